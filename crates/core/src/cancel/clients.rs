//! The registry as the list of clients the console's `SHOW CLIENTS` and
//! `KILL` work on: each logged-in session describes itself once
//! ([`CancelKey::describe`]: tenant, database, endpoint, address, TLS,
//! when, the cluster and backend user of its pool), marks why it was
//! pinned, and its slot tells what it does now (running on a backend,
//! waiting for one, idle, parked). Nothing here is on a statement's path:
//! a snapshot is taken under the registry's lock when asked for.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use super::{CancelKey, CancelRegistry, CancelTarget, PARK};

/// What a logged-in session is, for the console.
#[derive(Debug)]
pub struct ClientInfo {
    pub tenant: Arc<str>,
    /// MySQL's `USE` changes it.
    pub database: Mutex<String>,
    pub endpoint: Arc<str>,
    pub addr: Option<IpAddr>,
    pub tls: bool,
    /// A console session, not a pooled one.
    pub console: bool,
    /// The cluster and backend user of the pool it logged in to (none on
    /// a console session).
    pub route: Option<Arc<Route>>,
    pub since: Instant,
    pub connected_at: SystemTime,
    /// Why the session is pinned to its backend connection now (the first
    /// reason; MySQL's COM_RESET_CONNECTION unpins).
    pin: Mutex<Option<&'static str>>,
}

impl ClientInfo {
    /// `tenant` and `endpoint`: the session's own names, shared (not
    /// copied again for every session's description).
    pub fn new(tenant: Arc<str>, database: &str, endpoint: Arc<str>, addr: Option<IpAddr>, tls: bool) -> Self {
        Self {
            tenant,
            database: Mutex::new(database.to_owned()),
            endpoint,
            addr,
            tls,
            console: false,
            route: None,
            since: Instant::now(),
            connected_at: SystemTime::now(),
            pin: Mutex::new(None),
        }
    }

    /// Why the session is pinned now, if it is.
    pub fn pin(&self) -> Option<&'static str> {
        *self.pin.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session was pinned for `reason` (the first reason is kept).
    pub fn pinned(&self, reason: &'static str) {
        self.pin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
    }

    /// The session is no longer pinned.
    pub fn unpinned(&self) {
        *self.pin.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    pub fn database(&self) -> String {
        self.database.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn set_database(&self, database: &str) {
        database.clone_into(&mut self.database.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Where a pooled session's backend connections come from: its endpoint's
/// cluster and the user they log in as (its tenant's secret). Each pool
/// holds one; its sessions share it.
#[derive(Debug)]
pub struct Route {
    pub cluster: String,
    pub user: String,
}

/// What a session does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// Holds a backend connection (a transaction or statement under way,
    /// or pinned).
    Active,
    /// Its statement waits for a backend connection.
    Waiting,
    Idle,
    /// Idle, and parked off the runtime.
    Parked,
}

impl ClientState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Waiting => "waiting",
            Self::Idle => "idle",
            Self::Parked => "parked",
        }
    }
}

/// One client as the console lists it.
#[derive(Debug, Clone)]
pub struct ClientRow {
    /// Its id: PostgreSQL's BackendKeyData process id, MySQL's connection id.
    pub id: u32,
    pub info: Arc<ClientInfo>,
    pub state: ClientState,
    /// The backend connection it holds: server address and that
    /// connection's own id (PostgreSQL's pid, MySQL's thread id).
    pub server: Option<(String, u32)>,
    /// That connection's TLS session (version and cipher suite).
    pub server_tls: Option<Arc<str>>,
    /// How long it has waited for a backend connection, while it waits.
    pub wait: Option<std::time::Duration>,
}

impl<T> CancelKey<T> {
    /// Records who the logged-in session is (its owner for `KILL` too).
    pub fn describe(&self, info: Arc<ClientInfo>) {
        if let Some(e) = self
            .registry
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&self.id)
        {
            e.owner = Some(info.tenant.clone());
            e.info = Some(info);
        }
    }
}

impl<T: CancelTarget> CancelRegistry<T> {
    /// Every logged-in client (those still logging in are not listed), by id.
    pub fn clients(&self) -> Vec<ClientRow> {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<ClientRow> = map
            .iter()
            .filter_map(|(id, e)| {
                let info = e.info.clone()?;
                let held = e.slot.get();
                let server_tls = held.as_ref().and_then(|t| t.server_tls().cloned());
                let server = held.map(|t| {
                    let (addr, pid) = t.server();
                    (addr.to_owned(), pid)
                });
                let state = if server.is_some() {
                    ClientState::Active
                } else if e.slot.waiting.load(Ordering::Acquire) {
                    ClientState::Waiting
                } else if e.slot.park.load(Ordering::Relaxed) == PARK {
                    ClientState::Parked
                } else {
                    ClientState::Idle
                };
                let wait = (state == ClientState::Waiting).then(|| {
                    let from = e.slot.wait_from_us.load(Ordering::Relaxed);
                    e.slot
                        .born
                        .elapsed()
                        .saturating_sub(std::time::Duration::from_micros(from))
                });
                Some(ClientRow {
                    id: *id,
                    info,
                    state,
                    server,
                    server_tls,
                    wait,
                })
            })
            .collect();
        out.sort_by_key(|r| r.id);
        out
    }

    /// Logged-in sessions pinned now, by reason (one pass under the lock,
    /// nothing cloned: a scrape's cost with many idle clients).
    pub fn pinned_now(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut out = std::collections::BTreeMap::new();
        for e in self.map.lock().unwrap_or_else(PoisonError::into_inner).values() {
            if let Some(reason) = e.info.as_ref().and_then(|i| i.pin()) {
                *out.entry(reason).or_default() += 1;
            }
        }
        out
    }

    /// Asks session `id`, whoever's it is, to end (the console's `KILL`):
    /// false when there is no such logged-in session.
    pub fn terminate(&self, id: u32) -> bool {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&id) {
            Some(e) if e.info.is_some() => {
                e.slot.terminate();
                true
            }
            _ => false,
        }
    }
}
