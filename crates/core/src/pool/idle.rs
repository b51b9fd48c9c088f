//! The idle connections of one backend across its pools, as the
//! [`BackendShare`] sees them: which one a lease of another pool takes (one
//! of its own pool, else one of the same backend user, else the one idle
//! longest, so the connections of the tenants busy now are kept), and the
//! hand-over of connections to the leases waiting for a place, first come,
//! first served across pools (engines that switch connections between
//! tenants, [`crate::engine::Engine::SWITCHES`]), and the switch that
//! makes another pool's connection a lease's own ([`Pool::adopt`]). A
//! waiter that cannot take the idle connections there are (they were
//! opened with other startup parameters, which a switch keeps) gets the
//! place of one closed for it.
//!
//! Ordering: a lease that starts to wait is queued, counted (sequentially
//! consistent) and then looks at the idle connections; a connection coming
//! back is made idle, and then the count is read (after a sequentially
//! consistent fence). So either the waiter finds the connection, or the
//! connection's return finds the waiter: none waits beside an idle
//! connection until its deadline.

use std::cmp::Reverse;
use std::sync::{Arc, PoisonError, Weak};

use tokio::sync::oneshot;

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::share::Place;
use super::{BackendShare, OpenMark, Phase, Pool, Pooled};
use crate::engine::{Engine, SwitchError};

/// A connection taken from the idle list of `from`.
pub(super) struct Handed<E: Engine> {
    pub from: Arc<Pool<E>>,
    pub pooled: Box<Pooled<E::Conn>>,
}

/// A lease of `pool` waiting for a connection to be handed to it, or
/// (`wants_place`: its pool must open a connection of its own) for a place;
/// either may come as a place freed for it ([`Place::Slot`]).
pub(super) struct Waiter<E: Engine> {
    pub pool: Weak<Pool<E>>,
    pub tx: oneshot::Sender<Place<E>>,
    pub wants_place: bool,
    /// Since when, at the front of the line, it has found only
    /// connections of other kinds idle.
    pub blocked: Option<Instant>,
}

impl<E: Engine> BackendShare<E> {
    /// Counts `pool` among the pools on this backend.
    pub(super) fn register(&self, pool: &Arc<Pool<E>>) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools.retain(|(p, _)| p.strong_count() > 0);
        pools.push((Arc::downgrade(pool), pool.idle_len.clone()));
    }

    /// The pools on this backend with idle connections now (a pool with
    /// none is passed over on its count alone).
    fn pools_with_idle(&self) -> Vec<Arc<Pool<E>>> {
        self.pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, idle)| idle.load(std::sync::atomic::Ordering::Relaxed) > 0)
            .filter_map(|(p, _)| p.upgrade())
            .collect()
    }

    /// Closes the idle connection longest unused among the pools beside
    /// `pool` (the same user and database, other startup parameters: see
    /// [`super::PoolKey::startup`]) as `pool` is about to open one, when
    /// their connections would otherwise exceed the pool size they share.
    /// Every lease of theirs holds one of the shared permits
    /// ([`Pool::permits`]) and has, or is opening, one connection; so the
    /// connections after this open are the permits in use plus the idle
    /// ones beside (this pool has none idle, or it would not open). Counted
    /// so, opens under way are never missed, and a connection of another
    /// kind is closed only when the size demands it.
    pub(super) fn make_room_beside(&self, pool: &Pool<E>) {
        let beside: Vec<Arc<Pool<E>>> = self
            .pools_with_idle()
            .into_iter()
            .filter(|p| {
                p.key.cluster == pool.key.cluster
                    && p.key.user == pool.key.user
                    && p.key.database == pool.key.database
                    && p.key.startup != pool.key.startup
            })
            .collect();
        let idle_beside: usize = beside.iter().map(|p| p.idle_count()).sum();
        if idle_beside == 0 || pool.permits.in_use() + idle_beside <= pool.permits.size() {
            return;
        }
        let oldest = beside
            .iter()
            .filter_map(|p| Some((p.oldest_idle_since()?, p)))
            .min_by_key(|(since, _)| *since)
            .map(|(_, p)| p);
        // Dropped: closed, its place on the backend freed.
        drop(oldest.and_then(|p| p.pop_oldest()));
    }

    /// Takes the idle connection a lease of `for_pool` should get: one of
    /// that pool, else one of the same backend user (cheaper to move),
    /// else the one idle longest on the backend, among the connections it
    /// can switch (opened with its startup parameters). With `None`, the
    /// one idle longest.
    pub(super) fn take_idle(&self, for_pool: Option<&Pool<E>>) -> Option<Handed<E>> {
        self.take_idle_of(for_pool, true)
    }

    /// [`BackendShare::take_idle`] among the connections a lease of
    /// `for_pool` can switch (`same_kind`), or among those it cannot (the
    /// one idle longest, to close for it).
    fn take_idle_of(&self, for_pool: Option<&Pool<E>>, same_kind: bool) -> Option<Handed<E>> {
        let pools = self.pools_with_idle();
        // Another lease may empty the chosen pool between the look and the
        // take: look again (a few times; each miss means others progress).
        for _ in 0..4 {
            let best = pools
                .iter()
                // A connection opened with other startup parameters
                // (PostgreSQL's, MySQL's session capabilities) keeps them
                // through a switch: never another pool's of another kind.
                .filter(|p| for_pool.is_none_or(|f| (p.key.startup == f.key.startup) == same_kind))
                .filter_map(|p| {
                    let since = p.oldest_idle_since()?;
                    let rank = match for_pool {
                        Some(f) => (std::ptr::eq(p.as_ref(), f), p.key.user == f.key.user),
                        None => (false, false),
                    };
                    Some(((rank, Reverse(since)), p))
                })
                .max_by(|a, b| a.0.cmp(&b.0))
                .map(|(_, p)| p)?;
            if let Some(pooled) = best.pop_oldest() {
                return Some(Handed {
                    from: best.clone(),
                    pooled,
                });
            }
        }
        None
    }

    /// Hands idle connections to the leases waiting on this backend, first
    /// in line first, while there are both. The first waiter gets an idle
    /// connection it can switch (one opened with its startup parameters).
    /// Where only connections of other kinds are idle, one of them is
    /// closed and its place on the backend goes to that waiter (not to
    /// whoever the semaphore serves next, so each close serves the waiter
    /// it was made for) once waiting longer would cost it more than an
    /// open: it waits for a place of its own (`wants_place`), no
    /// connection of its kind is open to come back, or it has waited, at
    /// the front with only other kinds idle, what an open takes on this
    /// backend. Until then the idle connections go
    /// to the first waiters behind it that can switch them, so clients of
    /// two kinds on a full backend do not close and open connections for
    /// each other at every turn.
    pub(super) fn hand_over_idle(&self) {
        let mut queue = self.handoff.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(front) = queue.front_mut() {
            let Some(pool) = front.pool.upgrade().filter(|_| !front.tx.is_closed()) else {
                queue.pop_front();
                continue;
            };
            // A connection that comes back while this runs waits for the
            // lock and hands itself over next: only one the waiter cannot
            // switch is closed for it, never one of its kind.
            let place = if front.wants_place {
                self.take_idle(None).map(|c| Place::Slot(c.close_for_place()))
            } else if let Some(handed) = self.take_idle(Some(&pool)) {
                Some(Place::Conn(handed))
            } else if !self.idle_of_other_kind(&pool) {
                // Nothing idle at all (the usual wait, with one kind of
                // client): no need to look at every pool's open count.
                None
            } else if !self.kind_open(&pool)
                || front.blocked.get_or_insert_with(Instant::now).elapsed() >= self.counts.open_cost()
            {
                self.take_idle_of(Some(&pool), false)
                    .map(|c| Place::Slot(c.close_for_place()))
            } else {
                // Its kind comes back soon: the waiters behind that can
                // switch an idle connection are served meanwhile.
                if !self.serve_behind(&mut queue) {
                    break;
                }
                continue;
            };
            let Some(place) = place else { break };
            let Some(waiter) = queue.pop_front() else { break };
            if let Err(Place::Conn(back)) = waiter.tx.send(place) {
                // It stopped waiting just now: the connection stays idle
                // (a place given back is freed as it drops).
                back.from.put_back(back.pooled);
            }
        }
    }

    /// Hands an idle connection to the first waiter behind the front one
    /// that can switch it; false if none can.
    fn serve_behind(&self, queue: &mut std::collections::VecDeque<Waiter<E>>) -> bool {
        let kinds: Vec<Vec<(String, String)>> = self.pools_with_idle().iter().map(|p| p.key.startup.clone()).collect();
        let found = queue.iter().enumerate().skip(1).find_map(|(i, w)| {
            if w.wants_place || w.tx.is_closed() {
                return None;
            }
            let pool = w.pool.upgrade()?;
            kinds.contains(&pool.key.startup).then_some((i, pool))
        });
        let Some((i, pool)) = found else { return false };
        let Some(handed) = self.take_idle(Some(&pool)) else {
            return false;
        };
        match queue.remove(i) {
            Some(waiter) => {
                if let Err(Place::Conn(back)) = waiter.tx.send(Place::Conn(handed)) {
                    back.from.put_back(back.pooled);
                }
            }
            None => handed.from.put_back(handed.pooled),
        }
        true
    }

    /// Whether a connection that a lease of `pool` cannot switch (opened
    /// with other startup parameters) is idle on this backend now.
    fn idle_of_other_kind(&self, pool: &Pool<E>) -> bool {
        self.pools_with_idle().iter().any(|p| p.key.startup != pool.key.startup)
    }

    /// Whether a connection opened with `pool`'s startup parameters is
    /// open on this backend (idle or lent), so one may come back for it.
    fn kind_open(&self, pool: &Pool<E>) -> bool {
        self.pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(|(p, _)| p.upgrade())
            .any(|p| p.key.startup == pool.key.startup && p.open_count() > 0)
    }

    /// Closes the connection idle longest on this backend, to make room
    /// for a new one; false if there is none.
    pub(super) fn close_idle_longest(&self) -> bool {
        self.take_idle(None).is_some()
    }
}

impl<E: Engine> Handed<E> {
    /// Closes the connection and keeps its place on the backend, for the
    /// waiter it is closed for.
    fn close_for_place(mut self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.pooled.slot.take()
    }
}

impl<E: Engine> Pool<E> {
    /// Makes a connection taken from the idle list of `handed.from` (this
    /// pool or another on the backend) this pool's: another pool's is
    /// switched to this pool's backend user and database (the engine's
    /// switch, then `init_query`). `None` when it could not be used: it was
    /// closed.
    pub(super) async fn adopt(&self, handed: Handed<E>) -> Option<Box<Pooled<E::Conn>>> {
        let Handed { from, mut pooled } = handed;
        if from.expired(&pooled, &mut None) || !self.engine.is_usable(&mut pooled.conn) {
            return None;
        }
        if std::ptr::eq(from.as_ref(), self) {
            return Some(pooled);
        }
        let started = Instant::now();
        let generation = self.generation();
        let secret = self.secret();
        let cluster = self.cluster.load_full();
        let same_user = from.key.user == secret.user;
        let switched = async {
            let conn = &mut pooled.conn;
            self.engine
                .switch(
                    conn,
                    &secret,
                    &self.key.database,
                    same_user,
                    cluster.connect_timeout,
                    &cluster.backend_tls,
                )
                .await?;
            if let Some(sql) = &cluster.init_query {
                self.engine.initialize(conn, sql).await?;
            }
            Ok::<(), SwitchError>(())
        }
        .await;
        let counts = &self.share.counts;
        counts.switch(switched.is_ok());
        counts.phase(Phase::Switch, started.elapsed());
        if let Err(e) = switched {
            self.switch_failed.store(true, Ordering::Relaxed);
            tracing::debug!(backend = %self.key.backend, user = %self.key.user, database = %self.key.database, error = %e.error, intact = e.intact, "a backend connection could not be switched to this pool: its leases open connections of their own until one opens");
            if e.intact {
                from.put_back(pooled);
            }
            return None;
        }
        pooled.generation = generation;
        pooled.open = OpenMark::new(&self.open);
        pooled.switches = pooled.switches.saturating_add(1);
        Some(pooled)
    }
}
