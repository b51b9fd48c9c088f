//! The engine-agnostic state one proxy instance shares between its sessions:
//! the configuration snapshot, pools, topology, cancel registry and abuse
//! limits for one engine. Passed around as `Arc<Core<E>>`; nothing here is global.
//! A reload swaps what it changes in place ([`reload`]).

pub mod monitor;
pub mod operate;
mod reload;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use tokio::sync::watch;

use crate::cancel::CancelRegistry;
use crate::config::Settings;
use crate::engine::Engine;
use crate::pool::Pools;
use crate::topology::Topology;

pub use self::reload::ReloadReport;

pub struct Core<E: Engine> {
    /// The configuration now; a reload swaps it (sessions keep the
    /// endpoint settings they were accepted with).
    settings: ArcSwap<Settings>,
    /// Who may log in; replaced on reload (see [`Core::reload`]).
    pub tenants: crate::tenants::Tenants,
    pub engine: Arc<E>,
    pub pools: Arc<Pools<E>>,
    /// Backend connections in use per tenant, for tenants with
    /// `max_backend_connections`; a reload resizes them in place.
    pub tenant_backend_slots: TenantSlots,
    /// Client connections per tenant, for tenants with
    /// `max_client_connections`; a reload resizes them in place.
    pub tenant_slots: TenantSlots,
    pub topology: Topology,
    /// Failed-login and per-tenant connection-rate limiters.
    pub limits: crate::limits::Limits,
    pub cancels: Arc<CancelRegistry<E::CancelTarget>>,
    pub stats: crate::stats::Stats,
    /// What sessions count for `/metrics` ([`crate::meter`]).
    pub meters: crate::meter::Meters,
    /// Per-process seed for mock authentication of unknown users, so the
    /// same unknown name always sees the same salt.
    pub auth_mock_seed: [u8; 32],
    /// Bounds concurrent password hashing (PBKDF2) off the network thread.
    pub hashing: Arc<tokio::sync::Semaphore>,
    /// Becomes `true` when the proxy is shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// Where idle sessions park, unless parking is off.
    pub parking: Option<crate::park::ParkingLot>,
    /// Per-digest statistics, with `[digests] enabled`; a reload that
    /// changes `[digests]` starts a new store (or drops it).
    pub digests: arc_swap::ArcSwapOption<crate::digests::DigestStats>,
    /// What runs the console's commands (the app's, over every core; set
    /// once the app is built, held weakly: the app holds the cores).
    pub console: std::sync::OnceLock<std::sync::Weak<dyn crate::console::Commands>>,
    /// Endpoints the console's `DISABLE` closed to new logins, by name.
    pub disabled: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// Moves on after each reload has stored what it changed: a session's
    /// [`SettingsView`] is taken again only then.
    reloads: AtomicU64,
}

/// What a session's transactions read of the configuration: the settings
/// and whether digest statistics are on, kept by the session and taken
/// again only after a reload ([`SettingsView::current`]: one atomic load
/// per look, where loading the settings and the digest store each time
/// costs an `ArcSwap` load apiece).
pub struct SettingsView {
    seen: u64,
    settings: Arc<Settings>,
    digests: bool,
}

impl SettingsView {
    /// The view, taken again from `core` first if a reload came since.
    pub fn current<E: Engine>(&mut self, core: &Core<E>) -> &Self {
        if core.reloads.load(Ordering::Acquire) != self.seen {
            *self = core.settings_view();
        }
        self
    }

    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// Whether digest statistics are on (as of the last look).
    pub fn digests(&self) -> bool {
        self.digests
    }
}

impl<E: Engine> Core<E> {
    /// Probes each cluster once (so the first clients find their writer),
    /// then starts its monitor.
    pub async fn start_monitors(self: &Arc<Self>) {
        for state in self.topology.all() {
            if state.settings().monitor.is_some() {
                monitor::probe_once(self, &state).await;
                tokio::spawn(monitor::monitor(self.clone(), state, false));
            }
        }
    }

    /// The configuration now, for a quick look (not to hold across an await).
    pub fn settings(&self) -> arc_swap::Guard<Arc<Settings>> {
        self.settings.load()
    }

    /// The configuration now as a session keeps it ([`SettingsView`]).
    pub fn settings_view(&self) -> SettingsView {
        // The count first: a view taken during a reload is taken again.
        let seen = self.reloads.load(Ordering::Acquire);
        SettingsView {
            seen,
            settings: self.settings.load_full(),
            digests: self.digests.load().is_some(),
        }
    }

    /// The configuration now, to hold.
    pub fn settings_arc(&self) -> Arc<Settings> {
        self.settings.load_full()
    }

    /// A client-connection slot for `tenant`, or `None` when it is at its limit.
    pub fn tenant_slot(&self, tenant: &crate::config::Tenant) -> Option<Option<tokio::sync::OwnedSemaphorePermit>> {
        let Some(limit) = tenant.max_client_connections else {
            return Some(None);
        };
        let slots = slots_of(&self.tenant_slots, &tenant.name, limit);
        slots.semaphore().clone().try_acquire_owned().ok().map(Some)
    }

    /// After authentication: the tenant's connection rate and client
    /// connection limit, checked only now so a stranger learns nothing of
    /// them. The slot is held for the session's life.
    pub fn admit_tenant(
        &self,
        tenant: &crate::config::Tenant,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, crate::error::ProxyError> {
        use crate::error::{Condition, ProxyError};
        if !self.limits.connection_allowed(&tenant.name, tenant.connection_rate) {
            return Err(ProxyError::new(
                Condition::TooManyConnections,
                format!("connection rate limit reached for user \"{}\"", tenant.name),
            ));
        }
        self.tenant_slot(tenant).ok_or_else(|| {
            ProxyError::new(
                Condition::TooManyConnections,
                format!(
                    "too many connections for tenant \"{}\" (limit {})",
                    tenant.name,
                    tenant.max_client_connections.unwrap_or(0)
                ),
            )
        })
    }

    /// Whether the console's `DISABLE` closed `endpoint` to new logins.
    pub fn is_disabled(&self, endpoint: &str) -> bool {
        self.disabled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(endpoint)
    }

    /// The console's command runner, while the app is up.
    pub fn console(&self) -> Option<Arc<dyn crate::console::Commands>> {
        self.console.get().and_then(std::sync::Weak::upgrade)
    }

    /// The cap on `tenant`'s backend connections in use, if it has one.
    pub fn tenant_backend_cap(&self, tenant: &crate::config::Tenant) -> Option<crate::pool::TenantCap> {
        let limit = tenant.max_backend_connections?;
        Some(crate::pool::TenantCap {
            tenant: Arc::from(tenant.name.as_str()),
            slots: slots_of(&self.tenant_backend_slots, &tenant.name, limit),
        })
    }

    pub fn new(
        settings: Arc<Settings>,
        engine: E,
        shutdown: watch::Receiver<bool>,
        parking: Option<crate::park::ParkingLot>,
    ) -> Self {
        let topology = Topology::new(&settings, E::KIND);
        Self {
            tenants: crate::tenants::Tenants::new(settings.tenants.clone()),
            pools: Arc::new(Pools::new()),
            tenant_slots: Default::default(),
            tenant_backend_slots: Default::default(),
            topology,
            limits: crate::limits::Limits::new(
                settings.proxy.auth_failures_per_minute_per_address,
                settings.proxy.auth_failures_per_minute_per_user,
            ),
            cancels: Arc::new(CancelRegistry::default()),
            stats: crate::stats::Stats::default(),
            meters: crate::meter::Meters::default(),
            digests: arc_swap::ArcSwapOption::new(digest_store(&settings)),
            console: std::sync::OnceLock::new(),
            disabled: Default::default(),
            reloads: AtomicU64::new(0),
            engine: Arc::new(engine),
            settings: ArcSwap::new(settings),
            auth_mock_seed: rand::random(),
            hashing: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
            )),
            shutdown,
            parking,
        }
    }
}

/// Places per tenant name: a limit each, resized in place when it changes.
pub type TenantSlots = std::sync::Mutex<std::collections::HashMap<String, Arc<crate::pool::Capacity>>>;

/// `tenant`'s places in `slots`, made with `limit` places the first time,
/// resized to it when a reload changed it (holders keep their places).
fn slots_of(slots: &TenantSlots, tenant: &str, limit: u32) -> Arc<crate::pool::Capacity> {
    let mut slots = slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let c = slots
        .entry(tenant.to_owned())
        .or_insert_with(|| Arc::new(crate::pool::Capacity::new(limit as usize)));
    if c.size() != limit as usize {
        c.resize(limit as usize);
    }
    c.clone()
}

/// After a reload: each tenant's places take its new limit now (so a
/// session that logged in before the reload borrows under the new
/// `max_backend_connections` too); a tenant removed, or left without a
/// limit, loses its entry (sessions holding places keep them).
fn retune_slots(slots: &TenantSlots, limit_of: impl Fn(&str) -> Option<u32>) {
    slots
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|name, c| match limit_of(name) {
            Some(limit) => {
                if c.size() != limit as usize {
                    c.resize(limit as usize);
                }
                true
            }
            None => false,
        });
}

/// The digest store `settings` ask for, if any.
fn digest_store(settings: &Settings) -> Option<Arc<crate::digests::DigestStats>> {
    let d = settings.digests;
    d.enabled
        .then(|| Arc::new(crate::digests::DigestStats::new(d.max_digests)))
}
