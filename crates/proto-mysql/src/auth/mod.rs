//! Password-based authentication computations: `mysql_native_password`,
//! `caching_sha2_password` (fast path, and the RSA exchange of its full path),
//! MariaDB's `client_ed25519` and `mysql_clear_password`, plus a
//! constant-time comparison and nonce generation. Driving the exchange (which
//! packet comes next) is the caller's job; these are the pure computations.

pub mod caching_sha2;
pub mod clear_password;
mod double_hash;
pub mod ed25519;
pub mod native_password;
pub mod rsa_exchange;

use rand::RngCore;

/// Length of the auth-plugin nonce ("scramble") the server sends in the greeting.
pub const NONCE_LEN: usize = 20;

/// Constant-time equality for equal-length slices (length itself is not secret).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh nonce for a greeting or an AuthSwitchRequest. Bytes are printable
/// ASCII without NUL or `$`, as MySQL servers generate them (some clients treat
/// the nonce as a C string).
pub fn generate_nonce() -> [u8; NONCE_LEN] {
    let mut raw = [0u8; NONCE_LEN];
    rand::thread_rng().fill_bytes(&mut raw);
    let mut out = [0u8; NONCE_LEN];
    for (o, r) in out.iter_mut().zip(raw) {
        // 0x21..=0x7e minus '$' (0x24): 93 symbols.
        let c = 0x21 + (r % 93);
        *o = if c >= b'$' { c + 1 } else { c };
    }
    out
}
