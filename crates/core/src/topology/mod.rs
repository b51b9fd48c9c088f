//! What the proxy knows about each backend *now*: its role (discovered by
//! probing, never configured), whether it is up, its replication lag and
//! position, the leases outstanding on it, and which backend is the
//! cluster's elected writer. Routers read it at every lease
//! ([`crate::router`]); the monitor (`core::monitor`) writes it; changes are
//! published on a watch channel so sessions waiting for a writer wake the
//! moment one appears.
//!
//! The writer is *elected*, not merely "the first writable backend": the
//! elected writer stays elected while it is up and writable, and a writer
//! that was lost is fenced. A fenced backend that comes back still saying
//! it is a writer is used again only if no other backend was elected in
//! the meantime (a crashed writer restarted in place); once another one
//! was (a replica promoted), the old writer is not used until it reports
//! read-only (split brain: its rows diverged).
//!
//! A cluster without `monitor_secret` cannot be probed: its first backend is
//! taken as the writer and the rest as readers, all assumed up.

mod choice;
pub mod operate;
mod registry;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::{Notify, watch};

use crate::config::ClusterSettings;
use crate::engine::Probe;
use crate::engine::position::Position;

pub use self::choice::{Choice, Intent, RouteTo, Why};
pub use self::registry::{ClusterCache, Topology};

/// Failover events kept per cluster for the admin API.
pub const EVENTS_KEPT: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Unknown,
    Writer,
    Reader,
}

/// Why a backend that says it is a writer may not be one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    None,
    /// It was the elected writer and was lost; no other writer since.
    Lost,
    /// Lost, and another backend was elected after it: not used as a
    /// writer until it reports read-only.
    Superseded,
}

#[derive(Debug, Clone)]
pub struct Health {
    pub role: Role,
    pub up: bool,
    pub max_connections: Option<u32>,
    /// Replication delay (replicas only), when the server reports it.
    pub lag: Option<Duration>,
    /// Replication position (PostgreSQL LSN, MariaDB GTID), when known.
    pub position: Option<String>,
    /// What a replica has replayed, as of its last probe.
    pub replayed: Option<Position>,
    pub fence: Fence,
    /// The last probe's error while the backend fails.
    pub last_error: Option<String>,
    failures: u32,
    successes: u32,
}

pub struct BackendState {
    pub addr: String,
    health: Mutex<Health>,
    /// Leases outstanding on this backend now, across its pools.
    pub leases: Arc<AtomicUsize>,
    /// Leases routed to it so far.
    pub routed: AtomicU64,
    /// Drained by an operator: no new leases.
    pub draining: AtomicBool,
    /// Read-only balancing weight (the cluster's `weights`, 1 by default).
    pub weight: AtomicU32,
    /// The probe failure logged last and when, while probes fail.
    failure_logged: Mutex<Option<(Instant, String)>>,
}

impl BackendState {
    fn new(addr: &str, role: Role, up: bool, weight: u32) -> Self {
        Self {
            addr: addr.to_owned(),
            health: Mutex::new(Health {
                role,
                up,
                max_connections: None,
                lag: None,
                position: None,
                replayed: None,
                fence: Fence::None,
                last_error: None,
                failures: 0,
                successes: 0,
            }),
            leases: Arc::new(AtomicUsize::new(0)),
            routed: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            weight: AtomicU32::new(weight.max(1)),
            failure_logged: Mutex::new(None),
        }
    }

    /// Whether a probe's failure (`None`: it succeeded) should be logged
    /// now: the first of a run of failures, one with another error than
    /// the one logged, or the same error again once `every` has passed
    /// since it was. A success ends the run.
    pub fn failure_to_log(&self, error: Option<&str>, now: Instant, every: Duration) -> bool {
        let mut logged = self.failure_logged.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(error) = error else {
            *logged = None;
            return false;
        };
        let due = match logged.as_ref() {
            None => true,
            Some((at, last)) => last != error || now.saturating_duration_since(*at) >= every,
        };
        if due {
            *logged = Some((now, error.to_owned()));
        }
        due
    }

    pub fn health(&self) -> Health {
        self.health.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records one probe; returns whether `up` changed.
    fn record(&self, result: Result<Probe, String>, to_down: u32, to_up: u32) -> bool {
        let mut h = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let was_up = h.up;
        match result {
            Ok(p) => {
                let first = h.role == Role::Unknown && h.failures == 0;
                h.failures = 0;
                h.successes = h.successes.saturating_add(1);
                h.role = if p.writable { Role::Writer } else { Role::Reader };
                h.max_connections = p.max_connections;
                h.lag = p.lag;
                h.position = p.position;
                h.replayed = p.replayed;
                h.last_error = None;
                if !h.up && (first || h.successes >= to_up) {
                    h.up = true;
                }
            }
            Err(e) => {
                h.successes = 0;
                h.failures = h.failures.saturating_add(1);
                h.last_error = Some(e);
                if h.failures >= to_down {
                    h.up = false;
                }
            }
        }
        was_up != h.up
    }

    /// A replica's replay position read outside the probes (on a
    /// connection lent for a read): kept when it is further along.
    pub fn note_replayed(&self, position: Position) {
        let mut h = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        if h.replayed.as_ref().is_none_or(|old| position.covers(old)) {
            h.replayed = Some(position);
        }
    }

    fn set_fence(&self, fence: Fence) {
        self.health.lock().unwrap_or_else(PoisonError::into_inner).fence = fence;
    }
}

/// A writer change, for the admin API and metrics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FailoverEvent {
    /// Seconds since the Unix epoch when the writer was lost.
    pub lost_at: f64,
    pub lost: Option<String>,
    /// The writer elected after it, and when (None while there is none).
    pub elected: Option<String>,
    pub elected_at: Option<f64>,
    /// From loss to the new writer, in seconds.
    pub seconds_without_writer: Option<f64>,
}

pub struct ClusterState {
    pub name: String,
    /// The cluster's settings now (a reload swaps them; the monitor, the
    /// router's hold and switchover read them from here).
    settings: ArcSwap<ClusterSettings>,
    /// The backends now (a reload may add or remove some); read lock-free.
    backends: ArcSwap<Vec<Arc<BackendState>>>,
    /// The elected writer, if any; read lock-free.
    writer: ArcSwapOption<BackendState>,
    /// Serializes elections.
    election: Mutex<Election>,
    /// Bumped on every change a waiting session may care about.
    version: watch::Sender<u64>,
    /// Asks the monitor for a probe round now (a lease could not connect).
    pub probe_now: Notify,
    /// Sessions waiting for a backend to route to.
    pub waiting: AtomicUsize,
    /// Leases routed, by [`Why`] (in the order of [`Why::ALL`]).
    routed_why: [AtomicU64; Why::ALL.len()],
    /// Ties between equally loaded readers go round.
    next_reader: AtomicUsize,
    /// Paused by an operator (the cluster, or some of its endpoints).
    paused: AtomicBool,
    any_endpoint_paused: AtomicBool,
    paused_endpoints: Mutex<std::collections::HashSet<String>>,
}

#[derive(Default)]
struct Election {
    /// When the writer was lost, while there is none.
    lost: Option<(Instant, SystemTime, Option<String>)>,
    events: VecDeque<FailoverEvent>,
}

/// The role of the `i`th configured backend before any probe: unknown when
/// the cluster is probed; otherwise the first is taken as the writer.
fn initial_role(probed: bool, i: usize) -> Role {
    match (probed, i) {
        (true, _) => Role::Unknown,
        (false, 0) => Role::Writer,
        (false, _) => Role::Reader,
    }
}

/// `addr`'s weight in `weights` (1 when absent).
fn weight_of(weights: &std::collections::BTreeMap<String, u32>, addr: &str) -> u32 {
    weights.get(addr).copied().unwrap_or(1).max(1)
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl ClusterState {
    pub fn new(c: &Arc<ClusterSettings>) -> Self {
        let probed = c.monitor.is_some();
        let backends: Vec<Arc<BackendState>> = c
            .backends
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                Arc::new(BackendState::new(
                    addr,
                    initial_role(probed, i),
                    !probed,
                    weight_of(&c.weights, addr),
                ))
            })
            .collect();
        let writer = (!probed).then(|| backends.first().cloned()).flatten();
        Self {
            name: c.name.clone(),
            settings: ArcSwap::new(c.clone()),
            backends: ArcSwap::from_pointee(backends),
            writer: ArcSwapOption::new(writer),
            election: Mutex::new(Election::default()),
            version: watch::channel(0).0,
            probe_now: Notify::new(),
            waiting: AtomicUsize::new(0),
            routed_why: Default::default(),
            next_reader: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            any_endpoint_paused: AtomicBool::new(false),
            paused_endpoints: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// The cluster's settings now.
    pub fn settings(&self) -> Arc<ClusterSettings> {
        self.settings.load_full()
    }

    /// Takes a reloaded cluster's settings (its backends go through
    /// [`Self::set_backends`]).
    pub fn set_settings(&self, c: &Arc<ClusterSettings>) {
        self.settings.store(c.clone());
        self.changed();
    }

    /// The elected writer, if any.
    pub fn writer(&self) -> Option<Arc<BackendState>> {
        self.writer.load_full()
    }

    /// `backend`'s own `max_connections`, when a probe has read it.
    pub fn max_connections(&self, backend: &str) -> Option<u32> {
        self.backends
            .load()
            .iter()
            .find(|b| b.addr == backend)?
            .health()
            .max_connections
    }

    /// The backends now.
    pub fn backends(&self) -> Arc<Vec<Arc<BackendState>>> {
        self.backends.load_full()
    }

    /// Takes the backend list of a reloaded configuration: backends kept
    /// keep their state, new ones start unknown and down until a probe
    /// finds them (unprobed clusters: up, the first the writer), removed
    /// ones are forgotten (a removed writer is unelected). Returns (added,
    /// removed) addresses.
    pub fn set_backends(
        &self,
        addrs: &[String],
        probed: bool,
        weights: &std::collections::BTreeMap<String, u32>,
    ) -> (Vec<String>, Vec<String>) {
        let e = self.election.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.backends.load_full();
        let mut added = Vec::new();
        let next: Vec<Arc<BackendState>> = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| match old.iter().find(|b| &b.addr == a) {
                Some(b) => b.clone(),
                None => {
                    added.push(a.clone());
                    Arc::new(BackendState::new(
                        a,
                        initial_role(probed, i),
                        !probed,
                        weight_of(weights, a),
                    ))
                }
            })
            .collect();
        for b in &next {
            b.weight.store(weight_of(weights, &b.addr), Ordering::Relaxed);
        }
        let removed: Vec<String> = old
            .iter()
            .filter(|b| !addrs.contains(&b.addr))
            .map(|b| b.addr.clone())
            .collect();
        if added.is_empty() && removed.is_empty() {
            return (added, removed);
        }
        let writer_gone = self.writer.load().as_ref().is_some_and(|w| removed.contains(&w.addr));
        let unprobed_writer = (!probed).then(|| next.first().cloned()).flatten();
        self.backends.store(Arc::new(next));
        if writer_gone || !probed {
            self.writer.store(unprobed_writer);
        }
        drop(e);
        self.changed();
        (added, removed)
    }

    /// Counts one lease routed to `choice`.
    pub fn routed(&self, choice: &Choice) {
        choice.backend.routed.fetch_add(1, Ordering::Relaxed);
        let i = Why::ALL.iter().position(|w| *w == choice.why).unwrap_or(0);
        if let Some(n) = self.routed_why.get(i) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Leases routed so far, by reason.
    pub fn routed_by_reason(&self) -> Vec<(&'static str, u64)> {
        Why::ALL
            .iter()
            .zip(&self.routed_why)
            .map(|(w, n)| (w.name(), n.load(Ordering::Relaxed)))
            .collect()
    }

    /// A receiver that sees every later change of this cluster's state.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    fn changed(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// Records one probe of `b`; returns whether it went up or down.
    pub fn record(&self, b: &BackendState, result: Result<Probe, String>) -> bool {
        let (to_down, to_up) = {
            let c = self.settings.load();
            (c.health_check_failures, c.health_check_successes)
        };
        let flipped = b.record(result, to_down, to_up);
        if flipped {
            self.changed();
        }
        flipped
    }

    /// Elects the writer from what the probes found (see the module
    /// comment); returns whether the writer changed.
    pub fn elect(&self) -> bool {
        let mut e = self.election.lock().unwrap_or_else(PoisonError::into_inner);
        let backends = self.backends.load_full();
        // A fenced backend that now says it is a replica is safe again.
        for b in backends.iter() {
            let h = b.health();
            if h.fence != Fence::None && h.up && h.role == Role::Reader {
                tracing::info!(cluster = %self.name, backend = %b.addr, "a former writer reports read-only: no longer fenced");
                b.set_fence(Fence::None);
            }
        }
        let health: Vec<Health> = backends.iter().map(|b| b.health()).collect();
        let writable = |i: usize| health[i].up && health[i].role == Role::Writer;
        let current = self.writer.load_full();
        let current_at = current
            .as_ref()
            .and_then(|w| backends.iter().position(|b| Arc::ptr_eq(b, w)));
        if let Some(c) = current_at
            && writable(c)
        {
            for i in (0..health.len()).filter(|&i| i != c && writable(i) && health[i].fence == Fence::None) {
                tracing::warn!(cluster = %self.name, writer = %backends[c].addr, other = %backends[i].addr, "two backends accept writes: the elected writer keeps them");
            }
            return false;
        }
        let now = (Instant::now(), SystemTime::now());
        if let Some(lost) = &current {
            if current_at.is_some_and(|c| !health[c].up) {
                lost.set_fence(Fence::Lost);
            }
            tracing::warn!(cluster = %self.name, backend = %lost.addr, "writer lost");
            e.lost = Some((now.0, now.1, Some(lost.addr.clone())));
            self.writer.store(None);
        }
        let pick = (0..health.len())
            .filter(|&i| writable(i) && health[i].fence != Fence::Superseded)
            .min_by_key(|&i| (health[i].fence != Fence::None, i));
        let changed = current.is_some() || pick.is_some();
        if let Some(i) = pick {
            let elected = &backends[i];
            for (j, b) in backends.iter().enumerate() {
                if j != i && b.health().fence == Fence::Lost {
                    b.set_fence(Fence::Superseded);
                }
            }
            elected.set_fence(Fence::None);
            self.writer.store(Some(elected.clone()));
            if let Some((at, wall, lost)) = e.lost.take() {
                let took = at.elapsed();
                tracing::warn!(cluster = %self.name, writer = %elected.addr, seconds_without_writer = took.as_secs_f64(), "new writer elected");
                e.events.push_back(FailoverEvent {
                    lost_at: unix_seconds(wall),
                    lost,
                    elected: Some(elected.addr.clone()),
                    elected_at: Some(unix_seconds(now.1)),
                    seconds_without_writer: Some(took.as_secs_f64()),
                });
                while e.events.len() > EVENTS_KEPT {
                    e.events.pop_front();
                }
            } else {
                tracing::info!(cluster = %self.name, writer = %elected.addr, "writer elected");
            }
        }
        drop(e);
        if changed {
            self.changed();
        }
        changed
    }

    /// Failover events, oldest first; one still open (no writer yet) last.
    pub fn events(&self) -> Vec<FailoverEvent> {
        let e = self.election.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<FailoverEvent> = e.events.iter().cloned().collect();
        if let Some((_, wall, lost)) = &e.lost {
            out.push(FailoverEvent {
                lost_at: unix_seconds(*wall),
                lost: lost.clone(),
                elected: None,
                elected_at: None,
                seconds_without_writer: None,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests;
