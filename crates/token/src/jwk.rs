//! The JSON Web Key (RFC 7517) shapes this crate reads and writes, [`Jwk`]
//! and [`JwkSet`], and [`jwk_from_public_pem`], which turns a public key PEM
//! into a JWKS entry for development and test setups.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::alg::Alg;
use crate::der::{self, PublicKey};
use crate::error::TokenError;

/// One JSON Web Key. Only the public parameters this crate uses are kept;
/// anything else in a JWKS file (`x5c`, private parameters, ...) is ignored
/// when reading and never written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    /// `RSA`, `EC` or `OKP`.
    pub kty: String,
    /// Key id, matched against a token header's `kid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// Intended algorithm; when present it must fit the key type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// Intended use; when present it must be `sig`.
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
    /// Curve: `P-256` for EC, `Ed25519` for OKP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crv: Option<String>,
    /// RSA modulus, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<String>,
    /// RSA public exponent, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e: Option<String>,
    /// EC x coordinate or Ed25519 public key, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// EC y coordinate, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<String>,
}

/// A JWKS document: `{"keys": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JwkSet {
    /// The keys, in file order.
    pub keys: Vec<Jwk>,
}

impl JwkSet {
    /// The set as pretty-printed JSON, ready to be written to a JWKS file.
    pub fn to_json(&self) -> String {
        // Serializing plain strings into a String cannot fail; fall back to
        // an empty set rather than panic.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{\"keys\":[]}"))
    }
}

/// Builds a JWKS entry from a public key PEM: `BEGIN PUBLIC KEY`
/// (SubjectPublicKeyInfo of an RSA, EC P-256 or Ed25519 key) or
/// `BEGIN RSA PUBLIC KEY` (PKCS#1). The entry carries `alg` and `use: sig`,
/// and `kid` when given.
///
/// Private key PEMs are refused: derive the public key first
/// (`openssl pkey -in key.pem -pubout`).
pub fn jwk_from_public_pem(pem: &[u8], kid: Option<&str>) -> Result<Jwk, TokenError> {
    let block = der::parse_pem(pem).map_err(load_error)?;
    let public = match block.label.as_str() {
        "PUBLIC KEY" => der::spki_public(&block.der),
        "RSA PUBLIC KEY" => der::pkcs1_public(&block.der),
        _ => Err("expected a public key PEM (BEGIN PUBLIC KEY or BEGIN RSA PUBLIC KEY)"),
    }
    .map_err(load_error)?;
    let b64 = |bytes: &[u8]| Some(URL_SAFE_NO_PAD.encode(bytes));
    let base = Jwk {
        kid: kid.map(str::to_owned),
        use_: Some("sig".to_owned()),
        ..Jwk::default()
    };
    Ok(match public {
        PublicKey::Rsa { n, e } => Jwk {
            kty: "RSA".to_owned(),
            alg: Some(Alg::Rs256.as_str().to_owned()),
            n: b64(&n),
            e: b64(&e),
            ..base
        },
        PublicKey::EcP256 { x, y } => Jwk {
            kty: "EC".to_owned(),
            alg: Some(Alg::Es256.as_str().to_owned()),
            crv: Some("P-256".to_owned()),
            x: b64(&x),
            y: b64(&y),
            ..base
        },
        PublicKey::Ed25519 { x } => Jwk {
            kty: "OKP".to_owned(),
            alg: Some(Alg::EdDsa.as_str().to_owned()),
            crv: Some("Ed25519".to_owned()),
            x: b64(&x),
            ..base
        },
    })
}

fn load_error(reason: &'static str) -> TokenError {
    TokenError::KeyLoad(reason.to_owned())
}
