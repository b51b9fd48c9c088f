//! A latency histogram of fixed buckets, recorded with relaxed atomic adds
//! (no lock, no allocation): one count per bucket and the sum of the
//! values in nanoseconds. Its total count is the sum of its buckets, read
//! at each scrape, so `_count` always equals the `+Inf` bucket.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds (a last `+Inf` bucket follows):
/// from 100 µs (a proxied statement on a local network) to 10 s.
pub const BUCKETS_SECONDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// [`BUCKETS_SECONDS`] in nanoseconds, what a record compares against.
const BOUNDS_NANOS: [u64; BUCKETS_SECONDS.len()] = {
    let mut out = [0; BUCKETS_SECONDS.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = (BUCKETS_SECONDS[i] * 1e9) as u64;
        i += 1;
    }
    out
};

/// The buckets and the `+Inf` one.
const SLOTS: usize = BUCKETS_SECONDS.len() + 1;

#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; SLOTS],
    sum_nanos: AtomicU64,
}

/// What a scrape reads of a [`Histogram`].
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// (upper bound in seconds, values in this bucket alone), ascending,
    /// the last one `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    /// Records one value.
    pub fn record(&self, value: Duration) {
        let nanos = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        // The first bucket whose bound the value does not exceed (`le`).
        let slot = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = BUCKETS_SECONDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.counts)
            .map(|(bound, n)| (bound, n.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|(_, n)| n).sum(),
            buckets,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}
