//! COM_STMT_PREPARE's first reply packet (COM_STMT_PREPARE_OK), and in-place
//! renumbering of its statement id (the proxy hands clients its own ids).
//!
//! Reference: MySQL "COM_STMT_PREPARE Response".

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::lenenc::Reader;

/// Length of COM_STMT_PREPARE_OK: status, id, columns, params, filler, warnings.
pub const PREPARE_OK_LEN: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StmtPrepareOk {
    pub stmt_id: u32,
    pub num_columns: u16,
    pub num_params: u16,
    pub warnings: u16,
}

impl StmtPrepareOk {
    /// Decodes the packet. The warning count is optional (pre-4.1 servers end
    /// after the filler); a trailing MySQL 8 `metadata_follows` byte is ignored.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload, "COM_STMT_PREPARE_OK");
        let header = r.u8()?;
        if header != 0 {
            return Err(DecodeError::UnexpectedHeader {
                what: "COM_STMT_PREPARE_OK",
                header,
            });
        }
        let stmt_id = r.u32()?;
        let num_columns = r.u16()?;
        let num_params = r.u16()?;
        let mut warnings = 0;
        if !r.is_empty() {
            r.skip(1)?;
            warnings = r.u16()?;
        }
        Ok(StmtPrepareOk {
            stmt_id,
            num_columns,
            num_params,
            warnings,
        })
    }

    pub fn encode(&self, dst: &mut BytesMut) {
        dst.put_u8(0);
        dst.put_u32_le(self.stmt_id);
        dst.put_u16_le(self.num_columns);
        dst.put_u16_le(self.num_params);
        dst.put_u8(0);
        dst.put_u16_le(self.warnings);
    }
}

/// Replaces the statement id of a COM_STMT_PREPARE_OK payload in place.
pub fn rewrite_prepare_ok_id(payload: &mut [u8], id: u32) -> Result<(), DecodeError> {
    match payload.first() {
        None => return Err(DecodeError::Empty),
        Some(&0) => {}
        Some(&header) => {
            return Err(DecodeError::UnexpectedHeader {
                what: "COM_STMT_PREPARE_OK",
                header,
            });
        }
    }
    let needed = 5usize.saturating_sub(payload.len());
    let slot = payload.get_mut(1..5).ok_or(DecodeError::Truncated {
        what: "COM_STMT_PREPARE_OK",
        needed,
    })?;
    slot.copy_from_slice(&id.to_le_bytes());
    Ok(())
}
