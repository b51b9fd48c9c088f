//! Counters the proxy keeps about itself, shared by all sessions of a core:
//! pinned sessions by reason, errors sent to clients by kind and condition,
//! client connections accepted, and reloads. The admin API reads them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::ProxyError;

#[derive(Debug, Default)]
pub struct Stats {
    pins: Mutex<BTreeMap<&'static str, u64>>,
    errors: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    accepted: AtomicU64,
}

impl Stats {
    /// Counts one session pinned for `reason` (a stable, short code).
    pub fn record_pin(&self, reason: &'static str) {
        *self
            .pins
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(reason)
            .or_default() += 1;
    }

    /// Pinned sessions so far, by reason.
    pub fn pins(&self) -> BTreeMap<&'static str, u64> {
        self.pins.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Counts one error that ended a client's session (or its login).
    pub fn record_error(&self, e: &ProxyError) {
        let key = (e.kind().name(), e.condition.name());
        *self
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default() += 1;
    }

    /// Errors so far, by (kind, condition).
    pub fn errors(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        self.errors.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Counts one accepted client connection.
    pub fn record_accept(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Client connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}
