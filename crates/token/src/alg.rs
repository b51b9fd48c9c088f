//! The closed list of signature algorithms this crate accepts, [`Alg`], and
//! its mapping to `jsonwebtoken`'s algorithm type.

use std::fmt;

/// The only algorithms ever accepted. Anything else — `none`, HS384/HS512,
/// RS384/RS512, PS*, ES384, any spelling variant — is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256, RSA keys of 2048 to 8192 bits.
    Rs256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
    /// HMAC with SHA-256 and a shared secret.
    Hs256,
}

impl Alg {
    /// The exact, case-sensitive `alg` header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
            Alg::Hs256 => "HS256",
        }
    }

    /// Parses an `alg` header value; `None` for everything not on the list.
    pub fn from_header(value: &str) -> Option<Alg> {
        match value {
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            "EdDSA" => Some(Alg::EdDsa),
            "HS256" => Some(Alg::Hs256),
            _ => None,
        }
    }

    pub(crate) fn to_jwt(self) -> jsonwebtoken::Algorithm {
        match self {
            Alg::Rs256 => jsonwebtoken::Algorithm::RS256,
            Alg::Es256 => jsonwebtoken::Algorithm::ES256,
            Alg::EdDsa => jsonwebtoken::Algorithm::EdDSA,
            Alg::Hs256 => jsonwebtoken::Algorithm::HS256,
        }
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
