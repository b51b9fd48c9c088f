//! Server-side PostgreSQL client authentication: the proxy verifying its own clients.
//!
//! This module owns the credential checks Gatehouse performs when a client
//! connects, as sans-I/O building blocks:
//!
//! * [`scram`]: SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL uses it in the
//!   `AuthenticationSASL` exchange, plus PostgreSQL's stored verifier format.
//! * [`md5`]: the legacy `AuthenticationMD5Password` scheme.
//!
//! Nothing here reads a clock, touches a socket or draws randomness on its own:
//! the state machines take nonces and salts from the caller. The `random_*`
//! helpers below are conveniences for callers that want OS-seeded randomness.

pub mod md5;
pub mod scram;

pub use md5::{md5_stored, md5_verify};
pub use scram::{SCRAM_SHA_256, ScramError, ScramServer, ScramVerifier};

/// A fresh server nonce for [`ScramServer::new`], from the thread-local CSPRNG.
pub fn random_nonce() -> [u8; scram::NONCE_RAW_LEN] {
    rand::random()
}

/// A fresh salt for [`ScramVerifier::from_password`], from the thread-local CSPRNG.
pub fn random_salt() -> [u8; scram::DEFAULT_SALT_LEN] {
    rand::random()
}

/// A fresh 4-byte salt for `AuthenticationMD5Password`, from the thread-local CSPRNG.
pub fn random_md5_salt() -> [u8; md5::MD5_SALT_LEN] {
    rand::random()
}
