//! The payload checks: dates with leeway, issuer, audience, required claims.

use gatehouse_token::{KeySet, TokenError, Verifier, VerifierConfig};
use serde_json::{Value, json};
use std::time::Duration;

use crate::support::*;

fn check(claims: &Value, now: u64) -> Result<gatehouse_token::Claims, TokenError> {
    let keys = Keys::new();
    keys.verifier().verify(&sign(&keys.ec, claims), AUDIENCE, now)
}

#[test]
fn expiry_honours_the_leeway() {
    let exp = NOW + 600;
    // Default leeway is 30 s: accepted up to exp + 29, refused from exp + 30.
    assert!(check(&good_claims(), exp - 1).is_ok());
    assert!(check(&good_claims(), exp).is_ok());
    assert!(check(&good_claims(), exp + 29).is_ok());
    assert_eq!(check(&good_claims(), exp + 30), Err(TokenError::Expired));
    assert_eq!(check(&good_claims(), exp + 3600), Err(TokenError::Expired));
}

#[test]
fn zero_leeway_refuses_at_exp() {
    let keys = Keys::new();
    let mut config = VerifierConfig::new(ISSUER, keys.key_set());
    config.leeway = Duration::ZERO;
    let verifier = Verifier::new(config).expect("verifier");
    let token = sign(&keys.hs, &good_claims());
    assert!(verifier.verify(&token, AUDIENCE, NOW + 599).is_ok());
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW + 600), Err(TokenError::Expired));
}

#[test]
fn not_before_honours_the_leeway() {
    assert_eq!(
        check(&claims_with("nbf", json!(NOW + 31)), NOW),
        Err(TokenError::NotYetValid)
    );
    assert_eq!(
        check(&claims_with("nbf", json!(NOW + 3600)), NOW),
        Err(TokenError::NotYetValid)
    );
    assert!(check(&claims_with("nbf", json!(NOW + 30)), NOW).is_ok());
    assert!(check(&claims_with("nbf", json!(NOW - 10)), NOW).is_ok());
}

#[test]
fn issuer_must_match_exactly() {
    for iss in [
        "https://evil.test",
        "https://auth.gatehouse.test/",
        "HTTPS://AUTH.GATEHOUSE.TEST",
        "",
    ] {
        assert_eq!(
            check(&claims_with("iss", json!(iss)), NOW),
            Err(TokenError::WrongIssuer),
            "{iss}"
        );
    }
    assert_eq!(
        check(&claims_with("iss", Value::Null), NOW),
        Err(TokenError::MissingClaim("iss"))
    );
}

#[test]
fn audience_must_contain_the_endpoint() {
    assert_eq!(
        check(&claims_with("aud", json!("pg-other")), NOW),
        Err(TokenError::WrongAudience)
    );
    assert!(check(&claims_with("aud", json!(["pg-other", AUDIENCE])), NOW).is_ok());
    assert!(check(&claims_with("aud", json!([AUDIENCE])), NOW).is_ok());
    assert_eq!(
        check(&claims_with("aud", json!(["pg-other", "pg-third"])), NOW),
        Err(TokenError::WrongAudience)
    );
    assert_eq!(
        check(&claims_with("aud", json!([])), NOW),
        Err(TokenError::WrongAudience)
    );
    assert_eq!(
        check(&claims_with("aud", Value::Null), NOW),
        Err(TokenError::MissingClaim("aud"))
    );

    // The same token for another endpoint is refused.
    let keys = Keys::new();
    let verifier = keys.verifier();
    let token = sign(&keys.ed, &good_claims());
    assert_eq!(verifier.verify(&token, "pg-other", NOW), Err(TokenError::WrongAudience));
}

#[test]
fn required_claims_must_be_present() {
    for (claim, name) in [("sub", "sub"), ("db", "db"), ("exp", "exp")] {
        assert_eq!(
            check(&claims_with(claim, Value::Null), NOW),
            Err(TokenError::MissingClaim(name)),
            "{claim}"
        );
    }
    assert_eq!(
        check(&claims_with("sub", json!("")), NOW),
        Err(TokenError::MissingClaim("sub"))
    );
    assert_eq!(
        check(&claims_with("db", json!("")), NOW),
        Err(TokenError::MissingClaim("db"))
    );
}

#[test]
fn claims_of_the_wrong_type_make_the_token_malformed() {
    for (claim, value) in [
        ("exp", json!("1700000600")),
        ("exp", json!(-5)),
        ("nbf", json!(true)),
        ("iat", json!("now")),
        ("sub", json!(42)),
        ("db", json!(["orders"])),
        ("aud", json!(7)),
        ("jti", json!(7)),
        ("iss", json!({"url": ISSUER})),
    ] {
        assert!(
            matches!(check(&claims_with(claim, value), NOW), Err(TokenError::Malformed(_))),
            "{claim}"
        );
    }
}

#[test]
fn fractional_dates_and_unknown_claims_are_accepted() {
    let mut claims = claims_with("exp", json!((NOW + 600) as f64 + 0.75));
    claims["role"] = json!("admin");
    claims["nbf"] = json!(NOW as f64 - 0.5);
    let result = check(&claims, NOW).expect("valid");
    assert_eq!(result.expires_at, NOW + 600);
}

#[test]
fn verifier_needs_keys_and_an_issuer() {
    assert!(matches!(
        Verifier::new(VerifierConfig::new(ISSUER, KeySet::new())),
        Err(TokenError::KeyLoad(_))
    ));
    let keys = Keys::new();
    assert!(matches!(
        Verifier::new(VerifierConfig::new("", keys.key_set())),
        Err(TokenError::KeyLoad(_))
    ));
}
