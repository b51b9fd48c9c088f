//! The harness of `gatehouse-token`: verifying untrusted tokens (made up,
//! or validly signed over made-up header and claims), and reading keys
//! (JWKS documents, public and private key PEMs over made-up DER).

use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use gatehouse_token::{Claims, IssuingKey, JwkSet, KeySet, TokenError, Verifier, VerifierConfig, jwk_from_public_pem};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::input::Input;

/// The HS256 secret (kid `hs`) of the verifiers here.
pub(crate) const SECRET: &[u8] = b"gatehouse fuzzing secret, at least 32 bytes";
pub(crate) const ISSUER: &str = "https://issuer.example";
pub(crate) const AUDIENCE: &str = "endpoint-a";
pub(crate) const NOW: u64 = 1_700_000_000;
/// Public keys nobody here can sign with: RFC 8037 A.2 (Ed25519) and
/// RFC 7515 A.3 (EC P-256).
pub(crate) const JWKS: &str = r#"{"keys":[
  {"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
  {"kty":"EC","crv":"P-256","kid":"ec","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
]}"#;

fn verifier(cache_capacity: u64) -> Verifier {
    let mut keys = KeySet::new();
    keys.add_hs256_secret(SECRET, Some("hs".to_owned()))
        .expect("the secret is long enough");
    keys.add_jwks_json(JWKS).expect("the JWKS loads");
    let mut config = VerifierConfig::new(ISSUER, keys);
    config.cache_capacity = cache_capacity;
    Verifier::new(config).expect("the verifier has keys and an issuer")
}

/// The verifiers, made once (a fresh cache per run would cost most of the
/// run): one with a cache, whose answers must not differ from those of
/// the one without.
fn verifiers() -> &'static (Verifier, Verifier) {
    static V: OnceLock<(Verifier, Verifier)> = OnceLock::new();
    V.get_or_init(|| (verifier(1 << 16), verifier(0)))
}

fn hs256(signed: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET).expect("HMAC takes any key length");
    mac.update(signed.as_bytes());
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// By the first byte: 0: any text as a token; 1: a token signed with the
/// HS256 secret over a made-up header and payload (one-byte-length-prefixed
/// header, then the payload); 2: key material.
///
/// A token verifies the same from the cache, again, and without a cache;
/// what verifies was signed with the secret (no other private key is known
/// here), and carries the claims its payload holds; a validly signed token
/// whose header names HS256 and the secret's kid (or none) never fails on
/// its signature; no error shows token text.
pub fn token_verify(data: &[u8]) {
    let mut input = Input::new(data);
    match input.u8() % 3 {
        0 => {
            let token = String::from_utf8_lossy(input.rest());
            let _ = check(&token);
        }
        1 => signed(&mut input),
        _ => keys(&mut input),
    }
}

fn check(token: &str) -> Result<Claims, TokenError> {
    let (cached, uncached) = verifiers();
    let first = cached.verify(token, AUDIENCE, NOW);
    let hits = cached.cache_hits();
    assert_eq!(cached.verify(token, AUDIENCE, NOW), first, "the cached answer differs");
    assert_eq!(
        uncached.verify(token, AUDIENCE, NOW),
        first,
        "the uncached answer differs"
    );
    match &first {
        Ok(claims) => {
            // Tokens accepted only thanks to the leeway are not cached.
            if claims.expires_at > NOW {
                assert_eq!(cached.cache_hits(), hits + 1, "a verified token was not cached");
            }
            assert!(!claims.tenant.is_empty() && !claims.database.is_empty());
            assert!(claims.expires_at.saturating_add(30) > NOW);
            let (signed, signature) = token.rsplit_once('.').expect("a verified token has three parts");
            assert_eq!(
                signature,
                hs256(signed),
                "a token verified without the secret's signature"
            );
        }
        Err(e) => {
            // Every error of verify has a fixed text: none can show token
            // text. (Checking that the text does not contain the token's
            // parts fails when a token is made of the error's own words, as
            // the fuzzer found.)
            assert!(!matches!(e, TokenError::KeyLoad(_) | TokenError::Issue(_)), "{e:?}");
            assert_eq!(e.client_message(), "token authentication failed");
        }
    }
    first
}

fn signed(input: &mut Input<'_>) {
    let header = input.chunk();
    let payload = input.rest();
    let signed = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let token = format!("{signed}.{}", hs256(&signed));
    let result = check(&token);

    let header: Option<Value> = serde_json::from_slice(header).ok();
    if header.as_ref().is_some_and(names_the_secret) {
        assert_ne!(
            result,
            Err(TokenError::BadSignature),
            "a token signed with the secret did not verify"
        );
    }
    if let Ok(claims) = result {
        let claims_json: Value = serde_json::from_slice(payload).expect("verified claims are JSON");
        assert_eq!(claims_json.get("sub"), Some(&Value::from(claims.tenant)));
        assert_eq!(claims_json.get("db"), Some(&Value::from(claims.database)));
        assert_eq!(claims_json.get("iss"), Some(&Value::from(ISSUER)));
    }
}

/// A header with `alg: HS256`, no `crit`, and `kid` absent, null or the
/// secret's.
fn names_the_secret(h: &Value) -> bool {
    h.get("alg") == Some(&Value::from("HS256"))
        && h.get("crit").is_none()
        && match h.get("kid") {
            None | Some(Value::Null) => true,
            Some(kid) => kid == "hs",
        }
}

fn pem(label: &str, der: &[u8]) -> String {
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        STANDARD.encode(der)
    )
}

fn keys(input: &mut Input<'_>) {
    let which = input.u8();
    let rest = input.rest();
    let text = match which % 5 {
        0 => String::from_utf8_lossy(rest).into_owned(),
        1 => pem("PUBLIC KEY", rest),
        2 => pem("RSA PUBLIC KEY", rest),
        3 => pem("PRIVATE KEY", rest),
        _ => {
            let _ = KeySet::new().add_jwks_json(&String::from_utf8_lossy(rest));
            return;
        }
    };
    let _ = IssuingKey::from_pem(text.as_bytes(), None);
    if let Ok(jwk) = jwk_from_public_pem(text.as_bytes(), Some("k")) {
        let set = JwkSet { keys: vec![jwk] };
        let json = set.to_json();
        let back: JwkSet = serde_json::from_str(&json).expect("a written JWKS reads back");
        assert_eq!(back, set);
        let _ = KeySet::new().add_jwks_json(&json);
    }
}
