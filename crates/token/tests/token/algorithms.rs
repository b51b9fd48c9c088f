//! Which algorithms and keys are accepted, and the attacks on that choice.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_token::{Claims, KeySet, TokenError, issue};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::support::*;

fn expected() -> Claims {
    Claims {
        tenant: "acme".to_owned(),
        database: "orders".to_owned(),
        expires_at: NOW + 600,
    }
}

#[test]
fn each_allowed_algorithm_verifies_issued_tokens() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    for key in keys.all() {
        let token = issue(&key.issuing, &request(600)).expect("issue");
        assert_eq!(
            verifier.verify(&token, AUDIENCE, NOW + 1),
            Ok(expected()),
            "{:?}",
            key.alg
        );
    }
    assert_eq!(verifier.verifications(), 4);
}

#[test]
fn each_allowed_algorithm_verifies_hand_signed_tokens() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    for key in keys.all() {
        let token = sign(key, &good_claims());
        assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Ok(expected()), "{:?}", key.alg);
    }
}

#[test]
fn token_without_kid_is_tried_against_keys_of_its_type() {
    let keys = Keys::new();
    let other = ec_key("ec-2");
    let mut set = keys.key_set();
    set.add_jwk(other.jwk.as_ref().expect("jwk")).expect("add");
    let verifier = verifier(set);
    for key in [&keys.rsa, &keys.ec, &other, &keys.ed] {
        let mut header = Header::new(key.alg);
        header.kid = None;
        let token = jsonwebtoken::encode(&header, &good_claims(), &key.encoding).expect("encode");
        assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Ok(expected()), "{:?}", key.alg);
    }
}

#[test]
fn alg_none_is_refused() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    for alg in ["none", "None", "NONE", "nOnE"] {
        for signature in [&b""[..], b"x"] {
            let token = craft(&json!({"alg": alg, "typ": "JWT"}), &good_claims(), signature);
            assert_eq!(
                verifier.verify(&token, AUDIENCE, NOW),
                Err(TokenError::AlgorithmNotAllowed),
                "{alg}"
            );
        }
    }
    // Also with a kid naming a real key.
    let token = craft(&json!({"alg": "none", "kid": "rsa-1"}), &good_claims(), b"");
    assert_eq!(
        verifier.verify(&token, AUDIENCE, NOW),
        Err(TokenError::AlgorithmNotAllowed)
    );
}

#[test]
fn hs256_signed_with_the_rsa_public_key_is_refused() {
    let keys = Keys::new();
    let forged_with = |kid: Option<&str>| {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, &good_claims(), &EncodingKey::from_secret(RSA_PUBLIC_PEM)).expect("encode")
    };

    // Naming the RSA key: its type does not fit HS256.
    let all = keys.verifier();
    assert_eq!(
        all.verify(&forged_with(Some("rsa-1")), AUDIENCE, NOW),
        Err(TokenError::AlgorithmNotAllowed)
    );
    // No kid, and an HS256 secret configured: it does not verify.
    assert_eq!(
        all.verify(&forged_with(None), AUDIENCE, NOW),
        Err(TokenError::BadSignature)
    );
    // No kid and no HS256 secret at all: no key for it.
    let mut only_rsa = KeySet::new();
    only_rsa.add_jwk(keys.rsa.jwk.as_ref().expect("jwk")).expect("add");
    let rsa_only = verifier(only_rsa);
    assert_eq!(
        rsa_only.verify(&forged_with(None), AUDIENCE, NOW),
        Err(TokenError::UnknownKey)
    );
    assert_eq!(
        rsa_only.verify(&forged_with(Some("rsa-1")), AUDIENCE, NOW),
        Err(TokenError::AlgorithmNotAllowed)
    );
}

#[test]
fn kid_of_a_key_of_another_type_is_refused() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    // Signed by the EC key but naming the Ed25519 key.
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("ed-1".to_owned());
    let token = jsonwebtoken::encode(&header, &good_claims(), &keys.ec.encoding).expect("encode");
    assert_eq!(
        verifier.verify(&token, AUDIENCE, NOW),
        Err(TokenError::AlgorithmNotAllowed)
    );
}

#[test]
fn unlisted_algorithms_are_refused() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let really_signed = [
        (Algorithm::HS384, EncodingKey::from_secret(HS_SECRET), None),
        (Algorithm::HS512, EncodingKey::from_secret(HS_SECRET), None),
        (
            Algorithm::PS256,
            EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM).expect("rsa"),
            Some("rsa-1"),
        ),
        (
            Algorithm::RS512,
            EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM).expect("rsa"),
            Some("rsa-1"),
        ),
        (
            Algorithm::RS384,
            EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM).expect("rsa"),
            None,
        ),
    ];
    for (alg, key, kid) in really_signed {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_owned);
        let token = jsonwebtoken::encode(&header, &good_claims(), &key).expect("encode");
        assert_eq!(
            verifier.verify(&token, AUDIENCE, NOW),
            Err(TokenError::AlgorithmNotAllowed),
            "{alg:?}"
        );
    }
    for alg in [
        "ES384",
        "ES512",
        "PS512",
        "Ed25519",
        "hs256",
        "RS256 ",
        "",
        "EdDSA\u{0}",
    ] {
        let token = craft(&json!({"alg": alg, "kid": "ec-1"}), &good_claims(), b"sig");
        assert_eq!(
            verifier.verify(&token, AUDIENCE, NOW),
            Err(TokenError::AlgorithmNotAllowed),
            "{alg:?}"
        );
    }
    // Refused tokens are never served from the cache.
    assert_eq!(verifier.cache_hits(), 0);
}

#[test]
fn tampered_payload_fails_the_signature() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    for key in keys.all() {
        let token = issue(&key.issuing, &request(600)).expect("issue");
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(claims_with("db", json!("payroll")).to_string());
        parts[1] = &forged;
        let tampered = parts.join(".");
        assert_eq!(
            verifier.verify(&tampered, AUDIENCE, NOW),
            Err(TokenError::BadSignature),
            "{:?}",
            key.alg
        );
        // A flipped signature byte fails too.
        let mut signature = URL_SAFE_NO_PAD
            .decode(token.rsplit('.').next().expect("sig"))
            .expect("b64");
        signature[0] ^= 1;
        let flipped = format!(
            "{}.{}",
            &token[..token.rfind('.').expect("dot")],
            URL_SAFE_NO_PAD.encode(&signature)
        );
        assert_eq!(verifier.verify(&flipped, AUDIENCE, NOW), Err(TokenError::BadSignature));
    }
}

#[test]
fn token_signed_by_another_key_is_refused() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    // Same kid as a configured key, different private key.
    let impostor = ec_key("ec-1");
    assert_eq!(
        verifier.verify(&sign(&impostor, &good_claims()), AUDIENCE, NOW),
        Err(TokenError::BadSignature)
    );
    // A kid nobody configured.
    let stranger = ed_key("ed-unknown");
    assert_eq!(
        verifier.verify(&sign(&stranger, &good_claims()), AUDIENCE, NOW),
        Err(TokenError::UnknownKey)
    );
    // No kid at all: every Ed25519 key is tried, none verifies.
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = None;
    let token = jsonwebtoken::encode(&header, &good_claims(), &stranger.encoding).expect("encode");
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::BadSignature));
    // Another HS256 secret.
    let other = EncodingKey::from_secret(b"another-test-secret-0123456789abcdef-xyz");
    let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &good_claims(), &other).expect("encode");
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::BadSignature));
}

#[test]
fn empty_signature_and_crit_header_are_refused() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let token = craft(&json!({"alg": "HS256"}), &good_claims(), b"");
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::BadSignature));
    let token = craft(
        &json!({"alg": "ES256", "kid": "ec-1", "crit": ["exp"], "exp": 1}),
        &good_claims(),
        b"sig",
    );
    assert!(matches!(
        verifier.verify(&token, AUDIENCE, NOW),
        Err(TokenError::Malformed(_))
    ));
}

#[test]
fn malformed_tokens_are_refused() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let valid = issue(&keys.ec.issuing, &request(600)).expect("issue");
    let header_b64 = valid.split('.').next().expect("header");
    let cases = [
        String::new(),
        "abc".to_owned(),
        "a.b".to_owned(),
        format!("{valid}.extra"),
        format!("{valid}.a.b"),
        "!!!.e30.sig".to_owned(),
        format!("{}.e30.sig", URL_SAFE_NO_PAD.encode("not json")),
        format!("{}.e30.sig", URL_SAFE_NO_PAD.encode("{\"alg\":5}")),
        format!("{}.e30.sig", URL_SAFE_NO_PAD.encode("{\"kid\":\"ec-1\"}")),
        format!("{header_b64}=.e30.sig"),
        "x".repeat(20_000),
    ];
    for token in cases {
        assert!(
            matches!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::Malformed(_))),
            "{token:.40}"
        );
    }
    // A correctly signed payload that is not a JSON object.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = None;
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_string(&header).expect("json")),
        URL_SAFE_NO_PAD.encode("[1,2,3]")
    );
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &keys.hs.encoding, Algorithm::HS256).expect("sign");
    let token = format!("{message}.{signature}");
    assert!(matches!(
        verifier.verify(&token, AUDIENCE, NOW),
        Err(TokenError::Malformed(_))
    ));
}
