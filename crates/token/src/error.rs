//! The one error type of the crate, [`TokenError`], and the generic text a
//! client is shown for any token authentication failure.
//!
//! Every message is short and fixed (or built from a file path and an I/O
//! error kind): none ever contains token text, key bytes or claim values, so
//! none tells whether a tenant or database exists.

use thiserror::Error;

/// Why a token was refused, a key could not be loaded, or a token could not
/// be issued.
///
/// The `Display` text is meant for the proxy's logs. Clients get
/// [`TokenError::client_message`] instead.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenError {
    /// Not three base64url parts, not JSON, a claim of the wrong type, too
    /// long, or a `crit` header. The text says which part, never its content.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The header's `alg` is not one of RS256, ES256, EdDSA, HS256 (this
    /// includes `none`), or does not match the type of the key it names.
    #[error("token algorithm not allowed")]
    AlgorithmNotAllowed,
    /// No configured key has the header's `kid`, or (without `kid`) no key
    /// of the algorithm's type is configured.
    #[error("no key for this token")]
    UnknownKey,
    /// The signature does not verify with any candidate key.
    #[error("token signature does not verify")]
    BadSignature,
    /// `exp` plus the leeway has passed.
    #[error("token expired")]
    Expired,
    /// `nbf` minus the leeway is still in the future.
    #[error("token not yet valid")]
    NotYetValid,
    /// `iss` is not the configured issuer.
    #[error("token issuer not accepted")]
    WrongIssuer,
    /// `aud` does not contain the endpoint the client connected to.
    #[error("token audience not accepted")]
    WrongAudience,
    /// A required claim (`exp`, `iss`, `aud`, `sub`, `db`) is absent or empty.
    #[error("token lacks required claim {0}")]
    MissingClaim(&'static str),
    /// A key or key file could not be loaded or used. The text names the
    /// file and the reason, never key bytes.
    #[error("key not loaded: {0}")]
    KeyLoad(String),
    /// A token could not be issued (bad request or signing failure).
    #[error("token not issued: {0}")]
    Issue(&'static str),
}

/// The text shown to clients for every token authentication failure.
const CLIENT_MESSAGE: &str = "token authentication failed";

impl TokenError {
    /// One generic text for every failure, so a client learns nothing about
    /// why its token was refused (nor whether a tenant or database exists).
    pub fn client_message(&self) -> &'static str {
        CLIENT_MESSAGE
    }
}
