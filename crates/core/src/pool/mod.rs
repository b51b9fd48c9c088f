//! Pools of warm backend connections, one per (cluster, backend, backend
//! user, database) so a connection is never shared across users or
//! databases. Borrowing returns a [`Lease`]: an RAII guard that gives the
//! connection back only through [`Lease::release`] (after the engine's reset)
//! or [`Lease::recycle`], and discards it if dropped any other way. Waiters
//! are served first come, first served (tokio's semaphore is fair) and give
//! up after the borrow timeout with an error that names the limit hit.
//!
//! Besides each pool's own size, all pools on one backend share a
//! [`BackendShare`]: at most `max_connections_percent` of the server's own
//! `max_connections`, of which at most `max_idle_percent` idle. Where the
//! engine can move a connection to another backend user or database
//! ([`Engine::SWITCHES`], MySQL's COM_CHANGE_USER), a lease whose pool has
//! no idle connection takes one of another pool on the backend and switches
//! it ([`Pool::adopt`]) rather than opening one, and a lease waiting for a
//! place gets the next connection that comes back on the backend
//! ([`idle`]): many tenants share one backend's few connections instead of
//! each opening its own.
//!
//! A reload changes the settings of pools in use ([`Pools::reconfigure`]):
//! sizes grow at once and shrink as connections come back; a changed
//! `init_query` replaces the connections as they come back.

mod capacity;
mod idle;
mod lease;
mod set;
mod share;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use arc_swap::ArcSwap;

pub use self::capacity::Capacity;
pub use self::lease::{Lease, TenantCap};
pub use self::set::Pools;
use self::share::Place;
pub use self::share::{BackendConnects, BackendShare, Phase};
use crate::config::{ClusterSettings, Secret};
use crate::engine::Engine;
use crate::error::{Condition, ProxyError};

/// An idle connection as the console lists it.
#[derive(Debug, Clone)]
pub struct IdleConn {
    /// Its own id on the server (PostgreSQL's pid, MySQL's thread id).
    pub server_id: u32,
    /// What its TLS session agreed on; `None` in plain text.
    pub tls: Option<Arc<str>>,
    pub age: std::time::Duration,
    pub idle_for: std::time::Duration,
    /// How many times it moved to another pool ([`Pool::adopt`]).
    pub switches: u32,
}

/// What a pool serves. The cluster is part of the key because two clusters
/// may list the same server with different pool settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub cluster: String,
    pub backend: String,
    pub user: String,
    pub database: String,
    /// Parameters its connections are opened with, in the order given, as
    /// a client's own startup would set them (the server's reset values
    /// for them): empty for the shared pools; a PostgreSQL session-mode
    /// client that sends startup parameters gets a pool of connections
    /// opened with exactly its set, so `RESET` and `pg_settings.reset_val`
    /// answer as on a direct connection.
    pub startup: Vec<(String, String)>,
}

/// A connection with what the pool needs to know about it.
struct Pooled<C> {
    conn: C,
    /// The credentials generation it was opened with (see [`Pool::rotate`]).
    generation: u64,
    created: Instant,
    idle_since: Instant,
    /// How many times it moved to another pool.
    switches: u32,
    /// Its place in the backend's connection limit (taken out when the
    /// connection is closed to make room for a waiter: the place goes to
    /// that waiter, see [`idle`]).
    slot: Option<OwnedSemaphorePermit>,
    /// Counts it in its pool's open connections (replaced when it moves
    /// to another pool).
    open: OpenMark,
    _closed: CloseMark,
}

/// Counts a connection's close in its backend's counts when it is dropped.
struct CloseMark(Arc<share::ShareCounts>);

impl Drop for CloseMark {
    fn drop(&mut self) {
        self.0.closed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts a connection in its pool's [`Pool::open_count`] for as long as it
/// lives, wherever it is (idle, lent, waiting for a cancel to land).
struct OpenMark(Arc<AtomicUsize>);

impl OpenMark {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for OpenMark {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct Pool<E: Engine> {
    key: PoolKey,
    /// Its cluster and backend user as the client list shows them (one
    /// allocation per pool; sessions keep a reference).
    route: Arc<crate::cancel::Route>,
    /// The credentials new connections use. When a secret's password
    /// changes, the generation moves on: connections of older generations
    /// finish the work they are lent for and are closed instead of reused.
    secret: Mutex<Arc<Secret>>,
    generation: AtomicU64,
    engine: Arc<E>,
    /// The cluster's settings now (a reload swaps them).
    cluster: ArcSwap<ClusterSettings>,
    /// Of those, what every lease and return looks at: `server_lifetime`
    /// and `server_idle_timeout` ([`Expiry`]), read without an `ArcSwap`
    /// load.
    expiry: Expiry,
    share: Arc<BackendShare<E>>,
    /// Shared with the pools of the same key but other startup
    /// parameters ([`PoolKey::startup`]): `pool.size` bounds the leases of
    /// a backend user and database however their clients started.
    permits: Arc<Capacity>,
    /// For a pool with startup parameters, the shared pool of its key,
    /// kept (with the permits) while this one lives.
    _base: Option<Arc<Pool<E>>>,
    /// Leases outstanding on the pool's backend, across all its pools (the
    /// topology's count, which read-only routing balances on).
    backend_leases: Arc<AtomicUsize>,
    /// Boxed so a connection moves between pool and lease as a pointer.
    /// Oldest at the front: the pool reuses the connection it gave back
    /// last, and another pool takes the one idle longest.
    idle: Mutex<VecDeque<Box<Pooled<E::Conn>>>>,
    /// Its length, readable without the lock (shared with the backend's
    /// share, which skips pools with none idle without waking them).
    idle_len: Arc<AtomicUsize>,
    /// Backend connections open now, idle or lent.
    open: Arc<AtomicUsize>,
    /// A switch to this pool failed since it last opened a connection:
    /// its leases open connections of their own instead of taking other
    /// pools' (a tenant whose database or credentials the server refuses
    /// must not use up the other tenants' connections one by one).
    switch_failed: AtomicBool,
}

impl<E: Engine> Pool<E> {
    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Its cluster and backend user, shared (what a session's entry in the
    /// client list keeps).
    pub fn route(&self) -> Arc<crate::cancel::Route> {
        self.route.clone()
    }

    /// Connections idle in the pool now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether a connection is idle in the pool now (read without its lock).
    pub fn has_idle(&self) -> bool {
        self.idle_len.load(Ordering::Relaxed) > 0
    }

    /// Backend connections this pool has open now, idle or lent: at most its
    /// size (once a reload's shrink has settled). (`idle_count() +
    /// leased_count()` can read one more for
    /// an instant: a connection coming back is idle before its lease's place
    /// is freed, so that no waiter opens a connection it does not need.)
    pub fn open_count(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The idle connections: each one's id on its server, and how long
    /// ago it was opened and last given back (the console's `SHOW SERVERS`).
    pub fn idle_servers(&self) -> Vec<IdleConn> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|p| IdleConn {
                server_id: E::server_id(&p.conn),
                tls: E::server_tls(&p.conn),
                age: p.created.elapsed(),
                idle_for: p.idle_since.elapsed(),
                switches: p.switches,
            })
            .collect()
    }

    /// Places lent out now (a lease whose connection is still being opened
    /// counts).
    pub fn leased_count(&self) -> usize {
        self.permits.in_use()
    }

    /// The pool's size now (`pool.size`, as last reloaded).
    pub fn size(&self) -> usize {
        self.permits.size()
    }

    /// Takes a reloaded cluster's settings: the size applies at once
    /// (shrinking as connections come back), timeouts from the next lease;
    /// with another `init_query` or backend TLS (a mode, a CA or a client
    /// certificate), connections are replaced as they come back.
    fn reconfigure(&self, cluster: &Arc<ClusterSettings>) {
        self.expiry.set(cluster);
        let old = self.cluster.swap(cluster.clone());
        self.permits.resize(cluster.pool_size as usize);
        if old.init_query != cluster.init_query || old.backend_tls != cluster.backend_tls {
            self.retire();
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The credentials this pool's new connections use.
    pub fn secret(&self) -> Arc<Secret> {
        self.secret.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The name of the secret whose credentials this pool's connections use.
    pub fn secret_name(&self) -> String {
        self.secret.lock().unwrap_or_else(PoisonError::into_inner).name.clone()
    }

    /// Closes the idle connections and marks the lent ones to be closed when
    /// they come back (their backend went down, or stopped being the
    /// writer): none is handed out again. Returns how many were closed.
    pub fn retire(&self) -> usize {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.sweep()
    }

    fn lent(self: &Arc<Self>, pooled: Box<Pooled<E::Conn>>, permit: OwnedSemaphorePermit) -> Lease<E> {
        // SeqCst: a switchover's drain must see it, or the router's look
        // after it must see the pause or the drain (`router::still_routable`).
        self.backend_leases.fetch_add(1, Ordering::SeqCst);
        Lease {
            pooled: Some(pooled),
            pool: self.clone(),
            _permit: permit,
            _tenant: None,
        }
    }

    /// Uses `secret` for new connections if its user or password differ
    /// from the current one; returns whether they did.
    pub fn rotate(&self, secret: &Arc<Secret>) -> bool {
        let mut current = self.secret.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::ptr_eq(&current, secret)
            || (current.user == secret.user && current.password.expose() == secret.password.expose())
        {
            return false;
        }
        *current = secret.clone();
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.switch_failed.store(false, Ordering::Relaxed);
        drop(current);
        // Idle connections of the old generation go now.
        self.sweep();
        true
    }

    /// Whether `p` may not be used again: opened with older credentials,
    /// or past its lifetime or idle timeout. `now` is read once, when a
    /// timeout needs it, and kept for the caller's next look.
    fn expired(&self, p: &Pooled<E::Conn>, now: &mut Option<Instant>) -> bool {
        if p.generation != self.generation() {
            return true;
        }
        let (lifetime, idle_timeout) = self.expiry.get();
        if lifetime.is_none() && idle_timeout.is_none() {
            return false;
        }
        let now = *now.get_or_insert_with(Instant::now);
        lifetime.is_some_and(|l| now.duration_since(p.created) >= l)
            || idle_timeout.is_some_and(|t| now.duration_since(p.idle_since) >= t)
    }

    /// Borrows a connection: an idle one if any, else a new one, waiting at
    /// most the borrow timeout for a free slot in this pool and on the backend.
    pub async fn lease(self: &Arc<Self>) -> Result<Lease<E>, ProxyError> {
        let deadline = tokio::time::Instant::now() + self.cluster.load().borrow_timeout;
        self.lease_until(deadline).await
    }

    /// [`Pool::lease`] for a tenant with a cap on the backend connections
    /// its sessions hold at once: a slot of the cap is taken first (within
    /// the same borrow timeout) and travels with the lease.
    pub async fn lease_for(self: &Arc<Self>, cap: Option<&TenantCap>) -> Result<Lease<E>, ProxyError> {
        let deadline = tokio::time::Instant::now() + self.cluster.load().borrow_timeout;
        let Some(cap) = cap else {
            return self.lease_until(deadline).await;
        };
        let slot = self
            .wait_slot(cap.slots.semaphore(), deadline, || {
                format!(
                    "limit of {} backend connections for user \"{}\"",
                    cap.slots.size(),
                    cap.tenant
                )
            })
            .await?;
        let mut lease = self.lease_until(deadline).await?;
        lease._tenant = Some(slot);
        Ok(lease)
    }

    /// A slot of `slots`, waiting until `deadline` (first come, first
    /// served); then 53300 naming the limit. No timer when a slot is free.
    async fn wait_slot(
        &self,
        slots: &Arc<Semaphore>,
        deadline: tokio::time::Instant,
        limit: impl FnOnce() -> String,
    ) -> Result<OwnedSemaphorePermit, ProxyError> {
        let waited = match slots.clone().try_acquire_owned() {
            Ok(p) => Ok(Ok(p)),
            Err(_) => tokio::time::timeout_at(deadline, slots.clone().acquire_owned()).await,
        };
        match waited {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err(ProxyError::new(Condition::Shutdown, "the pool is closed")),
            Err(_) => Err(ProxyError::new(
                Condition::TooManyConnections,
                format!(
                    "no backend connection became free within {:?} ({})",
                    self.cluster.load().borrow_timeout,
                    limit()
                ),
            )),
        }
    }

    /// A lease without waiting, when one is to be had at once: a place is
    /// free in the pool (and in the tenant's cap, if any) and an idle
    /// connection is usable. `None` otherwise, having taken nothing (an
    /// idle connection found expired or unusable is closed, as
    /// [`Pool::lease_for`] would). The common case of a pooled
    /// transaction, with no future, no timer and no clock read beyond the
    /// idle connections' expiry.
    pub fn try_lease(self: &Arc<Self>, cap: Option<&TenantCap>) -> Option<Lease<E>> {
        if !self.has_idle() {
            return None;
        }
        let tenant = match cap {
            Some(cap) => Some(cap.slots.semaphore().clone().try_acquire_owned().ok()?),
            None => None,
        };
        let permit = self.permits.semaphore().clone().try_acquire_owned().ok()?;
        let p = self.pop_usable()?;
        let mut lease = self.lent(p, permit);
        lease._tenant = tenant;
        Some(lease)
    }

    /// An idle connection neither expired nor unusable, closing those that
    /// are.
    fn pop_usable(&self) -> Option<Box<Pooled<E::Conn>>> {
        let mut now = None;
        while let Some(mut p) = self.pop_idle() {
            if !self.expired(&p, &mut now) && self.engine.is_usable(&mut p.conn) {
                return Some(p);
            }
        }
        None
    }

    async fn lease_until(self: &Arc<Self>, deadline: tokio::time::Instant) -> Result<Lease<E>, ProxyError> {
        let permit = self
            .wait_slot(self.permits.semaphore(), deadline, || {
                format!(
                    "pool limit of {} connections for user \"{}\" on database \"{}\"",
                    self.permits.size(),
                    self.key.user,
                    self.key.database
                )
            })
            .await?;
        if let Some(p) = self.pop_usable() {
            return Ok(self.lent(p, permit));
        }
        // Each pass either returns or closes a connection that could not
        // be switched, so it ends (at the latest at the deadline).
        loop {
            let switching = E::SWITCHES && !self.switch_failed.load(Ordering::Relaxed);
            // Another pool's idle connection, unless leases wait for one
            // already (they come first) or the backend has room for one
            // more of this pool's own.
            if switching
                && !self.share.has_waiters()
                && !self.share.room_to_keep()
                && let Some(handed) = self.share.take_idle(Some(self))
            {
                // Boxed, as the open below: the rare, large futures stay out
                // of the lease's own, which a waiting session boxes.
                if let Some(p) = Box::pin(self.adopt(handed)).await {
                    return Ok(self.lent(p, permit));
                }
                continue;
            }
            self.share.make_room_beside(self);
            match Box::pin(self.share.acquire(self, switching, deadline)).await? {
                Place::Slot(slot) => return Box::pin(self.open_new(slot)).await.map(|p| self.lent(p, permit)),
                Place::Conn(handed) => {
                    if let Some(p) = Box::pin(self.adopt(handed)).await {
                        return Ok(self.lent(p, permit));
                    }
                }
            }
        }
    }

    /// Opens a new connection in `slot` of the backend's cap.
    async fn open_new(&self, slot: Option<OwnedSemaphorePermit>) -> Result<Box<Pooled<E::Conn>>, ProxyError> {
        let started = Instant::now();
        let generation = self.generation();
        let secret = self.secret.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let cluster = self.cluster.load_full();
        let opened = async {
            let mut conn = self
                .engine
                .connect(
                    &self.key.backend,
                    &secret,
                    &self.key.database,
                    &self.key.startup,
                    cluster.connect_timeout,
                    &cluster.backend_tls,
                )
                .await?;
            if let Some(sql) = &cluster.init_query {
                self.engine.initialize(&mut conn, sql).await?;
            }
            Ok(conn)
        }
        .await;
        let counts = &self.share.counts;
        counts.open(opened.is_ok());
        counts.phase(Phase::Open, started.elapsed());
        if opened.is_ok() {
            self.switch_failed.store(false, Ordering::Relaxed);
        }
        let now = Instant::now();
        Ok(Box::new(Pooled {
            conn: opened?,
            generation,
            created: started,
            idle_since: now,
            switches: 0,
            slot,
            open: OpenMark::new(&self.open),
            _closed: CloseMark(counts.clone()),
        }))
    }

    fn pop_idle(&self) -> Option<Box<Pooled<E::Conn>>> {
        let p = self.with_idle(VecDeque::pop_back);
        if p.is_some() {
            self.share.idle_left();
        }
        p
    }

    /// Changes the idle list, keeping [`Pool::idle_len`] in step.
    fn with_idle<R>(&self, change: impl FnOnce(&mut VecDeque<Box<Pooled<E::Conn>>>) -> R) -> R {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let r = change(&mut idle);
        self.idle_len.store(idle.len(), Ordering::Relaxed);
        r
    }

    /// Takes the connection idle longest (for another pool, or to close).
    fn pop_oldest(&self) -> Option<Box<Pooled<E::Conn>>> {
        let p = self.with_idle(VecDeque::pop_front);
        if p.is_some() {
            self.share.idle_left();
        }
        p
    }

    /// When the connection idle longest became idle.
    fn oldest_idle_since(&self) -> Option<Instant> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .front()
            .map(|p| p.idle_since)
    }

    fn push_idle(&self, mut p: Box<Pooled<E::Conn>>) {
        let mut now = None;
        if self.expired(&p, &mut now) || !self.share.idle_entered() {
            return; // dropping closes it and frees its backend slot
        }
        p.idle_since = now.unwrap_or_else(Instant::now);
        self.with_idle(|idle| idle.push_back(p));
        if E::SWITCHES {
            // Leases waiting for a place get it (see `idle.rs` for the order).
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.share.has_waiters() {
                self.share.hand_over_idle();
            }
        }
    }

    /// Puts back a connection taken from the idle list that nobody took
    /// after all, where it was (idle longest), without handing it over.
    fn put_back(&self, p: Box<Pooled<E::Conn>>) {
        if self.share.idle_entered() {
            self.with_idle(|idle| idle.push_front(p));
        }
    }

    /// Closes idle connections past their lifetime or idle timeout; returns
    /// how many were closed.
    pub fn sweep(&self) -> usize {
        let mut now = Some(Instant::now());
        let closed = self.with_idle(|idle| {
            let before = idle.len();
            idle.retain(|p| !self.expired(p, &mut now));
            before - idle.len()
        });
        for _ in 0..closed {
            self.share.idle_left();
        }
        closed
    }
}

/// A pool's `server_lifetime` and `server_idle_timeout`, in nanoseconds
/// ([`Expiry::NONE`]: not set), as atomics a reload stores.
struct Expiry {
    lifetime: AtomicU64,
    idle_timeout: AtomicU64,
}

impl Expiry {
    const NONE: u64 = u64::MAX;

    fn new(cluster: &ClusterSettings) -> Self {
        let e = Self {
            lifetime: AtomicU64::new(Self::NONE),
            idle_timeout: AtomicU64::new(Self::NONE),
        };
        e.set(cluster);
        e
    }

    fn set(&self, cluster: &ClusterSettings) {
        let nanos = |d: Option<std::time::Duration>| {
            d.map_or(Self::NONE, |d| u64::try_from(d.as_nanos()).unwrap_or(Self::NONE - 1))
        };
        self.lifetime.store(nanos(cluster.server_lifetime), Ordering::Relaxed);
        self.idle_timeout
            .store(nanos(cluster.server_idle_timeout), Ordering::Relaxed);
    }

    fn get(&self) -> (Option<std::time::Duration>, Option<std::time::Duration>) {
        let get = |a: &AtomicU64| match a.load(Ordering::Relaxed) {
            Self::NONE => None,
            n => Some(std::time::Duration::from_nanos(n)),
        };
        (get(&self.lifetime), get(&self.idle_timeout))
    }
}
