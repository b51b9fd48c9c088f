//! What all pools on one backend share: a cap on connections, a percentage
//! of the server's own `max_connections` (so the proxy never takes every
//! slot the server has), and a cap on how many of them may sit idle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::ClusterSettings;
use crate::error::{Condition, ProxyError};

/// Asks the pools on this backend to close one idle connection; true if one was.
pub type MakeRoom = Box<dyn Fn() -> bool + Send + Sync>;

pub struct BackendShare {
    backend: String,
    max_connections_percent: u32,
    max_idle_percent: u32,
    /// Set once the server's limit is known (a probe read it); until then,
    /// and without monitor credentials, only pool sizes limit connections.
    slots: OnceLock<(Arc<Semaphore>, usize, u32)>,
    max_idle: AtomicUsize,
    idle: AtomicUsize,
    make_room: MakeRoom,
}

impl BackendShare {
    pub fn new(cluster: &ClusterSettings, backend: &str, server_max: Option<u32>, make_room: MakeRoom) -> Self {
        let share = Self {
            backend: backend.to_owned(),
            max_connections_percent: cluster.max_connections_percent,
            max_idle_percent: cluster.max_idle_percent,
            slots: OnceLock::new(),
            max_idle: AtomicUsize::new(usize::MAX),
            idle: AtomicUsize::new(0),
            make_room,
        };
        share.learn_server_max(server_max);
        share
    }

    /// Applies the server's `max_connections` once it is known.
    pub fn learn_server_max(&self, server_max: Option<u32>) {
        let Some(m) = server_max else { return };
        if self.slots.get().is_some() {
            return;
        }
        let cap = ((u64::from(m) * u64::from(self.max_connections_percent)) / 100).max(1) as usize;
        let max_idle = ((u64::from(m) * u64::from(self.max_idle_percent)) / 100) as usize;
        if self.slots.set((Arc::new(Semaphore::new(cap)), cap, m)).is_ok() {
            self.max_idle.store(max_idle, Ordering::Relaxed);
            tracing::debug!(backend = %self.backend, server_max = m, cap, max_idle, "backend connection limit known");
        }
    }

    /// The most connections the proxy opens to this backend, if limited.
    pub fn cap(&self) -> Option<usize> {
        self.slots.get().map(|(_, c, _)| *c)
    }

    /// A place for one more connection, closing an idle one of another pool
    /// if that makes room, else waiting until `deadline`.
    pub async fn acquire(&self, deadline: tokio::time::Instant) -> Result<Option<OwnedSemaphorePermit>, ProxyError> {
        let Some((sem, cap, server_max)) = self.slots.get() else {
            return Ok(None);
        };
        loop {
            if let Ok(p) = sem.clone().try_acquire_owned() {
                return Ok(Some(p));
            }
            if !(self.make_room)() {
                break;
            }
        }
        match tokio::time::timeout_at(deadline, sem.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(Some(p)),
            _ => Err(ProxyError::new(
                Condition::TooManyConnections,
                format!(
                    "backend connection limit reached: {cap} connections to {} (max_connections_percent of the server's max_connections = {server_max})",
                    self.backend
                ),
            )),
        }
    }

    /// A connection becomes idle; false if that would exceed the idle cap
    /// (the caller then closes it).
    pub fn idle_entered(&self) -> bool {
        let max = self.max_idle.load(Ordering::Relaxed);
        let mut current = self.idle.load(Ordering::Relaxed);
        loop {
            if current >= max {
                return false;
            }
            match self
                .idle
                .compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(c) => current = c,
            }
        }
    }

    /// An idle connection was taken or closed.
    pub fn idle_left(&self) {
        let _ = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| Some(c.saturating_sub(1)));
    }

    pub fn idle_count(&self) -> usize {
        self.idle.load(Ordering::Relaxed)
    }
}
