//! `mysql_native_password`: the client sends
//! `SHA1(password) XOR SHA1(nonce ‖ SHA1(SHA1(password)))`; the server stores
//! `SHA1(SHA1(password))`, shown by `PASSWORD()` as `*` + 40 upper-case hex digits.
//!
//! Reference: MySQL "Native Authentication".

use sha1::Sha1;

use super::NONCE_LEN;
use super::double_hash::{self, NonceAt};

/// Length of a SHA-1 digest, of the scramble and of the stored hash.
pub const HASH_LEN: usize = 20;
/// Length of the textual form `*` + 40 hex digits (`mysql.user.authentication_string`).
pub const HEX_FORM_LEN: usize = 41;

/// The auth response a client sends. An empty password yields an empty response
/// in the protocol; this function returns the 20-byte value regardless, and
/// [`client_response`] applies that rule.
pub fn scramble(password: &[u8], nonce: &[u8; NONCE_LEN]) -> [u8; HASH_LEN] {
    double_hash::scramble::<Sha1, HASH_LEN>(password, nonce, NonceAt::First)
}

/// What a client puts on the wire: empty for an empty password, else [`scramble`].
pub fn client_response(password: &[u8], nonce: &[u8; NONCE_LEN]) -> Vec<u8> {
    double_hash::client_response::<Sha1, HASH_LEN>(password, nonce, NonceAt::First)
}

/// `SHA1(SHA1(password))`, what the server stores.
pub fn stored_hash(password: &[u8]) -> [u8; HASH_LEN] {
    double_hash::stored::<Sha1, HASH_LEN>(password)
}

/// Checks a client's response against the stored hash. An empty response matches
/// only the empty password's hash; any other length fails. Constant-time in the
/// response contents.
pub fn verify(stored: &[u8; HASH_LEN], nonce: &[u8; NONCE_LEN], response: &[u8]) -> bool {
    double_hash::verify::<Sha1, HASH_LEN>(stored, nonce, response, NonceAt::First)
}

/// Formats a stored hash the way `PASSWORD()` shows it: `*` + 40 upper-case hex.
pub fn format_stored(stored: &[u8; HASH_LEN]) -> String {
    let mut s = String::with_capacity(HEX_FORM_LEN);
    s.push('*');
    for b in stored {
        s.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789ABCDEF"[usize::from(b & 0xF)]));
    }
    s
}

/// Parses the `*HEX40` form (hex digits in either case). `None` if malformed.
pub fn parse_stored(text: &str) -> Option<[u8; HASH_LEN]> {
    let hex = text.strip_prefix('*')?.as_bytes();
    if hex.len() != HASH_LEN * 2 {
        return None;
    }
    let mut out = [0u8; HASH_LEN];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = hex_val(pair[0])? << 4 | hex_val(pair[1])?;
    }
    Some(out)
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}
