//! The verifying keys, [`KeySet`]: loading them from JWKS (RSA, EC P-256,
//! Ed25519) and HS256 shared secrets, and choosing which keys may verify a
//! given token header.
//!
//! Key choice: a token whose header has `kid` is checked against the one key
//! with that `kid` only, and refused with `AlgorithmNotAllowed` when that key's
//! type does not fit the header's `alg` (this stops the classic "HS256 with
//! the RSA public key as secret" confusion). A token without `kid` is checked
//! against every key whose type fits `alg`, in load order; JWKS files are small,
//! so the cost is bounded by the number of configured keys of that type.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::DecodingKey;

use crate::alg::Alg;
use crate::error::TokenError;
use crate::jwk::{Jwk, JwkSet};

/// RFC 7518 §3.2: an HS256 key must be at least as long as the hash output.
const MIN_HS256_SECRET: usize = 32;
/// ring verifies RS256 with 2048- to 8192-bit moduli.
const MIN_RSA_MODULUS: usize = 256;
const MAX_RSA_MODULUS: usize = 1024;

/// One key able to verify one algorithm.
pub(crate) struct VerifyingKey {
    pub(crate) kid: Option<String>,
    pub(crate) alg: Alg,
    pub(crate) key: DecodingKey,
}

/// The keys a [`crate::Verifier`] accepts signatures from.
///
/// Each key verifies exactly one algorithm: RSA keys RS256, EC P-256 keys
/// ES256, Ed25519 keys EdDSA, shared secrets HS256. A token whose header has
/// `kid` is checked against the key with that `kid` only, and refused with
/// [`TokenError::AlgorithmNotAllowed`] when the header's `alg` does not fit
/// that key (so an HS256 token "signed" with an RSA public key never reaches
/// the RSA key), or [`TokenError::UnknownKey`] when no key has that `kid`. A
/// token without `kid` is checked against every key of its algorithm's type,
/// in load order, and refused with [`TokenError::UnknownKey`] when there is
/// none.
///
/// `Debug` shows key ids and algorithms only, never key material.
#[derive(Default)]
pub struct KeySet {
    keys: Vec<VerifyingKey>,
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|k| (k.kid.as_deref(), k.alg)))
            .finish()
    }
}

impl KeySet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys loaded.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is loaded.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Adds the usable keys of a JWKS file; see [`KeySet::add_jwks_json`].
    pub fn add_jwks_file(&mut self, path: &Path) -> Result<usize, TokenError> {
        let bytes = read_file(path)?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| TokenError::KeyLoad(format!("{}: JWKS is not UTF-8", path.display())))?;
        self.add_jwks_json(text).map_err(|e| prefix_path(path, e))
    }

    /// Adds the usable keys of a JWKS document and returns how many.
    ///
    /// Keys this crate cannot use are skipped, as an identity provider's
    /// JWKS may hold keys for other purposes: `use` other than `sig`, a
    /// `kty` other than RSA/EC/OKP, a curve other than P-256/Ed25519, or an
    /// `alg` other than RS256/ES256/EdDSA for that type. A usable key whose
    /// numbers are broken, a `kid` already loaded, or a document with no
    /// usable key at all is an error.
    pub fn add_jwks_json(&mut self, json: &str) -> Result<usize, TokenError> {
        let set: JwkSet = serde_json::from_str(json).map_err(|e| {
            // serde_json's own text can quote values; keep only the position.
            TokenError::KeyLoad(format!("JWKS is not valid (line {}, column {})", e.line(), e.column()))
        })?;
        let mut added = Vec::new();
        for jwk in &set.keys {
            if let Some(key) = verifying_key_from_jwk(jwk)? {
                added.push(key);
            }
        }
        if added.is_empty() {
            return Err(TokenError::KeyLoad("JWKS has no usable key".to_owned()));
        }
        let count = added.len();
        for key in added {
            self.push(key)?;
        }
        Ok(count)
    }

    /// Adds one JWK; `Ok(false)` when it is of a kind this crate skips.
    pub fn add_jwk(&mut self, jwk: &Jwk) -> Result<bool, TokenError> {
        match verifying_key_from_jwk(jwk)? {
            Some(key) => self.push(key).map(|()| true),
            None => Ok(false),
        }
    }

    /// Adds an HS256 shared secret (at least 32 bytes), with an optional
    /// `kid`. Without `kid` it verifies only tokens that have none.
    pub fn add_hs256_secret(&mut self, secret: &[u8], kid: Option<String>) -> Result<(), TokenError> {
        check_hs256_secret(secret)?;
        self.push(VerifyingKey {
            kid,
            alg: Alg::Hs256,
            key: DecodingKey::from_secret(secret),
        })
    }

    /// Adds an HS256 shared secret read from a file; see [`read_secret_file`].
    pub fn add_hs256_secret_file(&mut self, path: &Path, kid: Option<String>) -> Result<(), TokenError> {
        let secret = read_secret_file(path)?;
        self.add_hs256_secret(&secret, kid).map_err(|e| prefix_path(path, e))
    }

    fn push(&mut self, key: VerifyingKey) -> Result<(), TokenError> {
        if key.kid.is_some() && self.keys.iter().any(|k| k.kid == key.kid) {
            return Err(TokenError::KeyLoad("two keys share one kid".to_owned()));
        }
        self.keys.push(key);
        Ok(())
    }

    /// The keys that may verify a token with this header; see the module doc.
    pub(crate) fn candidates(&self, alg: Alg, kid: Option<&str>) -> Result<Vec<&VerifyingKey>, TokenError> {
        match kid {
            Some(kid) => {
                let key = self
                    .keys
                    .iter()
                    .find(|k| k.kid.as_deref() == Some(kid))
                    .ok_or(TokenError::UnknownKey)?;
                if key.alg != alg {
                    return Err(TokenError::AlgorithmNotAllowed);
                }
                Ok(vec![key])
            }
            None => {
                let keys: Vec<_> = self.keys.iter().filter(|k| k.alg == alg).collect();
                if keys.is_empty() {
                    return Err(TokenError::UnknownKey);
                }
                Ok(keys)
            }
        }
    }
}

pub(crate) fn check_hs256_secret(secret: &[u8]) -> Result<(), TokenError> {
    if secret.len() < MIN_HS256_SECRET {
        return Err(TokenError::KeyLoad(format!(
            "HS256 secret is shorter than {MIN_HS256_SECRET} bytes"
        )));
    }
    Ok(())
}

/// Reads a file holding a shared secret. One trailing line end (`\n` or
/// `\r\n`) is dropped, so a secret written with `echo` works; every other
/// byte is part of the secret.
pub fn read_secret_file(path: &Path) -> Result<Vec<u8>, TokenError> {
    let mut secret = read_file(path)?;
    if secret.last() == Some(&b'\n') {
        secret.pop();
        if secret.last() == Some(&b'\r') {
            secret.pop();
        }
    }
    Ok(secret)
}

pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, TokenError> {
    std::fs::read(path).map_err(|e| TokenError::KeyLoad(format!("cannot read {}: {e}", path.display())))
}

fn prefix_path(path: &Path, error: TokenError) -> TokenError {
    match error {
        TokenError::KeyLoad(reason) => TokenError::KeyLoad(format!("{}: {reason}", path.display())),
        other => other,
    }
}

/// The verifying key of one JWK, `None` when the JWK is of a kind skipped.
fn verifying_key_from_jwk(jwk: &Jwk) -> Result<Option<VerifyingKey>, TokenError> {
    if jwk.use_.as_deref().is_some_and(|u| u != "sig") {
        return Ok(None);
    }
    let alg = match (jwk.kty.as_str(), jwk.crv.as_deref()) {
        ("RSA", _) => Alg::Rs256,
        ("EC", Some("P-256")) => Alg::Es256,
        ("OKP", Some("Ed25519")) => Alg::EdDsa,
        _ => return Ok(None),
    };
    if jwk.alg.as_deref().is_some_and(|a| a != alg.as_str()) {
        return Ok(None);
    }
    let key = match alg {
        Alg::Rs256 => {
            let n = param(&jwk.n, "n")?;
            let e = param(&jwk.e, "e")?;
            let n_len = decoded_len(n, "n")?;
            if !(MIN_RSA_MODULUS..=MAX_RSA_MODULUS).contains(&n_len) {
                return Err(bad_jwk("RSA modulus must be 2048 to 8192 bits"));
            }
            if decoded_len(e, "e")? == 0 {
                return Err(bad_jwk("RSA exponent is empty"));
            }
            DecodingKey::from_rsa_components(n, e)
        }
        Alg::Es256 => {
            let x = param(&jwk.x, "x")?;
            let y = param(&jwk.y, "y")?;
            if decoded_len(x, "x")? != 32 || decoded_len(y, "y")? != 32 {
                return Err(bad_jwk("P-256 coordinates must be 32 bytes"));
            }
            DecodingKey::from_ec_components(x, y)
        }
        Alg::EdDsa => {
            let x = param(&jwk.x, "x")?;
            if decoded_len(x, "x")? != 32 {
                return Err(bad_jwk("Ed25519 key must be 32 bytes"));
            }
            DecodingKey::from_ed_components(x)
        }
        Alg::Hs256 => return Ok(None),
    }
    .map_err(|_| bad_jwk("key parameters are not valid"))?;
    Ok(Some(VerifyingKey {
        kid: jwk.kid.clone(),
        alg,
        key,
    }))
}

fn param<'a>(value: &'a Option<String>, name: &'static str) -> Result<&'a str, TokenError> {
    value
        .as_deref()
        .ok_or_else(|| TokenError::KeyLoad(format!("JWK lacks parameter {name}")))
}

fn decoded_len(value: &str, name: &'static str) -> Result<usize, TokenError> {
    URL_SAFE_NO_PAD
        .decode(value)
        .map(|bytes| bytes.len())
        .map_err(|_| TokenError::KeyLoad(format!("JWK parameter {name} is not base64url")))
}

fn bad_jwk(reason: &'static str) -> TokenError {
    TokenError::KeyLoad(format!("JWK not usable: {reason}"))
}
