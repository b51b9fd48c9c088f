//! `caching_sha2_password` fast path: the client sends
//! `SHA256(password) XOR SHA256(SHA256(SHA256(password)) ‖ nonce)`; a server that
//! has `SHA256(SHA256(password))` cached verifies it and answers AuthMoreData
//! [`FAST_AUTH_SUCCESS`], otherwise [`PERFORM_FULL_AUTH`] (the client then sends
//! the password in clear over TLS, or asks for the RSA key with
//! [`REQUEST_PUBLIC_KEY`]).
//!
//! Reference: MySQL "Caching_sha2_password information".

use sha2::{Digest, Sha256};

use super::{NONCE_LEN, ct_eq};

/// Length of a SHA-256 digest and of the scramble.
pub const HASH_LEN: usize = 32;
/// AuthMoreData byte: the fast path succeeded, an OK packet follows.
pub const FAST_AUTH_SUCCESS: u8 = 0x03;
/// AuthMoreData byte: the client must send the full password.
pub const PERFORM_FULL_AUTH: u8 = 0x04;
/// Client byte asking the server for its RSA public key (non-TLS full auth).
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;

fn sha256(parts: &[&[u8]]) -> [u8; HASH_LEN] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// The fast-path auth response (the protocol sends nothing for an empty password;
/// see [`client_response`]).
pub fn scramble(password: &[u8], nonce: &[u8; NONCE_LEN]) -> [u8; HASH_LEN] {
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    let mix = sha256(&[&stage2, nonce]);
    let mut out = [0u8; HASH_LEN];
    for (o, (a, b)) in out.iter_mut().zip(stage1.iter().zip(mix)) {
        *o = a ^ b;
    }
    out
}

/// What a client puts on the wire: empty for an empty password, else [`scramble`].
pub fn client_response(password: &[u8], nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    if password.is_empty() {
        Vec::new()
    } else {
        scramble(password, nonce).to_vec()
    }
}

/// `SHA256(SHA256(password))`, what the fast-path cache holds.
pub fn stored_hash(password: &[u8]) -> [u8; HASH_LEN] {
    sha256(&[&sha256(&[password])])
}

/// Fast-path check of a response against the cached hash. An empty response
/// matches only the empty password. Constant-time in the response contents.
pub fn verify_fast(stored: &[u8; HASH_LEN], nonce: &[u8; NONCE_LEN], response: &[u8]) -> bool {
    if response.is_empty() {
        return ct_eq(stored, &stored_hash(b""));
    }
    if response.len() != HASH_LEN {
        return false;
    }
    let mix = sha256(&[stored, nonce]);
    let mut stage1 = [0u8; HASH_LEN];
    for (o, (a, b)) in stage1.iter_mut().zip(response.iter().zip(mix)) {
        *o = a ^ b;
    }
    ct_eq(&sha256(&[&stage1]), stored)
}
