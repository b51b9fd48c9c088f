//! The scheme `mysql_native_password` (SHA-1) and the fast path of
//! `caching_sha2_password` (SHA-256) share: the server keeps `H(H(pw))`;
//! the client sends `H(pw) XOR H(mix)`, where `mix` is the nonce and
//! `H(H(pw))` in an order each plugin fixes; the server undoes the XOR and
//! checks that the hash of the result is what it keeps.

use sha2::Digest;

use super::{NONCE_LEN, ct_eq};

/// Where the nonce goes in the mixing hash.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NonceAt {
    /// `H(nonce ‖ H(H(pw)))` (native password).
    First,
    /// `H(H(H(pw)) ‖ nonce)` (caching_sha2).
    Last,
}

/// `H(parts…)` as an `N`-byte array (`N` is `D`'s output size).
pub(crate) fn hash<D: Digest, const N: usize>(parts: &[&[u8]]) -> [u8; N] {
    let mut h = D::new();
    for p in parts {
        h.update(p);
    }
    let mut out = [0u8; N];
    out.copy_from_slice(&h.finalize());
    out
}

fn mix<D: Digest, const N: usize>(stored: &[u8; N], nonce: &[u8; NONCE_LEN], at: NonceAt) -> [u8; N] {
    match at {
        NonceAt::First => hash::<D, N>(&[nonce, stored]),
        NonceAt::Last => hash::<D, N>(&[stored, nonce]),
    }
}

fn xor<const N: usize>(a: &[u8; N], b: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (o, (x, y)) in out.iter_mut().zip(a.iter().zip(b)) {
        *o = x ^ y;
    }
    out
}

/// `H(H(pw))`, what the server keeps.
pub(crate) fn stored<D: Digest, const N: usize>(password: &[u8]) -> [u8; N] {
    hash::<D, N>(&[&hash::<D, N>(&[password])])
}

/// The client's answer: `H(pw) XOR H(mix)`.
pub(crate) fn scramble<D: Digest, const N: usize>(password: &[u8], nonce: &[u8; NONCE_LEN], at: NonceAt) -> [u8; N] {
    let stage1 = hash::<D, N>(&[password]);
    let stage2 = hash::<D, N>(&[&stage1]);
    xor(&stage1, &mix::<D, N>(&stage2, nonce, at))
}

/// What a client puts on the wire: empty for an empty password.
pub(crate) fn client_response<D: Digest, const N: usize>(
    password: &[u8],
    nonce: &[u8; NONCE_LEN],
    at: NonceAt,
) -> Vec<u8> {
    if password.is_empty() {
        Vec::new()
    } else {
        scramble::<D, N>(password, nonce, at).to_vec()
    }
}

/// Checks `response` against `stored`. An empty response matches only the
/// empty password; another length fails. Constant-time in the contents.
pub(crate) fn verify<D: Digest, const N: usize>(
    stored: &[u8; N],
    nonce: &[u8; NONCE_LEN],
    response: &[u8],
    at: NonceAt,
) -> bool {
    if response.is_empty() {
        return ct_eq(stored, &self::stored::<D, N>(b""));
    }
    if response.len() != N {
        return false;
    }
    let stage1 = xor(&mix::<D, N>(stored, nonce, at), response);
    ct_eq(&hash::<D, N>(&[&stage1]), stored)
}
