//! Abuse limits, engine-agnostic (both engines' logins use them): failed
//! logins are rate limited per source address and per user name, and new
//! connections per tenant. GCRA limiters from `governor`, one [`Limits`]
//! per [`crate::core::Core`].
//!
//! **Failed logins.** The user name is the one the client sent, so unknown
//! names are limited exactly like tenants and a refusal never tells whether a
//! tenant exists. Only failures count: [`Limits::login_allowed`] is asked
//! before any password is looked at, and [`Limits::record_failure`] charges
//! both keys when authentication fails; a success costs nothing. `governor`
//! cannot look at a key without charging it, so a key whose failure used up
//! its burst is noted in a small "blocked until" table (until one failure's
//! worth of budget is back), which is what [`Limits::login_allowed`] reads.
//! IPv6 addresses are limited per /64 (what one host usually holds); IPv4
//! and IPv4-mapped addresses per address.
//!
//! **Reload.** [`Limits::set_failure_limits`] takes new per-minute limits
//! in place: a limit that changed starts counting afresh under its new
//! quota (`governor` cannot change a limiter's quota, and carrying counts
//! over between quotas would be a guess), while keys already over the old
//! limit stay refused until their time is up, so a reload never lifts a
//! block. A limit that did not change keeps its counts.
//!
//! **Connection rate.** A tenant with a `connection_rate` gets a limiter of
//! its own (tenants' quotas differ, and a keyed `governor` limiter has one
//! quota), checked only after the client proved who it is.
//!
//! **Memory.** Keyed state grows with distinct keys, which an attacker
//! chooses (names; addresses with IPv6). Each table is pruned when it passes
//! a threshold (`retain_recent` for `governor`'s store, expired entries for
//! the blocked table) and the threshold then becomes twice what survived (at
//! least [`PRUNE_FLOOR`]), so pruning is amortised O(1) per failure and needs
//! no task of its own. A key is dropped at most one burst window (a minute
//! at the defaults) after its last failure.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::{NoOpMiddleware, StateInformationMiddleware};
use governor::nanos::Nanos;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::config::ConnectionRate;

pub use gatehouse_settings::limits::{
    DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_ADDRESS, DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_USER,
};
/// Keys a table holds before it is first pruned.
pub const PRUNE_FLOOR: usize = 4096;

/// What a client over a failed-login limit is told: the same for every
/// name, known or not, and for both limits.
pub const TOO_MANY_FAILURES: &str = "too many failed login attempts; try again later";

/// The rate limiters of one proxy instance.
pub struct Limits<C: Clock = DefaultClock> {
    by_address: ArcSwap<Failures<IpAddr, C>>,
    by_user: ArcSwap<Failures<String, C>>,
    tenants: Mutex<HashMap<String, (ConnectionRate, TenantLimiter<C>)>>,
    clock: C,
}

type TenantLimiter<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

impl Limits<DefaultClock> {
    /// Limits allowing `per_address` and `per_user` failed logins a minute.
    pub fn new(per_address: NonZeroU32, per_user: NonZeroU32) -> Self {
        Self::with_clock(per_address, per_user, DefaultClock::default())
    }
}

impl<C: Clock + Clone> Limits<C> {
    pub fn with_clock(per_address: NonZeroU32, per_user: NonZeroU32, clock: C) -> Self {
        Self {
            by_address: ArcSwap::from_pointee(Failures::new(per_address, clock.clone())),
            by_user: ArcSwap::from_pointee(Failures::new(per_user, clock.clone())),
            tenants: Mutex::default(),
            clock,
        }
    }

    /// Whether a login from `addr` as `user` may be tried at all: `false`
    /// while either is over its failed-login limit.
    pub fn login_allowed(&self, addr: IpAddr, user: &str) -> bool {
        !self.by_address.load().is_blocked(&address_key(addr)) && !self.by_user.load().is_blocked(user)
    }

    /// Counts one failed login from `addr` as `user`.
    pub fn record_failure(&self, addr: IpAddr, user: &str) {
        self.by_address.load().record(address_key(addr));
        self.by_user.load().record(user.to_owned());
    }

    /// The failed-login limits now: (per address, per user), a minute.
    pub fn failure_limits(&self) -> (NonZeroU32, NonZeroU32) {
        (self.by_address.load().per_minute, self.by_user.load().per_minute)
    }

    /// Takes new failed-login limits (a reload; see the module comment):
    /// a changed one counts afresh, its blocked keys stay blocked.
    pub fn set_failure_limits(&self, per_address: NonZeroU32, per_user: NonZeroU32) {
        if self.by_address.load().per_minute != per_address {
            let renewed = self.by_address.load().renewed(per_address);
            self.by_address.store(Arc::new(renewed));
        }
        if self.by_user.load().per_minute != per_user {
            let renewed = self.by_user.load().renewed(per_user);
            self.by_user.store(Arc::new(renewed));
        }
    }

    /// Whether `tenant` may open one more connection now (and counts it);
    /// always `true` without a rate. A changed rate (after a reload) starts
    /// a fresh limiter.
    pub fn connection_allowed(&self, tenant: &str, rate: Option<ConnectionRate>) -> bool {
        let Some(rate) = rate else {
            return true;
        };
        let mut tenants = self.tenants.lock().unwrap_or_else(PoisonError::into_inner);
        match tenants.get(tenant) {
            Some((r, limiter)) if *r == rate => limiter.check().is_ok(),
            _ => {
                let quota = Quota::per_second(rate.per_second).allow_burst(rate.burst);
                let limiter = RateLimiter::direct_with_clock(quota, self.clock.clone());
                let allowed = limiter.check().is_ok();
                tenants.insert(tenant.to_owned(), (rate, limiter));
                allowed
            }
        }
    }

    /// Drops the connection-rate state of tenants for which `keep` is false
    /// (called on reload with the new tenant table).
    pub fn retain_tenants(&self, keep: impl Fn(&str) -> bool) {
        self.tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|name, _| keep(name));
    }

    /// Keys held by the failed-login tables (limiter state and blocked
    /// keys), for tests and metrics.
    pub fn tracked_keys(&self) -> usize {
        self.by_address.load().len() + self.by_user.load().len()
    }
}

/// The key an address is limited under: IPv4 (also when mapped into IPv6)
/// as is, IPv6 by its /64.
pub fn address_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
        v4 => v4,
    }
}

/// A failed-login limiter for one kind of key.
struct Failures<K: Hash + Eq + Clone, C: Clock> {
    /// The limit this limiter was built for: failures a minute, and the burst.
    per_minute: NonZeroU32,
    limiter: RateLimiter<K, DefaultKeyedStateStore<K>, C, StateInformationMiddleware>,
    /// Keys that used up their burst, and when one more failure is allowed.
    blocked: Mutex<Blocked<K, C::Instant>>,
    /// Size of `limiter` at which it is pruned next.
    prune_at: AtomicUsize,
    replenish: Nanos,
    clock: C,
}

struct Blocked<K, I> {
    until: HashMap<K, I>,
    prune_at: usize,
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> Failures<K, C> {
    fn new(per_minute: NonZeroU32, clock: C) -> Self {
        let quota = Quota::per_minute(per_minute);
        Self {
            per_minute,
            limiter: RateLimiter::dashmap_with_clock(quota, clock.clone()).with_middleware(),
            blocked: Mutex::new(Blocked {
                until: HashMap::new(),
                prune_at: PRUNE_FLOOR,
            }),
            prune_at: AtomicUsize::new(PRUNE_FLOOR),
            replenish: quota.replenish_interval().into(),
            clock,
        }
    }

    /// A limiter for `per_minute` that counts afresh, with the keys
    /// blocked now still blocked until their time.
    fn renewed(&self, per_minute: NonZeroU32) -> Self {
        let fresh = Self::new(per_minute, self.clock.clone());
        {
            let now = self.clock.now();
            let old = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
            let mut blocked = fresh.blocked.lock().unwrap_or_else(PoisonError::into_inner);
            blocked.until = old
                .until
                .iter()
                .filter(|(_, until)| **until > now)
                .map(|(k, until)| (k.clone(), *until))
                .collect();
            blocked.prune_at = PRUNE_FLOOR.max(blocked.until.len().saturating_mul(2));
        }
        fresh
    }

    fn is_blocked<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        let now = self.clock.now();
        let mut blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        match blocked.until.get(key) {
            Some(until) if *until > now => true,
            Some(_) => {
                blocked.until.remove(key);
                false
            }
            None => false,
        }
    }

    fn record(&self, key: K) {
        let now = self.clock.now();
        let until = match self.limiter.check_key(&key) {
            Ok(state) if state.remaining_burst_capacity() > 0 => None,
            // The burst is used up: the next failure is allowed once one
            // cell is back, at most one replenish interval from now.
            Ok(_) => Some(now + self.replenish),
            // Attempts let in before the key was blocked, failing late.
            Err(not_until) => Some(not_until.earliest_possible()),
        };
        if self.limiter.len() > self.prune_at.load(Ordering::Relaxed) {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
            let left = self.limiter.len();
            self.prune_at
                .store(PRUNE_FLOOR.max(left.saturating_mul(2)), Ordering::Relaxed);
        }
        let Some(until) = until else {
            return;
        };
        let mut blocked = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        blocked.until.insert(key, until);
        if blocked.until.len() > blocked.prune_at {
            blocked.until.retain(|_, u| *u > now);
            blocked.until.shrink_to_fit();
            blocked.prune_at = PRUNE_FLOOR.max(blocked.until.len().saturating_mul(2));
        }
    }

    fn len(&self) -> usize {
        self.limiter.len() + self.blocked.lock().unwrap_or_else(PoisonError::into_inner).until.len()
    }
}

#[cfg(test)]
mod tests;
