//! Startup-phase packets: the untagged messages a client sends before the
//! session exists (StartupMessage, SSLRequest, GSSENCRequest, CancelRequest;
//! PostgreSQL docs §55.2.1 and §55.7), parsed from and written to bytes.

use thiserror::Error;

/// `MAX_STARTUP_PACKET_LENGTH` in `src/include/libpq/pqcomm.h`.
pub const MAX_STARTUP_PACKET_LEN: usize = 10_000;
/// `NEGOTIATE_SSL_CODE` (pqcomm.h): 1234 << 16 | 5679.
pub const SSL_REQUEST_CODE: u32 = 80_877_103;
/// `NEGOTIATE_GSS_CODE` (pqcomm.h): 1234 << 16 | 5680.
pub const GSSENC_REQUEST_CODE: u32 = 80_877_104;
/// `CANCEL_REQUEST_CODE` (pqcomm.h): 1234 << 16 | 5678.
pub const CANCEL_REQUEST_CODE: u32 = 80_877_102;
/// Protocol 3.0 (`PG_PROTOCOL(3,0)`).
pub const PROTOCOL_3_0: u32 = 3 << 16;

/// A parsed startup-phase packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupPacket {
    SslRequest,
    GssEncRequest,
    Cancel {
        pid: u32,
        secret: u32,
    },
    Startup {
        /// Requested minor version of protocol 3; the proxy speaks 3.0 and
        /// answers a higher minor with NegotiateProtocolVersion.
        minor: u16,
        params: Vec<(String, String)>,
        /// `_pq_.*` protocol options, which the proxy does not support.
        unsupported_options: Vec<String>,
    },
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum StartupError {
    #[error("invalid length of startup packet")]
    BadLength,
    #[error("unsupported frontend protocol {major}.{minor}: server supports 3.0")]
    UnsupportedProtocol { major: u16, minor: u16 },
    #[error("invalid startup packet layout: {0}")]
    Malformed(&'static str),
}

/// Parses one startup packet from the front of `buf`. Returns the packet and
/// the number of bytes it used, or `None` when more bytes are needed.
pub fn parse_startup(buf: &[u8]) -> Result<Option<(StartupPacket, usize)>, StartupError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if !(8..=MAX_STARTUP_PACKET_LEN).contains(&len) {
        return Err(StartupError::BadLength);
    }
    if buf.len() < len {
        return Ok(None);
    }
    let code = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let body = &buf[8..len];
    let packet = match code {
        SSL_REQUEST_CODE | GSSENC_REQUEST_CODE if !body.is_empty() => {
            return Err(StartupError::BadLength);
        }
        SSL_REQUEST_CODE => StartupPacket::SslRequest,
        GSSENC_REQUEST_CODE => StartupPacket::GssEncRequest,
        CANCEL_REQUEST_CODE => {
            if body.len() != 8 {
                return Err(StartupError::BadLength);
            }
            StartupPacket::Cancel {
                pid: u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                secret: u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
            }
        }
        _ => {
            let major = (code >> 16) as u16;
            let minor = (code & 0xffff) as u16;
            if major != 3 {
                return Err(StartupError::UnsupportedProtocol { major, minor });
            }
            let (params, unsupported_options) = parse_params(body)?;
            StartupPacket::Startup {
                minor,
                params,
                unsupported_options,
            }
        }
    };
    Ok(Some((packet, len)))
}

type Params = (Vec<(String, String)>, Vec<String>);

fn parse_params(body: &[u8]) -> Result<Params, StartupError> {
    let mut params = Vec::new();
    let mut options = Vec::new();
    let mut rest = body;
    loop {
        let (key, after) = cstr(rest)?;
        if key.is_empty() {
            if !after.is_empty() {
                return Err(StartupError::Malformed("data after the final terminator"));
            }
            break;
        }
        let (value, after) = cstr(after)?;
        if key.starts_with("_pq_.") {
            options.push(key.to_owned());
        } else {
            params.push((key.to_owned(), value.to_owned()));
        }
        rest = after;
    }
    Ok((params, options))
}

fn cstr(buf: &[u8]) -> Result<(&str, &[u8]), StartupError> {
    let end = buf
        .iter()
        .position(|&b| b == 0)
        .ok_or(StartupError::Malformed("missing terminator"))?;
    let s = std::str::from_utf8(&buf[..end]).map_err(|_| StartupError::Malformed("parameter is not valid UTF-8"))?;
    Ok((s, &buf[end + 1..]))
}

/// A StartupMessage for protocol 3.0 with the given parameters.
pub fn startup_message<'a>(params: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = vec![0; 4];
    out.extend_from_slice(&PROTOCOL_3_0.to_be_bytes());
    for (k, v) in params {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out.push(0);
    let len = out.len() as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// An SSLRequest packet: what a client sends first to ask for TLS; the
/// server answers the single byte [`SSL_ACCEPTED`] or [`SSL_REFUSED`]
/// (protocol docs, "SSL Session Encryption").
pub fn ssl_request() -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&8u32.to_be_bytes());
    out[4..].copy_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    out
}

/// The server's answer to an SSLRequest when it starts TLS.
pub const SSL_ACCEPTED: u8 = b'S';
/// The server's answer to an SSLRequest when it has no TLS.
pub const SSL_REFUSED: u8 = b'N';

/// A CancelRequest packet.
pub fn cancel_request(pid: u32, secret: u32) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&16u32.to_be_bytes());
    out[4..8].copy_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
    out[8..12].copy_from_slice(&pid.to_be_bytes());
    out[12..].copy_from_slice(&secret.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn startup_round_trip() {
        let bytes = startup_message([("user", "alice"), ("database", "db1")]);
        let (p, used) = parse_startup(&bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(
            p,
            StartupPacket::Startup {
                minor: 0,
                params: vec![("user".into(), "alice".into()), ("database".into(), "db1".into())],
                unsupported_options: vec![],
            }
        );
        assert_eq!(parse_startup(&bytes[..bytes.len() - 1]).unwrap(), None);
    }

    #[test]
    fn special_requests() {
        let mut ssl = 8u32.to_be_bytes().to_vec();
        ssl.extend_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
        assert_eq!(parse_startup(&ssl).unwrap().unwrap().0, StartupPacket::SslRequest);
        assert_eq!(ssl_request().as_slice(), ssl.as_slice());
        let c = cancel_request(7, 9);
        assert_eq!(
            parse_startup(&c).unwrap().unwrap().0,
            StartupPacket::Cancel { pid: 7, secret: 9 }
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(parse_startup(&[0, 0, 0, 4, 0, 0, 0, 0]), Err(StartupError::BadLength));
        assert_eq!(parse_startup(&[0, 1, 0, 0]), Err(StartupError::BadLength));
        let mut v2 = 8u32.to_be_bytes().to_vec();
        v2.extend_from_slice(&(2u32 << 16).to_be_bytes());
        assert_eq!(
            parse_startup(&v2),
            Err(StartupError::UnsupportedProtocol { major: 2, minor: 0 })
        );
        let mut unterminated = startup_message([("user", "a")]);
        unterminated.pop();
        unterminated.push(b'x');
        assert!(parse_startup(&unterminated).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(buf in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(Some((_, used))) = parse_startup(&buf) {
                prop_assert!(used <= buf.len());
            }
        }
    }
}
