//! Extended-query messages whose statement names the proxy rewrites: Parse,
//! Bind, Describe and Close (§55.7). Decoders borrow from the whole message;
//! encoders append a rewritten copy.

use bytes::{BufMut, BytesMut};

use crate::messages::{DecodeError, body, put_message};

fn cstr(buf: &[u8], tag: char) -> Result<(&str, &[u8]), DecodeError> {
    let end = buf.iter().position(|&b| b == 0).ok_or(DecodeError::Malformed(tag))?;
    let s = std::str::from_utf8(&buf[..end]).map_err(|_| DecodeError::Malformed(tag))?;
    Ok((s, &buf[end + 1..]))
}

/// A Parse message: statement name, query text, and the parameter-type
/// section as raw bytes (Int16 count, Int32 OIDs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parse<'a> {
    pub name: &'a str,
    pub query: &'a str,
    pub param_types: &'a [u8],
}

pub fn parse_parse(msg: &[u8]) -> Result<Parse<'_>, DecodeError> {
    let (name, rest) = cstr(body(msg), 'P')?;
    let (query, param_types) = cstr(rest, 'P')?;
    if param_types.len() < 2 {
        return Err(DecodeError::Malformed('P'));
    }
    let n = i16::from_be_bytes([param_types[0], param_types[1]]);
    if n < 0 || param_types.len() != 2 + 4 * n as usize {
        return Err(DecodeError::Malformed('P'));
    }
    Ok(Parse {
        name,
        query,
        param_types,
    })
}

pub fn put_parse(out: &mut BytesMut, name: &str, query: &str, param_types: &[u8]) {
    put_message(out, b'P', |b| {
        b.put_slice(name.as_bytes());
        b.put_u8(0);
        b.put_slice(query.as_bytes());
        b.put_u8(0);
        b.put_slice(param_types);
    });
}

/// A Bind message's portal and statement names and the rest of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind<'a> {
    pub portal: &'a str,
    pub statement: &'a str,
    pub rest: &'a [u8],
}

pub fn parse_bind(msg: &[u8]) -> Result<Bind<'_>, DecodeError> {
    let (portal, rest) = cstr(body(msg), 'B')?;
    let (statement, rest) = cstr(rest, 'B')?;
    Ok(Bind {
        portal,
        statement,
        rest,
    })
}

pub fn put_bind(out: &mut BytesMut, portal: &str, statement: &str, rest: &[u8]) {
    put_message(out, b'B', |b| {
        b.put_slice(portal.as_bytes());
        b.put_u8(0);
        b.put_slice(statement.as_bytes());
        b.put_u8(0);
        b.put_slice(rest);
    });
}

/// Describe ('D') or Close ('C'): 'S' for a statement, 'P' for a portal.
pub fn parse_target(msg: &[u8]) -> Result<(u8, &str), DecodeError> {
    let tag = msg.first().map_or('?', |&t| char::from(t));
    let (&kind, rest) = body(msg).split_first().ok_or(DecodeError::Malformed(tag))?;
    if kind != b'S' && kind != b'P' {
        return Err(DecodeError::Malformed(tag));
    }
    let (name, rest) = cstr(rest, tag)?;
    if !rest.is_empty() {
        return Err(DecodeError::Malformed(tag));
    }
    Ok((kind, name))
}

pub fn put_target(out: &mut BytesMut, tag: u8, kind: u8, name: &str) {
    put_message(out, tag, |b| {
        b.put_u8(kind);
        b.put_slice(name.as_bytes());
        b.put_u8(0);
    });
}

/// `Sync`.
pub fn put_sync(out: &mut BytesMut) {
    put_message(out, b'S', |_| {});
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trips() {
        let mut b = BytesMut::new();
        put_parse(&mut b, "s1", "SELECT $1", &[0, 1, 0, 0, 0, 23]);
        let p = parse_parse(&b).unwrap();
        assert_eq!(
            (p.name, p.query, p.param_types),
            ("s1", "SELECT $1", &[0u8, 1, 0, 0, 0, 23][..])
        );
        let mut b = BytesMut::new();
        put_bind(&mut b, "", "s1", &[0, 0, 0, 0, 0, 0]);
        let bind = parse_bind(&b).unwrap();
        assert_eq!(
            (bind.portal, bind.statement, bind.rest),
            ("", "s1", &[0u8, 0, 0, 0, 0, 0][..])
        );
        let mut b = BytesMut::new();
        put_target(&mut b, b'D', b'S', "s1");
        assert_eq!(parse_target(&b).unwrap(), (b'S', "s1"));
    }

    #[test]
    fn rejects_malformed() {
        let mut b = BytesMut::new();
        put_parse(&mut b, "s1", "SELECT 1", &[0, 2, 0, 0, 0, 23]);
        assert!(parse_parse(&b).is_err(), "declared two types, sent one");
        let mut b = BytesMut::new();
        put_target(&mut b, b'D', b'X', "s1");
        assert!(parse_target(&b).is_err());
    }

    proptest! {
        #[test]
        fn never_panic(tag in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = BytesMut::new();
            put_message(&mut b, tag, |m| m.put_slice(&payload));
            let _ = parse_parse(&b);
            let _ = parse_bind(&b);
            let _ = parse_target(&b);
        }
    }
}
