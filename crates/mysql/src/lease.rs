//! A MySQL session's lease: borrowing one (routed afresh each time, the
//! client's tracked variables brought along), settling it after a command
//! (given back unless a transaction, a lock, a cursor or what moves with
//! the client holds it), losing it with its server, and giving it back
//! at the session's end.

use super::backend::MyConn;
use super::txn::{Fatal, Session};
use gatehouse_core::cancel::LeaseWait;
use gatehouse_core::error::{Condition, ProxyError};

impl Session {
    /// Gives the lease back unless something holds it.
    pub(super) async fn settle(&mut self) {
        let keep = self.pinned.is_some()
            || self.in_transaction
            || self.carry.holds()
            || self.locked
            || self.cursor_open
            || self.long_data;
        if keep || !self.take_last_insert_id().await || !self.lease_ends().await {
            return;
        }
        if let Some(lease) = self.lease.take() {
            self.carry.lease_changed();
            self.cancel.slot.set(None);
            if self.discard {
                self.discard = false;
                drop(lease);
            } else {
                lease.recycle();
            }
        }
    }

    /// At the end of the session: a connection with state is reset (which
    /// also rolls back an open transaction) before it serves anyone else.
    pub(super) async fn finish(&mut self) {
        self.cancel.slot.set(None);
        if let Some(mut lease) = self.lease.take() {
            // Idle connections hold LAST_INSERT_ID() 0: one that may not is
            // reset (which zeroes it) rather than read.
            let unknown_id = lease.conn().last_insert_id != Some(0);
            if self.discard {
                drop(lease);
            } else if unknown_id
                || self.pinned.is_some()
                || self.in_transaction
                || self.carry.autocommit_txn
                || self.carry.next_txn
                || self.locked
                || self.cursor_open
                || self.long_data
            {
                lease.release().await;
            } else {
                lease.recycle();
            }
        }
    }

    /// The lease's connection failed under a query of the proxy's own
    /// before the client's command: the session ends with the error.
    pub(super) fn lost(&mut self, e: ProxyError) -> Fatal {
        tracing::warn!(tenant = %self.tenant.name, backend = %self.pool.key().backend, cause = %e, "backend connection lost under a lease");
        self.drop_lease();
        (
            1,
            ProxyError::new(Condition::BackendUnavailable, "Lost connection to the database server")
                .with_detail(e.to_string()),
        )
    }

    /// Discards the lease's connection (broken, or mid-reply).
    pub fn drop_lease(&mut self) {
        self.cancel.slot.set(None);
        self.lease = None;
        self.carry.lease_changed();
    }

    /// Borrows a connection if the session has none, and brings its
    /// tracked variables to the client's. A `KILL QUERY` for the session
    /// while it waits for one ends the wait: the statement does not run
    /// and answers 1317, as one the server interrupted.
    pub async fn conn(&mut self) -> Result<&mut MyConn, ProxyError> {
        self.leave_read_lease().await;
        if self.lease.is_none() {
            // What a split session is told of the lease (nothing when a
            // rule sends it to a named backend or another cluster).
            let told = match &self.ruled {
                Some(route) => gatehouse_core::split::ruled_decision(route, self.decision),
                None => Some(self.decision),
            };
            if let Some(d) = told {
                self.decision = d;
            }
            let intent = match (&self.ruled, self.split.as_deref()) {
                (Some(route), _) => gatehouse_core::topology::Intent::Ruled(route),
                (None, Some(split)) => split.intent(self.decision),
                (None, None) => gatehouse_core::topology::Intent::Write,
            };
            let interrupted = || ProxyError::new(Condition::Canceled, "Query execution was interrupted");
            // Usually a connection is lent at once: no wait, no clock read.
            let (waited, began) = self
                .core
                .lease_or_wait(
                    &self.endpoint,
                    &mut self.pool,
                    self.cap.as_ref(),
                    intent,
                    &self.cancel.slot,
                    &mut self.clusters,
                )
                .await;
            let mut lease = match waited {
                LeaseWait::Done(Ok(lease)) => lease,
                LeaseWait::Done(Err(e)) => {
                    return Err(e);
                }
                LeaseWait::Cancelled => return Err(interrupted()),
            };
            self.inspect.leased();
            if !self.cancel.slot.publish(Some(lease.conn().cancel.clone())) {
                // A KILL QUERY came as the connection was handed over.
                lease.recycle();
                return Err(interrupted());
            }
            let lid = lease.conn().last_insert_id;
            if let (Some(split), Some(d)) = (self.split.as_deref_mut(), told) {
                split.leased(d, self.endpoint.read_your_writes);
            }
            self.lease = Some(lease);
            self.lease_wait = began.map_or(std::time::Duration::ZERO, |b| b.elapsed());
            self.inspect.meter().lease_waited(self.lease_wait);
            self.carry.lease_changed();
            self.lid_lease_started(lid);
        }
        let Some(lease) = self.lease.as_mut() else {
            return Err(ProxyError::new(Condition::Internal, "no backend connection"));
        };
        let conn = lease.conn();
        if let Some(sql) = self.vars.replay_sql(&conn.vars, conn.is_mariadb(), conn.caps) {
            if let Err(e) = conn.query(&sql).await {
                // Nothing of the client's ran; the connection is not reused.
                self.drop_lease();
                return Err(e);
            }
            conn.take_vars(self.vars.clone()).await;
            self.carry.lease_changed();
        }
        let Some(lease) = self.lease.as_mut() else {
            return Err(ProxyError::new(Condition::Internal, "no backend connection"));
        };
        Ok(lease.conn())
    }

    /// After a `SET` the proxy cannot follow (an expression, a parameter:
    /// the session is pinned), the connection's `sql_mode` and character
    /// set may differ from those its prepared statements were parsed under,
    /// so they are closed: a statement the client prepares next is parsed
    /// anew, as on a direct connection.
    pub async fn reparse_prepared(&mut self) {
        if let Some(lease) = self.lease.as_mut() {
            lease.conn().close_all_prepared().await;
        }
    }
}
