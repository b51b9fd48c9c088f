//! Packet framing: the 4-byte header (3-byte little-endian payload length and a
//! 1-byte sequence id), reassembly of logical packets split over several
//! `0xFFFFFF`-byte physical packets, and the matching encoder.
//!
//! Reference: MySQL "MySQL Packets" and "Sending More Than 16Mb".

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Largest payload of one physical packet (`2^24 - 1`); a payload of exactly this
/// length announces that another physical packet continues the logical one
/// (MySQL "Sending More Than 16Mb").
pub const MAX_PACKET_PAYLOAD: usize = 0xFF_FFFF;
/// Length of the packet header: `int<3> payload_length`, `int<1> sequence_id`.
pub const HEADER_LEN: usize = 4;

/// One logical packet: the concatenated payload of one or more physical packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Sequence id of the first physical packet.
    pub seq: u8,
    /// Sequence id of the last physical packet (equal to `seq` unless the packet was
    /// split); the peer's next packet must carry `last_seq.wrapping_add(1)`.
    pub last_seq: u8,
    pub payload: Bytes,
}

/// Framing errors. Both are fatal for the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The logical payload is (at least) `len` bytes, more than the `max` allowed;
    /// reply with ER_NET_PACKET_TOO_LARGE and close.
    #[error("packet payload of at least {len} bytes exceeds the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    /// A continuation packet did not carry the next sequence id.
    #[error("packets out of order: expected sequence id {expected}, got {got}")]
    OutOfOrder { expected: u8, got: u8 },
}

/// Reads the header at the start of `buf` without consuming anything:
/// `(payload_length, sequence_id)`, or `None` if fewer than 4 bytes are buffered.
pub fn peek_header(buf: &[u8]) -> Option<(usize, u8)> {
    let h = buf.get(..HEADER_LEN)?;
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    Some((len, h[3]))
}

/// Takes one whole logical packet off the front of `buf`.
///
/// Returns `Ok(None)` (consuming nothing) while the packet is incomplete. Fails as
/// soon as a header shows that the logical payload exceeds `max_payload` (without
/// waiting for the body), or when a continuation's sequence id is not the previous
/// one plus one (mod 256). On error `buf` is left untouched; the connection should
/// be closed.
pub fn decode_packet(buf: &mut BytesMut, max_payload: usize) -> Result<Option<Packet>, FrameError> {
    let mut offset = 0usize;
    let mut total = 0usize;
    let mut first_seq = 0u8;
    let mut chunks = 0usize;
    loop {
        let Some((len, seq)) = peek_header(&buf[offset..]) else {
            return Ok(None);
        };
        if chunks == 0 {
            first_seq = seq;
        } else {
            let expected = first_seq.wrapping_add(chunks as u8);
            if seq != expected {
                return Err(FrameError::OutOfOrder { expected, got: seq });
            }
        }
        total = total.saturating_add(len);
        if total > max_payload {
            return Err(FrameError::TooLarge {
                len: total,
                max: max_payload,
            });
        }
        let end = offset + HEADER_LEN + len;
        if buf.len() < end {
            return Ok(None);
        }
        chunks += 1;
        if len < MAX_PACKET_PAYLOAD {
            let last_seq = seq;
            if chunks == 1 {
                buf.advance(HEADER_LEN);
                let payload = buf.split_to(len).freeze();
                return Ok(Some(Packet { seq, last_seq, payload }));
            }
            let mut payload = BytesMut::with_capacity(total);
            let mut pos = 0usize;
            while pos < end {
                let chunk_len = peek_header(&buf[pos..]).map_or(0, |(l, _)| l);
                let body = pos + HEADER_LEN;
                payload.extend_from_slice(&buf[body..body + chunk_len]);
                pos = body + chunk_len;
            }
            buf.advance(end);
            return Ok(Some(Packet {
                seq: first_seq,
                last_seq,
                payload: payload.freeze(),
            }));
        }
        offset = end;
    }
}

/// Writes `payload` as one logical packet starting at sequence id `seq`, splitting
/// it into `MAX_PACKET_PAYLOAD`-byte physical packets when needed (a payload whose
/// length is an exact multiple of `MAX_PACKET_PAYLOAD` ends with an empty packet).
/// Returns the sequence id the next packet must use.
pub fn encode_packet(dst: &mut BytesMut, seq: u8, payload: &[u8]) -> u8 {
    dst.reserve(payload.len() + HEADER_LEN * (1 + payload.len() / MAX_PACKET_PAYLOAD));
    let mut seq = seq;
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_PACKET_PAYLOAD);
        put_header(dst, n, seq);
        dst.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        seq = seq.wrapping_add(1);
        if n < MAX_PACKET_PAYLOAD {
            return seq;
        }
    }
}

/// Appends a header for a payload of `len` bytes (`len` must not exceed
/// [`MAX_PACKET_PAYLOAD`]; larger values are truncated to 24 bits by the format).
fn put_header(dst: &mut BytesMut, len: usize, seq: u8) {
    let len = len.min(MAX_PACKET_PAYLOAD) as u32;
    dst.put_uint_le(u64::from(len), 3);
    dst.put_u8(seq);
}

/// Fills a 4-byte header in place, e.g. into room reserved by [`begin_packet`].
/// Fails if `len` does not fit one physical packet.
pub fn write_header(header: &mut [u8; HEADER_LEN], len: usize, seq: u8) -> Result<(), FrameError> {
    if len > MAX_PACKET_PAYLOAD {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_PACKET_PAYLOAD,
        });
    }
    header[0] = len as u8;
    header[1] = (len >> 8) as u8;
    header[2] = (len >> 16) as u8;
    header[3] = seq;
    Ok(())
}

/// Reserves room for a header at the end of `dst` and returns its offset; write
/// the payload after it, then call [`finish_packet`].
pub fn begin_packet(dst: &mut BytesMut) -> usize {
    let start = dst.len();
    dst.put_bytes(0, HEADER_LEN);
    start
}

/// Completes a packet started with [`begin_packet`] at `start`: writes the header,
/// or re-frames the payload into several physical packets if it reached
/// [`MAX_PACKET_PAYLOAD`]. Returns the next sequence id.
pub fn finish_packet(dst: &mut BytesMut, start: usize, seq: u8) -> u8 {
    // A `start` that [`begin_packet`] did not return is a caller bug; do nothing
    // rather than panic.
    let Some(body) = start.checked_add(HEADER_LEN).filter(|&b| b <= dst.len()) else {
        return seq;
    };
    let len = dst.len() - body;
    if len < MAX_PACKET_PAYLOAD {
        let mut header = [0u8; HEADER_LEN];
        if write_header(&mut header, len, seq).is_ok() {
            dst[start..body].copy_from_slice(&header);
        }
        return seq.wrapping_add(1);
    }
    let payload = dst.split_off(body);
    dst.truncate(start);
    encode_packet(dst, seq, &payload)
}
