//! Bounded per-digest statistics: which statement shapes cost the backends
//! the most, in memory that a flood of unique queries cannot grow.
//!
//! A digest is a normalized statement shape with a stable 64-bit id
//! ([`gatehouse_sql::digest`]). Sessions report every statement they ran as
//! a [`Sample`]; [`DigestStats`] keeps, for at most `capacity` digests:
//!
//! * `calls` (see *overestimate* below), `errors` (the backend answered with
//!   an error), `rows` (returned or affected);
//! * backend time, from sending the statement to its last response byte:
//!   total, min, max, mean and p99 in microseconds. p99 comes from an HDR
//!   histogram of 2 significant figures over 1 µs ..= 1 hour (a longer
//!   sample counts as one hour there; min, max and total stay exact), so it
//!   is within 1 % of the true value, and kept within `min ..= max`;
//! * lease wait, the time a statement waited for a backend connection:
//!   total and max;
//! * pins: how often the statement pinned its session, by reason code;
//! * up to [`MAX_NAMES_PER_DIGEST`] tenants and endpoints that ran it, with
//!   a flag when more did;
//! * when it was first and last seen (Unix milliseconds).
//!
//! # Space-Saving top-K
//!
//! When the store is full and an unknown digest arrives, the entry with the
//! fewest `calls` is replaced (Metwally, Agrawal, El Abbadi: *Efficient
//! computation of frequent and top-k elements in data streams*, 2005). The
//! newcomer starts with `calls = evicted.calls + 1` and
//! `overestimate = evicted.calls`: its true count lies within
//! `calls - overestimate ..= calls`. Every other statistic (times, rows,
//! errors, names, pins, first seen) starts fresh, so it describes exactly
//! `calls - overestimate` statements; means divide by that. A digest is
//! never undercounted, and one that ran more than `N / k` of the `N`
//! statements a shard of `k` slots saw is guaranteed to be in the store.
//!
//! # Sharding
//!
//! The store is split into up to [`SHARDS`] shards chosen by a mix of the id,
//! each behind its own `std::sync::Mutex`, so sessions on different cores
//! rarely meet. The capacity is divided exactly among the shards, so the
//! store never holds more than `capacity` entries; the top-K guarantee above
//! holds per shard. A lock is held only for a hash lookup and a few
//! additions; on a miss in a full shard, also for a scan of that shard's call
//! counts (a dense `Vec<u64>`) and for clearing the evicted entry's histogram
//! (its memory is reused, not freed). [`DigestStats::snapshot`] locks a shard
//! once per entry it copies, never for the whole read, so a snapshot is not
//! atomic: an entry evicted while it is taken is left out.
//!
//! # Memory
//!
//! One entry holds at most [`ENTRY_BYTES_BOUND`] bytes, nearly all of it the
//! histogram ([`HISTOGRAM_BYTES`]); the store at most
//! `capacity * ENTRY_BYTES_BOUND` plus a few hundred bytes per shard.

mod entry;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(crate) use entry::cut;
use entry::{Shard, mix};

/// Distinct tenants (and, separately, endpoints) kept per digest; further
/// names only set [`DigestRow::more_tenants`] / [`DigestRow::more_endpoints`].
pub const MAX_NAMES_PER_DIGEST: usize = 8;

/// A tenant or endpoint name longer than this many bytes is kept cut at the
/// last char boundary at or below it.
pub const MAX_NAME_BYTES: usize = 128;

/// Distinct pin reason codes counted per digest; further codes are counted
/// under [`PIN_OTHER`].
pub const MAX_PIN_REASONS: usize = 16;

/// The pin reason under which codes past [`MAX_PIN_REASONS`] are counted.
pub const PIN_OTHER: &str = "other";

/// Longest digest text kept, in bytes: what [`gatehouse_sql::digest`]
/// produces at most. A longer text (from elsewhere) is cut at a char boundary.
pub const MAX_TEXT_BYTES: usize = gatehouse_sql::MAX_DIGEST_TEXT + 3;

/// Most shards a store is split into (fewer when `capacity` is smaller).
pub const SHARDS: usize = 16;

/// Highest backend time the histogram tells apart: one hour, in µs.
pub const HISTOGRAM_HIGH_US: u64 = 3_600_000_000;

/// Significant decimal figures of the histogram: a percentile is within
/// 1/16 (6.25 %) of the true value, and a histogram takes under 2 KiB.
pub const HISTOGRAM_SIGFIG: u8 = 1;

/// Bytes of one entry's histogram, measured (see the test
/// `memory_per_entry_is_fixed_and_within_the_documented_bound`): 464
/// `u32` counters for 1 µs ..= 1 h at 1 significant figure, plus the
/// 96-byte struct. Fixed: values are clamped, the histogram never resizes
/// (a counter saturates at `u32::MAX`).
pub const HISTOGRAM_BYTES: usize = 464 * 4 + 96;

/// Upper bound of the memory of one entry, in bytes: the histogram
/// ([`HISTOGRAM_BYTES`], 1 952), the text (at most [`MAX_TEXT_BYTES`],
/// 1 027), tenant and endpoint names (at most `2 * MAX_NAMES_PER_DIGEST *
/// (16 + MAX_NAME_BYTES)` = 2 304), pin counts (at most
/// [`MAX_PIN_REASONS`] + 1 keys in two B-tree nodes, under 1 KiB), the
/// entry struct, its call counter and its index slot (under 1 KiB): 6 405
/// bytes on x86_64 (summed by the test named under [`HISTOGRAM_BYTES`]),
/// rounded up to 8 KiB.
pub const ENTRY_BYTES_BOUND: usize = 8 * 1024;

/// One statement's outcome, reported by a session.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// The digest id ([`gatehouse_sql::Digest::id`]).
    pub id: u64,
    /// The digest text; copied only when the digest enters the store.
    pub text: &'a str,
    pub tenant: &'a str,
    pub endpoint: &'a str,
    /// Time from sending to the backend to its last response byte.
    pub backend: Duration,
    /// Time the statement waited for a backend connection (0 if it had one).
    pub lease_wait: Duration,
    /// Rows returned or affected.
    pub rows: u64,
    /// The backend answered with an error.
    pub error: bool,
    /// The session was pinned by this statement, with this reason code.
    pub pin: Option<&'static str>,
}

/// Statistics of the heaviest digests, in bounded memory; shared by all
/// sessions (see the module docs).
pub struct DigestStats {
    capacity: usize,
    shards: Box<[Mutex<Shard>]>,
}

/// One digest's statistics, as read by [`DigestStats::snapshot`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct DigestRow {
    /// 16 lower-case hex digits of the u64 id (JSON numbers lose u64
    /// precision).
    pub id: String,
    pub text: String,
    /// Statements counted, of which up to `overestimate` may belong to
    /// digests this entry replaced.
    pub calls: u64,
    /// `calls` of the entry this one replaced (0 if none): the true count is
    /// within `calls - overestimate ..= calls`.
    pub overestimate: u64,
    pub errors: u64,
    pub rows: u64,
    /// Backend time, over the `calls - overestimate` statements seen.
    pub total_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub mean_us: u64,
    pub p99_us: u64,
    pub lease_wait_total_us: u64,
    pub lease_wait_max_us: u64,
    /// Statements that pinned their session, by reason code.
    pub pins: BTreeMap<&'static str, u64>,
    /// Sorted, at most [`MAX_NAMES_PER_DIGEST`].
    pub tenants: Vec<String>,
    /// Sorted, at most [`MAX_NAMES_PER_DIGEST`].
    pub endpoints: Vec<String>,
    /// A tenant did not fit in `tenants`.
    pub more_tenants: bool,
    /// An endpoint did not fit in `endpoints`.
    pub more_endpoints: bool,
    pub first_seen_unix_ms: u64,
    pub last_seen_unix_ms: u64,
}

impl DigestStats {
    /// A store of at most `capacity` digests (a `capacity` of 0 is taken as
    /// 1), each entry at most [`ENTRY_BYTES_BOUND`] bytes (8 KiB,
    /// mostly its histogram), so at most `capacity * ENTRY_BYTES_BOUND`
    /// bytes in all. Entries are allocated as digests arrive, not up front.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let n = capacity.min(SHARDS);
        let shards = (0..n)
            .map(|i| Mutex::new(Shard::new(capacity / n + usize::from(i < capacity % n))))
            .collect();
        DigestStats { capacity, shards }
    }

    /// The most entries the store holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counts one statement, seen now.
    pub fn record(&self, s: &Sample<'_>) {
        self.record_at(s, unix_ms_now());
    }

    /// Counts one statement, seen at `now_unix_ms` (for callers that already
    /// read the clock, and for tests).
    pub fn record_at(&self, s: &Sample<'_>, now_unix_ms: u64) {
        let backend_us = micros(s.backend);
        let lease_wait_us = micros(s.lease_wait);
        self.lock(self.shard_of(s.id))
            .record(s, backend_us, lease_wait_us, now_unix_ms);
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|i| self.lock(i).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry, heaviest (total backend time) first, ties by id;
    /// `limit` caps the count. Locks each shard once to list its entries,
    /// then once per entry copied.
    pub fn snapshot(&self, limit: Option<usize>) -> Vec<DigestRow> {
        let mut heads: Vec<(u64, u64, usize)> = Vec::new();
        for i in 0..self.shards.len() {
            let shard = self.lock(i);
            heads.extend(shard.heads().map(|(total, id)| (total, id, i)));
        }
        heads.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        if let Some(limit) = limit {
            heads.truncate(limit);
        }
        let mut rows: Vec<DigestRow> = heads.iter().filter_map(|&(_, id, i)| self.lock(i).row(id)).collect();
        // Totals may have grown between the two passes.
        rows.sort_by(|a, b| b.total_us.cmp(&a.total_us).then_with(|| a.id.cmp(&b.id)));
        rows
    }

    /// Forgets every entry and the eviction count. Memory is freed outside
    /// the locks.
    pub fn reset(&self) {
        for i in 0..self.shards.len() {
            let mut shard = self.lock(i);
            let fresh = Shard::new(shard.capacity());
            let old = std::mem::replace(&mut *shard, fresh);
            drop(shard);
            drop(old);
        }
    }

    /// Entries replaced by newcomers since the store was made or reset.
    pub fn evictions(&self) -> u64 {
        (0..self.shards.len())
            .map(|i| self.lock(i).evictions())
            .fold(0, u64::saturating_add)
    }

    /// The shard an id lives in: the low half of a mix of the id, mapped onto
    /// `0..shards` by multiplication (the maps inside hash the bits outside).
    fn shard_of(&self, id: u64) -> usize {
        let low = mix(id) & 0xffff_ffff;
        ((low * self.shards.len() as u64) >> 32) as usize
    }

    fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        self.shards[i].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for DigestStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DigestStats")
            .field("capacity", &self.capacity)
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

/// Whole microseconds, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
