//! One shard of the digest store: a Space-Saving table of entries, and the
//! entry itself.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use hdrhistogram::Histogram;

use super::{
    DigestRow, HISTOGRAM_HIGH_US, HISTOGRAM_SIGFIG, MAX_NAME_BYTES, MAX_NAMES_PER_DIGEST, MAX_PIN_REASONS,
    MAX_TEXT_BYTES, PIN_OTHER, Sample,
};

/// A finalizer of 64-bit hashes (MurmurHash3's `fmix64`): every bit of the
/// id moves about half the bits of the result. Ids are FNV-1a hashes, whose
/// low bits are weak, and tests use small consecutive ids.
pub(super) fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Hashes a u64 id with [`mix`], cheaper than SipHash. It is not keyed: a
/// client could craft statements whose ids share a bucket, but a shard holds
/// at most its capacity, so a lookup then costs at most a scan of the shard,
/// as a miss in a full shard does anyway.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = mix(id);
    }
}

/// One shard: `entries[i]` has `calls[i]` calls and `index[&entries[i].id]
/// == i`. Slots are only ever reused, never removed (until a reset).
pub(super) struct Shard {
    capacity: usize,
    index: HashMap<u64, usize, BuildHasherDefault<IdHasher>>,
    /// Dense, so the scan for the minimum on a miss stays in cache.
    calls: Vec<u64>,
    entries: Vec<Entry>,
    evictions: u64,
}

impl Shard {
    pub(super) fn new(capacity: usize) -> Self {
        Shard {
            capacity,
            index: HashMap::default(),
            calls: Vec::new(),
            entries: Vec::new(),
            evictions: 0,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn evictions(&self) -> u64 {
        self.evictions
    }

    pub(super) fn record(&mut self, s: &Sample<'_>, backend_us: u64, lease_wait_us: u64, now_ms: u64) {
        let i = if let Some(&i) = self.index.get(&s.id) {
            self.calls[i] = self.calls[i].saturating_add(1);
            i
        } else if self.entries.len() < self.capacity {
            let i = self.entries.len();
            self.entries.push(Entry::new(s.id, s.text, 0, now_ms));
            self.calls.push(1);
            self.index.insert(s.id, i);
            i
        } else if let Some(i) = min_index(&self.calls) {
            // Space-Saving: the newcomer takes the least-called slot and its
            // count, plus one.
            let floor = self.calls[i];
            self.index.remove(&self.entries[i].id);
            self.index.insert(s.id, i);
            self.entries[i].reuse(s.id, s.text, floor, now_ms);
            self.calls[i] = floor.saturating_add(1);
            self.evictions = self.evictions.saturating_add(1);
            i
        } else {
            // A shard of capacity 0; `DigestStats::new` makes none.
            return;
        };
        self.entries[i].observe(s, backend_us, lease_wait_us, now_ms);
    }

    /// `(total_us, id)` of every entry.
    pub(super) fn heads(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.entries.iter().map(|e| (e.total_us, e.id))
    }

    /// The row of entry `id`, if it is (still) here.
    pub(super) fn row(&self, id: u64) -> Option<DigestRow> {
        let &i = self.index.get(&id)?;
        Some(self.entries[i].row(self.calls[i]))
    }

    #[cfg(test)]
    pub(super) fn histogram_bytes(&self) -> Option<usize> {
        let h = self.entries.first()?.hist.as_ref()?;
        Some(size_of::<Histogram<u32>>() + h.distinct_values() * size_of::<u32>())
    }
}

/// The first index of the smallest count; stops at 1, the least there is.
fn min_index(calls: &[u64]) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, &c) in calls.iter().enumerate() {
        if best.is_none_or(|(_, b)| c < b) {
            best = Some((i, c));
            if c <= 1 {
                break;
            }
        }
    }
    best.map(|(i, _)| i)
}

/// One digest's statistics, except its call count (in [`Shard::calls`]).
pub(super) struct Entry {
    id: u64,
    text: String,
    overestimate: u64,
    errors: u64,
    rows: u64,
    total_us: u64,
    min_us: u64,
    max_us: u64,
    lease_wait_total_us: u64,
    lease_wait_max_us: u64,
    /// `None` only if the histogram could not be made, which its constant
    /// bounds rule out (a test makes one).
    hist: Option<Histogram<u32>>,
    pins: BTreeMap<&'static str, u64>,
    tenants: Names,
    endpoints: Names,
    first_seen_unix_ms: u64,
    last_seen_unix_ms: u64,
}

impl Entry {
    fn new(id: u64, text: &str, overestimate: u64, now_ms: u64) -> Self {
        Entry {
            text: cut(text, MAX_TEXT_BYTES).to_owned(),
            hist: new_histogram(),
            ..Entry::empty(id, overestimate, now_ms)
        }
    }

    /// Turns this (evicted) entry into a fresh one for `id`, keeping its
    /// allocations: the histogram's counters, the text's and the names'
    /// buffers.
    fn reuse(&mut self, id: u64, text: &str, overestimate: u64, now_ms: u64) {
        let mut fresh = Entry::empty(id, overestimate, now_ms);
        let text = cut(text, MAX_TEXT_BYTES);
        fresh.text = std::mem::take(&mut self.text);
        fresh.text.clear();
        // Exact, so the buffer never outgrows the longest text kept.
        fresh.text.reserve_exact(text.len());
        fresh.text.push_str(text);
        fresh.hist = match self.hist.take() {
            Some(mut h) => {
                h.reset();
                Some(h)
            }
            None => new_histogram(),
        };
        fresh.tenants = std::mem::take(&mut self.tenants).cleared();
        fresh.endpoints = std::mem::take(&mut self.endpoints).cleared();
        *self = fresh;
    }

    /// An entry without text or histogram (allocates nothing).
    fn empty(id: u64, overestimate: u64, now_ms: u64) -> Self {
        Entry {
            id,
            text: String::new(),
            overestimate,
            errors: 0,
            rows: 0,
            total_us: 0,
            min_us: u64::MAX,
            max_us: 0,
            lease_wait_total_us: 0,
            lease_wait_max_us: 0,
            hist: None,
            pins: BTreeMap::new(),
            tenants: Names::default(),
            endpoints: Names::default(),
            first_seen_unix_ms: now_ms,
            last_seen_unix_ms: now_ms,
        }
    }

    fn observe(&mut self, s: &Sample<'_>, backend_us: u64, lease_wait_us: u64, now_ms: u64) {
        self.errors = self.errors.saturating_add(u64::from(s.error));
        self.rows = self.rows.saturating_add(s.rows);
        self.total_us = self.total_us.saturating_add(backend_us);
        self.min_us = self.min_us.min(backend_us);
        self.max_us = self.max_us.max(backend_us);
        if let Some(h) = &mut self.hist {
            h.saturating_record(backend_us);
        }
        self.lease_wait_total_us = self.lease_wait_total_us.saturating_add(lease_wait_us);
        self.lease_wait_max_us = self.lease_wait_max_us.max(lease_wait_us);
        if let Some(code) = s.pin {
            let key = if self.pins.len() < MAX_PIN_REASONS || self.pins.contains_key(code) {
                code
            } else {
                PIN_OTHER
            };
            let n = self.pins.entry(key).or_insert(0);
            *n = n.saturating_add(1);
        }
        self.tenants.note(s.tenant);
        self.endpoints.note(s.endpoint);
        self.last_seen_unix_ms = self.last_seen_unix_ms.max(now_ms);
    }

    fn row(&self, calls: u64) -> DigestRow {
        let seen = calls.saturating_sub(self.overestimate).max(1);
        let min_us = self.min_us.min(self.max_us);
        let p99_us = self.hist.as_ref().map_or(self.max_us, |h| h.value_at_quantile(0.99));
        DigestRow {
            id: format!("{:016x}", self.id),
            text: self.text.clone(),
            calls,
            overestimate: self.overestimate,
            errors: self.errors,
            rows: self.rows,
            total_us: self.total_us,
            min_us,
            max_us: self.max_us,
            mean_us: self.total_us / seen,
            // The histogram's buckets are up to 1 % wide; never report a p99
            // outside what was seen.
            p99_us: p99_us.min(self.max_us).max(min_us),
            lease_wait_total_us: self.lease_wait_total_us,
            lease_wait_max_us: self.lease_wait_max_us,
            pins: self.pins.clone(),
            tenants: self.tenants.sorted(),
            endpoints: self.endpoints.sorted(),
            more_tenants: self.tenants.more,
            more_endpoints: self.endpoints.more,
            first_seen_unix_ms: self.first_seen_unix_ms,
            last_seen_unix_ms: self.last_seen_unix_ms,
        }
    }
}

/// At most [`MAX_NAMES_PER_DIGEST`] distinct names, in arrival order.
#[derive(Default)]
struct Names {
    list: Vec<Box<str>>,
    more: bool,
}

impl Names {
    /// Keeps `name` if there is room; an empty name is not kept.
    fn note(&mut self, name: &str) {
        let name = cut(name, MAX_NAME_BYTES);
        if name.is_empty() || self.list.iter().any(|n| **n == *name) {
            return;
        }
        if self.list.len() < MAX_NAMES_PER_DIGEST {
            self.list.push(name.into());
        } else {
            self.more = true;
        }
    }

    /// Empty, keeping the list's buffer.
    fn cleared(mut self) -> Self {
        self.list.clear();
        self.more = false;
        self
    }

    fn sorted(&self) -> Vec<String> {
        let mut v: Vec<String> = self.list.iter().map(|n| n.to_string()).collect();
        v.sort_unstable();
        v
    }
}

/// A histogram of 1 µs ..= 1 h at [`HISTOGRAM_SIGFIG`] figures; `None` only
/// if those constants were invalid (a test makes one).
fn new_histogram() -> Option<Histogram<u32>> {
    Histogram::new_with_bounds(1, HISTOGRAM_HIGH_US, HISTOGRAM_SIGFIG).ok()
}

pub(crate) use gatehouse_settings::text::cut;
