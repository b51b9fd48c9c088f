//! The router: asked each time a session needs a backend connection (a
//! transaction starting, a pinned or session-mode session starting, a
//! PostgreSQL greeting), never once for a session's life. A session keeps
//! a routing context, its endpoint (cluster, role, replica lag bound) and
//! the pool it used last (tenant's backend user and secret, database);
//! the router picks the backend from the topology as it is *now*
//! ([`ClusterState::choose`]), takes the pool for (that backend, the same
//! user and database), and borrows from it. A query rule's route
//! ([`Intent::Ruled`]) may name one backend of the cluster, or another
//! cluster of the same engine, whose writer then serves the lease from a
//! pool of that cluster's own; the next lease without a rule comes back.
//!
//! With no backend to route to (no writer during a failover, no replica
//! and no fallback), the lease waits on the topology's watch channel, so
//! it proceeds the moment a writer is elected, for at most the cluster's
//! `failover_hold`; then the client gets "too many connections"
//! (53300 / 1040) naming the reason. A backend that refuses the
//! connection is reported to the monitor (which probes at once) and the
//! lease is routed again, within the same hold: a dead writer costs the
//! clients between transactions nothing but the wait. An operator's pause
//! (a switchover's first step) holds leases the same way, and a drained
//! backend takes none, including a lease whose connection was still being
//! opened when the pause or the drain began: it is given back unused once
//! lent, and routed again ([`still_routable`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use crate::cancel::{CancelSlot, LeaseWait};
use crate::config::{EndpointRole, EndpointSettings};
use crate::core::Core;
use crate::engine::Engine;
use crate::engine::position::Position;
use crate::error::{Condition, ProxyError};
use crate::pool::{Lease, Pool, PoolKey, TenantCap};
use crate::topology::{BackendState, Choice, ClusterCache, ClusterState, Intent, RouteTo, Why};

/// The longest a lease waits before routing again after its backend
/// refused a connection, when the topology does not change sooner.
pub const RETRY_AFTER_CONNECT_FAILURE: std::time::Duration = std::time::Duration::from_millis(100);

/// Counts a session among those waiting for a backend while it lives.
struct Waiting<'a>(&'a ClusterState);

impl<'a> Waiting<'a> {
    fn new(state: &'a ClusterState) -> Self {
        state.waiting.fetch_add(1, Ordering::Relaxed);
        Self(state)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a tenant's session holds once admitted: its client-connection
/// slot (for the session's life), its cap on backend connections, and its
/// routing context's first pool.
pub struct Admitted<E: Engine> {
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
    pub cap: Option<TenantCap>,
    pub pool: Arc<Pool<E>>,
}

impl<E: Engine> Core<E> {
    /// Post-login admission, the same for every engine and for MySQL's
    /// COM_CHANGE_USER: the tenant's connection rate and client-connection
    /// limit (checked only after authentication, so a stranger learns
    /// nothing of them), its backend cap, and the routing context on
    /// `database`. The engine has checked the tenant may use `database`
    /// (its answer's wording is the engine's).
    pub fn admit(
        &self,
        endpoint: &EndpointSettings,
        tenant: &crate::config::Tenant,
        database: &str,
    ) -> Result<Admitted<E>, ProxyError> {
        if self.is_disabled(&endpoint.name) {
            return Err(ProxyError::new(
                Condition::NotAllowed,
                format!(
                    "endpoint \"{}\" is disabled: it takes no new logins (the console's ENABLE opens it)",
                    endpoint.name
                ),
            ));
        }
        let slot = self.admit_tenant(tenant)?;
        let pool = self.initial_pool(endpoint, &tenant.secret, database)?;
        Ok(Admitted {
            slot,
            cap: self.tenant_backend_cap(tenant),
            pool,
        })
    }

    /// The pool a new session of `endpoint` starts its routing context
    /// with: on the backend the router would choose now, or, with none up,
    /// the first configured (nothing connects until a lease is routed).
    pub fn initial_pool(
        &self,
        endpoint: &EndpointSettings,
        secret: &Arc<crate::config::Secret>,
        database: &str,
    ) -> Result<Arc<Pool<E>>, ProxyError> {
        let state = self.cluster_state(endpoint)?;
        // A replica where the tenant has an idle connection, among equally
        // busy ones: its first lease then neither opens nor switches one.
        let mut key = PoolKey {
            cluster: endpoint.cluster.name.clone(),
            backend: String::new(),
            user: secret.user.clone(),
            database: database.to_owned(),
            startup: Vec::new(),
        };
        let warm = |b: &BackendState| {
            let mut key = key.clone();
            key.backend.clone_from(&b.addr);
            self.pools.has_idle(&key)
        };
        let backend = match state.peek(endpoint, &warm) {
            Some(c) => c.backend,
            None => state
                .backends()
                .first()
                .cloned()
                .ok_or_else(|| ProxyError::new(Condition::Internal, "cluster has no backend"))?,
        };
        key.backend = backend.addr.clone();
        Ok(self.pool_on(&state, key, secret, &backend.leases))
    }

    /// The pool for the session whose last pool was `pool`, but on
    /// database `database` (MySQL `USE`, COM_CHANGE_USER).
    pub fn pool_for_database(
        &self,
        endpoint: &EndpointSettings,
        pool: &Pool<E>,
        database: &str,
    ) -> Result<Arc<Pool<E>>, ProxyError> {
        self.pool_beside(endpoint, pool, |key| key.database = database.to_owned())
    }

    /// Whether the pool of connections opened with `startup` beside the
    /// session's pool `pool` exists: the server took these parameters
    /// before (such a pool is made only after they were tried on a
    /// connection of the shared pool, and is dropped once unused and empty).
    pub fn has_pool_with_startup(&self, pool: &Pool<E>, startup: &[(String, String)]) -> bool {
        let mut key = pool.key().clone();
        key.startup = startup.to_vec();
        self.pools.contains(&key)
    }

    /// The pool of connections opened with `startup` (see
    /// [`PoolKey::startup`]) beside the session's pool `pool`.
    pub fn pool_with_startup(
        &self,
        endpoint: &EndpointSettings,
        pool: &Pool<E>,
        startup: Vec<(String, String)>,
    ) -> Result<Arc<Pool<E>>, ProxyError> {
        self.pool_beside(endpoint, pool, |key| key.startup = startup)
    }

    /// The pool on the same backend as `pool`, in the endpoint's cluster as
    /// the topology lists it now, with `change` made to its key.
    fn pool_beside(
        &self,
        endpoint: &EndpointSettings,
        pool: &Pool<E>,
        change: impl FnOnce(&mut PoolKey),
    ) -> Result<Arc<Pool<E>>, ProxyError> {
        let state = self.cluster_state(endpoint)?;
        let mut key = pool.key().clone();
        change(&mut key);
        key.cluster.clone_from(&state.name);
        let leases = state
            .backends()
            .iter()
            .find(|b| b.addr == key.backend)
            .map(|b| b.leases.clone())
            .unwrap_or_default();
        Ok(self.pool_on(&state, key, &pool.secret(), &leases))
    }

    /// The pool for `key`, made with the cluster's settings as they are now.
    fn pool_on(
        &self,
        state: &ClusterState,
        key: PoolKey,
        secret: &Arc<crate::config::Secret>,
        leases: &Arc<std::sync::atomic::AtomicUsize>,
    ) -> Arc<Pool<E>> {
        let server_max = state.max_connections(&key.backend);
        self.pools
            .get(&self.engine, &state.settings(), key, secret, server_max, leases)
    }

    /// The session's cluster as the topology lists it now; a cluster a
    /// reload removed ends the session's work with a shutdown-class error.
    fn cluster_state(&self, endpoint: &EndpointSettings) -> Result<Arc<ClusterState>, ProxyError> {
        self.topology
            .cluster(&endpoint.cluster.name)
            .ok_or_else(|| removed_cluster(endpoint))
    }

    /// The cluster a rule's `route = { cluster }` names, as the topology
    /// lists it now (a reload that removed it also dropped the rule; a
    /// statement ruled before that finds no backend).
    fn routed_cluster(&self, name: &str) -> Result<Arc<ClusterState>, ProxyError> {
        self.topology.cluster(name).ok_or_else(|| {
            ProxyError::new(
                Condition::NoBackendForRole,
                format!("cluster \"{name}\" named by a query rule is no longer configured"),
            )
        })
    }

    /// [`Core::lease`]'s common case, without a future: the backend chosen
    /// is the one the session's last pool is on, and that pool lends at
    /// once ([`Pool::try_lease`]: a free place, a usable idle connection).
    /// `None`: nothing was taken, and [`Core::lease`] does the rest. (Its
    /// choice is made again: among tied replicas the turn moves twice for
    /// such a lease, which happens only when a pool that had an idle
    /// connection could not lend it.)
    /// `state`: the endpoint's cluster as the topology lists it now.
    fn lease_now(
        &self,
        state: &ClusterState,
        endpoint: &EndpointSettings,
        pool: &Arc<Pool<E>>,
        cap: Option<&TenantCap>,
        intent: Intent<'_>,
    ) -> Option<Lease<E>> {
        if !pool.has_idle() || matches!(intent, Intent::Ruled(RouteTo::Cluster(_))) {
            return None;
        }
        let current: &Pool<E> = pool;
        let warm = |b: &BackendState| current.key().backend == b.addr;
        let choice = state.choose_warm(endpoint, intent, &warm)?;
        // A read after the client's write goes on in `lease` (the replica
        // is asked how far it is).
        if choice.why == Why::WriterReadYourWrites
            || pool.key().backend != choice.backend.addr
            || pool.key().cluster != state.name
        {
            return None;
        }
        let lease = still_routable(state, endpoint, &choice.backend, pool.try_lease(cap)?)?;
        state.routed(&choice);
        Some(lease)
    }

    /// A lease for a session's statement: lent at once when it can be
    /// ([`Core::lease_now`]: no future, no clock read), else routed and
    /// waited for ([`Core::lease`], boxed: the wait's large future stays out
    /// of the session's) under the session's cancel `slot`, so that a
    /// cancel for the session ends the wait
    /// ([`CancelSlot::unless_cancelled`]). Also returns when the wait began
    /// (`None`: lent at once), for the session's lease-wait meter. On an
    /// error the slot is left empty. The
    /// endpoint's cluster is found through the session's `cache`
    /// ([`Topology::cluster_cached`]).
    pub async fn lease_or_wait<T: Clone>(
        &self,
        endpoint: &EndpointSettings,
        pool: &mut Arc<Pool<E>>,
        cap: Option<&TenantCap>,
        intent: Intent<'_>,
        slot: &CancelSlot<T>,
        cache: &mut ClusterCache,
    ) -> (LeaseWait<Result<Lease<E>, ProxyError>>, Option<std::time::Instant>) {
        let state = match intent {
            Intent::Ruled(RouteTo::Cluster(name)) => self.routed_cluster(name),
            _ => self
                .topology
                .cluster_cached(&endpoint.cluster.name, cache)
                .ok_or_else(|| removed_cluster(endpoint)),
        };
        let state = match state {
            Ok(state) => state,
            Err(e) => {
                slot.set(None);
                return (LeaseWait::Done(Err(e)), None);
            }
        };
        if let Some(lease) = self.lease_now(&state, endpoint, pool, cap, intent) {
            return (LeaseWait::Done(Ok(lease)), None);
        }
        let began = std::time::Instant::now();
        let routed = self.lease_on(state, endpoint, pool, cap, intent);
        let waited = Box::pin(slot.unless_cancelled(routed)).await;
        if let LeaseWait::Done(Err(_)) = &waited {
            // No connection: nothing of the statement's is cancellable.
            slot.set(None);
        }
        (waited, Some(began))
    }

    /// Routes one lease for a session of `endpoint` whose last pool is
    /// `pool` (replaced by the pool it is routed to), and borrows it, with
    /// the tenant's cap `cap` if any; `intent` is what a split endpoint's
    /// transaction does (other endpoints' roles decide alone). See the
    /// module comment for waiting.
    pub async fn lease(
        &self,
        endpoint: &EndpointSettings,
        pool: &mut Arc<Pool<E>>,
        cap: Option<&TenantCap>,
        intent: Intent<'_>,
    ) -> Result<Lease<E>, ProxyError> {
        let state = match intent {
            Intent::Ruled(RouteTo::Cluster(name)) => self.routed_cluster(name)?,
            _ => self.cluster_state(endpoint)?,
        };
        self.lease_on(state, endpoint, pool, cap, intent).await
    }

    /// [`Core::lease`] in `state`, the cluster the lease is routed in (the
    /// endpoint's, or the one a rule names), as the topology lists it now.
    async fn lease_on(
        &self,
        state: Arc<ClusterState>,
        endpoint: &EndpointSettings,
        pool: &mut Arc<Pool<E>>,
        cap: Option<&TenantCap>,
        intent: Intent<'_>,
    ) -> Result<Lease<E>, ProxyError> {
        // Among equally busy replicas, the session's own when its pool
        // there has an idle connection (no switch, no open).
        let current: &Pool<E> = pool;
        let warm = |b: &BackendState| current.has_idle() && current.key().backend == b.addr;
        let choice = state.choose_warm(endpoint, intent, &warm);
        // A read after the client's write that no replica had replayed at
        // its last probe: the least busy replica is asked how far it is now.
        if let Some(c) = &choice
            && c.why == Why::WriterReadYourWrites
            && let Intent::Read { after: Some(need) } = intent
            && let Some(lease) = Box::pin(self.caught_up_reader(&state, endpoint, pool, cap, need)).await
        {
            return Ok(lease);
        }
        // The common case, kept small (its future is boxed with every
        // transaction's): the backend chosen is the one used last, and it
        // lends at once. Everything else (another backend, no backend, a
        // backend that cannot be reached) takes the boxed slow path.
        if let Some(choice) = choice
            && pool.key().backend == choice.backend.addr
            && pool.key().cluster == state.name
        {
            match pool.lease_for(cap).await {
                Ok(lease) => {
                    if let Some(lease) = still_routable(&state, endpoint, &choice.backend, lease) {
                        state.routed(&choice);
                        return Ok(lease);
                    }
                }
                Err(e) if e.condition != Condition::BackendUnavailable => return Err(e),
                Err(_) => state.probe_now.notify_one(),
            }
        }
        Box::pin(self.lease_routed(&state, endpoint, pool, cap, intent)).await
    }

    /// A lease on the least busy usable replica if, asked on the connection
    /// lent, it has replayed `need` (the client's last write); its answer
    /// also moves what the topology knows of it forward, for every session.
    /// `None`: the read goes to the writer.
    async fn caught_up_reader(
        &self,
        state: &ClusterState,
        endpoint: &EndpointSettings,
        pool: &mut Arc<Pool<E>>,
        cap: Option<&TenantCap>,
        need: &Position,
    ) -> Option<Lease<E>> {
        let candidate = state.choose(endpoint, Intent::Read { after: None })?;
        if candidate.why != Why::LeastBusyReader {
            return None;
        }
        let mut key = pool.key().clone();
        key.backend = candidate.backend.addr.clone();
        key.cluster.clone_from(&state.name);
        let reader_pool = self.pool_on(state, key, &pool.secret(), &candidate.backend.leases);
        let lease = reader_pool.lease_for(cap).await.ok()?;
        let mut lease = still_routable(state, endpoint, &candidate.backend, lease)?;
        match E::replay_position(lease.conn()).await {
            Ok(Some(at)) => {
                let covers = at.covers(need);
                candidate.backend.note_replayed(at);
                if !covers {
                    lease.recycle();
                    return None;
                }
                state.routed(&Choice {
                    backend: candidate.backend.clone(),
                    why: Why::CaughtUpReader,
                });
                *pool = reader_pool;
                Some(lease)
            }
            Ok(None) => {
                lease.recycle();
                None
            }
            // The connection failed under the question: not reused.
            Err(_) => None,
        }
    }

    /// [`Core::lease`] when the backend changes, is missing or fails.
    async fn lease_routed(
        &self,
        state: &ClusterState,
        endpoint: &EndpointSettings,
        pool: &mut Arc<Pool<E>>,
        cap: Option<&TenantCap>,
        intent: Intent<'_>,
    ) -> Result<Lease<E>, ProxyError> {
        // Subscribed only once a choice fails, then every change is seen.
        let mut changes: Option<tokio::sync::watch::Receiver<u64>> = None;
        let mut hold = None;
        let mut _waiting = None;
        loop {
            if let Some(c) = changes.as_mut() {
                c.borrow_and_update();
            }
            let Some(choice) = state.choose(endpoint, intent) else {
                let Some(c) = changes.as_mut() else {
                    // Subscribe, then look again: a change in between is not lost.
                    changes = Some(state.subscribe());
                    continue;
                };
                _waiting.get_or_insert_with(|| Waiting::new(state));
                let until = *hold.get_or_insert_with(|| Instant::now() + state.settings().failover_hold);
                if tokio::time::timeout_at(until, c.changed()).await.is_err() {
                    return Err(no_backend(endpoint, state));
                }
                continue;
            };
            if pool.key().backend != choice.backend.addr || pool.key().cluster != state.name {
                let mut key = pool.key().clone();
                key.backend = choice.backend.addr.clone();
                key.cluster.clone_from(&state.name);
                tracing::debug!(cluster = %key.cluster, backend = %key.backend, why = choice.why.name(), "lease routed to another backend");
                *pool = self.pool_on(state, key, &pool.secret(), &choice.backend.leases);
            }
            match pool.lease_for(cap).await {
                Ok(lease) => {
                    if let Some(lease) = still_routable(state, endpoint, &choice.backend, lease) {
                        state.routed(&choice);
                        return Ok(lease);
                    }
                    // Paused or drained while it was taken: routed again.
                    changes.get_or_insert_with(|| state.subscribe());
                }
                Err(e) if e.condition == Condition::BackendUnavailable => {
                    let until = *hold.get_or_insert_with(|| Instant::now() + state.settings().failover_hold);
                    if Instant::now() >= until {
                        return Err(e);
                    }
                    // The backend is gone but not yet marked down: the
                    // monitor looks now, and the lease is routed again.
                    tracing::debug!(backend = %choice.backend.addr, error = %e, "lease could not connect: routing again");
                    _waiting.get_or_insert_with(|| Waiting::new(state));
                    state.probe_now.notify_one();
                    let c = changes.get_or_insert_with(|| state.subscribe());
                    let retry = (Instant::now() + RETRY_AFTER_CONNECT_FAILURE).min(until);
                    let _ = tokio::time::timeout_at(retry, c.changed()).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The error of a lease whose endpoint's cluster a reload removed (a
/// shutdown-class error: the session's work there is over).
fn removed_cluster(endpoint: &EndpointSettings) -> ProxyError {
    ProxyError::new(
        Condition::Shutdown,
        format!(
            "cluster \"{}\" was removed from the configuration",
            endpoint.cluster.name
        ),
    )
}

/// `lease`, on `backend`, if the choice that sent it there still holds
/// now that it is lent: `endpoint` not paused, `backend` not drained.
/// Else `None`: the connection is given back unused (closed, when its
/// backend is being drained, as a drain closes the idle ones), and the
/// lease is routed again. Taking a lease can take a while (a connection
/// opened, a slot awaited) after the choice, and an operator who paused
/// the endpoint or drained the backend meanwhile has already been told no
/// lease is out there: a switchover's drain counted none of this one, and
/// stops the old writer next. Since the lease is counted on its backend
/// before this look (both sequentially consistent, as are the operator's
/// stores and the drain's count), either the count sees the lease or the
/// lease sees the operator's change: no statement starts after it.
fn still_routable<E: Engine>(
    state: &ClusterState,
    endpoint: &EndpointSettings,
    backend: &BackendState,
    lease: Lease<E>,
) -> Option<Lease<E>> {
    if backend.draining.load(Ordering::SeqCst) {
        tracing::debug!(backend = %backend.addr, "lease taken as its backend was drained: closed, routed again");
        drop(lease);
        return None;
    }
    if state.holds(&endpoint.name) {
        tracing::debug!(cluster = %state.name, endpoint = %endpoint.name, "lease taken as a pause began: given back, the session waits");
        lease.recycle();
        return None;
    }
    Some(lease)
}

/// The error of a lease that found no backend within `failover_hold`.
fn no_backend(endpoint: &EndpointSettings, state: &ClusterState) -> ProxyError {
    let what = match endpoint.role {
        EndpointRole::ReadWrite => "writable backend",
        EndpointRole::ReadOnly => "backend for reads",
        EndpointRole::Split => "backend",
    };
    ProxyError::new(
        Condition::NoBackendForRole,
        format!(
            "no {what} in cluster \"{}\" within {:?} (failover_hold)",
            state.name,
            state.settings().failover_hold
        ),
    )
}
