//! Generic response packets: OK (0x00, or 0xFE with `CLIENT_DEPRECATE_EOF`), ERR
//! (0xFF), EOF (0xFE, short), the LOCAL INFILE request (0xFB), and classification
//! helpers that resolve the 0xFE ambiguity between EOF/OK and a huge row.
//!
//! Reference: MySQL "OK_Packet", "ERR_Packet", "EOF_Packet",
//! "Protocol::LOCAL INFILE Request".

use bytes::{BufMut, Bytes, BytesMut};

use crate::consts::{CLIENT_PROTOCOL_41, CLIENT_SESSION_TRACK, SERVER_SESSION_STATE_CHANGED};
use crate::error::DecodeError;
use crate::errors::MyError;
use crate::frame::MAX_PACKET_PAYLOAD;
use crate::lenenc::{Reader, put_lenenc_bytes, put_lenenc_int};

pub const OK_HEADER: u8 = 0x00;
pub const EOF_HEADER: u8 = 0xFE;
pub const ERR_HEADER: u8 = 0xFF;
pub const LOCAL_INFILE_HEADER: u8 = 0xFB;
/// An EOF packet is shorter than this ("EOF_Packet": header, warnings, status = 5
/// bytes; anything starting with 0xFE that is 9 bytes or longer is data).
pub const EOF_MAX_LEN: usize = 9;
/// ERR code MariaDB uses for progress reports (`MARIADB_CLIENT_PROGRESS`).
pub const PROGRESS_REPORT_CODE: u16 = 0xFFFF;
/// Marker before the SQLSTATE in a 4.1 ERR packet.
pub const SQLSTATE_MARKER: u8 = b'#';

/// Whether `payload` is an OK packet (0x00 header; needs at least 7 bytes).
pub fn is_ok(payload: &[u8]) -> bool {
    payload.first() == Some(&OK_HEADER) && payload.len() >= 7
}

/// Whether `payload` is an ERR packet.
pub fn is_err(payload: &[u8]) -> bool {
    payload.first() == Some(&ERR_HEADER)
}

/// Whether `payload` ends a row or column stream: a classic EOF packet (0xFE,
/// shorter than 9 bytes) or, with `deprecate_eof`, an OK packet with the 0xFE
/// header (shorter than `MAX_PACKET_PAYLOAD`). A 0xFE first byte in a longer
/// packet is a row whose first value is at least 2^24 bytes.
pub fn is_eof(payload: &[u8], deprecate_eof: bool) -> bool {
    let limit = if deprecate_eof { MAX_PACKET_PAYLOAD } else { EOF_MAX_LEN };
    payload.first() == Some(&EOF_HEADER) && payload.len() < limit
}

/// Whether `payload` is a LOCAL INFILE request (as the first packet of a reply).
pub fn is_local_infile(payload: &[u8]) -> bool {
    payload.first() == Some(&LOCAL_INFILE_HEADER)
}

/// OK packet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OkPacket {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
    /// Human-readable info ("Rows matched: ...").
    pub info: Bytes,
    /// Raw session state changes (`CLIENT_SESSION_TRACK` and
    /// `SERVER_SESSION_STATE_CHANGED`); parse with [`crate::session_track`].
    pub session_state: Option<Bytes>,
}

impl OkPacket {
    /// Decodes an OK packet with header 0x00 or 0xFE under capabilities `caps`.
    pub fn decode(payload: &[u8], caps: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "OK packet");
        let header = r.u8()?;
        if header != OK_HEADER && header != EOF_HEADER {
            return Err(DecodeError::UnexpectedHeader {
                what: "OK packet",
                header,
            });
        }
        let affected_rows = r.lenenc_int()?;
        let last_insert_id = r.lenenc_int()?;
        let (mut status, mut warnings) = (0, 0);
        if caps & CLIENT_PROTOCOL_41 != 0 {
            status = r.u16()?;
            warnings = r.u16()?;
        }
        let mut ok = OkPacket {
            affected_rows,
            last_insert_id,
            status,
            warnings,
            ..Default::default()
        };
        if caps & CLIENT_SESSION_TRACK != 0 {
            // Servers omit the info string entirely when it is empty and no
            // session state follows.
            if !r.is_empty() {
                ok.info = Bytes::copy_from_slice(r.lenenc_bytes()?);
            }
            if status & SERVER_SESSION_STATE_CHANGED != 0 && !r.is_empty() {
                ok.session_state = Some(Bytes::copy_from_slice(r.lenenc_bytes()?));
            }
        } else {
            ok.info = Bytes::copy_from_slice(r.rest());
        }
        Ok(ok)
    }

    /// Appends the packet with `header` (0x00, or 0xFE where it replaces an EOF
    /// under `CLIENT_DEPRECATE_EOF`). `SERVER_SESSION_STATE_CHANGED` in the written
    /// status is derived, not copied: it is set exactly when `CLIENT_SESSION_TRACK`
    /// is in `caps` and `session_state` is present (which is then written too).
    pub fn encode(&self, dst: &mut BytesMut, caps: u32, header: u8) {
        dst.put_u8(header);
        put_lenenc_int(dst, self.affected_rows);
        put_lenenc_int(dst, self.last_insert_id);
        let track = caps & CLIENT_SESSION_TRACK != 0;
        let mut status = self.status & !SERVER_SESSION_STATE_CHANGED;
        if track && self.session_state.is_some() {
            status |= SERVER_SESSION_STATE_CHANGED;
        }
        if caps & CLIENT_PROTOCOL_41 != 0 {
            dst.put_u16_le(status);
            dst.put_u16_le(self.warnings);
        }
        if track {
            if !self.info.is_empty() || self.session_state.is_some() {
                put_lenenc_bytes(dst, &self.info);
            }
            if let Some(state) = &self.session_state {
                put_lenenc_bytes(dst, state);
            }
        } else {
            dst.extend_from_slice(&self.info);
        }
    }
}

/// ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket {
    pub code: u16,
    /// Absent in pre-4.1 packets and in errors sent before capabilities are agreed.
    pub sqlstate: Option<[u8; 5]>,
    pub message: String,
}

impl ErrPacket {
    /// An ERR packet for a known error with a client-facing message.
    pub fn from_error(err: MyError, message: impl Into<String>) -> Self {
        ErrPacket {
            code: err.code,
            sqlstate: Some(err.sqlstate_bytes()),
            message: message.into(),
        }
    }

    /// The SQLSTATE as text, `HY000` when absent.
    pub fn sqlstate_str(&self) -> String {
        String::from_utf8_lossy(&self.sqlstate.unwrap_or(*b"HY000")).into_owned()
    }

    /// MariaDB progress report (code 0xFFFF), not an error.
    pub fn is_progress_report(payload: &[u8]) -> bool {
        payload.len() >= 3 && payload[0] == ERR_HEADER && payload[1..3] == [0xFF, 0xFF]
    }

    /// Decodes an ERR packet; the SQLSTATE is read when the '#' marker is present.
    /// Non-UTF-8 messages are converted lossily.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "ERR packet");
        let header = r.u8()?;
        if header != ERR_HEADER {
            return Err(DecodeError::UnexpectedHeader {
                what: "ERR packet",
                header,
            });
        }
        let code = r.u16()?;
        let mut sqlstate = None;
        if r.peek_u8() == Some(SQLSTATE_MARKER) && r.remaining() >= 6 {
            r.skip(1)?;
            sqlstate = Some(r.array()?);
        }
        let message = String::from_utf8_lossy(r.rest()).into_owned();
        Ok(ErrPacket {
            code,
            sqlstate,
            message,
        })
    }

    /// Appends the packet; the SQLSTATE (with '#') is written when present.
    /// Without one, a message that starts with '#' and 5 more bytes reads
    /// back as a SQLSTATE and the rest: the format cannot tell them apart
    /// (errors the proxy writes always carry a SQLSTATE).
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(ERR_HEADER);
        dst.put_u16_le(self.code);
        if let Some(state) = self.sqlstate {
            dst.put_u8(SQLSTATE_MARKER);
            dst.extend_from_slice(&state);
        }
        dst.extend_from_slice(self.message.as_bytes());
    }
}

/// EOF packet (4.1 form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EofPacket {
    pub warnings: u16,
    pub status: u16,
}

impl EofPacket {
    /// Decodes a 0xFE packet shorter than [`EOF_MAX_LEN`]; a bare 1-byte EOF
    /// (pre-4.1) yields zeros.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "EOF packet");
        let header = r.u8()?;
        if header != EOF_HEADER || payload.len() >= EOF_MAX_LEN {
            return Err(DecodeError::UnexpectedHeader {
                what: "EOF packet",
                header,
            });
        }
        if r.is_empty() {
            return Ok(EofPacket::default());
        }
        Ok(EofPacket {
            warnings: r.u16()?,
            status: r.u16()?,
        })
    }

    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(EOF_HEADER);
        dst.put_u16_le(self.warnings);
        dst.put_u16_le(self.status);
    }
}

/// The server asks the client to send a local file (`LOAD DATA LOCAL INFILE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalInfileRequest {
    pub filename: Bytes,
}

impl LocalInfileRequest {
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        match payload.split_first() {
            Some((&LOCAL_INFILE_HEADER, name)) => Ok(LocalInfileRequest {
                filename: Bytes::copy_from_slice(name),
            }),
            Some((&header, _)) => Err(DecodeError::UnexpectedHeader {
                what: "LOCAL INFILE request",
                header,
            }),
            None => Err(DecodeError::Empty),
        }
    }

    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(LOCAL_INFILE_HEADER);
        dst.extend_from_slice(&self.filename);
    }
}
