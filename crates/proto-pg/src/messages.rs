//! The regular messages the proxy writes itself or needs to read (§55.7):
//! encoders append to a `BytesMut`, decoders take one whole message
//! (tag and length included) as produced by [`crate::frame::next_frame`].

use bytes::{BufMut, BytesMut};
use thiserror::Error;

use crate::frame::HEADER_LEN;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("message '{0}' is truncated or malformed")]
    Malformed(char),
    #[error("unexpected message '{0}'")]
    Unexpected(char),
}

/// Appends a message with `tag`, letting `body` write its payload; the length
/// is patched in afterwards.
pub fn put_message(out: &mut BytesMut, tag: u8, body: impl FnOnce(&mut BytesMut)) {
    let start = out.len();
    out.put_u8(tag);
    out.put_i32(0);
    body(out);
    let len = (out.len() - start - 1) as i32;
    out[start + 1..start + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
}

fn put_cstr(out: &mut BytesMut, s: &str) {
    out.put_slice(s.as_bytes());
    out.put_u8(0);
}

/// `ErrorResponse` ('E') or, with `notice`, `NoticeResponse` ('N').
pub fn put_error(out: &mut BytesMut, severity: &str, code: &str, message: &str) {
    put_message(out, b'E', |b| {
        b.put_u8(b'S');
        put_cstr(b, severity);
        b.put_u8(b'V');
        put_cstr(b, severity);
        b.put_u8(b'C');
        put_cstr(b, code);
        b.put_u8(b'M');
        put_cstr(b, message);
        b.put_u8(0);
    });
}

/// `AuthenticationOk`.
pub fn put_auth_ok(out: &mut BytesMut) {
    put_message(out, b'R', |b| b.put_i32(0));
}

/// `AuthenticationCleartextPassword`: the client answers with its password
/// (or a token) in a PasswordMessage; only sent over TLS in practice.
pub fn put_auth_cleartext(out: &mut BytesMut) {
    put_message(out, b'R', |b| b.put_i32(3));
}

/// `AuthenticationMD5Password` with its salt.
pub fn put_auth_md5(out: &mut BytesMut, salt: [u8; 4]) {
    put_message(out, b'R', |b| {
        b.put_i32(5);
        b.put_slice(&salt);
    });
}

/// `AuthenticationSASL` listing the mechanisms offered.
pub fn put_auth_sasl(out: &mut BytesMut, mechanisms: &[&str]) {
    put_message(out, b'R', |b| {
        b.put_i32(10);
        for m in mechanisms {
            put_cstr(b, m);
        }
        b.put_u8(0);
    });
}

/// `AuthenticationSASLContinue` (11) or `AuthenticationSASLFinal` (12).
pub fn put_auth_sasl_data(out: &mut BytesMut, fin: bool, data: &[u8]) {
    put_message(out, b'R', |b| {
        b.put_i32(if fin { 12 } else { 11 });
        b.put_slice(data);
    });
}

/// `ParameterStatus`.
pub fn put_parameter_status(out: &mut BytesMut, name: &str, value: &str) {
    put_message(out, b'S', |b| {
        put_cstr(b, name);
        put_cstr(b, value);
    });
}

/// `BackendKeyData`.
pub fn put_backend_key(out: &mut BytesMut, pid: u32, secret: u32) {
    put_message(out, b'K', |b| {
        b.put_u32(pid);
        b.put_u32(secret);
    });
}

/// `ReadyForQuery` with transaction status `I`, `T` or `E`.
pub fn put_ready(out: &mut BytesMut, status: u8) {
    put_message(out, b'Z', |b| b.put_u8(status));
}

/// `NegotiateProtocolVersion`: the newest minor version supported and the
/// protocol options not recognized.
pub fn put_negotiate_protocol(out: &mut BytesMut, minor: u16, unrecognized: &[String]) {
    put_message(out, b'v', |b| {
        b.put_i32(i32::from(minor));
        b.put_i32(unrecognized.len() as i32);
        for o in unrecognized {
            put_cstr(b, o);
        }
    });
}

/// Frontend `Query`.
pub fn put_query(out: &mut BytesMut, sql: &str) {
    put_message(out, b'Q', |b| put_cstr(b, sql));
}

/// Frontend `PasswordMessage` (also carries SASL responses; `raw` has no
/// terminator added when `cstring` is false).
pub fn put_password(out: &mut BytesMut, data: &[u8], cstring: bool) {
    put_message(out, b'p', |b| {
        b.put_slice(data);
        if cstring {
            b.put_u8(0);
        }
    });
}

/// Frontend `SASLInitialResponse`.
pub fn put_sasl_initial(out: &mut BytesMut, mechanism: &str, data: &[u8]) {
    put_message(out, b'p', |b| {
        put_cstr(b, mechanism);
        b.put_i32(data.len() as i32);
        b.put_slice(data);
    });
}

/// Frontend `Terminate`.
pub fn put_terminate(out: &mut BytesMut) {
    put_message(out, b'X', |_| {});
}

/// The payload of a whole message (after tag and length).
pub fn body(msg: &[u8]) -> &[u8] {
    msg.get(HEADER_LEN..).unwrap_or(&[])
}

fn split_cstr(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = buf.iter().position(|&b| b == 0)?;
    Some((&buf[..end], &buf[end + 1..]))
}

/// Fields of an `ErrorResponse` / `NoticeResponse`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorFields {
    pub severity: String,
    pub code: String,
    pub message: String,
}

pub fn parse_error(msg: &[u8]) -> Result<ErrorFields, DecodeError> {
    let mut rest = body(msg);
    let mut f = ErrorFields::default();
    loop {
        let (&kind, after) = rest.split_first().ok_or(DecodeError::Malformed('E'))?;
        if kind == 0 {
            return Ok(f);
        }
        let (value, after) = split_cstr(after).ok_or(DecodeError::Malformed('E'))?;
        let value = String::from_utf8_lossy(value).into_owned();
        match kind {
            b'V' => f.severity = value,
            b'S' if f.severity.is_empty() => f.severity = value,
            b'C' => f.code = value,
            b'M' => f.message = value,
            _ => {}
        }
        rest = after;
    }
}

/// `ParameterStatus` → (name, value).
pub fn parse_parameter_status(msg: &[u8]) -> Result<(String, String), DecodeError> {
    let (name, rest) = split_cstr(body(msg)).ok_or(DecodeError::Malformed('S'))?;
    let (value, _) = split_cstr(rest).ok_or(DecodeError::Malformed('S'))?;
    Ok((
        String::from_utf8_lossy(name).into_owned(),
        String::from_utf8_lossy(value).into_owned(),
    ))
}

/// `BackendKeyData` → (pid, secret).
pub fn parse_backend_key(msg: &[u8]) -> Result<(u32, u32), DecodeError> {
    let b = body(msg);
    if b.len() != 8 {
        return Err(DecodeError::Malformed('K'));
    }
    Ok((
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    ))
}

/// `ReadyForQuery` → transaction status byte.
pub fn parse_ready(msg: &[u8]) -> Result<u8, DecodeError> {
    match body(msg) {
        [s @ (b'I' | b'T' | b'E')] => Ok(*s),
        _ => Err(DecodeError::Malformed('Z')),
    }
}

/// `DataRow` → column values (`None` for NULL).
pub fn parse_data_row(msg: &[u8]) -> Result<Vec<Option<Vec<u8>>>, DecodeError> {
    let bad = DecodeError::Malformed('D');
    let b = body(msg);
    let n = u16::from_be_bytes([*b.first().ok_or(bad.clone())?, *b.get(1).ok_or(bad.clone())?]);
    let mut rest = &b[2..];
    let mut cols = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        if rest.len() < 4 {
            return Err(bad);
        }
        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        rest = &rest[4..];
        if len < 0 {
            cols.push(None);
        } else {
            let len = len as usize;
            let v = rest.get(..len).ok_or(bad.clone())?;
            cols.push(Some(v.to_vec()));
            rest = &rest[len..];
        }
    }
    Ok(cols)
}

/// The authentication request carried by an 'R' message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthRequest {
    Ok,
    Cleartext,
    Md5 { salt: [u8; 4] },
    Sasl { mechanisms: Vec<String> },
    SaslContinue(Vec<u8>),
    SaslFinal(Vec<u8>),
    Other(i32),
}

pub fn parse_auth(msg: &[u8]) -> Result<AuthRequest, DecodeError> {
    let bad = DecodeError::Malformed('R');
    let b = body(msg);
    if b.len() < 4 {
        return Err(bad);
    }
    let code = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let rest = &b[4..];
    Ok(match code {
        0 => AuthRequest::Ok,
        3 => AuthRequest::Cleartext,
        5 => {
            let salt: [u8; 4] = rest.try_into().map_err(|_| bad)?;
            AuthRequest::Md5 { salt }
        }
        10 => {
            let mut mechanisms = Vec::new();
            let mut r = rest;
            while let Some((m, after)) = split_cstr(r) {
                if m.is_empty() {
                    break;
                }
                mechanisms.push(String::from_utf8_lossy(m).into_owned());
                r = after;
            }
            AuthRequest::Sasl { mechanisms }
        }
        11 => AuthRequest::SaslContinue(rest.to_vec()),
        12 => AuthRequest::SaslFinal(rest.to_vec()),
        other => AuthRequest::Other(other),
    })
}

/// A client's `SASLInitialResponse` → (mechanism, data).
pub fn parse_sasl_initial(msg: &[u8]) -> Result<(String, Vec<u8>), DecodeError> {
    let bad = DecodeError::Malformed('p');
    let (mech, rest) = split_cstr(body(msg)).ok_or(bad.clone())?;
    if rest.len() < 4 {
        return Err(bad);
    }
    let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let data = &rest[4..];
    let data = if len < 0 {
        &[][..]
    } else if data.len() == len as usize {
        data
    } else {
        return Err(bad);
    };
    Ok((String::from_utf8_lossy(mech).into_owned(), data.to_vec()))
}

/// A client's `PasswordMessage` → the password bytes without the terminator.
pub fn parse_password(msg: &[u8]) -> Result<&[u8], DecodeError> {
    match split_cstr(body(msg)) {
        Some((pw, [])) => Ok(pw),
        _ => Err(DecodeError::Malformed('p')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn error_round_trip() {
        let mut b = BytesMut::new();
        put_error(&mut b, "FATAL", "28P01", "password authentication failed");
        let f = parse_error(&b).unwrap();
        assert_eq!(f.severity, "FATAL");
        assert_eq!(f.code, "28P01");
        assert_eq!(f.message, "password authentication failed");
    }

    #[test]
    fn small_messages_round_trip() {
        let mut b = BytesMut::new();
        put_parameter_status(&mut b, "TimeZone", "UTC");
        assert_eq!(parse_parameter_status(&b).unwrap(), ("TimeZone".into(), "UTC".into()));
        let mut b = BytesMut::new();
        put_backend_key(&mut b, 42, 7);
        assert_eq!(parse_backend_key(&b).unwrap(), (42, 7));
        let mut b = BytesMut::new();
        put_ready(&mut b, b'T');
        assert_eq!(parse_ready(&b).unwrap(), b'T');
        let mut b = BytesMut::new();
        put_auth_sasl(&mut b, &["SCRAM-SHA-256"]);
        assert_eq!(
            parse_auth(&b).unwrap(),
            AuthRequest::Sasl {
                mechanisms: vec!["SCRAM-SHA-256".into()]
            }
        );
        let mut b = BytesMut::new();
        put_sasl_initial(&mut b, "SCRAM-SHA-256", b"n,,n=,r=abc");
        assert_eq!(
            parse_sasl_initial(&b).unwrap(),
            ("SCRAM-SHA-256".into(), b"n,,n=,r=abc".to_vec())
        );
    }

    proptest! {
        #[test]
        fn decoders_never_panic(tag in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = BytesMut::new();
            put_message(&mut b, tag, |m| m.put_slice(&payload));
            let _ = parse_error(&b);
            let _ = parse_parameter_status(&b);
            let _ = parse_backend_key(&b);
            let _ = parse_ready(&b);
            let _ = parse_data_row(&b);
            let _ = parse_auth(&b);
            let _ = parse_sasl_initial(&b);
            let _ = parse_password(&b);
        }
    }
}
