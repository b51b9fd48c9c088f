//! PostgreSQL's legacy MD5 password authentication (server side).
//!
//! Owns the stored form (`"md5" + hex(md5(password || username))`) and the check
//! of a client's `PasswordMessage` answering `AuthenticationMD5Password`, as
//! described in the PostgreSQL documentation, "Message Flow" /
//! "AuthenticationMD5Password" and "Password Authentication".

use md5::{Digest, Md5};
use subtle::ConstantTimeEq;

/// Prefix of a stored MD5 password and of the client's response
/// (PostgreSQL docs, "Password Authentication").
pub const MD5_PREFIX: &str = "md5";

/// Length of the salt in `AuthenticationMD5Password` (PostgreSQL protocol,
/// "Message Formats": `Byte4` salt).
pub const MD5_SALT_LEN: usize = 4;

/// Length of a hex-encoded MD5 digest (RFC 1321: 128-bit digest).
const MD5_HEX_LEN: usize = 32;

/// PostgreSQL's stored md5 form: `"md5" + hex(md5(password || username))`.
pub fn md5_stored(username: &str, password: &str) -> String {
    let mut h = Md5::new();
    h.update(password.as_bytes());
    h.update(username.as_bytes());
    format!("{MD5_PREFIX}{}", hex_lower(&h.finalize()))
}

/// Verify the client's `PasswordMessage` payload (without the trailing NUL) for
/// `AuthenticationMD5Password`.
///
/// The expected response is `"md5" + hex(md5(hex_part_of_stored || salt))`, compared
/// in constant time. A malformed `stored` string (not `"md5"` followed by 32
/// lowercase hex digits) never verifies.
pub fn md5_verify(stored: &str, salt: [u8; MD5_SALT_LEN], client_response: &[u8]) -> bool {
    let Some(hex_part) = stored.strip_prefix(MD5_PREFIX) else {
        return false;
    };
    // libpq hashes the lowercase hex text, so any other form could never match.
    if hex_part.len() != MD5_HEX_LEN
        || !hex_part
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return false;
    }
    let mut h = Md5::new();
    h.update(hex_part.as_bytes());
    h.update(salt);
    // Built on the stack: this runs for every md5 login.
    let mut expected = [0u8; MD5_PREFIX.len() + MD5_HEX_LEN];
    expected[..MD5_PREFIX.len()].copy_from_slice(MD5_PREFIX.as_bytes());
    hex_lower_into(&h.finalize(), &mut expected[MD5_PREFIX.len()..]);
    bool::from(expected.ct_eq(client_response))
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` as lowercase hex into `out` (two digits per byte; `out`
/// is at least twice as long as `bytes`).
fn hex_lower_into(bytes: &[u8], out: &mut [u8]) {
    for (&b, pair) in bytes.iter().zip(out.chunks_exact_mut(2)) {
        pair[0] = HEX_DIGITS[usize::from(b >> 4)];
        pair[1] = HEX_DIGITS[usize::from(b & 0x0f)];
    }
}

fn hex_lower(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    hex_lower_into(bytes, &mut out);
    out.into_iter().map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::authentication::md5_hash;

    #[test]
    fn stored_matches_postgres_protocol() {
        assert_eq!(
            md5_stored("alice", "s3cret"),
            postgres_protocol::password::md5(b"s3cret", "alice")
        );
    }

    #[test]
    fn verify_against_independent_client() {
        let stored = md5_stored("alice", "s3cret");
        let salt = [1, 2, 3, 0xff];
        let good = md5_hash(b"alice", b"s3cret", salt);
        assert!(md5_verify(&stored, salt, good.as_bytes()));
        let bad = md5_hash(b"alice", b"wrong", salt);
        assert!(!md5_verify(&stored, salt, bad.as_bytes()));
        assert!(!md5_verify(&stored, [0; 4], good.as_bytes()));
        let other_user = md5_hash(b"bob", b"s3cret", salt);
        assert!(!md5_verify(&stored, salt, other_user.as_bytes()));
        // Trailing NUL must already have been stripped by the caller.
        let mut with_nul = good.clone().into_bytes();
        with_nul.push(0);
        assert!(!md5_verify(&stored, salt, &with_nul));
        assert!(!md5_verify(&stored, salt, b""));
    }

    #[test]
    fn malformed_stored_never_verifies() {
        let salt = [9, 8, 7, 6];
        let good = md5_hash(b"alice", b"pw", salt);
        let stored = md5_stored("alice", "pw");
        for bad in [
            String::new(),
            "md5".to_owned(),
            stored[3..].to_owned(),
            stored.to_uppercase(),
            format!("{stored}0"),
            stored[..34].to_owned(),
            format!("md5{}", "g".repeat(32)),
            "SCRAM-SHA-256$4096:abc$def:ghi".to_owned(),
        ] {
            assert!(!md5_verify(&bad, salt, good.as_bytes()), "{bad:?}");
        }
    }
}
