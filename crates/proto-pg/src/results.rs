//! Writing result sets a proxy answers itself (its admin console):
//! RowDescription, DataRow, CommandComplete, EmptyQueryResponse and
//! NoticeResponse, as in the protocol's "Message Formats"
//! (PostgreSQL 15 docs, section 55.7), in the text format only.

use bytes::{BufMut, BytesMut};

use crate::messages::put_message;

/// Type OIDs of pg_type (src/include/catalog/pg_type.dat) for the columns
/// a console sends: `text`, `int8`, `float8`.
pub const TEXT_OID: u32 = 25;
pub const INT8_OID: u32 = 20;
pub const FLOAT8_OID: u32 = 701;

/// A column's type OID and its pg_type `typlen` (-1: variable).
pub fn type_len(oid: u32) -> i16 {
    match oid {
        INT8_OID | FLOAT8_OID => 8,
        _ => -1,
    }
}

fn put_cstr(out: &mut BytesMut, s: &str) {
    // A NUL would end the string early on the client: cut it there.
    let s = s.split('\0').next().unwrap_or_default();
    out.put_slice(s.as_bytes());
    out.put_u8(0);
}

/// `RowDescription` ('T') of text-format columns, each (name, type OID).
pub fn put_row_description(out: &mut BytesMut, columns: &[(&str, u32)]) {
    put_message(out, b'T', |b| {
        b.put_i16(i16::try_from(columns.len()).unwrap_or(i16::MAX));
        for (name, oid) in columns {
            put_cstr(b, name);
            b.put_u32(0); // no table
            b.put_i16(0); // no column of one
            b.put_u32(*oid);
            b.put_i16(type_len(*oid));
            b.put_i32(-1); // no type modifier
            b.put_i16(0); // text format
        }
    });
}

/// `DataRow` ('D'): each value's text, or NULL.
pub fn put_data_row(out: &mut BytesMut, values: &[Option<&str>]) {
    put_message(out, b'D', |b| {
        b.put_i16(i16::try_from(values.len()).unwrap_or(i16::MAX));
        for v in values {
            match v {
                None => b.put_i32(-1),
                Some(s) => {
                    b.put_i32(i32::try_from(s.len()).unwrap_or(i32::MAX));
                    b.put_slice(s.as_bytes());
                }
            }
        }
    });
}

/// `CommandComplete` ('C') with its tag, such as `SHOW` or `SELECT 3`.
pub fn put_command_complete(out: &mut BytesMut, tag: &str) {
    put_message(out, b'C', |b| put_cstr(b, tag));
}

/// `EmptyQueryResponse` ('I'): the answer to an empty query string.
pub fn put_empty_query(out: &mut BytesMut) {
    put_message(out, b'I', |_| {});
}

/// `NoticeResponse` ('N') at severity NOTICE with SQLSTATE 00000.
pub fn put_notice(out: &mut BytesMut, message: &str) {
    put_message(out, b'N', |b| {
        for (field, value) in [(b'S', "NOTICE"), (b'V', "NOTICE"), (b'C', "00000"), (b'M', message)] {
            b.put_u8(field);
            put_cstr(b, value);
        }
        b.put_u8(0);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::parse_data_row;

    #[test]
    fn a_data_row_reads_back_with_its_nulls() {
        let mut out = BytesMut::new();
        put_data_row(&mut out, &[Some("a"), None, Some("")]);
        let row = parse_data_row(&out).unwrap();
        assert_eq!(row, vec![Some(b"a".to_vec()), None, Some(Vec::new())]);
    }

    #[test]
    fn a_row_description_has_one_field_each() {
        let mut out = BytesMut::new();
        put_row_description(&mut out, &[("id", INT8_OID), ("name", TEXT_OID)]);
        assert_eq!(out[0], b'T');
        let len = u32::from_be_bytes([out[1], out[2], out[3], out[4]]) as usize;
        assert_eq!(len + 1, out.len());
        assert_eq!(i16::from_be_bytes([out[5], out[6]]), 2);
        // name, then 18 bytes of attributes, for each.
        assert_eq!(out.len(), 7 + (3 + 18) + (5 + 18));
    }
}
