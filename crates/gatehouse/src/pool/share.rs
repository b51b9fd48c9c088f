//! What all pools on one backend share: a cap on connections, a percentage
//! of the server's own `max_connections` (so the proxy never takes every
//! slot the server has), and a cap on how many of them may sit idle.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::ClusterSettings;
use crate::error::{Condition, ProxyError};

/// Asks the pools on this backend to close one idle connection; true if one was.
pub type MakeRoom = Box<dyn Fn() -> bool + Send + Sync>;

pub struct BackendShare {
    backend: String,
    /// `None` when the server's limit is unknown (no monitor credentials).
    slots: Option<(Arc<Semaphore>, usize, u32)>,
    max_idle: usize,
    idle: AtomicUsize,
    make_room: MakeRoom,
}

impl BackendShare {
    pub fn new(cluster: &ClusterSettings, backend: &str, server_max: Option<u32>, make_room: MakeRoom) -> Self {
        let cap =
            server_max.map(|m| ((u64::from(m) * u64::from(cluster.max_connections_percent)) / 100).max(1) as usize);
        let max_idle = server_max
            .map(|m| ((u64::from(m) * u64::from(cluster.max_idle_percent)) / 100) as usize)
            .unwrap_or(usize::MAX);
        Self {
            backend: backend.to_owned(),
            slots: cap.zip(server_max).map(|(c, m)| (Arc::new(Semaphore::new(c)), c, m)),
            max_idle,
            idle: AtomicUsize::new(0),
            make_room,
        }
    }

    /// The most connections the proxy opens to this backend, if limited.
    pub fn cap(&self) -> Option<usize> {
        self.slots.as_ref().map(|(_, c, _)| *c)
    }

    /// A place for one more connection, closing an idle one of another pool
    /// if that makes room, else waiting until `deadline`.
    pub async fn acquire(&self, deadline: tokio::time::Instant) -> Result<Option<OwnedSemaphorePermit>, ProxyError> {
        let Some((sem, cap, server_max)) = &self.slots else {
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
        let mut current = self.idle.load(Ordering::Relaxed);
        loop {
            if current >= self.max_idle {
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
