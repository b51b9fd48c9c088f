//! Error texts: short, generic for clients, and never carrying token text
//! or key material.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_token::{IssuingKey, KeySet, TokenError, jwk_from_public_pem};
use serde_json::{Value, json};

use crate::support::*;

fn every_variant() -> Vec<TokenError> {
    vec![
        TokenError::Malformed("payload is not base64url"),
        TokenError::AlgorithmNotAllowed,
        TokenError::UnknownKey,
        TokenError::BadSignature,
        TokenError::Expired,
        TokenError::NotYetValid,
        TokenError::WrongIssuer,
        TokenError::WrongAudience,
        TokenError::MissingClaim("sub"),
        TokenError::KeyLoad("JWKS has no usable key".to_owned()),
        TokenError::Issue("ttl must be at least one second"),
    ]
}

#[test]
fn every_variant_has_the_one_client_message() {
    for error in every_variant() {
        assert_eq!(error.client_message(), "token authentication failed");
        let text = error.to_string();
        assert!(!text.is_empty() && text.len() < 80, "{text}");
    }
}

/// No piece of the token long enough to mean anything shows up in `text`.
fn assert_no_token_text(text: &str, token: &str) {
    assert!(!text.contains(token), "{text}");
    for part in token.split('.').filter(|p| p.len() >= 8) {
        assert!(!text.contains(part), "{text}");
        assert!(!text.contains(&part[..8]), "{text}");
    }
}

#[test]
fn refusals_never_show_the_token() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let valid = sign(&keys.ec, &good_claims());
    let mut tampered: Vec<&str> = valid.split('.').collect();
    let forged = URL_SAFE_NO_PAD.encode(claims_with("sub", json!("root")).to_string());
    tampered[1] = &forged;
    let mut cases: Vec<(String, u64, &str)> = vec![
        (craft(&json!({"alg": "none"}), &good_claims(), b""), NOW, AUDIENCE),
        (craft(&json!({"alg": "HS512"}), &good_claims(), b"sig"), NOW, AUDIENCE),
        (
            craft(&json!({"alg": "ES256", "kid": "who"}), &good_claims(), b"sig"),
            NOW,
            AUDIENCE,
        ),
        (tampered.join("."), NOW, AUDIENCE),
        (valid.clone(), NOW + 10_000, AUDIENCE),
        (sign(&keys.ec, &claims_with("nbf", json!(NOW + 999))), NOW, AUDIENCE),
        (
            sign(&keys.ec, &claims_with("iss", json!("https://evil.test"))),
            NOW,
            AUDIENCE,
        ),
        (valid.clone(), NOW, "pg-secret-db"),
        (sign(&keys.ec, &claims_with("db", Value::Null)), NOW, AUDIENCE),
        (sign(&keys.ec, &claims_with("exp", json!("soon"))), NOW, AUDIENCE),
        (format!("{valid}.{valid}"), NOW, AUDIENCE),
    ];
    cases.push(("x".repeat(9_000), NOW, AUDIENCE));
    let mut seen = Vec::new();
    for (token, now, audience) in &cases {
        let error = verifier.verify(token, audience, *now).expect_err("refused");
        let text = error.to_string();
        assert_no_token_text(&text, token);
        assert_no_token_text(&format!("{error:?}"), token);
        for secret_word in ["acme", "orders", "root", "evil", "pg-secret-db"] {
            assert!(!text.contains(secret_word), "{text}");
        }
        seen.push(std::mem::discriminant(&error));
    }
    seen.dedup();
    assert!(seen.len() >= 9, "cases cover most variants");
}

#[test]
fn key_errors_never_show_key_material() {
    // A short HS256 secret.
    let short = b"short-secret-value";
    for error in [
        KeySet::new().add_hs256_secret(short, None).expect_err("short"),
        IssuingKey::hs256(short, None).expect_err("short"),
    ] {
        assert!(!error.to_string().contains("short-secret"), "{error}");
    }
    // A JWKS whose values have the wrong type: serde's text would quote them.
    let jwks = r#"{"keys":[{"kty":"RSA","n":12345678901234567,"e":"AQAB","d":"c2VjcmV0LXByaXZhdGUtZXhwb25lbnQ"}]}"#;
    let error = KeySet::new().add_jwks_json(jwks).expect_err("bad type");
    let text = error.to_string();
    assert!(
        !text.contains("12345678901234567") && !text.contains("c2VjcmV0"),
        "{text}"
    );
    // A broken modulus.
    let jwks = r#"{"keys":[{"kty":"RSA","n":"not*base64*secretish","e":"AQAB"}]}"#;
    let text = KeySet::new().add_jwks_json(jwks).expect_err("bad n").to_string();
    assert!(!text.contains("secretish"), "{text}");
    // A mangled private key PEM.
    let pem = String::from_utf8_lossy(RSA_PRIVATE_PEM).to_string();
    let body_line = pem.lines().nth(3).expect("line");
    let mangled = pem.replace(body_line, &"*".repeat(body_line.len()));
    let error = IssuingKey::from_pem(mangled.as_bytes(), None).expect_err("mangled");
    assert!(!error.to_string().contains(&body_line[..16]), "{error}");
    let error = jwk_from_public_pem(RSA_PRIVATE_PEM, None).expect_err("private");
    assert!(!error.to_string().contains(&body_line[..16]), "{error}");
    // Debug of keys shows no secret.
    let mut set = KeySet::new();
    set.add_hs256_secret(HS_SECRET, Some("hs-1".to_owned()))
        .expect("secret");
    let key = IssuingKey::hs256(HS_SECRET, Some("hs-1".to_owned())).expect("secret");
    let secret = String::from_utf8_lossy(HS_SECRET).to_string();
    for text in [format!("{set:?}"), format!("{key:?}"), format!("{:?}", verifier(set))] {
        assert!(text.contains("hs-1") && !text.contains(&secret[..12]), "{text}");
        assert!(!text.contains("116, 101, 115, 116"), "{text}");
    }
}
