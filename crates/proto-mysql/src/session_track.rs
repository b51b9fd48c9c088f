//! Session state change records carried in OK packets (`CLIENT_SESSION_TRACK`):
//! system variables, current schema, "state changed" and transaction state, which
//! the proxy uses to learn what a statement did to the session.
//!
//! Reference: MySQL "Session State Information" (`enum_session_state_type`).

use crate::error::DecodeError;
use crate::lenenc::Reader;

pub const SESSION_TRACK_SYSTEM_VARIABLES: u8 = 0;
pub const SESSION_TRACK_SCHEMA: u8 = 1;
pub const SESSION_TRACK_STATE_CHANGE: u8 = 2;
pub const SESSION_TRACK_GTIDS: u8 = 3;
pub const SESSION_TRACK_TRANSACTION_CHARACTERISTICS: u8 = 4;
pub const SESSION_TRACK_TRANSACTION_STATE: u8 = 5;

/// One change record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionChange<'a> {
    /// A tracked system variable now has `value`.
    SystemVariable { name: &'a [u8], value: &'a [u8] },
    /// The default schema is now `name`.
    Schema(&'a [u8]),
    /// `true` if session state changed ("1").
    StateChange(bool),
    /// Any other record type (GTIDs, transaction state...), undecoded.
    Other { kind: u8, data: &'a [u8] },
}

/// Iterates the records of `OkPacket::session_state`. Yields `Err` once and stops
/// on malformed input.
pub fn changes(state: &[u8]) -> impl Iterator<Item = Result<SessionChange<'_>, DecodeError>> {
    let mut r = Reader::new(state, "session state");
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || r.is_empty() {
            return None;
        }
        let item = next(&mut r);
        failed = item.is_err();
        Some(item)
    })
}

fn next<'a>(r: &mut Reader<'a>) -> Result<SessionChange<'a>, DecodeError> {
    let kind = r.u8()?;
    let data = r.lenenc_bytes()?;
    let mut d = Reader::new(data, "session state record");
    Ok(match kind {
        SESSION_TRACK_SYSTEM_VARIABLES => {
            let name = d.lenenc_bytes()?;
            let value = d.lenenc_bytes()?;
            SessionChange::SystemVariable { name, value }
        }
        SESSION_TRACK_SCHEMA => SessionChange::Schema(d.lenenc_bytes()?),
        SESSION_TRACK_STATE_CHANGE => SessionChange::StateChange(d.lenenc_bytes()? == b"1"),
        _ => SessionChange::Other { kind, data },
    })
}
