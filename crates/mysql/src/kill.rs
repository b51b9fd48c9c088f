//! `KILL [QUERY | CONNECTION] <id>`, COM_PROCESS_KILL and `SHOW [FULL]
//! PROCESSLIST` through the proxy, in one id space with `CONNECTION_ID()`
//! (which the proxy writes in as the session's id, see
//! `gatehouse_sql::mysql::substitute_previous_results`): ids are the
//! proxy's own (the handshake's connection id, which is the session's
//! cancel key); a session sees only its own tenant's sessions, as a user
//! without the PROCESS privilege sees only its own threads on a server, so
//! any other id is "Unknown thread id".
//!
//! `SHOW PROCESSLIST` lists the tenant's sessions with MariaDB's columns:
//! `Command` is `Query` for a session running a statement on a backend (or
//! waiting for one), else `Sleep`; `Time` is the seconds since the session
//! logged in (the proxy does not follow each statement's start); `Info`
//! is the statement for the asking session itself only.
//!
//! What each form does, matching MariaDB (10.11, observed on the wire):
//! - `KILL QUERY <id>` cancels the backend query that session runs, if any
//!   (`KILL QUERY` on its backend connection); the killer gets OK.
//! - `KILL [CONNECTION] <id>` and COM_PROCESS_KILL raise the session's
//!   terminate signal and answer OK at once. The killed session, wherever it
//!   waits, has the server end the backend connection running its query
//!   (`KILL CONNECTION` on it, so the server rolls back itself) and drops
//!   it (it is mid-reply; a connection idle in a transaction is
//!   reset, which rolls it back, and returned to the pool instead), and
//!   closes its client connection without a reply: the server sends a
//!   killed connection nothing either, busy or idle.
//! - On one's own id, `KILL` answers ER_CONNECTION_KILLED (1927) and ends the
//!   session; `KILL QUERY` answers ER_QUERY_INTERRUPTED (1317) and nothing
//!   else happens.

use bytes::BytesMut;
use gatehouse_proto_mysql::errors;
use gatehouse_sql::mysql::Kill;
use tokio::io::AsyncWriteExt;

use super::txn::{Fatal, Session};
use gatehouse_core::engine::Engine;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};

/// The message of ER_CONNECTION_KILLED.
const CONNECTION_KILLED: &str = "Connection was killed";

/// COM_PROCESS_KILL's request: a 4-byte connection id, ending the whole
/// connection. Missing bytes read as zero (the id is then unknown).
pub fn process_kill_request(payload: &[u8]) -> Kill {
    let mut id = [0u8; 4];
    let given = payload.get(1..).unwrap_or_default();
    let n = given.len().min(4);
    id[..n].copy_from_slice(&given[..n]);
    Kill {
        query_only: false,
        id: u64::from(u32::from_le_bytes(id)),
    }
}

impl Session {
    /// Answers a `KILL` (see the module docs).
    pub(super) async fn kill(&mut self, stream: &mut ClientStream, kill: Kill) -> Result<(), Fatal> {
        let Ok(id) = u32::try_from(kill.id) else {
            return self.no_such_thread(stream, kill.id).await;
        };
        if id == self.cancel.id {
            if kill.query_only {
                // The server interrupts the KILL QUERY statement itself.
                let msg = "Query execution was interrupted";
                return self.error(stream, 1, errors::ER_QUERY_INTERRUPTED, msg).await;
            }
            return Err((1, ProxyError::new(Condition::Terminated, CONNECTION_KILLED)));
        }
        if kill.query_only {
            let Some(target) = self.core.cancels.lookup_owned(id, &self.tenant.name) else {
                return self.no_such_thread(stream, kill.id).await;
            };
            if let Some(claimed) = target
                && let Err(e) = self.core.engine.cancel(claimed.target.clone()).await
            {
                tracing::warn!(error = %e, "KILL QUERY could not be delivered");
            }
            // A statement of that session waiting for a connection stops
            // once this KILL has been answered, as on a server.
            let answered = self.local_ok(stream).await;
            self.core.cancels.wake_cancelled(id);
            return answered;
        } else if !self.core.cancels.terminate_owned(id, &self.tenant.name) {
            return self.no_such_thread(stream, kill.id).await;
        }
        self.local_ok(stream).await
    }

    async fn no_such_thread(&mut self, stream: &mut ClientStream, id: u64) -> Result<(), Fatal> {
        self.error(
            stream,
            1,
            errors::ER_NO_SUCH_THREAD,
            &format!("Unknown thread id: {id}"),
        )
        .await
    }

    /// Answers `SHOW [FULL] PROCESSLIST` with this tenant's sessions.
    pub(super) async fn processlist(&mut self, stream: &mut ClientStream, full: bool) -> Result<(), Fatal> {
        use gatehouse_core::console::{
            Cell, ColumnType::Integer as I, ColumnType::Real as R, ColumnType::Text as T, Table,
        };
        let mut t = Table::new(&[
            ("Id", I),
            ("User", T),
            ("Host", T),
            ("db", T),
            ("Command", T),
            ("Time", I),
            ("State", T),
            ("Info", T),
            ("Progress", R),
        ]);
        let me = self.cancel.id;
        for c in self.core.cancels.clients() {
            if *c.info.tenant != *self.tenant.name {
                continue;
            }
            let running = c.id == me
                || matches!(
                    c.state,
                    gatehouse_core::cancel::ClientState::Active | gatehouse_core::cancel::ClientState::Waiting
                );
            let info = (c.id == me).then(|| {
                let text = if full {
                    "SHOW FULL PROCESSLIST"
                } else {
                    "SHOW PROCESSLIST"
                };
                Cell::from(text)
            });
            t.push(vec![
                c.id.into(),
                c.info.tenant.as_ref().into(),
                c.info.addr.map(|a| a.to_string()).into(),
                Cell::from(Some(c.info.database()).filter(|d| !d.is_empty())),
                if running { "Query" } else { "Sleep" }.into(),
                c.info.since.elapsed().as_secs().into(),
                if c.id == me { "starting" } else { c.state.name() }.into(),
                info.unwrap_or(Cell::Null),
                Cell::Real(0.0),
            ]);
        }
        let mut out = BytesMut::new();
        let extended = (self.session_caps >> 32)
            & u64::from(gatehouse_proto_mysql::consts::MARIADB_CLIENT_EXTENDED_TYPE_INFO)
            != 0;
        super::table::put_table(&mut out, 1, &t, self.status, extended);
        stream.write_all(&out).await.map_err(|e| {
            (
                0,
                ProxyError::new(Condition::ProtocolViolation, "client write failed").with_detail(e.to_string()),
            )
        })
    }

    /// Ends this session after another session's `KILL`. `mid_command`: a
    /// command was abandoned, so a backend connection the session holds may
    /// be running a query or be mid-reply: the query is cancelled and the
    /// connection closed. Otherwise a held connection is idle and the end of
    /// the session resets it (rolling back an open transaction) before it
    /// is reused. The client gets no reply, as from the server.
    pub(super) async fn killed(&mut self, mid_command: bool) -> Result<(), Fatal> {
        if mid_command && let Some(lease) = self.lease.as_mut() {
            let target = lease.conn().cancel.clone();
            if let Err(e) = super::backend::terminate(target).await {
                tracing::warn!(error = %e, "the killed session's backend query could not be cancelled");
            }
            self.drop_lease();
        }
        let e = ProxyError::new(Condition::Terminated, CONNECTION_KILLED);
        self.core.stats.record_error(&e);
        tracing::info!(tenant = %self.tenant.name, "client session killed by another session");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_kill_reads_a_little_endian_id() {
        let k = process_kill_request(&[0x0c, 0x39, 0x30, 0, 0]);
        assert_eq!(
            k,
            Kill {
                query_only: false,
                id: 12345
            }
        );
        assert_eq!(
            process_kill_request(&[0x0c, 0x01]).id,
            1,
            "short: missing bytes are zero"
        );
        assert_eq!(process_kill_request(&[0x0c]).id, 0);
    }
}
