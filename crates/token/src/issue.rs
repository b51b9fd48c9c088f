//! Minting tokens for development and tests: [`IssuingKey`] (a private key
//! PEM whose type picks the algorithm, or an HS256 secret) and [`issue`],
//! behind `gatehouse token issue`.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use jsonwebtoken::{EncodingKey, Header};
use serde::Serialize;

use crate::alg::Alg;
use crate::der::{self, KeyType};
use crate::error::TokenError;
use crate::keys::{check_hs256_secret, read_file, read_secret_file};

/// A key that signs tokens. `Debug` shows the algorithm and `kid` only.
pub struct IssuingKey {
    alg: Alg,
    kid: Option<String>,
    key: EncodingKey,
}

impl fmt::Debug for IssuingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuingKey")
            .field("alg", &self.alg)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl IssuingKey {
    /// Reads a private key PEM; its type picks the algorithm:
    ///
    /// - RSA, `BEGIN PRIVATE KEY` (PKCS#8) or `BEGIN RSA PRIVATE KEY`
    ///   (PKCS#1), 2048 to 8192 bits: RS256;
    /// - EC P-256, `BEGIN PRIVATE KEY` (PKCS#8): ES256. SEC1
    ///   `BEGIN EC PRIVATE KEY` is refused; convert it with
    ///   `openssl pkcs8 -topk8 -nocrypt`;
    /// - Ed25519, `BEGIN PRIVATE KEY` (PKCS#8): EdDSA.
    ///
    /// Encrypted keys and other curves are refused. The key signs a probe
    /// message once, so an unusable key fails here, not at first use.
    pub fn from_pem(pem: &[u8], kid: Option<String>) -> Result<Self, TokenError> {
        let block = der::parse_pem(pem).map_err(load_error)?;
        let (alg, key) = match block.label.as_str() {
            "RSA PRIVATE KEY" => (Alg::Rs256, EncodingKey::from_rsa_der(&block.der)),
            "PRIVATE KEY" => match der::pkcs8_key_type(&block.der).map_err(load_error)? {
                KeyType::Rsa => {
                    let pkcs1 = der::pkcs8_inner_key(&block.der).map_err(load_error)?;
                    (Alg::Rs256, EncodingKey::from_rsa_der(pkcs1))
                }
                KeyType::EcP256 => (Alg::Es256, EncodingKey::from_ec_der(&block.der)),
                KeyType::Ed25519 => (Alg::EdDsa, EncodingKey::from_ed_der(&block.der)),
            },
            "EC PRIVATE KEY" => {
                return Err(load_error(
                    "EC keys must be PKCS#8 (BEGIN PRIVATE KEY); convert with openssl pkcs8 -topk8 -nocrypt",
                ));
            }
            "ENCRYPTED PRIVATE KEY" => return Err(load_error("encrypted keys are not supported")),
            _ => return Err(load_error("expected a private key PEM")),
        };
        jsonwebtoken::crypto::sign(b"gatehouse-token key check", &key, alg.to_jwt())
            .map_err(|_| TokenError::KeyLoad(format!("private key is not a usable {alg} key")))?;
        Ok(IssuingKey { alg, kid, key })
    }

    /// [`IssuingKey::from_pem`] on a file.
    pub fn from_pem_file(path: &Path, kid: Option<String>) -> Result<Self, TokenError> {
        let pem = read_file(path)?;
        Self::from_pem(&pem, kid).map_err(|e| with_path(path, e))
    }

    /// An HS256 shared secret of at least 32 bytes.
    pub fn hs256(secret: &[u8], kid: Option<String>) -> Result<Self, TokenError> {
        check_hs256_secret(secret)?;
        Ok(IssuingKey {
            alg: Alg::Hs256,
            kid,
            key: EncodingKey::from_secret(secret),
        })
    }

    /// An HS256 shared secret read from a file (see [`read_secret_file`]).
    pub fn hs256_from_file(path: &Path, kid: Option<String>) -> Result<Self, TokenError> {
        let secret = read_secret_file(path)?;
        Self::hs256(&secret, kid).map_err(|e| with_path(path, e))
    }

    /// The algorithm this key signs with.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The `kid` put in the header of tokens, if any.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }
}

/// What to put in an issued token.
#[derive(Debug, Clone)]
pub struct IssueRequest {
    /// `iss`.
    pub issuer: String,
    /// `aud`: the endpoint name the token is for.
    pub audience: String,
    /// `sub`.
    pub tenant: String,
    /// `db`.
    pub database: String,
    /// `exp` is `now` plus this, in whole seconds (at least one).
    pub ttl: Duration,
    /// `iat`, in seconds since the Unix epoch.
    pub now: u64,
}

#[derive(Serialize)]
struct IssuedClaims<'a> {
    iss: &'a str,
    aud: &'a str,
    sub: &'a str,
    db: &'a str,
    iat: u64,
    exp: u64,
}

/// Signs a token for `request` with `key`. The header carries `alg`,
/// `typ: JWT` and the key's `kid` when it has one.
pub fn issue(key: &IssuingKey, request: &IssueRequest) -> Result<String, TokenError> {
    for (value, what) in [
        (&request.issuer, "issuer is empty"),
        (&request.audience, "audience is empty"),
        (&request.tenant, "tenant is empty"),
        (&request.database, "database is empty"),
    ] {
        if value.is_empty() {
            return Err(TokenError::Issue(what));
        }
    }
    let ttl = request.ttl.as_secs();
    if ttl == 0 {
        return Err(TokenError::Issue("ttl must be at least one second"));
    }
    let exp = request
        .now
        .checked_add(ttl)
        .ok_or(TokenError::Issue("expiry is out of range"))?;
    let mut header = Header::new(key.alg.to_jwt());
    header.kid = key.kid.clone();
    let claims = IssuedClaims {
        iss: &request.issuer,
        aud: &request.audience,
        sub: &request.tenant,
        db: &request.database,
        iat: request.now,
        exp,
    };
    jsonwebtoken::encode(&header, &claims, &key.key).map_err(|_| TokenError::Issue("signing failed"))
}

fn load_error(reason: &'static str) -> TokenError {
    TokenError::KeyLoad(reason.to_owned())
}

fn with_path(path: &Path, error: TokenError) -> TokenError {
    match error {
        TokenError::KeyLoad(reason) => TokenError::KeyLoad(format!("{}: {reason}", path.display())),
        other => other,
    }
}
