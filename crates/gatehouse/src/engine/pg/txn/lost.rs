//! A backend lost under a transaction-pooled session (its server was
//! killed, failed over, restarted): when the client was not inside an
//! explicit transaction and is not pinned, only what was in flight fails.
//! Each request still owed an answer gets the error a server gives a failed
//! request (SQLSTATE 08006, severity ERROR, so the client connection stays
//! open), the rest of an open extended-query exchange is skipped to its
//! Sync, and the session's next transaction is routed afresh, to whatever
//! backend is the writer by then. Inside an explicit transaction (or
//! pinned) the client's state died with the server: the session ends, as
//! it would on a direct connection.

use bytes::BytesMut;
use gatehouse_proto_pg::{messages, sqlstate};

use super::super::pending::Event;
use super::super::relay::End;
use super::TxSession;
use crate::error::{Condition, ProxyError};

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
        if self.pinned.is_some() || self.b_remaining > 0 || self.status != b'I' || self.lease.is_none() {
            return Some(end);
        }
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
        let mut error = BytesMut::new();
        messages::put_error(&mut error, "ERROR", sqlstate::CONNECTION_FAILURE, LOST_MESSAGE);
        let mut ready = BytesMut::new();
        messages::put_ready(&mut ready, b'I');
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
        self.status = b'I';
        None
    }
}
