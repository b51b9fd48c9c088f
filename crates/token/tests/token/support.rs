//! Shared test keys, claim sets and token builders.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gatehouse_token::{IssueRequest, IssuingKey, Jwk, JwkSet, KeySet, Verifier, VerifierConfig, jwk_from_public_pem};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::time::Duration;

pub const ISSUER: &str = "https://auth.gatehouse.test";
pub const AUDIENCE: &str = "pg-main";
pub const NOW: u64 = 1_700_000_000;
pub const HS_SECRET: &[u8] = b"test-only-shared-secret-0123456789abcdef";

/// Test-only RSA key pair, see tests/fixtures/README.md.
pub const RSA_PRIVATE_PEM: &[u8] = include_bytes!("../fixtures/rsa-test-private.pem");
pub const RSA_PRIVATE_PKCS1_PEM: &[u8] = include_bytes!("../fixtures/rsa-test-private-pkcs1.pem");
pub const RSA_PUBLIC_PEM: &[u8] = include_bytes!("../fixtures/rsa-test-public.pem");
pub const EC_SEC1_PEM: &[u8] = include_bytes!("../fixtures/ec-test-private-sec1.pem");

/// One signing key with everything a test needs about it.
pub struct TestKey {
    pub alg: Algorithm,
    pub kid: Option<String>,
    /// For hand-crafted tokens.
    pub encoding: EncodingKey,
    /// For the crate's own issuing.
    pub issuing: IssuingKey,
    /// The public side, `None` for HS256.
    pub jwk: Option<Jwk>,
    pub public_pem: Vec<u8>,
}

fn from_pems(alg: Algorithm, private: &[u8], public: &[u8], kid: &str) -> TestKey {
    let encoding = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(private),
        Algorithm::ES256 => EncodingKey::from_ec_pem(private),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(private),
        _ => unreachable!(),
    }
    .expect("encoding key");
    TestKey {
        alg,
        kid: Some(kid.to_owned()),
        encoding,
        issuing: IssuingKey::from_pem(private, Some(kid.to_owned())).expect("issuing key"),
        jwk: Some(jwk_from_public_pem(public, Some(kid)).expect("jwk")),
        public_pem: public.to_vec(),
    }
}

pub fn rsa_key() -> TestKey {
    from_pems(Algorithm::RS256, RSA_PRIVATE_PEM, RSA_PUBLIC_PEM, "rsa-1")
}

fn generated(alg: Algorithm, rcgen_alg: &'static rcgen::SignatureAlgorithm, kid: &str) -> TestKey {
    let pair = rcgen::KeyPair::generate_for(rcgen_alg).expect("generate key");
    from_pems(
        alg,
        pair.serialize_pem().as_bytes(),
        pair.public_key_pem().as_bytes(),
        kid,
    )
}

pub fn ec_key(kid: &str) -> TestKey {
    generated(Algorithm::ES256, &rcgen::PKCS_ECDSA_P256_SHA256, kid)
}

pub fn ed_key(kid: &str) -> TestKey {
    generated(Algorithm::EdDSA, &rcgen::PKCS_ED25519, kid)
}

/// The HS256 test secret, without kid (the simple setup).
pub fn hs_key() -> TestKey {
    TestKey {
        alg: Algorithm::HS256,
        kid: None,
        encoding: EncodingKey::from_secret(HS_SECRET),
        issuing: IssuingKey::hs256(HS_SECRET, None).expect("hs256 key"),
        jwk: None,
        public_pem: Vec::new(),
    }
}

/// All four kinds, loaded into one key set.
pub struct Keys {
    pub rsa: TestKey,
    pub ec: TestKey,
    pub ed: TestKey,
    pub hs: TestKey,
}

impl Keys {
    pub fn new() -> Self {
        Keys {
            rsa: rsa_key(),
            ec: ec_key("ec-1"),
            ed: ed_key("ed-1"),
            hs: hs_key(),
        }
    }

    pub fn all(&self) -> [&TestKey; 4] {
        [&self.rsa, &self.ec, &self.ed, &self.hs]
    }

    pub fn jwks_json(&self) -> String {
        JwkSet {
            keys: [&self.rsa, &self.ec, &self.ed]
                .iter()
                .filter_map(|k| k.jwk.clone())
                .collect(),
        }
        .to_json()
    }

    pub fn key_set(&self) -> KeySet {
        let mut keys = KeySet::new();
        assert_eq!(keys.add_jwks_json(&self.jwks_json()).expect("jwks"), 3);
        keys.add_hs256_secret(HS_SECRET, None).expect("secret");
        keys
    }

    pub fn verifier(&self) -> Verifier {
        verifier(self.key_set())
    }
}

pub fn verifier(keys: KeySet) -> Verifier {
    Verifier::new(VerifierConfig::new(ISSUER, keys)).expect("verifier")
}

pub fn request(ttl_secs: u64) -> IssueRequest {
    IssueRequest {
        issuer: ISSUER.to_owned(),
        audience: AUDIENCE.to_owned(),
        tenant: "acme".to_owned(),
        database: "orders".to_owned(),
        ttl: Duration::from_secs(ttl_secs),
        now: NOW,
    }
}

/// A full, valid claim set expiring ten minutes after `NOW`.
pub fn good_claims() -> Value {
    json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "acme",
        "db": "orders",
        "iat": NOW,
        "exp": NOW + 600,
        "jti": "t-1",
    })
}

/// `good_claims` with `key` set to `value` (or removed when `Value::Null`).
pub fn claims_with(key: &str, value: Value) -> Value {
    let mut claims = good_claims();
    let map = claims.as_object_mut().expect("object");
    if value.is_null() {
        map.remove(key);
    } else {
        map.insert(key.to_owned(), value);
    }
    claims
}

/// Signs arbitrary claims with `key`, its kid in the header.
pub fn sign(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = key.kid.clone();
    jsonwebtoken::encode(&header, claims, &key.encoding).expect("encode")
}

/// Assembles a token from raw JSON parts and raw signature bytes.
pub fn craft(header: &Value, payload: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}
