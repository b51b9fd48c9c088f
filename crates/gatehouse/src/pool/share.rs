//! What all pools on one backend share: a cap on connections, a percentage
//! of the server's own `max_connections` (so the proxy never takes every
//! slot the server has), and a cap on how many of them may sit idle. While
//! a pool waits for a place under the cap, no connection of another pool
//! stays idle on this backend: it is closed as it comes back, and its
//! place goes to the first waiter. It also counts the connections its
//! pools opened and failed to open, for `/metrics` ([`BackendConnects`]).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{OnceLock, PoisonError};

use tokio::sync::OwnedSemaphorePermit;

use super::{Capacity, Pools};
use crate::config::ClusterSettings;
use crate::engine::Engine;
use crate::error::{Condition, ProxyError};

/// Asks the pools on this backend to close one idle connection; true if one was.
pub type MakeRoom = Box<dyn Fn() -> bool + Send + Sync>;

pub struct BackendShare {
    backend: String,
    max_connections_percent: AtomicU32,
    max_idle_percent: AtomicU32,
    /// Set once the server's limit is known (a probe read it); until then,
    /// and without monitor credentials, only pool sizes limit connections.
    /// With the server's `max_connections`.
    slots: OnceLock<(Capacity, u32)>,
    max_idle: AtomicUsize,
    idle: AtomicUsize,
    /// Leases waiting for a place under the cap now.
    waiting: AtomicUsize,
    make_room: MakeRoom,
    /// Connections opened (and initialized), and attempts that failed.
    opened: AtomicU64,
    open_failed: AtomicU64,
}

/// What one backend's share counted, as a scrape reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConnects {
    pub cluster: String,
    pub backend: String,
    pub opened: u64,
    pub failed: u64,
    /// The most connections the proxy opens to it, when known.
    pub cap: Option<usize>,
}

/// Counts one waiter while it waits (a cancelled wait included).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl BackendShare {
    pub fn new(cluster: &ClusterSettings, backend: &str, server_max: Option<u32>, make_room: MakeRoom) -> Self {
        let share = Self {
            backend: backend.to_owned(),
            max_connections_percent: AtomicU32::new(cluster.max_connections_percent),
            max_idle_percent: AtomicU32::new(cluster.max_idle_percent),
            slots: OnceLock::new(),
            max_idle: AtomicUsize::new(usize::MAX),
            idle: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            make_room,
            opened: AtomicU64::new(0),
            open_failed: AtomicU64::new(0),
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
        let (cap, max_idle) = self.limits(m);
        if self.slots.set((Capacity::new(cap), m)).is_ok() {
            self.max_idle.store(max_idle, Ordering::Relaxed);
            tracing::debug!(backend = %self.backend, server_max = m, cap, max_idle, "backend connection limit known");
        }
    }

    /// The connection cap and idle cap for a server limit of `server_max`.
    fn limits(&self, server_max: u32) -> (usize, usize) {
        let pct = |p: &AtomicU32| u64::from(server_max) * u64::from(p.load(Ordering::Relaxed)) / 100;
        (
            pct(&self.max_connections_percent).max(1) as usize,
            pct(&self.max_idle_percent) as usize,
        )
    }

    /// Takes a reloaded cluster's percentages: the cap grows at once and
    /// shrinks as connections close; the idle cap applies to connections
    /// coming back from now on.
    pub fn reconfigure(&self, cluster: &ClusterSettings) {
        self.max_connections_percent
            .store(cluster.max_connections_percent, Ordering::Relaxed);
        self.max_idle_percent.store(cluster.max_idle_percent, Ordering::Relaxed);
        if let Some((slots, m)) = self.slots.get() {
            let (cap, max_idle) = self.limits(*m);
            slots.resize(cap);
            self.max_idle.store(max_idle, Ordering::Relaxed);
        }
    }

    /// The most connections the proxy opens to this backend, if limited.
    pub fn cap(&self) -> Option<usize> {
        self.slots.get().map(|(c, _)| c.size())
    }

    /// A place for one more connection, closing an idle one of another pool
    /// if that makes room, else waiting until `deadline`.
    pub async fn acquire(&self, deadline: tokio::time::Instant) -> Result<Option<OwnedSemaphorePermit>, ProxyError> {
        let Some((slots, server_max)) = self.slots.get() else {
            return Ok(None);
        };
        let sem = slots.semaphore();
        loop {
            if let Ok(p) = sem.clone().try_acquire_owned() {
                return Ok(Some(p));
            }
            if !(self.make_room)() {
                break;
            }
        }
        let waited = {
            let _waiting = Waiting::new(&self.waiting);
            // A connection may have gone idle between the last try and
            // the count above; room made now goes to this wait.
            (self.make_room)();
            tokio::time::timeout_at(deadline, sem.clone().acquire_owned()).await
        };
        match waited {
            Ok(Ok(p)) => Ok(Some(p)),
            _ => Err(ProxyError::new(
                Condition::TooManyConnections,
                format!(
                    "backend connection limit reached: {} connections to {} (max_connections_percent of the server's max_connections = {server_max})",
                    slots.size(),
                    self.backend
                ),
            )),
        }
    }

    /// A connection becomes idle; false if that would exceed the idle cap
    /// or a lease waits for a place on this backend (the caller then
    /// closes it, and the place goes to the first waiter).
    pub fn idle_entered(&self) -> bool {
        if self.waiting.load(Ordering::Acquire) > 0 {
            return false;
        }
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

    /// A pool of the backend opened a connection, or failed to.
    pub fn count_open(&self, ok: bool) {
        let counter = if ok { &self.opened } else { &self.open_failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl<E: Engine> Pools<E> {
    /// Connections opened and failed per backend, by cluster and backend
    /// (a backend whose pools never opened one is not listed).
    pub fn backend_connects(&self) -> Vec<BackendConnects> {
        let mut out: Vec<BackendConnects> = self
            .shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((cluster, backend), s)| BackendConnects {
                cluster: cluster.clone(),
                backend: backend.clone(),
                opened: s.opened.load(Ordering::Relaxed),
                failed: s.open_failed.load(Ordering::Relaxed),
                cap: s.cap(),
            })
            .collect();
        out.sort_by(|a, b| (&a.cluster, &a.backend).cmp(&(&b.cluster, &b.backend)));
        out
    }
}
