//! A MySQL session on a split endpoint ([`gatehouse_core::split`]): each command's
//! decision, made before it borrows a connection. A text query is routed
//! by its statements (all of them, for a multi-statement query); a
//! prepared statement's execution by the text it was prepared from;
//! `COM_FIELD_LIST` and `COM_STATISTICS` are reads; every other command
//! goes to the writer. With autocommit off every statement opens (or is
//! in) a transaction that may write later: the writer.
//!
//! A read lease the session still holds when a command that is not a
//! read comes (it was kept for `SHOW WARNINGS`, say) goes back first,
//! unless a transaction or state holds it: the command is routed anew.

use gatehouse_proto_mysql::command::stmt_id_at;
use gatehouse_proto_mysql::consts::*;
use gatehouse_sql::mysql::{self as my_sql, Dialect};

use super::MyEngine;
use super::txn::Session;
use gatehouse_core::split::{Decision, Leased, decide};

/// What a statement the proxy cannot read (not UTF-8) or a command that
/// may change anything is: the writer.
const WRITER: Decision = Decision::Write { wrote: true };

impl Session {
    /// The decision for `statements` of a text query.
    pub(super) fn decide_query(&mut self, statements: &[&str], dialect: Dialect) {
        if self.split.is_none() {
            return;
        }
        self.decision = if self.status & SERVER_STATUS_AUTOCOMMIT == 0 {
            WRITER
        } else {
            let functions: Vec<&str> = self.endpoint.read_only_functions.iter().map(String::as_str).collect();
            decide(statements.iter().map(|s| my_sql::route_with(s, dialect, &functions)))
        };
        self.note_on_lease();
    }

    /// In a block on the writer, a command that may write makes the
    /// block's position due ([`gatehouse_core::split::SplitState::noted`]).
    fn note_on_lease(&mut self) {
        let (ryw, decision, leased) = (self.endpoint.read_your_writes, self.decision, self.lease.is_some());
        if leased && let Some(split) = self.split.as_deref_mut() {
            split.noted(decision, ryw);
        }
    }

    /// The decision for a command other than a text query.
    pub(super) fn decide_command(&mut self, cmd: u8, payload: &[u8]) {
        if self.split.is_none() {
            return;
        }
        self.decision = match cmd {
            _ if self.status & SERVER_STATUS_AUTOCOMMIT == 0 => WRITER,
            COM_FIELD_LIST | COM_STATISTICS => Decision::Read,
            COM_STMT_PREPARE => match std::str::from_utf8(&payload[1..]) {
                Ok(sql) => self.route_one(sql),
                Err(_) => WRITER,
            },
            COM_STMT_EXECUTE | COM_STMT_SEND_LONG_DATA => {
                let text = stmt_id_at(payload).and_then(|id| self.stmts.text(id));
                match text {
                    Some(sql) => self.route_one(&sql),
                    None => WRITER,
                }
            }
            _ => WRITER,
        };
        self.note_on_lease();
    }

    fn route_one(&self, sql: &str) -> Decision {
        let functions: Vec<&str> = self.endpoint.read_only_functions.iter().map(String::as_str).collect();
        decide([my_sql::route_with(sql, self.dialect(), &functions)])
    }

    /// Before a command borrows: a read lease kept past its statement
    /// (warnings, `LAST_INSERT_ID()`) goes back when the command is not a
    /// read (nor one of the session's own results, which it holds: `SHOW
    /// WARNINGS`) and nothing else holds the lease.
    pub(super) async fn leave_read_lease(&mut self) {
        let Some(split) = self.split.as_deref() else {
            return;
        };
        let held = self.pinned.is_some() || self.in_transaction || self.locked || self.cursor_open || self.long_data;
        let stays = matches!(self.decision, Decision::Read | Decision::Follow);
        if self.lease.is_none() || held || split.lease() != Leased::Read || stays {
            return;
        }
        if !self.take_last_insert_id().await {
            return;
        }
        if let Some(lease) = self.lease.take() {
            self.carry.lease_changed();
            self.cancel.slot.set(None);
            lease.recycle();
        }
        if let Some(split) = self.split.as_deref_mut() {
            split.released(None);
        }
    }

    /// As the lease goes back: the writer's position after a transaction
    /// that may have written (read-your-writes). `false`: the connection
    /// was lost reading it (and is dropped).
    pub(super) async fn lease_ends(&mut self) -> bool {
        let (Some(split), Some(lease)) = (self.split.as_deref_mut(), self.lease.as_mut()) else {
            return true;
        };
        if let Err(e) = split.lease_ends::<MyEngine>(lease.conn()).await {
            tracing::warn!(error = %e, "backend connection lost reading the write position");
            self.drop_lease();
            return false;
        }
        true
    }
}
