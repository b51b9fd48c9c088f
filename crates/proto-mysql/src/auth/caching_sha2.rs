//! `caching_sha2_password` fast path: the client sends
//! `SHA256(password) XOR SHA256(SHA256(SHA256(password)) ‖ nonce)`; a server that
//! has `SHA256(SHA256(password))` cached verifies it and answers AuthMoreData
//! [`FAST_AUTH_SUCCESS`], otherwise [`PERFORM_FULL_AUTH`] (the client then sends
//! the password in clear over TLS, or asks for the RSA key with
//! [`REQUEST_PUBLIC_KEY`]).
//!
//! Reference: MySQL "Caching_sha2_password information".

use sha2::Sha256;

use super::NONCE_LEN;
use super::double_hash::{self, NonceAt};

/// Length of a SHA-256 digest and of the scramble.
pub const HASH_LEN: usize = 32;
/// AuthMoreData byte: the fast path succeeded, an OK packet follows.
pub const FAST_AUTH_SUCCESS: u8 = 0x03;
/// AuthMoreData byte: the client must send the full password.
pub const PERFORM_FULL_AUTH: u8 = 0x04;
/// Client byte asking the server for its RSA public key (non-TLS full auth).
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;

/// The fast-path auth response (the protocol sends nothing for an empty password;
/// see [`client_response`]).
pub fn scramble(password: &[u8], nonce: &[u8; NONCE_LEN]) -> [u8; HASH_LEN] {
    double_hash::scramble::<Sha256, HASH_LEN>(password, nonce, NonceAt::Last)
}

/// What a client puts on the wire: empty for an empty password, else [`scramble`].
pub fn client_response(password: &[u8], nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    double_hash::client_response::<Sha256, HASH_LEN>(password, nonce, NonceAt::Last)
}

/// `SHA256(SHA256(password))`, what the fast-path cache holds.
pub fn stored_hash(password: &[u8]) -> [u8; HASH_LEN] {
    double_hash::stored::<Sha256, HASH_LEN>(password)
}

/// Fast-path check of a response against the cached hash. An empty response
/// matches only the empty password. Constant-time in the response contents.
pub fn verify_fast(stored: &[u8; HASH_LEN], nonce: &[u8; NONCE_LEN], response: &[u8]) -> bool {
    double_hash::verify::<Sha256, HASH_LEN>(stored, nonce, response, NonceAt::Last)
}
