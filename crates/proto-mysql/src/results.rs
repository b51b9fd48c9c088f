//! Writing text result sets a proxy answers itself (its admin console), in
//! the classic form every client reads (without CLIENT_DEPRECATE_EOF or
//! MariaDB's extended type info): the column count, one
//! Protocol::ColumnDefinition41 per column, EOF, text rows, EOF
//! (MySQL client/server protocol, "Text Resultset").

use bytes::{BufMut, BytesMut};

use crate::lenenc::{put_lenenc_bytes, put_lenenc_int};

/// Column types (`enum_field_types`, include/mysql_com.h) a console sends.
pub const MYSQL_TYPE_DOUBLE: u8 = 0x05;
pub const MYSQL_TYPE_LONGLONG: u8 = 0x08;
pub const MYSQL_TYPE_VAR_STRING: u8 = 0xfd;

/// Collation ids: utf8mb4_general_ci for text, binary for numbers.
pub const UTF8MB4_GENERAL_CI: u16 = 45;
pub const BINARY_COLLATION: u16 = 63;

/// Column flags (include/mysql_com.h).
pub const BINARY_FLAG: u16 = 128;
pub const NUM_FLAG: u16 = 32768;

/// The length of ColumnDefinition41's fixed-length fields, sent before them.
const FIXED_FIELDS_LEN: u64 = 0x0c;

/// A text row's NULL (a lenenc string can never start with 0xFB).
const NULL_VALUE: u8 = 0xfb;

/// The payload of a column count packet.
pub fn put_column_count(out: &mut BytesMut, n: usize) {
    put_lenenc_int(out, n as u64);
}

/// The payload of one ColumnDefinition41 for a column of `kind`
/// ([`MYSQL_TYPE_VAR_STRING`], [`MYSQL_TYPE_LONGLONG`] or
/// [`MYSQL_TYPE_DOUBLE`]) in no schema or table. `extended`: the session
/// negotiated MariaDB's `MARIADB_CLIENT_EXTENDED_TYPE_INFO`, whose column
/// definitions carry a block of extended type information after the
/// names (MariaDB "Result set packets": empty here, a plain type).
pub fn put_column_definition(out: &mut BytesMut, name: &str, kind: u8, extended: bool) {
    put_lenenc_bytes(out, b"def");
    for _ in 0..3 {
        put_lenenc_bytes(out, b""); // schema, table, org_table
    }
    put_lenenc_bytes(out, name.as_bytes());
    put_lenenc_bytes(out, name.as_bytes());
    if extended {
        put_lenenc_bytes(out, b"");
    }
    put_lenenc_int(out, FIXED_FIELDS_LEN);
    let (collation, length, flags, decimals) = match kind {
        MYSQL_TYPE_LONGLONG => (BINARY_COLLATION, 20, BINARY_FLAG | NUM_FLAG, 0),
        // 31: "not a fixed number of decimals".
        MYSQL_TYPE_DOUBLE => (BINARY_COLLATION, 22, BINARY_FLAG | NUM_FLAG, 31),
        _ => (UTF8MB4_GENERAL_CI, 4 * 1024, 0, 0),
    };
    out.put_u16_le(collation);
    out.put_u32_le(length);
    out.put_u8(kind);
    out.put_u16_le(flags);
    out.put_u8(decimals);
    out.put_u16_le(0);
}

/// The payload of one text row: each value as a lenenc string, or NULL.
pub fn put_text_row(out: &mut BytesMut, values: &[Option<&str>]) {
    for v in values {
        match v {
            None => out.put_u8(NULL_VALUE),
            Some(s) => put_lenenc_bytes(out, s.as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lenenc::Reader;

    #[test]
    fn a_column_definition_reads_back_field_by_field() {
        let mut out = BytesMut::new();
        put_column_definition(&mut out, "cl_active", MYSQL_TYPE_LONGLONG, false);
        let mut r = Reader::new(&out, "column definition");
        assert_eq!(r.lenenc_bytes().unwrap(), b"def");
        for _ in 0..3 {
            assert_eq!(r.lenenc_bytes().unwrap(), b"");
        }
        assert_eq!(r.lenenc_bytes().unwrap(), b"cl_active");
        assert_eq!(r.lenenc_bytes().unwrap(), b"cl_active");
        assert_eq!(r.lenenc_int().unwrap(), FIXED_FIELDS_LEN);
        assert_eq!(r.u16().unwrap(), BINARY_COLLATION);
        assert_eq!(r.u32().unwrap(), 20);
        assert_eq!(r.u8().unwrap(), MYSQL_TYPE_LONGLONG);
        assert_eq!(r.u16().unwrap(), BINARY_FLAG | NUM_FLAG);
        assert_eq!(r.u8().unwrap(), 0);
        assert_eq!(r.u16().unwrap(), 0);
        assert!(r.is_empty());
    }

    #[test]
    fn an_extended_column_definition_has_an_empty_type_info_block_after_the_names() {
        let mut plain = BytesMut::new();
        put_column_definition(&mut plain, "x", MYSQL_TYPE_VAR_STRING, false);
        let mut out = BytesMut::new();
        put_column_definition(&mut out, "x", MYSQL_TYPE_VAR_STRING, true);
        let mut r = Reader::new(&out, "column definition");
        for want in [&b"def"[..], b"", b"", b"", b"x", b"x", b""] {
            assert_eq!(r.lenenc_bytes().unwrap(), want);
        }
        assert_eq!(r.lenenc_int().unwrap(), FIXED_FIELDS_LEN);
        assert_eq!(out.len(), plain.len() + 1);
    }

    #[test]
    fn a_text_row_keeps_nulls_apart_from_empty_strings() {
        let mut out = BytesMut::new();
        put_text_row(&mut out, &[Some("a"), None, Some("")]);
        assert_eq!(&out[..], &[1, b'a', NULL_VALUE, 0]);
    }
}
