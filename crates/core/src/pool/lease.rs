//! A backend connection lent to one client ([`Lease`]): how it goes back
//! to its pool (recycled as it is, or released after the engine's reset),
//! and the tenant's cap a lease may hold a place of ([`TenantCap`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::OwnedSemaphorePermit;

use super::{Capacity, Pool, Pooled};
use crate::cancel::CANCEL_SETTLE_LIMIT;
use crate::engine::Engine;

/// A backend connection lent to one client. Dropping it discards the
/// connection; [`Lease::release`] resets it and [`Lease::recycle`] returns it.
pub struct Lease<E: Engine> {
    pub(super) pooled: Option<Box<Pooled<E::Conn>>>,
    pub(super) pool: Arc<Pool<E>>,
    pub(super) _permit: OwnedSemaphorePermit,
    /// The tenant's cap slot, when its backend connections are capped.
    pub(super) _tenant: Option<OwnedSemaphorePermit>,
}

impl<E: Engine> Drop for Lease<E> {
    fn drop(&mut self) {
        self.pool.backend_leases.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A tenant's cap on the backend connections its sessions hold at once.
#[derive(Clone)]
pub struct TenantCap {
    pub tenant: Arc<str>,
    /// Shared by the tenant's sessions; a reload resizes it.
    pub slots: Arc<Capacity>,
}

impl<E: Engine> Lease<E> {
    pub fn conn(&mut self) -> &mut E::Conn {
        // The option is only emptied by `release`/`recycle`, which consume the lease.
        match self.pooled.as_mut() {
            Some(p) => &mut p.conn,
            None => unreachable!("lease used after release"),
        }
    }

    pub fn pool(&self) -> &Arc<Pool<E>> {
        &self.pool
    }

    /// Returns the connection to the pool as it is: for a connection whose
    /// session state the caller knows to be safe for the next client
    /// (transaction pooling, at a transaction boundary).
    ///
    /// A connection with a cancel still on its way to it (see
    /// [`crate::cancel`]) waits for the cancel to land, off the session's
    /// task and still counted in the pool, before anyone else gets it; one
    /// whose cancel never lands is closed.
    pub fn recycle(mut self) {
        let Some(p) = self.pooled.take() else { return };
        let flight = E::cancel_flight(&p.conn);
        if flight.idle() {
            self.pool.push_idle(p);
            return;
        }
        let flight = flight.clone();
        self.pooled = Some(p);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if flight.settled(CANCEL_SETTLE_LIMIT).await {
                    self.recycle();
                }
            });
        }
    }

    /// Resets the connection and returns it to the pool; a connection whose
    /// reset fails, or whose cancel in flight never lands, is closed instead.
    pub async fn release(mut self) {
        if let Some(mut p) = self.pooled.take() {
            if !E::cancel_flight(&p.conn).idle() {
                let flight = E::cancel_flight(&p.conn).clone();
                if !flight.settled(CANCEL_SETTLE_LIMIT).await {
                    tracing::debug!("backend connection discarded: a cancel sent to it was not delivered");
                    return;
                }
            }
            match self.pool.engine.reset(&mut p.conn).await {
                Ok(()) => self.pool.push_idle(p),
                Err(e) => tracing::debug!(error = %e, "backend connection discarded after failed reset"),
            }
        }
    }
}
