//! `mysql_clear_password` (also the full-auth step of `caching_sha2_password`
//! over TLS): the password as a NUL-terminated string. Only safe over TLS.
//!
//! Reference: MySQL "Clear text client plugin".

/// The client's response: the password followed by one NUL.
pub fn encode(password: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(password.len() + 1);
    out.extend_from_slice(password);
    out.push(0);
    out
}

/// The password from a response: everything up to the first NUL (clients that
/// omit the terminator are accepted too).
pub fn decode(response: &[u8]) -> &[u8] {
    match response.iter().position(|&b| b == 0) {
        Some(end) => &response[..end],
        None => response,
    }
}
