//! The seeds of the login-token target: issued and hand-signed tokens,
//! public keys and a JWKS.

use std::time::Duration;

use gatehouse_token::{IssueRequest, IssuingKey, issue};

use super::{Seed, cat, chunk};
use crate::token::{AUDIENCE, ISSUER, JWKS, NOW, SECRET};

pub(super) fn token_seeds() -> Vec<Seed> {
    let key = IssuingKey::hs256(SECRET, Some("hs".to_owned())).expect("the secret is long enough");
    let token = issue(
        &key,
        &IssueRequest {
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
            tenant: "acme".to_owned(),
            database: "acme_db".to_owned(),
            ttl: Duration::from_secs(3600),
            now: NOW - 60,
        },
    )
    .expect("the token is issued");
    let claims = format!(
        r#"{{"iss":"{ISSUER}","aud":["{AUDIENCE}"],"sub":"acme","db":"acme_db","exp":{},"nbf":{}}}"#,
        NOW + 60,
        NOW - 1
    );
    // RFC 8410 §10.1: an Ed25519 SubjectPublicKeyInfo.
    let spki = [
        &[0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00][..],
        &[
            0x19, 0xbf, 0x44, 0x09, 0x69, 0x84, 0xcd, 0xfe, 0x85, 0x41, 0xba, 0xc1, 0x67, 0xdc, 0x3b, 0x96, 0xc8, 0x50,
            0x86, 0xaa, 0x30, 0xb6, 0xb6, 0xcb, 0x0c, 0x5c, 0x38, 0xad, 0x70, 0x31, 0x66, 0xe1,
        ],
    ]
    .concat();
    vec![
        ("token_verify", "issued", cat(&[&[0], token.as_bytes()])),
        ("token_verify", "alg-none", text_token(r#"{"alg":"none"}"#)),
        (
            "token_verify",
            "signed-claims",
            cat(&[
                &[1],
                &chunk(br#"{"alg":"HS256","kid":"hs","typ":"JWT"}"#),
                claims.as_bytes(),
            ]),
        ),
        (
            "token_verify",
            "signed-far-future",
            cat(&[
                &[1],
                &chunk(br#"{"alg":"HS256"}"#),
                format!(r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"a","db":"b","exp":1e300}}"#).as_bytes(),
            ]),
        ),
        (
            "token_verify",
            "signed-expired",
            cat(&[&[1], &chunk(br#"{"alg":"HS256"}"#), br#"{"iss":"x","exp":5}"#]),
        ),
        ("token_verify", "public-key-der", cat(&[&[2, 1], &spki])),
        ("token_verify", "jwks", cat(&[&[2, 4], JWKS.as_bytes()])),
    ]
}

fn text_token(header: &str) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("\0{}.{}.", b64(header), b64(r#"{"sub":"x"}"#)).into_bytes()
}
