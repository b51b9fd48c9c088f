//! Counters the proxy keeps about itself, shared by all sessions of a core:
//! for now, pinned sessions by reason (so users can see what pins them).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

#[derive(Debug, Default)]
pub struct Stats {
    pins: Mutex<BTreeMap<&'static str, u64>>,
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
}
