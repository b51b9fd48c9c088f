//! Packet I/O over a socket for the MySQL engine, both sides: a read buffer
//! that yields whole logical packets (with a size limit, so an oversized
//! packet is refused as soon as its header arrives), and writes of one
//! packet or of a buffer of packets already framed.

use bytes::BytesMut;
use gatehouse_proto_mysql::frame::{self, FrameError, Packet};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Initial capacity of a read buffer; it grows for larger packets.
pub const READ_BUFFER: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("connection closed")]
    Closed,
    #[error("connection closed in the middle of a packet")]
    Truncated,
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one logical packet from `s`, buffering in `buf` (which may hold
/// the start of following packets afterwards).
pub async fn read_packet<S: AsyncRead + Unpin>(s: &mut S, buf: &mut BytesMut, max: usize) -> Result<Packet, IoError> {
    loop {
        if let Some(p) = frame::decode_packet(buf, max)? {
            return Ok(p);
        }
        fill(s, buf).await?;
    }
}

/// Reads what is available into `buf` (at least one byte); the end of the
/// stream is [`IoError::Closed`] between packets, [`IoError::Truncated`]
/// inside one.
pub async fn fill<S: AsyncRead + Unpin>(s: &mut S, buf: &mut BytesMut) -> Result<(), IoError> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(READ_BUFFER);
    }
    if s.read_buf(buf).await? == 0 {
        return Err(if buf.is_empty() {
            IoError::Closed
        } else {
            IoError::Truncated
        });
    }
    Ok(())
}

/// Frames `payload` with sequence id `seq` into `out` and returns the next
/// sequence id.
pub fn put_packet(out: &mut BytesMut, seq: u8, payload: &[u8]) -> u8 {
    frame::encode_packet(out, seq, payload)
}

/// Writes one packet and returns the next sequence id.
pub async fn write_packet<S: AsyncWrite + Unpin>(s: &mut S, seq: u8, payload: &[u8]) -> std::io::Result<u8> {
    let mut out = BytesMut::with_capacity(payload.len() + frame::HEADER_LEN);
    let next = put_packet(&mut out, seq, payload);
    s.write_all(&out).await?;
    Ok(next)
}
