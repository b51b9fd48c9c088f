//! Basic data types of the protocol: fixed-length little-endian integers,
//! length-encoded integers and strings, NUL-terminated strings and rest-of-packet
//! strings. [`Reader`] decodes them from a `&[u8]` with typed errors; the `put_*`
//! functions encode them onto a [`BytesMut`].
//!
//! Reference: MySQL "Integer Types" and "String Types".

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;

/// Length-encoded integer prefix of a 2-byte value (MySQL "Integer Types").
pub const LENENC_U16: u8 = 0xFC;
/// Length-encoded integer prefix of a 3-byte value.
pub const LENENC_U24: u8 = 0xFD;
/// Length-encoded integer prefix of an 8-byte value.
pub const LENENC_U64: u8 = 0xFE;
/// In a text result row, a length-encoded string starting with 0xFB is SQL NULL.
pub const LENENC_NULL: u8 = 0xFB;
/// 0xFF is never a valid length-encoded integer prefix (it is the ERR header).
pub const LENENC_INVALID: u8 = 0xFF;

/// A cursor over a payload. Every read either advances past the value or fails
/// with [`DecodeError`] (leaving the position unspecified); it never panics.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// `what` names the message being decoded; it is carried into errors.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    /// The next byte without consuming it.
    pub fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }
    /// An error naming this reader's message, for callers' own checks.
    pub fn invalid(&self, detail: &'static str) -> DecodeError {
        DecodeError::Invalid {
            what: self.what,
            detail,
        }
    }
    /// Consumes exactly `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let rest = &self.buf[self.pos..];
        if rest.len() < n {
            return Err(DecodeError::Truncated {
                what: self.what,
                needed: n - rest.len(),
            });
        }
        self.pos += n;
        Ok(&rest[..n])
    }
    /// Consumes `N` bytes into an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u24(&mut self) -> Result<u32, DecodeError> {
        let b = self.bytes(3)?;
        Ok(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// A length-encoded integer, or `None` for the 0xFB NULL marker.
    pub fn lenenc_int_or_null(&mut self) -> Result<Option<u64>, DecodeError> {
        let first = self.u8()?;
        Ok(Some(match first {
            0..=0xFA => u64::from(first),
            LENENC_NULL => return Ok(None),
            LENENC_U16 => u64::from(self.u16()?),
            LENENC_U24 => u64::from(self.u24()?),
            LENENC_U64 => self.u64()?,
            _ => {
                return Err(DecodeError::BadLenencPrefix {
                    what: self.what,
                    prefix: first,
                });
            }
        }))
    }
    /// A length-encoded integer; the NULL marker is an error here.
    pub fn lenenc_int(&mut self) -> Result<u64, DecodeError> {
        self.lenenc_int_or_null()?
            .ok_or(DecodeError::UnexpectedNull { what: self.what })
    }
    /// A length-encoded string, or `None` for NULL (text result rows only).
    pub fn lenenc_bytes_or_null(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.lenenc_int_or_null()? {
            None => Ok(None),
            Some(len) => {
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                self.bytes(len).map(Some)
            }
        }
    }
    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        self.lenenc_bytes_or_null()?
            .ok_or(DecodeError::UnexpectedNull { what: self.what })
    }
    /// A NUL-terminated string (the NUL is consumed, not returned).
    pub fn nul_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(DecodeError::MissingNul { what: self.what })?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }
    /// A NUL-terminated string, or the rest of the payload if no NUL is present
    /// (some servers omit the last terminator).
    pub fn nul_or_rest(&mut self) -> &'a [u8] {
        match self.nul_bytes() {
            Ok(b) => b,
            Err(_) => self.rest(),
        }
    }
    /// Everything left (`string<EOF>`).
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
        self.pos = self.buf.len();
        rest
    }
    /// Fails unless the whole payload was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { what: self.what, count }),
        }
    }
    /// Converts bytes read from this payload to a `String`, failing on invalid UTF-8.
    pub fn utf8(&self, bytes: &[u8]) -> Result<String, DecodeError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::InvalidUtf8 { what: self.what })
    }
}

/// Number of bytes [`put_lenenc_int`] writes for `v`.
pub fn lenenc_int_len(v: u64) -> usize {
    match v {
        0..0xFB => 1,
        0xFB..=0xFFFF => 3,
        0x1_0000..=0xFF_FFFF => 4,
        _ => 9,
    }
}

/// Appends a length-encoded integer (never uses the 0xFB NULL marker).
pub fn put_lenenc_int(dst: &mut BytesMut, v: u64) {
    match v {
        0..0xFB => dst.put_u8(v as u8),
        0xFB..=0xFFFF => {
            dst.put_u8(LENENC_U16);
            dst.put_u16_le(v as u16);
        }
        0x1_0000..=0xFF_FFFF => {
            dst.put_u8(LENENC_U24);
            dst.put_uint_le(v, 3);
        }
        _ => {
            dst.put_u8(LENENC_U64);
            dst.put_u64_le(v);
        }
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_bytes(dst: &mut BytesMut, s: &[u8]) {
    put_lenenc_int(dst, s.len() as u64);
    dst.extend_from_slice(s);
}

/// Appends a NUL-terminated string. `s` must not contain NUL itself (it would end
/// the string early for the reader); callers building from user input check that.
pub fn put_nul_bytes(dst: &mut BytesMut, s: &[u8]) {
    dst.extend_from_slice(s);
    dst.put_u8(0);
}

/// Appends a 3-byte little-endian integer (the low 24 bits of `v`).
pub fn put_u24(dst: &mut BytesMut, v: u32) {
    dst.put_uint_le(u64::from(v & 0xFF_FFFF), 3);
}
