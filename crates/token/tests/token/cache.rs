//! The verified-token cache: hits, expiry, audience separation, bounds.

use gatehouse_token::{KeySet, TokenError, Verifier, VerifierConfig, issue};

use crate::support::*;

#[test]
fn second_verify_of_the_same_token_is_a_cache_hit() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let token = issue(&keys.rsa.issuing, &request(600)).expect("issue");
    let first = verifier.verify(&token, AUDIENCE, NOW).expect("first");
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (1, 0));
    for i in 0..10 {
        assert_eq!(verifier.verify(&token, AUDIENCE, NOW + i), Ok(first.clone()));
    }
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (1, 10));
}

#[test]
fn cached_token_past_its_expiry_is_not_served() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let token = issue(&keys.hs.issuing, &request(60)).expect("issue");
    verifier.verify(&token, AUDIENCE, NOW).expect("fresh");
    verifier.verify(&token, AUDIENCE, NOW + 59).expect("cached");
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (1, 1));

    // At exp the cache entry is dead: full verification runs again and,
    // within the leeway, still accepts (without caching it).
    verifier.verify(&token, AUDIENCE, NOW + 60).expect("within leeway");
    verifier.verify(&token, AUDIENCE, NOW + 61).expect("within leeway");
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (3, 1));

    // Past exp + leeway it is refused, whatever was cached.
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW + 90), Err(TokenError::Expired));
    assert_eq!(verifier.cache_hits(), 1);
}

#[test]
fn expired_entry_is_refused_even_straight_after_caching() {
    // Cached at NOW with exp NOW + 10; asking at NOW + 10_000 must not hit,
    // even though no real time passed for the cache's own clock.
    let keys = Keys::new();
    let verifier = keys.verifier();
    let token = issue(&keys.ed.issuing, &request(10)).expect("issue");
    verifier.verify(&token, AUDIENCE, NOW).expect("fresh");
    assert_eq!(
        verifier.verify(&token, AUDIENCE, NOW + 10_000),
        Err(TokenError::Expired)
    );
    assert_eq!(verifier.cache_hits(), 0);
}

#[test]
fn cache_is_per_audience() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let mut request = request(600);
    request.audience = "pg-other".to_owned();
    let token = issue(&keys.ec.issuing, &request).expect("issue");
    verifier.verify(&token, "pg-other", NOW).expect("own endpoint");
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::WrongAudience));
    assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::WrongAudience));
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (3, 0));
}

#[test]
fn failures_are_not_cached() {
    let keys = Keys::new();
    let verifier = keys.verifier();
    let token = sign(&ec_key("ec-1"), &good_claims());
    for _ in 0..3 {
        assert_eq!(verifier.verify(&token, AUDIENCE, NOW), Err(TokenError::BadSignature));
    }
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (3, 0));
}

#[test]
fn capacity_zero_disables_the_cache() {
    let keys = Keys::new();
    let mut config = VerifierConfig::new(ISSUER, keys.key_set());
    config.cache_capacity = 0;
    let verifier = Verifier::new(config).expect("verifier");
    let token = issue(&keys.hs.issuing, &request(600)).expect("issue");
    for _ in 0..3 {
        verifier.verify(&token, AUDIENCE, NOW).expect("valid");
    }
    assert_eq!((verifier.verifications(), verifier.cache_hits()), (3, 0));
}

#[test]
fn cache_stays_bounded() {
    let keys = Keys::new();
    let mut set = KeySet::new();
    set.add_hs256_secret(HS_SECRET, None).expect("secret");
    let mut config = VerifierConfig::new(ISSUER, set);
    config.cache_capacity = 8;
    let verifier = Verifier::new(config).expect("verifier");
    let tokens: Vec<String> = (0..200)
        .map(|i| {
            let mut request = request(600);
            request.tenant = format!("tenant-{i}");
            issue(&keys.hs.issuing, &request).expect("issue")
        })
        .collect();
    for token in &tokens {
        verifier.verify(token, AUDIENCE, NOW).expect("valid");
    }
    // Every one still verifies, from the cache or not.
    for token in &tokens {
        verifier.verify(token, AUDIENCE, NOW).expect("valid");
    }
    assert_eq!(verifier.verifications() + verifier.cache_hits(), 400);
    assert!(verifier.cache_hits() < 200, "hits {}", verifier.cache_hits());
}
