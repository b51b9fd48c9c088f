//! Short-lived signed tokens (JWT) that clients present as their password.
//!
//! This crate owns the whole token story of the proxy, without any I/O beyond
//! reading key files:
//!
//! - [`KeySet`] holds the verifying keys: public keys from a JWKS file
//!   (RSA, EC P-256, Ed25519) and/or an HS256 shared secret.
//! - [`Verifier`] checks a token's signature, `exp`, `nbf`, `iss` and `aud`,
//!   maps `sub` to a tenant and `db` to a database, and caches verified tokens
//!   until they expire.
//! - [`issue`] mints tokens for development and tests from an [`IssuingKey`].
//! - [`jwk_from_public_pem`] turns a public key into a JWKS entry.
//!
//! Only four algorithms are ever accepted: RS256, ES256, EdDSA (Ed25519) and
//! HS256. `alg: none` and every other algorithm are refused before any
//! signature work. Error messages never contain token text or key material,
//! and [`TokenError::client_message`] gives the one generic text a client sees.

#![forbid(unsafe_code)]

mod alg;
mod cache;
mod claims;
mod der;
mod error;
mod issue;
mod jwk;
mod keys;
mod verify;

pub use alg::Alg;
pub use claims::Claims;
pub use error::TokenError;
pub use issue::{IssueRequest, IssuingKey, issue};
pub use jwk::{Jwk, JwkSet, jwk_from_public_pem};
pub use keys::{KeySet, read_secret_file};
pub use verify::{DEFAULT_CACHE_CAPACITY, DEFAULT_LEEWAY, MAX_TOKEN_LEN, Verifier, VerifierConfig, unix_seconds};
