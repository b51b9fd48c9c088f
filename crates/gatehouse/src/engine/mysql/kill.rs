//! `KILL [QUERY | CONNECTION] <id>` and COM_PROCESS_KILL through the proxy.
//! Ids are the proxy's own (the handshake's connection id, which is the
//! session's cancel key); a session sees only its own tenant's sessions,
//! so any other id is "Unknown thread id", as on a server.
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

use gatehouse_proto_mysql::errors;
use gatehouse_sql::mysql::Kill;

use super::txn::{Fatal, Session};
use crate::engine::Engine;
use crate::engine::stream::ClientStream;
use crate::error::{Condition, ProxyError};

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
                tracing::info!(error = %e, "KILL QUERY could not be delivered");
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
                tracing::info!(error = %e, "the killed session's backend query could not be cancelled");
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
