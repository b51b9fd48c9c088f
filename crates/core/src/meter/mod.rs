//! What client sessions count for `/metrics`, the same for both engines:
//! per endpoint, client logins that succeeded (with or without TLS) or
//! failed (by reason), transactions, statements, bytes each way, and
//! histograms of lease waits, statement times through the proxy and the
//! backends' response times ([`EndpointMeter`]); per tenant, transactions
//! and statements ([`TenantMeter`]).
//!
//! A core holds one [`Meters`]. A client connection resolves its
//! endpoint's counters once, when it is accepted (its
//! [`crate::engine::stream::ClientStream`] counts the bytes), and its
//! tenant's once, at login, into a [`SessionMeter`] that the session keeps
//! for its life (in its boxed [`crate::inspect::Inspector`]). Recording is
//! a relaxed atomic add on counters the session already holds: no lock,
//! no look-up, no allocation. With `[stats] histograms = false` no clock is
//! read for them; with `[stats] tenant_series = 0` no tenant is counted.
//! The admin API reads everything at each scrape.

mod histogram;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use self::histogram::{BUCKETS_SECONDS, Histogram, HistogramSnapshot};
use crate::config::StatsSettings;

/// The tenant label of the series holding every tenant outside the top N.
pub const OTHER_TENANTS: &str = "other";

/// Every core's counters, by endpoint and by tenant (created on first use;
/// kept for the process's life so that counters never go back).
#[derive(Debug, Default)]
pub struct Meters {
    endpoints: Mutex<HashMap<String, Arc<EndpointMeter>>>,
    tenants: Mutex<HashMap<String, Arc<TenantMeter>>>,
}

/// One endpoint's counters.
#[derive(Debug, Default)]
pub struct EndpointMeter {
    /// Logins that succeeded: plain, TLS.
    logins: [AtomicU64; 2],
    /// Logins that failed, by the condition of their error.
    login_failures: Mutex<BTreeMap<&'static str, u64>>,
    transactions: AtomicU64,
    statements: AtomicU64,
    bytes_received: AtomicU64,
    bytes_sent: AtomicU64,
    /// How long each lease waited for a backend connection.
    pub lease_wait: Histogram,
    /// A statement's time through the proxy: its request read to the last
    /// byte of its answer written.
    pub statement: Histogram,
    /// A statement's time on its backend: sent to its answer complete.
    pub response: Histogram,
}

/// One tenant's counters.
#[derive(Debug, Default)]
pub struct TenantMeter {
    transactions: AtomicU64,
    statements: AtomicU64,
}

/// An endpoint's counters as a scrape reads them.
#[derive(Debug, Clone)]
pub struct EndpointCounts {
    pub endpoint: String,
    pub logins_plain: u64,
    pub logins_tls: u64,
    pub login_failures: BTreeMap<&'static str, u64>,
    pub transactions: u64,
    pub statements: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub lease_wait: HistogramSnapshot,
    pub statement: HistogramSnapshot,
    pub response: HistogramSnapshot,
}

/// A tenant's counts (or those of all tenants outside the top N).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantCounts {
    pub tenant: String,
    pub transactions: u64,
    pub statements: u64,
}

impl Meters {
    /// `endpoint`'s counters (created on first use).
    pub fn endpoint(&self, endpoint: &str) -> Arc<EndpointMeter> {
        let mut map = self.endpoints.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = map.get(endpoint) {
            return m.clone();
        }
        let m = Arc::new(EndpointMeter::default());
        map.insert(endpoint.to_owned(), m.clone());
        m
    }

    /// A logged-in session's meter: its endpoint's counters (`endpoint`,
    /// from its connection) and, when tenant series are on, its tenant's.
    pub fn session(&self, endpoint: Arc<EndpointMeter>, tenant: &str, stats: &StatsSettings) -> SessionMeter {
        let tenant = (stats.tenant_series > 0).then(|| {
            self.tenants
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(tenant.to_owned())
                .or_default()
                .clone()
        });
        SessionMeter {
            endpoint,
            tenant,
            histograms: stats.histograms,
            ran: false,
            statements: 0,
            transactions: 0,
        }
    }

    /// Every endpoint's counters (those in `names` even if unused), by name.
    pub fn endpoints<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<EndpointCounts> {
        for name in names {
            self.endpoint(name);
        }
        let map = self.endpoints.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<EndpointCounts> = map.iter().map(|(name, m)| m.counts(name)).collect();
        out.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
        out
    }

    /// Every tenant's counts (tenants that logged in while tenant series
    /// were on).
    pub fn tenants(&self) -> Vec<TenantCounts> {
        self.tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, m)| TenantCounts {
                tenant: name.clone(),
                transactions: m.transactions.load(Ordering::Relaxed),
                statements: m.statements.load(Ordering::Relaxed),
            })
            .collect()
    }
}

/// Of `all` (several cores' counts: a tenant's are summed), the `top`
/// tenants with the most transactions (ties by name), then, when any is
/// left out, one [`OTHER_TENANTS`] entry with the sum of the rest. A tenant
/// named like that entry is always in the rest, so no two entries share a
/// name. Empty when `top` is 0.
pub fn top_tenants(all: impl IntoIterator<Item = TenantCounts>, top: usize) -> Vec<TenantCounts> {
    if top == 0 {
        return Vec::new();
    }
    let mut merged: HashMap<String, TenantCounts> = HashMap::new();
    for t in all {
        let m = merged.entry(t.tenant.clone()).or_insert_with(|| TenantCounts {
            tenant: t.tenant.clone(),
            transactions: 0,
            statements: 0,
        });
        m.transactions += t.transactions;
        m.statements += t.statements;
    }
    let mut all: Vec<TenantCounts> = merged.into_values().collect();
    let named_other = |t: &TenantCounts| t.tenant == OTHER_TENANTS;
    all.sort_by(|a, b| {
        (named_other(a), std::cmp::Reverse(a.transactions), &a.tenant).cmp(&(
            named_other(b),
            std::cmp::Reverse(b.transactions),
            &b.tenant,
        ))
    });
    let shown = all.iter().take(top).take_while(|t| !named_other(t)).count();
    let rest = all.split_off(shown);
    if !rest.is_empty() {
        all.push(TenantCounts {
            tenant: OTHER_TENANTS.to_owned(),
            transactions: rest.iter().map(|t| t.transactions).sum(),
            statements: rest.iter().map(|t| t.statements).sum(),
        });
    }
    all
}

impl EndpointMeter {
    /// Bytes read from a client of the endpoint (after TLS).
    pub fn received(&self, n: usize) {
        self.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes written to a client of the endpoint (before TLS).
    pub fn sent(&self, n: usize) {
        self.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A login failed with an error of condition `reason`
    /// ([`crate::error::Condition::name`]).
    pub fn login_failed(&self, reason: &'static str) {
        *self
            .login_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(reason)
            .or_default() += 1;
    }

    fn counts(&self, endpoint: &str) -> EndpointCounts {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EndpointCounts {
            endpoint: endpoint.to_owned(),
            logins_plain: load(&self.logins[0]),
            logins_tls: load(&self.logins[1]),
            login_failures: self
                .login_failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            transactions: load(&self.transactions),
            statements: load(&self.statements),
            bytes_received: load(&self.bytes_received),
            bytes_sent: load(&self.bytes_sent),
            lease_wait: self.lease_wait.snapshot(),
            statement: self.statement.snapshot(),
            response: self.response.snapshot(),
        }
    }
}

/// When a statement's request was read, and when it went to its backend
/// (later when it waited for a lease).
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub received: Instant,
    pub sent: Instant,
}

/// What one session records into, resolved at its login.
#[derive(Debug)]
pub struct SessionMeter {
    endpoint: Arc<EndpointMeter>,
    tenant: Option<Arc<TenantMeter>>,
    histograms: bool,
    /// A statement ran since the last transaction boundary.
    ran: bool,
    /// The session's own counts, for its end line ([`crate::session_log`]).
    statements: u64,
    transactions: u64,
}

impl SessionMeter {
    /// The endpoint's counters (its client connection counts bytes into them).
    pub fn endpoint(&self) -> &Arc<EndpointMeter> {
        &self.endpoint
    }

    /// The client logged in (authenticated and admitted), over TLS or not.
    pub fn logged_in(&self, tls: bool) {
        self.endpoint.logins[usize::from(tls)].fetch_add(1, Ordering::Relaxed);
    }

    /// Statements this session sent to a backend so far.
    pub fn statements(&self) -> u64 {
        self.statements
    }

    /// Transactions this session ended so far.
    pub fn transactions(&self) -> u64 {
        self.transactions
    }

    /// Whether statement and lease times are recorded.
    pub fn histograms(&self) -> bool {
        self.histograms
    }

    /// Now, when histograms are on (else no clock is read).
    pub fn clock(&self) -> Option<Instant> {
        self.histograms.then(Instant::now)
    }

    /// A client statement goes to a backend (a simple Query, an Execute,
    /// a COM_QUERY, a COM_STMT_EXECUTE).
    pub fn statement(&mut self) {
        self.ran = true;
        self.statements += 1;
        self.endpoint.statements.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = &self.tenant {
            t.statements.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The backend said where the session stands after an answer: a
    /// transaction ends when it is out of one and a statement ran since
    /// the last time it was.
    pub fn boundary(&mut self, in_transaction: bool) {
        if in_transaction || !self.ran {
            return;
        }
        self.ran = false;
        self.transactions += 1;
        self.endpoint.transactions.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = &self.tenant {
            t.transactions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A lease was had after `wait` (recorded when histograms are on).
    pub fn lease_waited(&self, wait: Duration) {
        if self.histograms {
            self.endpoint.lease_wait.record(wait);
        }
    }

    /// A statement stamped `stamp` was answered in full by its backend at
    /// `answered`, and the answer's last byte written to the client at
    /// `written`.
    pub fn answered(&self, stamp: Stamp, answered: Instant, written: Instant) {
        self.endpoint
            .response
            .record(answered.saturating_duration_since(stamp.sent));
        self.endpoint
            .statement
            .record(written.saturating_duration_since(stamp.received));
    }
}
