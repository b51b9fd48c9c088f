//! The backend side of a transaction-pooled session: borrowing a
//! connection (routed afresh each time, with the client's tracked values
//! applied), reading the server's messages through the response queue, and
//! giving the connection back at a transaction boundary.

use bytes::Buf;
use gatehouse_proto_pg::frame::{HOLD_WHOLE_LIMIT, Step, next_frame};
use gatehouse_proto_pg::messages;

use super::super::pending::{Disposition, Event};
use super::super::relay::End;
use super::super::tracked;
use super::{CONTROL_HOLD_LIMIT, TxSession, UNKNOWN_OWNER};
use gatehouse_core::cancel::LeaseWait;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::split::Decision;
use gatehouse_core::topology::{Intent, RouteTo};
use gatehouse_settings::config::PoolMode;

impl TxSession {
    /// At a transaction boundary, reads back changed parameters and returns
    /// the connection to the pool, unless the session is pinned.
    pub(super) async fn maybe_release(&mut self) -> Result<(), End> {
        if self.endpoint.pool_mode == PoolMode::Statement && self.queue.is_empty() && self.status != b'I' {
            return Err(End::ClientError(ProxyError::new(
                Condition::FeatureNotSupported,
                "transaction blocks not allowed in statement pooling mode",
            )));
        }
        if !self.queue.is_empty() || self.unsynced || self.status != b'I' || self.b_remaining > 0 {
            return Ok(());
        }
        if std::mem::take(&mut self.defaults_changed) {
            // New sessions start with the role's and database's defaults as
            // they are now; the pooled connections' sessions started before.
            let key = self.pool.key();
            let closed = self.core.pools.retire_backend(&key.cluster, &key.backend);
            self.core.engine.greetings.forget_backend(&key.cluster, &key.backend);
            tracing::info!(backend = %key.backend, closed, "ALTER ROLE/DATABASE SET: the backend's pooled connections are replaced");
        }
        if self.pinned.is_some() {
            if self.readback && self.resets != 0 {
                return Box::pin(self.restore_resets_here()).await;
            }
            return Ok(());
        }
        let Some(mut lease) = self.lease.take() else {
            return Ok(());
        };
        if !lease.conn().buf.is_empty() {
            self.lease = Some(lease);
            return Ok(());
        }
        if self.readback {
            self.readback = false;
            match Box::pin(tracked::read(lease.conn())).await {
                Ok(values) => {
                    // What the transaction reset went to the connection's
                    // defaults (the server's): the session's own are its
                    // startup values, applied before its next transaction.
                    self.desired = if self.resets == 0 {
                        values.clone()
                    } else {
                        let desired = tracked::with_baseline(&values, &self.baseline, std::mem::take(&mut self.resets));
                        tracked::announce(&lease.conn().params, &values, &desired, &mut self.to_client);
                        desired
                    };
                    lease.conn().tracked = Some(values);
                }
                Err(e) => return Err(End::BackendGone(e.to_string())),
            }
        }
        if let Some(split) = self.split.as_deref_mut()
            && let Err(e) = Box::pin(split.lease_ends::<crate::PgEngine>(lease.conn())).await
        {
            return Err(End::BackendGone(e.to_string()));
        }
        self.cancel.slot.set(None);
        lease.recycle();
        Ok(())
    }

    /// A pinned session's connection stays its own: what its transaction
    /// reset (to the connection's defaults, the server's) is set to the
    /// session's startup values on it now, before its next statement, and
    /// the client is told the reported ones' values (ParameterStatus).
    async fn restore_resets_here(&mut self) -> Result<(), End> {
        let Some(lease) = self.lease.as_mut() else {
            return Ok(());
        };
        let conn = lease.conn();
        if !conn.buf.is_empty() {
            return Ok(());
        }
        self.readback = false;
        let resets = std::mem::take(&mut self.resets);
        let gone = |e: ProxyError| End::BackendGone(e.to_string());
        let values = Box::pin(tracked::read(conn)).await.map_err(gone)?;
        let desired = tracked::with_baseline(&values, &self.baseline, resets);
        conn.tracked = Some(values.clone());
        Box::pin(tracked::apply(conn, &desired)).await.map_err(gone)?;
        tracked::announce(&conn.params, &values, &desired, &mut self.to_client);
        self.desired = desired;
        Ok(())
    }

    /// Borrows a connection if the session has none, routed afresh
    /// (gatehouse_core::router). `Ok(Some(error))` when there is none to be had
    /// (no backend within the failover hold, the pool's borrow timeout) or
    /// a cancel request came while it waited: the message is answered with
    /// the error and the session goes on (see `answer_refused`).
    /// On a split endpoint, `decision` is what the exchange does.
    /// `ruled`: the lease a query rule routes the statement to, if any.
    pub(super) async fn ensure_lease(
        &mut self,
        decision: Option<Decision>,
        ruled: Option<RouteTo>,
    ) -> Result<Option<ProxyError>, End> {
        if self.lease.is_some() {
            return Ok(None);
        }
        let intent = match (&ruled, self.split.as_deref(), decision) {
            (Some(route), ..) => Intent::Ruled(route),
            (None, Some(split), Some(d)) => split.intent(d),
            _ => Intent::Write,
        };
        let decision = match &ruled {
            Some(route) => decision.and_then(|d| gatehouse_core::split::ruled_decision(route, d)),
            None => decision,
        };
        let cancelled = || ProxyError::new(Condition::Canceled, "canceling statement due to user request");
        // Usually a connection is lent at once: no wait, no clock read.
        let (waited, began) = self
            .core
            .lease_or_wait(
                &self.endpoint,
                &mut self.pool,
                self.backend_cap.as_ref(),
                intent,
                &self.cancel.slot,
                &mut self.clusters,
            )
            .await;
        let mut lease = match waited {
            LeaseWait::Done(Ok(lease)) => lease,
            LeaseWait::Done(Err(e)) => {
                self.core.stats.record_error(&e);
                tracing::info!(session = self.session_id, error = %e, "no backend connection for the statement");
                return Ok(Some(e));
            }
            LeaseWait::Cancelled => return Ok(Some(cancelled())),
        };
        self.inspect.leased();
        // Usually the connection has the client's values already: the
        // (boxed) apply is skipped.
        if !tracked::in_step(lease.conn(), &self.desired)
            && let Err(e) = Box::pin(tracked::apply(lease.conn(), &self.desired)).await
        {
            return Err(End::BackendGone(e.to_string()));
        }
        if !self.cancel.slot.publish(lease.conn().cancel_target()) {
            // Cancelled while it was made ready: nothing of the client's ran.
            lease.recycle();
            return Ok(Some(cancelled()));
        }
        if let (Some(split), Some(d)) = (self.split.as_deref_mut(), decision) {
            split.leased(d, self.endpoint.read_your_writes);
        }
        self.lease = Some(lease);
        self.lease_metered(began);
        Ok(None)
    }

    pub(super) fn backend_messages(&mut self) -> Result<(), End> {
        let Some(lease) = self.lease.as_mut() else {
            return Ok(());
        };
        // One allocation for what this read forwards, not a doubling per message.
        self.to_client.reserve(lease.conn().buf.len());
        loop {
            let Some(lease) = self.lease.as_mut() else {
                return Ok(());
            };
            let conn = lease.conn();
            if conn.buf.is_empty() {
                break;
            }
            if self.b_remaining > 0 {
                let n = self.b_remaining.min(conn.buf.len());
                self.to_client.extend_from_slice(&conn.buf[..n]);
                conn.buf.advance(n);
                self.b_remaining -= n;
                continue;
            }
            let hold = match conn.buf[0] {
                b'D' | b'd' => HOLD_WHOLE_LIMIT,
                _ => CONTROL_HOLD_LIMIT,
            };
            let (tag, len) = match next_frame(&conn.buf, hold, usize::MAX) {
                Ok(Step::NeedMore) => break,
                Ok(Step::Stream { len, .. }) => {
                    let n = len.min(conn.buf.len());
                    self.to_client.extend_from_slice(&conn.buf[..n]);
                    conn.buf.advance(n);
                    self.b_remaining = len - n;
                    continue;
                }
                Ok(Step::Whole { tag, len }) => (tag, len),
                Err(e) => return Err(End::BackendGone(format!("malformed message from server: {e}"))),
            };
            let msg = conn.buf.split_to(len);
            tracing::trace!(tag = %char::from(tag), len, "backend message");
            // A server that ends its connection (its postmaster died, an
            // administrator terminated it, a timeout) says so with a FATAL
            // first: for a session that does not own the connection that is
            // the loss of a pooled connection, not the client's end (see
            // `lost.rs`), and is not relayed.
            if tag == b'E'
                && self.pinned.is_none()
                && let Ok(f) = messages::parse_error(&msg)
                && matches!(f.severity.as_str(), "FATAL" | "PANIC")
            {
                return Err(End::BackendGone(format!(
                    "server ended the connection: {} {}",
                    f.code, f.message
                )));
            }
            match tag {
                b'Z' => {
                    self.status = messages::parse_ready(&msg).map_err(|e| End::BackendGone(e.to_string()))?;
                    conn.status = self.status;
                    self.inspect.meter_mut().boundary(self.status != b'I');
                }
                b'S' => {
                    if let Ok((n, v)) = messages::parse_parameter_status(&msg) {
                        conn.set_param(n, v);
                    }
                }
                _ => {}
            }
            if tag == b'C' && self.queue.front_followed() {
                self.queue.add_rows(super::inspect::rows_of_tag(messages::body(&msg)));
            }
            if self.queue.on_message(tag) == Disposition::Forward {
                self.to_client.extend_from_slice(&msg);
            }
            self.queue.after(&mut self.to_client);
            self.apply_queue_events();
            if self.queue.has_finished() {
                self.record_finished();
            }
        }
        Ok(())
    }

    /// Brings the connection's prepared statements and the client's registry
    /// up to date with what the queue learned: a Parse that failed or was
    /// skipped prepared nothing, a Close that was skipped closed nothing.
    /// Called after every message in either direction, since the queue
    /// learns of skips when it is told of a message sent while the backend
    /// skips to Sync, not only when the backend answers: a later message in
    /// the same batch must already see the truth (else a skipped Close of
    /// an evicted statement is prepared again: 42P05).
    pub(super) fn apply_queue_events(&mut self) {
        if !self.queue.has_events() {
            return;
        }
        let events = self.queue.take_events();
        let Some(lease) = self.lease.as_mut() else {
            return;
        };
        let conn = lease.conn();
        for event in events {
            match event {
                Event::ParseFailed { proxy, client } => {
                    if proxy.is_empty() {
                        // Whose unnamed statement the backend holds is now unknown.
                        conn.unnamed_owner = Some(UNKNOWN_OWNER);
                    }
                    conn.prepared.remove(&proxy);
                    if let Some(client) = client {
                        self.registry.forget_failed(&client, &proxy);
                    }
                }
                Event::CloseSkipped { proxy } if proxy.is_empty() => conn.unnamed_owner = Some(UNKNOWN_OWNER),
                Event::CloseSkipped { proxy } => {
                    conn.prepared.insert(proxy, 0);
                }
            }
        }
    }
}
