//! Loading keys: JWKS parsing and skipping, PEM detection, secrets, JWK
//! building, and issuing options.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_token::{Alg, IssuingKey, Jwk, KeySet, TokenError, issue, jwk_from_public_pem};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

use crate::support::*;

fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("gatehouse-token-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).expect("write temp file");
    path
}

fn header_of(token: &str) -> Value {
    let header = token.split('.').next().expect("header");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).expect("b64")).expect("json")
}

#[test]
fn pem_type_picks_the_algorithm() {
    let keys = Keys::new();
    assert_eq!(keys.rsa.issuing.alg(), Alg::Rs256);
    assert_eq!(keys.ec.issuing.alg(), Alg::Es256);
    assert_eq!(keys.ed.issuing.alg(), Alg::EdDsa);
    assert_eq!(keys.hs.issuing.alg(), Alg::Hs256);
    let pkcs1 = IssuingKey::from_pem(RSA_PRIVATE_PKCS1_PEM, Some("rsa-1".to_owned())).expect("pkcs1");
    assert_eq!(pkcs1.alg(), Alg::Rs256);
    // The PKCS#1 form of the fixture signs tokens the fixture's JWK verifies.
    let token = issue(&pkcs1, &request(600)).expect("issue");
    assert!(keys.verifier().verify(&token, AUDIENCE, NOW).is_ok());
}

#[test]
fn unsupported_private_keys_are_refused() {
    let p384 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("p384");
    for pem in [
        EC_SEC1_PEM.to_vec(),
        p384.serialize_pem().into_bytes(),
        RSA_PUBLIC_PEM.to_vec(),
        b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n".to_vec(),
        b"-----BEGIN PRIVATE KEY-----\nMAMCAQA=\n-----END PRIVATE KEY-----\n".to_vec(),
        b"not a pem".to_vec(),
    ] {
        assert!(
            matches!(IssuingKey::from_pem(&pem, None), Err(TokenError::KeyLoad(_))),
            "{}",
            String::from_utf8_lossy(&pem[..20])
        );
    }
    let error = IssuingKey::from_pem(EC_SEC1_PEM, None).expect_err("sec1");
    assert!(error.to_string().contains("PKCS#8"), "{error}");
}

#[test]
fn jwk_from_public_pem_builds_usable_entries() {
    let keys = Keys::new();
    let rsa = keys.rsa.jwk.as_ref().expect("rsa");
    assert_eq!(
        (rsa.kty.as_str(), rsa.alg.as_deref(), rsa.e.as_deref()),
        ("RSA", Some("RS256"), Some("AQAB"))
    );
    assert_eq!(
        URL_SAFE_NO_PAD.decode(rsa.n.as_deref().expect("n")).expect("n").len(),
        256
    );
    let ec = keys.ec.jwk.as_ref().expect("ec");
    assert_eq!(
        (ec.kty.as_str(), ec.crv.as_deref(), ec.alg.as_deref()),
        ("EC", Some("P-256"), Some("ES256"))
    );
    let ed = keys.ed.jwk.as_ref().expect("ed");
    assert_eq!(
        (ed.kty.as_str(), ed.crv.as_deref(), ed.alg.as_deref()),
        ("OKP", Some("Ed25519"), Some("EdDSA"))
    );
    assert_eq!(ed.use_.as_deref(), Some("sig"));
    assert_eq!(ed.kid.as_deref(), Some("ed-1"));
    // Public key PEMs of the generated keys match what was loaded.
    assert_eq!(jwk_from_public_pem(&keys.ec.public_pem, Some("ec-1")).as_ref(), Ok(ec));

    // A JWKS written to a file loads back.
    let path = temp_file("jwks.json", keys.jwks_json().as_bytes());
    let mut set = KeySet::new();
    assert_eq!(set.add_jwks_file(&path), Ok(3));
    std::fs::remove_file(&path).ok();
    assert_eq!(set.len(), 3);
}

#[test]
fn rsa_public_key_in_pkcs1_form_gives_the_same_jwk() {
    let keys = Keys::new();
    let rsa = keys.rsa.jwk.as_ref().expect("rsa");
    // Build the PKCS#1 RSAPublicKey from the SPKI one: strip the SPKI wrapper.
    let spki_b64: String = String::from_utf8_lossy(RSA_PUBLIC_PEM)
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let spki = base64::engine::general_purpose::STANDARD.decode(spki_b64).expect("b64");
    // For a 2048-bit key the BIT STRING content starts 24 bytes in
    // (SEQ hdr 4, AlgId 15, BIT STRING hdr 4, unused-bits byte 1).
    let pkcs1 = &spki[24..];
    let pem = format!(
        "-----BEGIN RSA PUBLIC KEY-----\n{}\n-----END RSA PUBLIC KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs1)
    );
    let jwk = jwk_from_public_pem(pem.as_bytes(), Some("rsa-1")).expect("pkcs1 public");
    assert_eq!(&jwk, rsa);
}

#[test]
fn jwks_skips_keys_it_cannot_use() {
    let keys = Keys::new();
    let ec = serde_json::to_value(keys.ec.jwk.as_ref().expect("ec")).expect("json");
    let mut p384 = ec.clone();
    p384["crv"] = json!("P-384");
    p384["kid"] = json!("p384");
    let mut enc = ec.clone();
    enc["use"] = json!("enc");
    enc["kid"] = json!("enc");
    let mut es384 = ec.clone();
    es384["alg"] = json!("ES384");
    es384["kid"] = json!("es384");
    let mut rsa_ps = serde_json::to_value(keys.rsa.jwk.as_ref().expect("rsa")).expect("json");
    rsa_ps["alg"] = json!("PS256");
    let oct = json!({"kty": "oct", "k": "c2VjcmV0", "kid": "oct"});
    let jwks = json!({"keys": [p384, enc, es384, rsa_ps, oct, ec]});
    let mut set = KeySet::new();
    assert_eq!(set.add_jwks_json(&jwks.to_string()), Ok(1));

    let only_unusable = json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]});
    assert!(matches!(
        KeySet::new().add_jwks_json(&only_unusable.to_string()),
        Err(TokenError::KeyLoad(_))
    ));
    assert!(matches!(
        KeySet::new().add_jwks_json("{\"keys\": []}"),
        Err(TokenError::KeyLoad(_))
    ));
    assert!(matches!(
        KeySet::new().add_jwks_json("not json"),
        Err(TokenError::KeyLoad(_))
    ));
}

#[test]
fn jwks_refuses_broken_or_duplicate_keys() {
    let keys = Keys::new();
    let rsa = keys.rsa.jwk.clone().expect("rsa");
    let short_rsa = Jwk {
        n: Some(URL_SAFE_NO_PAD.encode([0xC5u8; 128])),
        ..rsa.clone()
    };
    let no_y = Jwk {
        y: None,
        ..keys.ec.jwk.clone().expect("ec")
    };
    let short_ed = Jwk {
        x: Some(URL_SAFE_NO_PAD.encode([1u8; 31])),
        ..keys.ed.jwk.clone().expect("ed")
    };
    for jwk in [short_rsa, no_y, short_ed] {
        assert!(
            matches!(KeySet::new().add_jwk(&jwk), Err(TokenError::KeyLoad(_))),
            "{jwk:?}"
        );
    }
    let mut set = KeySet::new();
    assert_eq!(set.add_jwk(&rsa), Ok(true));
    assert!(matches!(set.add_jwk(&rsa), Err(TokenError::KeyLoad(_))));
    assert!(matches!(
        set.add_hs256_secret(HS_SECRET, Some("rsa-1".to_owned())),
        Err(TokenError::KeyLoad(_))
    ));
}

#[test]
fn hs256_secret_from_file_drops_one_line_end() {
    let path = temp_file("secret", &[HS_SECRET, b"\r\n"].concat());
    let mut set = KeySet::new();
    set.add_hs256_secret_file(&path, None).expect("secret file");
    let key = IssuingKey::hs256_from_file(&path, None).expect("secret file");
    std::fs::remove_file(&path).ok();
    let verifier = verifier(set);
    // Tokens from the in-memory secret verify with the file's secret.
    let token = issue(&hs_key().issuing, &request(600)).expect("issue");
    assert!(verifier.verify(&token, AUDIENCE, NOW).is_ok());
    let token = issue(&key, &request(600)).expect("issue");
    assert!(verifier.verify(&token, AUDIENCE, NOW).is_ok());

    let missing = std::env::temp_dir().join("gatehouse-token-no-such-file");
    assert!(matches!(
        KeySet::new().add_hs256_secret_file(&missing, None),
        Err(TokenError::KeyLoad(_))
    ));
    assert!(matches!(
        IssuingKey::from_pem_file(&missing, None),
        Err(TokenError::KeyLoad(_))
    ));
}

#[test]
fn hs256_secret_with_kid_needs_the_kid() {
    let mut set = KeySet::new();
    set.add_hs256_secret(HS_SECRET, Some("hs-1".to_owned()))
        .expect("secret");
    let verifier = verifier(set);
    let with_kid = IssuingKey::hs256(HS_SECRET, Some("hs-1".to_owned())).expect("key");
    let token = issue(&with_kid, &request(600)).expect("issue");
    assert_eq!(header_of(&token)["kid"], json!("hs-1"));
    assert!(verifier.verify(&token, AUDIENCE, NOW).is_ok());
    // Without kid, keys of the type are tried whatever their kid.
    let token = issue(&hs_key().issuing, &request(600)).expect("issue");
    assert!(verifier.verify(&token, AUDIENCE, NOW).is_ok());
}

#[test]
fn issued_tokens_carry_the_request() {
    let keys = Keys::new();
    let token = issue(&keys.ed.issuing, &request(900)).expect("issue");
    assert_eq!(header_of(&token), json!({"alg": "EdDSA", "typ": "JWT", "kid": "ed-1"}));
    let payload = token.split('.').nth(1).expect("payload");
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("b64")).expect("json");
    assert_eq!(
        claims,
        json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "acme", "db": "orders", "iat": NOW, "exp": NOW + 900})
    );
    let hs_header = header_of(&issue(&keys.hs.issuing, &request(900)).expect("issue"));
    assert_eq!(hs_header, json!({"alg": "HS256", "typ": "JWT"}));
}

#[test]
fn bad_issue_requests_are_refused() {
    let keys = Keys::new();
    let mut zero = request(0);
    zero.ttl = Duration::from_millis(900);
    assert!(matches!(issue(&keys.hs.issuing, &zero), Err(TokenError::Issue(_))));
    let mut overflow = request(10);
    overflow.now = u64::MAX;
    assert!(matches!(issue(&keys.hs.issuing, &overflow), Err(TokenError::Issue(_))));
    for field in 0..4 {
        let mut empty = request(600);
        match field {
            0 => empty.issuer.clear(),
            1 => empty.audience.clear(),
            2 => empty.tenant.clear(),
            _ => empty.database.clear(),
        }
        assert!(matches!(issue(&keys.hs.issuing, &empty), Err(TokenError::Issue(_))));
    }
}
