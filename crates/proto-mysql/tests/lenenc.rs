//! Length-encoded integers and strings, NUL strings, fixed integers.

use bytes::BytesMut;
use gatehouse_proto_mysql::DecodeError;
use gatehouse_proto_mysql::lenenc::*;
use proptest::prelude::*;

#[test]
fn known_encodings() {
    for (v, enc) in [
        (0u64, &[0x00][..]),
        (250, &[0xFA]),
        (251, &[0xFC, 0xFB, 0x00]),
        (0xFFFF, &[0xFC, 0xFF, 0xFF]),
        (0x1_0000, &[0xFD, 0x00, 0x00, 0x01]),
        (0xFF_FFFF, &[0xFD, 0xFF, 0xFF, 0xFF]),
        (0x100_0000, &[0xFE, 0, 0, 0, 1, 0, 0, 0, 0]),
    ] {
        let mut b = BytesMut::new();
        put_lenenc_int(&mut b, v);
        assert_eq!(&b[..], enc, "{v}");
        assert_eq!(lenenc_int_len(v), enc.len());
        let mut r = Reader::new(enc, "t");
        assert_eq!(r.lenenc_int().unwrap(), v);
        r.finish().unwrap();
    }
}

#[test]
fn null_and_invalid_prefixes() {
    let mut r = Reader::new(&[0xFB], "row");
    assert_eq!(r.lenenc_bytes_or_null().unwrap(), None);
    assert_eq!(
        Reader::new(&[0xFB], "x").lenenc_int(),
        Err(DecodeError::UnexpectedNull { what: "x" })
    );
    assert_eq!(
        Reader::new(&[0xFF], "x").lenenc_int(),
        Err(DecodeError::BadLenencPrefix {
            what: "x",
            prefix: 0xFF
        })
    );
    assert_eq!(
        Reader::new(&[0xFC, 1], "x").lenenc_int(),
        Err(DecodeError::Truncated { what: "x", needed: 1 })
    );
    // A huge length must fail cleanly, not allocate or overflow.
    let huge = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
    assert!(matches!(
        Reader::new(&huge, "x").lenenc_bytes(),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn strings_and_fixed_ints() {
    let data = b"\x03abcuser\0\x01\x02\x03\x04\x05\x06\x07\x08\x09rest";
    let mut r = Reader::new(data, "t");
    assert_eq!(r.lenenc_bytes().unwrap(), b"abc");
    assert_eq!(r.nul_bytes().unwrap(), b"user");
    assert_eq!(r.u16().unwrap(), 0x0201);
    assert_eq!(r.u24().unwrap(), 0x050403);
    assert_eq!(r.u32().unwrap(), 0x09080706);
    assert_eq!(r.peek_u8(), Some(b'r'));
    assert_eq!(r.rest(), b"rest");
    assert!(r.is_empty());
    assert!(matches!(
        Reader::new(b"abc", "t").nul_bytes(),
        Err(DecodeError::MissingNul { .. })
    ));
    assert_eq!(Reader::new(b"abc", "t").nul_or_rest(), b"abc");
    assert!(matches!(
        Reader::new(b"ab", "t").finish(),
        Err(DecodeError::TrailingBytes { count: 2, .. })
    ));
}

proptest! {
    #[test]
    fn int_round_trip(v: u64) {
        let mut b = BytesMut::new();
        put_lenenc_int(&mut b, v);
        prop_assert_eq!(b.len(), lenenc_int_len(v));
        let mut r = Reader::new(&b, "t");
        prop_assert_eq!(r.lenenc_int().unwrap(), v);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn string_round_trip(s in prop::collection::vec(any::<u8>(), 0..600), n in prop::collection::vec(1u8..=255, 0..50)) {
        let mut b = BytesMut::new();
        put_lenenc_bytes(&mut b, &s);
        put_nul_bytes(&mut b, &n);
        put_u24(&mut b, 0xABCDEF);
        let mut r = Reader::new(&b, "t");
        prop_assert_eq!(r.lenenc_bytes().unwrap(), &s[..]);
        prop_assert_eq!(r.nul_bytes().unwrap(), &n[..]);
        prop_assert_eq!(r.u24().unwrap(), 0xABCDEF);
        prop_assert!(r.finish().is_ok());
    }

    #[test]
    fn reader_never_panics(data in prop::collection::vec(any::<u8>(), 0..40), ops in prop::collection::vec(0u8..9, 0..12)) {
        let mut r = Reader::new(&data, "fuzz");
        for op in ops {
            let _ = match op {
                0 => r.lenenc_int().map(|_| ()),
                1 => r.lenenc_bytes_or_null().map(|_| ()),
                2 => r.nul_bytes().map(|_| ()),
                3 => r.u16().map(|_| ()),
                4 => r.u24().map(|_| ()),
                5 => r.u64().map(|_| ()),
                6 => r.bytes(3).map(|_| ()),
                7 => r.skip(5),
                _ => r.finish(),
            };
        }
    }
}
