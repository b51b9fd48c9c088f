//! Following the server's reply to one client command, packet by packet, to know
//! when it is complete and what state it left: the status flags of the final
//! OK/EOF (`SERVER_STATUS_IN_TRANS` marks the transaction boundary the proxy
//! multiplexes on), errors, prepared statement metadata, cursors.
//!
//! Usage: when the client sends a command, build
//! `ResponseTracker::new(ResponseKind::for_command(payload[0]), deprecate_eof)`;
//! feed every logical packet the server sends until [`Step::Done`].
//! See the crate docs for capabilities that must not be negotiated.
//!
//! Reference: MySQL "Text Protocol" (COM_QUERY Response, Text Resultset),
//! "Prepared Statements" (Binary Protocol Resultset, COM_STMT_PREPARE Response,
//! COM_STMT_FETCH Response), "Multi-Resultset", "COM_FIELD_LIST".

mod tracker;

pub use tracker::ResponseTracker;

use crate::consts::*;
use crate::error::DecodeError;
use crate::prepare::StmtPrepareOk;

/// What shape of reply a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// OK, ERR, LOCAL INFILE request, or text result sets (COM_QUERY,
    /// COM_PROCESS_INFO), possibly several (`SERVER_MORE_RESULTS_EXISTS`).
    ResultSets,
    /// Exactly one OK, ERR or EOF (COM_INIT_DB, COM_PING, COM_RESET_CONNECTION,
    /// COM_STMT_RESET, COM_SET_OPTION, and unknown commands, which get ERR).
    OkOrErr,
    /// COM_STMT_PREPARE: PREPARE_OK then parameter and column definitions, or ERR.
    StmtPrepare,
    /// COM_STMT_EXECUTE / COM_STMT_BULK_EXECUTE: OK, ERR or binary result sets; may
    /// end after the column definitions when a cursor was opened.
    StmtExecute,
    /// COM_STMT_FETCH: binary rows then a terminator, or ERR.
    StmtFetch,
    /// COM_FIELD_LIST: column definitions then EOF, or ERR.
    FieldList,
    /// COM_STATISTICS: one string packet.
    Statistics,
    /// COM_CHANGE_USER: an auth exchange ending in OK or ERR.
    ChangeUser,
    /// COM_QUIT, COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA: the server sends nothing.
    NoReply,
    /// Replication, clone and COM_MULTI commands, which the proxy must refuse: their
    /// replies are streams this tracker does not follow.
    Unsupported(u8),
}

impl ResponseKind {
    /// The reply shape for a command byte.
    pub fn for_command(cmd: u8) -> Self {
        match cmd {
            COM_QUERY | COM_PROCESS_INFO => ResponseKind::ResultSets,
            COM_STMT_PREPARE => ResponseKind::StmtPrepare,
            COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE => ResponseKind::StmtExecute,
            COM_STMT_FETCH => ResponseKind::StmtFetch,
            COM_FIELD_LIST => ResponseKind::FieldList,
            COM_STATISTICS => ResponseKind::Statistics,
            COM_CHANGE_USER => ResponseKind::ChangeUser,
            COM_QUIT | COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA => ResponseKind::NoReply,
            COM_BINLOG_DUMP | COM_BINLOG_DUMP_GTID | COM_REGISTER_SLAVE | COM_TABLE_DUMP | COM_CONNECT_OUT
            | COM_CLONE | COM_MULTI => ResponseKind::Unsupported(cmd),
            _ => ResponseKind::OkOrErr,
        }
    }
}

/// Affected rows and insert id of the OK packet that ended a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OkSummary {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub warnings: u16,
}

/// How a complete reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Done {
    /// Status flags of the last OK/EOF seen in this reply. An ERR carries no
    /// status: after an error this is the last status seen earlier in the reply
    /// (or `None`), and the transaction state must be kept from before (or probed).
    pub status: Option<u16>,
    /// The final OK (0x00, or 0xFE under `CLIENT_DEPRECATE_EOF`), if it ended so.
    pub ok: Option<OkSummary>,
    /// The error code if the reply ended with ERR.
    pub error: Option<u16>,
    /// COM_STMT_PREPARE: the parsed PREPARE_OK.
    pub prepare_ok: Option<StmtPrepareOk>,
    /// COM_STMT_EXECUTE opened a cursor (`SERVER_STATUS_CURSOR_EXISTS`); rows will
    /// come through COM_STMT_FETCH, so the session holds server-side state.
    pub cursor_opened: bool,
    /// Some OK in the reply had `SERVER_SESSION_STATE_CHANGED`.
    pub session_state_changed: bool,
    /// Number of result sets (with columns) in the reply.
    pub result_sets: u32,
    /// Some OK in the reply carried a non-zero last-insert-id: a statement
    /// generated an AUTO_INCREMENT value, inserted one explicitly, or called
    /// `LAST_INSERT_ID(expr)` (the OK cannot tell which).
    pub insert_id_seen: bool,
    /// Rows of the reply's last result, when it was a result set; `None`
    /// when the last result was an OK (or an error).
    pub last_rows: Option<u64>,
    /// Warnings the last OK or EOF reported (a result set's count comes
    /// in its final EOF): what `SHOW WARNINGS` would list next.
    pub warnings: u16,
}

impl Done {
    /// `SERVER_STATUS_IN_TRANS` of the final status, `None` if unknown.
    pub fn in_transaction(&self) -> Option<bool> {
        self.status.map(|s| s & SERVER_STATUS_IN_TRANS != 0)
    }
}

/// What the proxy should do after feeding a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The reply continues; keep forwarding server packets.
    More,
    /// The server sent a LOCAL INFILE request (0xFB). The client (or the proxy,
    /// refusing with an empty packet) must send file data ending with an empty
    /// packet; then keep feeding the server's OK/ERR.
    LocalInfile,
    /// COM_CHANGE_USER: the server sent AuthSwitchRequest or AuthMoreData that needs
    /// a client answer; relay the client's next packet, then keep feeding.
    AuthContinue,
    /// The reply is complete.
    Done(Done),
}

/// A server reply that does not follow the protocol for the command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    #[error("empty packet in a server reply")]
    Empty,
    #[error("unexpected packet starting with 0x{header:02x} while {state}")]
    Unexpected { state: &'static str, header: u8 },
    #[error("the reply is already complete")]
    AlreadyDone,
    #[error("this command gets no reply")]
    NoReplyExpected,
    #[error("command 0x{0:02x} is not supported by the reply tracker")]
    Unsupported(u8),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}
