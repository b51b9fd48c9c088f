//! Framing: header parsing, reassembly of split packets, size limits, encoder.

use bytes::BytesMut;
use gatehouse_proto_mysql::frame::*;
use proptest::prelude::*;

fn framed(seq: u8, payload: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    encode_packet(&mut b, seq, payload);
    b
}

#[test]
fn single_packet_and_incomplete() {
    let mut b = BytesMut::from(&[3, 0, 0, 7, b'a', b'b'][..]);
    assert_eq!(peek_header(&b), Some((3, 7)));
    assert_eq!(decode_packet(&mut b, 100), Ok(None));
    assert_eq!(b.len(), 6, "nothing consumed while incomplete");
    b.extend_from_slice(b"c\x01\x00\x00\x08z");
    let p = decode_packet(&mut b, 100).unwrap().unwrap();
    assert_eq!((p.seq, p.last_seq, &p.payload[..]), (7, 7, &b"abc"[..]));
    let p = decode_packet(&mut b, 100).unwrap().unwrap();
    assert_eq!(&p.payload[..], b"z");
    assert!(b.is_empty());
    assert_eq!(peek_header(&[1, 2, 3]), None);
}

#[test]
fn empty_payload_packet() {
    let mut b = framed(4, b"");
    assert_eq!(&b[..], &[0, 0, 0, 4]);
    let p = decode_packet(&mut b, 0).unwrap().unwrap();
    assert!(p.payload.is_empty());
}

#[test]
fn split_packets_round_trip_with_seq_wrap() {
    for len in [
        MAX_PACKET_PAYLOAD - 1,
        MAX_PACKET_PAYLOAD,
        MAX_PACKET_PAYLOAD + 5,
        2 * MAX_PACKET_PAYLOAD,
    ] {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut b = BytesMut::new();
        let next = encode_packet(&mut b, 255, &payload);
        let physical = len / MAX_PACKET_PAYLOAD + 1;
        assert_eq!(next, 255u8.wrapping_add(physical as u8));
        assert_eq!(b.len(), len + 4 * physical, "exact multiples end with an empty packet");
        let p = decode_packet(&mut b, usize::MAX).unwrap().unwrap();
        assert_eq!((p.seq, p.last_seq), (255, 255u8.wrapping_add(physical as u8 - 1)));
        assert_eq!(p.payload.len(), len);
        assert!(p.payload[..] == payload[..]);
        assert!(b.is_empty());
    }
}

#[test]
fn too_large_is_detected_from_the_header_alone() {
    let mut b = BytesMut::from(&[0x10, 0, 0, 0][..]);
    assert_eq!(
        decode_packet(&mut b, 15),
        Err(FrameError::TooLarge { len: 16, max: 15 })
    );
    // A continuation chain is refused once the running total passes the limit,
    // before its body arrives.
    let mut b = BytesMut::from(&[0xFF, 0xFF, 0xFF, 0][..]);
    assert_eq!(
        decode_packet(&mut b, MAX_PACKET_PAYLOAD - 1),
        Err(FrameError::TooLarge {
            len: MAX_PACKET_PAYLOAD,
            max: MAX_PACKET_PAYLOAD - 1
        })
    );
    let mut b = framed(0, &vec![0u8; MAX_PACKET_PAYLOAD]);
    b.truncate(MAX_PACKET_PAYLOAD + 4 + 4);
    b[MAX_PACKET_PAYLOAD + 4] = 1; // second header says 1 more byte
    assert!(matches!(
        decode_packet(&mut b, MAX_PACKET_PAYLOAD),
        Err(FrameError::TooLarge { .. })
    ));
}

#[test]
fn out_of_order_continuation() {
    let mut b = framed(3, &vec![1u8; MAX_PACKET_PAYLOAD]);
    b[MAX_PACKET_PAYLOAD + 4 + 3] = 9;
    assert_eq!(
        decode_packet(&mut b, usize::MAX),
        Err(FrameError::OutOfOrder { expected: 4, got: 9 })
    );
}

#[test]
fn build_in_place() {
    let mut b = BytesMut::from(&b"prefix"[..]);
    let start = begin_packet(&mut b);
    b.extend_from_slice(b"hello");
    assert_eq!(finish_packet(&mut b, start, 2), 3);
    assert_eq!(&b[..], b"prefix\x05\x00\x00\x02hello");
    // Misuse does nothing rather than panic.
    assert_eq!(finish_packet(&mut b, 1000, 7), 7);
    let mut h = [0u8; 4];
    write_header(&mut h, 0x01_02_03, 9).unwrap();
    assert_eq!(h, [3, 2, 1, 9]);
    assert!(write_header(&mut h, MAX_PACKET_PAYLOAD + 1, 0).is_err());
}

#[test]
fn build_in_place_large_is_split() {
    let mut b = BytesMut::new();
    let start = begin_packet(&mut b);
    b.extend_from_slice(&vec![7u8; MAX_PACKET_PAYLOAD]);
    assert_eq!(finish_packet(&mut b, start, 0), 2);
    assert_eq!(b.len(), MAX_PACKET_PAYLOAD + 8);
    let p = decode_packet(&mut b, usize::MAX).unwrap().unwrap();
    assert_eq!(p.payload.len(), MAX_PACKET_PAYLOAD);
}

proptest! {
    #[test]
    fn round_trip(seq: u8, payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..5)) {
        let mut b = BytesMut::new();
        for p in &payloads {
            encode_packet(&mut b, seq, p);
        }
        for p in &payloads {
            let got = decode_packet(&mut b, 300).unwrap().unwrap();
            prop_assert_eq!(got.seq, seq);
            prop_assert_eq!(&got.payload[..], &p[..]);
        }
        prop_assert!(b.is_empty());
    }

    #[test]
    fn never_panics(data in prop::collection::vec(any::<u8>(), 0..64), max in 0usize..100) {
        let mut b = BytesMut::from(&data[..]);
        while let Ok(Some(_)) = decode_packet(&mut b, max) {}
    }

    #[test]
    fn byte_at_a_time_equals_all_at_once(payload in prop::collection::vec(any::<u8>(), 0..100)) {
        let whole = framed(1, &payload);
        let mut b = BytesMut::new();
        for (i, byte) in whole.iter().enumerate() {
            b.extend_from_slice(&[*byte]);
            let got = decode_packet(&mut b, 100).unwrap();
            prop_assert_eq!(got.is_some(), i + 1 == whole.len());
            if let Some(p) = got { prop_assert_eq!(&p.payload[..], &payload[..]); }
        }
    }
}
