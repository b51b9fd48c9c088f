//! Client commands of the command phase, parsed from a packet payload without
//! copying, plus in-place access to the statement id of the COM_STMT_* commands
//! (the proxy renumbers statements per backend connection).
//!
//! Reference: MySQL "Text Protocol" and "Prepared Statements" command pages.

use crate::consts::*;
use crate::error::DecodeError;
use crate::lenenc::Reader;

/// A parsed client command; slices borrow from the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    Quit,
    InitDb(&'a [u8]),
    Query(&'a [u8]),
    FieldList {
        table: &'a [u8],
        wildcard: &'a [u8],
    },
    Statistics,
    Ping,
    /// Raw payload after the command byte; decode with
    /// [`crate::handshake::ChangeUser::decode`] (which wants the whole payload).
    ChangeUser(&'a [u8]),
    ResetConnection,
    SetOption(u16),
    StmtPrepare(&'a [u8]),
    StmtExecute {
        stmt_id: u32,
        flags: u8,
        iteration_count: u32,
        rest: &'a [u8],
    },
    StmtSendLongData {
        stmt_id: u32,
        param_id: u16,
        data: &'a [u8],
    },
    StmtClose(u32),
    StmtReset(u32),
    StmtFetch {
        stmt_id: u32,
        rows: u32,
    },
    /// Any other command byte (the payload is not inspected).
    Other(u8),
}

impl<'a> Command<'a> {
    /// Parses a command payload. Empty payloads and truncated fixed fields fail.
    pub fn parse(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let (&cmd, body) = payload.split_first().ok_or(DecodeError::Empty)?;
        let mut r = Reader::new(body, "command");
        Ok(match cmd {
            COM_QUIT => Command::Quit,
            COM_INIT_DB => Command::InitDb(body),
            COM_QUERY => Command::Query(body),
            COM_FIELD_LIST => {
                let table = r.nul_or_rest();
                Command::FieldList {
                    table,
                    wildcard: r.rest(),
                }
            }
            COM_STATISTICS => Command::Statistics,
            COM_PING => Command::Ping,
            COM_CHANGE_USER => Command::ChangeUser(body),
            COM_RESET_CONNECTION => Command::ResetConnection,
            COM_SET_OPTION => Command::SetOption(r.u16()?),
            COM_STMT_PREPARE => Command::StmtPrepare(body),
            COM_STMT_EXECUTE => Command::StmtExecute {
                stmt_id: r.u32()?,
                flags: r.u8()?,
                iteration_count: r.u32()?,
                rest: r.rest(),
            },
            COM_STMT_SEND_LONG_DATA => Command::StmtSendLongData {
                stmt_id: r.u32()?,
                param_id: r.u16()?,
                data: r.rest(),
            },
            COM_STMT_CLOSE => Command::StmtClose(r.u32()?),
            COM_STMT_RESET => Command::StmtReset(r.u32()?),
            COM_STMT_FETCH => Command::StmtFetch {
                stmt_id: r.u32()?,
                rows: r.u32()?,
            },
            other => Command::Other(other),
        })
    }

    /// The command byte this variant was parsed from.
    pub fn code(&self) -> u8 {
        match self {
            Command::Quit => COM_QUIT,
            Command::InitDb(_) => COM_INIT_DB,
            Command::Query(_) => COM_QUERY,
            Command::FieldList { .. } => COM_FIELD_LIST,
            Command::Statistics => COM_STATISTICS,
            Command::Ping => COM_PING,
            Command::ChangeUser(_) => COM_CHANGE_USER,
            Command::ResetConnection => COM_RESET_CONNECTION,
            Command::SetOption(_) => COM_SET_OPTION,
            Command::StmtPrepare(_) => COM_STMT_PREPARE,
            Command::StmtExecute { .. } => COM_STMT_EXECUTE,
            Command::StmtSendLongData { .. } => COM_STMT_SEND_LONG_DATA,
            Command::StmtClose(_) => COM_STMT_CLOSE,
            Command::StmtReset(_) => COM_STMT_RESET,
            Command::StmtFetch { .. } => COM_STMT_FETCH,
            Command::Other(c) => *c,
        }
    }
}

/// Whether `cmd` carries a statement id at payload bytes 1..5: COM_STMT_EXECUTE,
/// SEND_LONG_DATA, CLOSE, RESET and FETCH (and MariaDB's COM_STMT_BULK_EXECUTE).
pub fn has_stmt_id(cmd: u8) -> bool {
    matches!(
        cmd,
        COM_STMT_EXECUTE
            | COM_STMT_SEND_LONG_DATA
            | COM_STMT_CLOSE
            | COM_STMT_RESET
            | COM_STMT_FETCH
            | COM_STMT_BULK_EXECUTE
    )
}

/// The statement id of a statement command, `None` for other commands or a
/// payload too short to hold one.
pub fn stmt_id_at(payload: &[u8]) -> Option<u32> {
    let (&cmd, body) = payload.split_first()?;
    if !has_stmt_id(cmd) {
        return None;
    }
    let id = body.get(..4)?;
    Some(u32::from_le_bytes([id[0], id[1], id[2], id[3]]))
}

/// Replaces the statement id of a statement command in place.
pub fn rewrite_stmt_id(payload: &mut [u8], id: u32) -> Result<(), DecodeError> {
    let (&mut cmd, body) = payload.split_first_mut().ok_or(DecodeError::Empty)?;
    if !has_stmt_id(cmd) {
        return Err(DecodeError::UnexpectedHeader {
            what: "statement command",
            header: cmd,
        });
    }
    let needed = 4usize.saturating_sub(body.len());
    let slot = body.get_mut(..4).ok_or(DecodeError::Truncated {
        what: "statement command",
        needed,
    })?;
    slot.copy_from_slice(&id.to_le_bytes());
    Ok(())
}
