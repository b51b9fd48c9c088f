//! Framing of regular (post-startup) protocol messages: a one-byte tag, then a
//! big-endian `Int32` length that counts itself but not the tag
//! (PostgreSQL docs §55.7 "Message Formats").
//!
//! The proxy never needs most messages whole: [`next_frame`] tells the caller
//! whether the message at the front of a buffer is small enough to be held
//! whole (so it can be inspected) or must be streamed through as it arrives,
//! so a 1 GiB `DataRow` or `CopyData` is forwarded without buffering it.

use thiserror::Error;

/// Bytes of a regular message header: tag + Int32 length.
pub const HEADER_LEN: usize = 5;

/// The largest message PostgreSQL itself accepts (`PQ_LARGE_MESSAGE_LIMIT`,
/// `src/include/libpq/libpq.h`: `MaxAllocSize - 1`). No configured limit may
/// exceed it.
pub const PQ_LARGE_MESSAGE_LIMIT: usize = 0x3fff_ffff - 1;

/// Messages up to this size (tag included) are held whole when asked for;
/// larger ones are streamed. Every message the proxy inspects is far smaller.
pub const HOLD_WHOLE_LIMIT: usize = 64 * 1024;

/// What sits at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A whole message of `len` bytes (tag and length included) is in the buffer.
    Whole { tag: u8, len: usize },
    /// A message of `len` bytes (tag included) starts here but is not whole in
    /// the buffer, and is larger than the caller wants to hold: pass it
    /// through as it arrives.
    Stream { tag: u8, len: usize },
    /// Not even a header (or a small message is incomplete): read more.
    NeedMore,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("invalid message length {0}")]
    BadLength(i64),
    #[error("message of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
}

/// Looks at the front of `buf`. `max_len` caps the accepted message size
/// (tag included); messages up to `hold` bytes are only reported once whole.
pub fn next_frame(buf: &[u8], hold: usize, max_len: usize) -> Result<Step, FrameError> {
    if buf.len() < HEADER_LEN {
        return Ok(Step::NeedMore);
    }
    let tag = buf[0];
    let declared = i32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    if declared < 4 {
        return Err(FrameError::BadLength(i64::from(declared)));
    }
    // `declared` is positive and < 2^31, so this cannot overflow usize.
    let len = declared as usize + 1;
    let limit = max_len.min(PQ_LARGE_MESSAGE_LIMIT);
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    if buf.len() >= len {
        Ok(Step::Whole { tag, len })
    } else if len <= hold {
        Ok(Step::NeedMore)
    } else {
        Ok(Step::Stream { tag, len })
    }
}

/// Tags a frontend may send once the session is established (§55.7).
pub fn is_frontend_tag(tag: u8) -> bool {
    matches!(
        tag,
        b'B' | b'C' | b'd' | b'c' | b'f' | b'D' | b'E' | b'H' | b'F' | b'P' | b'Q' | b'S' | b'X'
    )
}

/// Frontend messages after which the backend owes exactly one ReadyForQuery.
pub fn expects_ready_for_query(tag: u8) -> bool {
    matches!(tag, b'Q' | b'S' | b'F')
}

/// Extended-query messages that leave the backend waiting for a Sync.
pub fn is_extended_query(tag: u8) -> bool {
    matches!(tag, b'P' | b'B' | b'D' | b'E' | b'C' | b'H')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        v.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn whole_and_partial() {
        let m = msg(b'Q', b"select 1\0");
        assert_eq!(
            next_frame(&m, 1024, 1 << 20),
            Ok(Step::Whole {
                tag: b'Q',
                len: m.len()
            })
        );
        assert_eq!(next_frame(&m[..7], 1024, 1 << 20), Ok(Step::NeedMore));
        assert_eq!(
            next_frame(&m[..7], 4, 1 << 20),
            Ok(Step::Stream {
                tag: b'Q',
                len: m.len()
            })
        );
        assert_eq!(next_frame(&m[..3], 4, 1 << 20), Ok(Step::NeedMore));
    }

    #[test]
    fn bad_lengths() {
        assert_eq!(next_frame(&[b'Q', 0, 0, 0, 3], 10, 100), Err(FrameError::BadLength(3)));
        assert_eq!(
            next_frame(&[b'Q', 0xff, 0xff, 0xff, 0xff], 10, 100),
            Err(FrameError::BadLength(-1))
        );
        assert_eq!(
            next_frame(&[b'Q', 0x7f, 0xff, 0xff, 0xff], 10, usize::MAX),
            Err(FrameError::TooLarge {
                len: 0x8000_0000,
                limit: PQ_LARGE_MESSAGE_LIMIT
            })
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_is_consistent(buf in proptest::collection::vec(any::<u8>(), 0..64), hold in 0usize..80, max in 0usize..200) {
            match next_frame(&buf, hold, max) {
                Ok(Step::Whole { len, .. }) => prop_assert!(len <= buf.len() && len >= HEADER_LEN && len <= max),
                Ok(Step::Stream { len, .. }) => prop_assert!(len > buf.len() && len > hold && len <= max),
                Ok(Step::NeedMore) | Err(_) => {}
            }
        }

        #[test]
        fn split_stream_reassembles(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8)) {
            let mut stream = Vec::new();
            for b in &bodies { stream.extend(msg(b'd', b)); }
            let mut pos = 0;
            let mut seen = 0;
            while pos < stream.len() {
                match next_frame(&stream[pos..], 1 << 16, 1 << 20) {
                    Ok(Step::Whole { len, .. }) => { pos += len; seen += 1; }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            prop_assert_eq!(seen, bodies.len());
        }
    }
}
