//! What all pools on one backend share: a cap on connections, a percentage
//! of the server's own `max_connections` (so the proxy never takes every
//! slot the server has), and a cap on how many of them may sit idle.
//!
//! When the cap is full, a lease waits for a place, first come, first
//! served across the backend's pools (so one busy tenant cannot starve the
//! others). What frees a place differs by engine:
//! * an engine that switches connections between tenants
//!   ([`Engine::SWITCHES`], MySQL) hands a connection coming back to the
//!   first waiter, whichever pool it came from ([`super::idle`]), and the
//!   waiter's pool switches it;
//! * otherwise (PostgreSQL), while a lease waits no connection of another
//!   pool stays idle on this backend: it is closed as it comes back, and
//!   its place goes to the first waiter; with no waiter, a lease that needs
//!   a place closes the connection idle longest on the backend.
//!
//! It also counts, for `/metrics` and the console ([`BackendConnects`]),
//! the connections its pools opened, failed to open, switched and closed,
//! and the time leases spent in each phase of getting a connection.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::idle::{Handed, Waiter};
use super::{Capacity, Pool, Pools};
use crate::config::ClusterSettings;
use crate::engine::Engine;
use crate::error::{Condition, ProxyError};

/// A pool on the backend, with its count of idle connections (read
/// without waking the pool).
pub(super) type PoolEntry<E> = (Weak<Pool<E>>, Arc<AtomicUsize>);

pub struct BackendShare<E: Engine> {
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
    /// The pools on this backend (a pool the set dropped is pruned as the
    /// list is read).
    pub(super) pools: Mutex<Vec<PoolEntry<E>>>,
    /// Leases waiting for a connection to be handed to them, oldest first
    /// (engines that switch connections only).
    pub(super) handoff: Mutex<VecDeque<Waiter<E>>>,
    pub(super) counts: Arc<ShareCounts>,
}

/// What one backend's pools did, counted (read by scrapes and the console).
#[derive(Default)]
pub struct ShareCounts {
    /// Connections opened (and initialized), and attempts that failed.
    opened: AtomicU64,
    open_failed: AtomicU64,
    /// Connections moved to another pool (tenant), and moves that failed
    /// (the connection was closed).
    switched: AtomicU64,
    switch_failed: AtomicU64,
    /// Connections closed, for whatever reason.
    pub(super) closed: AtomicU64,
    /// Nanoseconds and counts of each phase a lease can go through
    /// besides taking an idle connection of its own pool.
    phases: [PhaseCount; 3],
}

#[derive(Default)]
struct PhaseCount {
    nanos: AtomicU64,
    count: AtomicU64,
}

/// A phase of getting a backend connection, beyond taking an idle one of
/// the lease's own pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a place under the backend's connection cap (or for a
    /// connection handed over).
    Place,
    /// Opening a new connection: connect, TLS, authentication, `init_query`.
    Open,
    /// Moving a connection of another pool to the lease's (the engine's
    /// switch and `init_query`).
    Switch,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Place, Phase::Open, Phase::Switch];

    /// The label `/metrics` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Place => "place",
            Phase::Open => "open",
            Phase::Switch => "switch",
        }
    }
}

impl ShareCounts {
    pub(super) fn phase(&self, phase: Phase, took: Duration) {
        let p = &self.phases[phase as usize];
        p.nanos
            .fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        p.count.fetch_add(1, Ordering::Relaxed);
    }

    /// What opening a connection to the backend took on average (zero
    /// before the first open).
    pub(super) fn open_cost(&self) -> Duration {
        let p = &self.phases[Phase::Open as usize];
        let count = p.count.load(Ordering::Relaxed);
        Duration::from_nanos(p.nanos.load(Ordering::Relaxed).checked_div(count).unwrap_or(0))
    }

    /// A pool of the backend opened a connection, or failed to.
    pub(super) fn open(&self, ok: bool) {
        let counter = if ok { &self.opened } else { &self.open_failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection was switched to another pool, or failed to be.
    pub(super) fn switch(&self, ok: bool) {
        let counter = if ok { &self.switched } else { &self.switch_failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What one backend's share counted, as a scrape reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendConnects {
    pub cluster: String,
    pub backend: String,
    pub opened: u64,
    pub failed: u64,
    /// Connections moved to another tenant's pool, and moves that failed.
    pub switched: u64,
    pub switch_failed: u64,
    pub closed: u64,
    /// Per [`Phase::ALL`]: the time leases spent in it, and how many did.
    pub phases: [(Duration, u64); 3],
    /// The most connections the proxy opens to it, when known.
    pub cap: Option<usize>,
}

/// The least a waiting lease waits before it looks at the idle connections
/// again itself (see [`BackendShare::acquire`]): a floor under the mean
/// time to open a connection, which is zero before the first open.
const NUDGE_FIRST: Duration = Duration::from_millis(1);

/// What a lease that needs a connection beyond its pool's idle ones gets.
pub(super) enum Place<E: Engine> {
    /// A place for a new connection (`None`: the backend's cap is unknown,
    /// or the connection closed for it had been opened before it was known).
    Slot(Option<OwnedSemaphorePermit>),
    /// A connection another pool handed over while the lease waited.
    Conn(Handed<E>),
}

/// Counts one waiter while it waits (a cancelled wait included).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        // SeqCst: a connection coming back either sees this wait, or this
        // wait's look at the idle connections sees it (`idle.rs`).
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<E: Engine> BackendShare<E> {
    pub fn new(cluster: &ClusterSettings, backend: &str, server_max: Option<u32>) -> Self {
        let share = Self {
            backend: backend.to_owned(),
            max_connections_percent: AtomicU32::new(cluster.max_connections_percent),
            max_idle_percent: AtomicU32::new(cluster.max_idle_percent),
            slots: OnceLock::new(),
            max_idle: AtomicUsize::new(usize::MAX),
            idle: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            pools: Mutex::new(Vec::new()),
            handoff: Mutex::new(VecDeque::new()),
            counts: Arc::default(),
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

    /// Whether a lease that finds no idle connection of its own pool
    /// should open one rather than switch another pool's: while the cap
    /// has a free place and every connection the backend has, plus this
    /// one, could sit idle under the idle cap. A tenant then keeps connections of its own at light load
    /// (a lease that finds one skips the switch's round trip), and past
    /// that point connections move between tenants instead of being
    /// opened, so nothing is opened only to be closed as it comes back.
    /// False while the server's limit is unknown (connections then move).
    pub(super) fn room_to_keep(&self) -> bool {
        let Some((slots, _)) = self.slots.get() else {
            return false;
        };
        let used = slots.in_use();
        used < slots.size() && used < self.max_idle.load(Ordering::Relaxed)
    }

    /// Whether a lease waits for a place on this backend now.
    pub(super) fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// A place for one more connection for a lease of `pool`, else a wait
    /// until `deadline` for a place or (`switching`: the pool takes other
    /// pools' connections) a connection handed over. Without switching, an
    /// idle connection of another pool is closed first if that makes room.
    pub(super) async fn acquire(
        &self,
        pool: &Arc<Pool<E>>,
        switching: bool,
        deadline: tokio::time::Instant,
    ) -> Result<Place<E>, ProxyError> {
        let Some((slots, server_max)) = self.slots.get() else {
            return Ok(Place::Slot(None));
        };
        let sem = slots.semaphore();
        loop {
            if let Ok(p) = sem.clone().try_acquire_owned() {
                return Ok(Place::Slot(Some(p)));
            }
            // A switching lease took every idle connection it could
            // before coming here, unless others wait: then it queues.
            if switching || !self.close_idle_longest() {
                break;
            }
        }
        let started = std::time::Instant::now();
        let waited = {
            let mut handed = None;
            if E::SWITCHES {
                let (tx, rx) = oneshot::channel();
                self.handoff
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_back(Waiter {
                        pool: Arc::downgrade(pool),
                        tx,
                        wants_place: !switching,
                        blocked: None,
                    });
                handed = Some(rx);
            }
            let _waiting = Waiting::new(&self.waiting);
            if E::SWITCHES {
                // A connection may have come back between the lease's look
                // at the idle ones and this wait: it goes to the first in line.
                std::sync::atomic::fence(Ordering::SeqCst);
                self.hand_over_idle();
            } else {
                // A connection may have gone idle between the last try and
                // the count above; room made now goes to this wait.
                self.close_idle_longest();
            }
            let place = async {
                let acquired = sem.clone().acquire_owned();
                let Some(rx) = handed.as_mut() else {
                    return acquired.await.ok().map(|p| Place::Slot(Some(p)));
                };
                tokio::pin!(acquired);
                // Once a waiter at the front has found only other kinds
                // idle for what an open takes, the hand-over closes one
                // for it (`idle.rs`): it looks again now and then (every
                // open's time, doubling), in case nothing comes back.
                let mut every = self.counts.open_cost().max(NUDGE_FIRST);
                let nudge = tokio::time::sleep(every);
                tokio::pin!(nudge);
                loop {
                    tokio::select! {
                        p = &mut acquired => return p.ok().map(|p| Place::Slot(Some(p))),
                        c = &mut *rx => return c.ok(),
                        () = &mut nudge => {
                            self.hand_over_idle();
                            every = every.saturating_mul(2);
                            nudge.as_mut().reset(tokio::time::Instant::now() + every);
                        }
                    }
                }
            };
            let got = tokio::time::timeout_at(deadline, place).await.ok().flatten();
            // A connection handed over just as the wait ended is taken
            // rather than lost (a place taken with it goes back).
            match handed.as_mut().map(|rx| {
                rx.close();
                rx.try_recv()
            }) {
                Some(Ok(c)) => Some(c),
                _ => got,
            }
        };
        self.counts.phase(Phase::Place, started.elapsed());
        waited.ok_or_else(|| {
            ProxyError::new(
                Condition::TooManyConnections,
                format!(
                    "backend connection limit reached: {} connections to {} (max_connections_percent of the server's max_connections = {server_max})",
                    slots.size(),
                    self.backend
                ),
            )
        })
    }

    /// A connection becomes idle; false if that would exceed the idle cap
    /// or (engines that do not switch) a lease waits for a place on this
    /// backend: the caller then closes it, and the place goes to the first
    /// waiter.
    pub fn idle_entered(&self) -> bool {
        if !E::SWITCHES && self.waiting.load(Ordering::Acquire) > 0 {
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

    fn connects(&self, cluster: &str) -> BackendConnects {
        let c = &self.counts;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BackendConnects {
            cluster: cluster.to_owned(),
            backend: self.backend.clone(),
            opened: load(&c.opened),
            failed: load(&c.open_failed),
            switched: load(&c.switched),
            switch_failed: load(&c.switch_failed),
            closed: load(&c.closed),
            phases: [0, 1, 2].map(|i| (Duration::from_nanos(load(&c.phases[i].nanos)), load(&c.phases[i].count))),
            cap: self.cap(),
        }
    }
}

impl<E: Engine> Pools<E> {
    /// Connections opened, failed, switched and closed per backend, by
    /// cluster and backend (a backend whose pools never opened one is not
    /// listed).
    pub fn backend_connects(&self) -> Vec<BackendConnects> {
        let mut out: Vec<BackendConnects> = self
            .shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|((cluster, _), s)| s.connects(cluster))
            .collect();
        out.sort_by(|a, b| (&a.cluster, &a.backend).cmp(&(&b.cluster, &b.backend)));
        out
    }
}
