//! A backend lost under a transaction-pooled session (its server was
//! killed, failed over, restarted): unless the session is pinned (its
//! state died with the server: it ends), only what was in flight fails.
//! Each request still owed an answer gets the error a server gives a failed
//! request (SQLSTATE 08006, severity ERROR, so the client connection stays
//! open), the rest of an open extended-query exchange is skipped to its
//! Sync, and the session's next transaction is routed afresh, to whatever
//! backend is the writer by then.
//!
//! Inside an explicit transaction block the client still believes in its
//! transaction, which died with the server: the session answers as a
//! server answers an aborted block (ReadyForQuery 'E'; every statement
//! 25P02) until the client ends the block (ROLLBACK, ABORT, COMMIT or END,
//! answered "ROLLBACK", as PostgreSQL answers a COMMIT of an aborted
//! block), so nothing it sends next runs outside the transaction it meant.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use gatehouse_proto_pg::{extended, messages, sqlstate};

use super::super::pending::{Event, Pending};
use super::super::relay::End;
use super::super::statements::{Statement, proxy_name};
use super::TxSession;
use gatehouse_core::error::{Condition, ProxyError};

/// What the client is told of a statement lost with its server.
pub const LOST_MESSAGE: &str = "the connection to the database server was lost during the statement (server failure or failover); \
     it may or may not have been applied, and the session goes on";

impl TxSession {
    /// Recovers the session from the loss of its lease's backend (`None`),
    /// or gives `end` back when it cannot go on (another end; pinned,
    /// inside a transaction, mid-message). Not async, and taking `end` by
    /// value, so nothing of it stays in the session's future.
    pub(super) fn recover(&mut self, end: End) -> Option<End> {
        let End::BackendGone(cause) = &end else {
            return Some(end);
        };
        if self.pinned.is_some() || self.b_remaining > 0 || self.lease.is_none() {
            return Some(end);
        }
        let in_block = self.status != b'I';
        let backend = self.pool.key().backend.clone();
        tracing::warn!(
            session = self.session_id,
            backend = %backend,
            cause = %cause,
            "backend connection lost between transactions' boundaries: the statement in flight fails, the session goes on"
        );
        self.core
            .stats
            .record_error(&ProxyError::new(Condition::BackendUnavailable, LOST_MESSAGE));
        self.cancel.slot.set(None);
        self.lease = None;
        self.to_backend.clear();
        // Whether a SET in flight took effect is unknown; the client's last
        // known values stay what the next connection is given.
        self.readback = false;
        self.resets = 0;
        let mut error = BytesMut::new();
        messages::put_error(&mut error, "ERROR", sqlstate::CONNECTION_FAILURE, LOST_MESSAGE);
        let status = if in_block { b'E' } else { b'I' };
        let mut ready = BytesMut::new();
        messages::put_ready(&mut ready, status);
        let open = self.queue.backend_lost(&error, &ready, &mut self.to_client);
        for event in self.queue.take_events() {
            if let Event::ParseFailed {
                proxy,
                client: Some(client),
            } = event
            {
                self.registry.forget_failed(&client, &proxy);
            }
        }
        if self.unsynced {
            if !open {
                self.to_client.extend_from_slice(&error);
            }
            self.client_skip = true;
            self.unsynced = false;
        }
        self.status = status;
        self.lost_block = in_block;
        None
    }

    /// Answers one client message of a transaction block lost with its
    /// server (see the module comment); nothing reaches a backend.
    pub(super) fn answer_lost_block(&mut self, tag: u8, msg: &Bytes) -> Result<(), End> {
        let malformed =
            |e: messages::DecodeError| End::ClientError(ProxyError::new(Condition::ProtocolViolation, e.to_string()));
        let mut out = BytesMut::new();
        let aborted = |out: &mut BytesMut| {
            messages::put_error(out, "ERROR", sqlstate::IN_FAILED_SQL_TRANSACTION, ABORTED_MESSAGE);
        };
        match tag {
            b'Q' => {
                let sql = messages::body(msg).split_last().map(|(_, s)| s).unwrap_or_default();
                if ends_block(&String::from_utf8_lossy(sql)) {
                    put_rolled_back(&mut out);
                    self.block_ended();
                    messages::put_ready(&mut out, b'I');
                } else {
                    aborted(&mut out);
                    messages::put_ready(&mut out, b'E');
                }
            }
            b'F' => {
                aborted(&mut out);
                messages::put_ready(&mut out, b'E');
            }
            b'P' => {
                let p = extended::parse_parse(msg).map_err(malformed)?;
                if ends_block(p.query) {
                    if !p.name.is_empty() {
                        let stmt = Statement {
                            proxy: proxy_name(p.query, p.param_types),
                            query: Arc::from(p.query),
                            param_types: Bytes::copy_from_slice(p.param_types),
                            touches_tracked: false,
                            rule_timeout: None,
                            rule_route: None,
                        };
                        self.registry.insert(p.name, Arc::new(stmt));
                    }
                    self.lost_ending = true;
                    messages::put_message(&mut out, b'1', |_| {});
                } else {
                    aborted(&mut out);
                    self.client_skip = true;
                    self.lost_ending = false;
                }
            }
            b'B' => {
                let b = extended::parse_bind(msg).map_err(malformed)?;
                let ending = if b.statement.is_empty() {
                    self.lost_ending
                } else {
                    self.registry.get(b.statement).is_some_and(|s| ends_block(&s.query))
                };
                if ending {
                    self.lost_ending = true;
                    messages::put_message(&mut out, b'2', |_| {});
                } else {
                    aborted(&mut out);
                    self.client_skip = true;
                    self.lost_ending = false;
                }
            }
            // Describe of the ending statement or portal: no parameters, no rows.
            b'D' => {
                if msg.get(5) == Some(&b'S') {
                    messages::put_message(&mut out, b't', |o| o.extend_from_slice(&0u16.to_be_bytes()));
                }
                messages::put_message(&mut out, b'n', |_| {});
            }
            b'E' => put_rolled_back(&mut out),
            b'C' => messages::put_message(&mut out, b'3', |_| {}),
            b'S' => {
                if std::mem::take(&mut self.lost_ending) {
                    self.block_ended();
                }
                messages::put_ready(&mut out, self.status);
            }
            _ => {}
        }
        if !out.is_empty() {
            self.queue.push(Pending::Synthetic(out.freeze()), &mut self.to_client);
        }
        Ok(())
    }

    fn block_ended(&mut self) {
        self.lost_block = false;
        self.status = b'I';
        tracing::info!(session = self.session_id, "the client ended its lost transaction block");
    }
}

/// What the client is told of a statement in a block lost with its server.
pub const ABORTED_MESSAGE: &str = "current transaction is aborted, commands ignored until end of transaction block \
     (its database server was lost; the transaction was rolled back)";

/// CommandComplete "ROLLBACK".
fn put_rolled_back(out: &mut BytesMut) {
    messages::put_message(out, b'C', |o| o.extend_from_slice(b"ROLLBACK\0"));
}

/// Whether `sql` ends a transaction block (ROLLBACK, ABORT, COMMIT, END,
/// with WORK / TRANSACTION / AND NO CHAIN), not ROLLBACK TO SAVEPOINT.
pub fn ends_block(sql: &str) -> bool {
    let lower = sql.trim().trim_end_matches(';').trim().to_ascii_lowercase();
    let mut words = lower.split_whitespace();
    let first = words.next().unwrap_or_default();
    if !matches!(first, "rollback" | "abort" | "commit" | "end") {
        return false;
    }
    words.all(|w| matches!(w, "work" | "transaction" | "and" | "no" | "chain"))
}

#[cfg(test)]
mod tests {
    use super::ends_block;

    #[test]
    fn block_ending_statements_are_recognised() {
        for sql in [
            "ROLLBACK",
            "rollback;",
            " COMMIT ",
            "END",
            "abort work",
            "commit and no chain",
            "ROLLBACK TRANSACTION",
        ] {
            assert!(ends_block(sql), "{sql}");
        }
        for sql in [
            "ROLLBACK TO SAVEPOINT a",
            "rollback to a",
            "SELECT 1",
            "COMMIT PREPARED 'x'",
            "commit and chain x",
            "",
        ] {
            assert!(!ends_block(sql), "{sql}");
        }
    }
}
