//! What a load run measured: every request's latency in HDR histograms,
//! one per second of the run, one per tenant and one overall, with
//! requests, failures by code (and the first message of each), the virtual
//! users active, and the watched processes' samples of each second.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::client::Failure;
use super::procs::ProcSample;

/// Latencies are kept in microseconds, from 1 µs up to this (an hour).
const HIGHEST_US: u64 = 3_600_000_000;
/// Significant figures of the overall histogram (within 0.1 %).
const OVERALL_SIGFIG: u8 = 3;
/// Significant figures of each second's and each tenant's (within 1 %, a
/// few KiB each).
const SECOND_SIGFIG: u8 = 2;

/// One second of the run.
pub struct Second {
    pub requests: u64,
    pub failures: u64,
    pub latency: Histogram<u64>,
    pub users: u32,
    pub procs: Vec<ProcSample>,
    /// Each counted server's client connections (`None`: not answered).
    pub connections: Vec<Option<u64>>,
    /// Each sampled proxy metric (`None`: not read).
    pub metrics: Vec<Option<f64>>,
}

/// Latency percentiles of a histogram, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        }
    }
}

/// One tenant's requests over the run (a target without tenants is one
/// tenant), so that a tenant served worse than the others shows.
pub struct TenantLatency {
    pub requests: u64,
    pub failures: u64,
    /// Its successful requests' latencies.
    pub latency: Histogram<u64>,
}

impl TenantLatency {
    fn new() -> Self {
        Self {
            requests: 0,
            failures: 0,
            latency: histogram(SECOND_SIGFIG),
        }
    }
}

struct Inner {
    seconds: Vec<Second>,
    overall: Histogram<u64>,
    requests: u64,
    failures: BTreeMap<String, (u64, String)>,
    tenants: Vec<TenantLatency>,
}

/// Shared by the virtual users (one short lock per request).
pub struct Recorder {
    start: Instant,
    inner: Mutex<Inner>,
}

fn histogram(sigfig: u8) -> Histogram<u64> {
    match Histogram::new_with_bounds(1, HIGHEST_US, sigfig) {
        Ok(h) => h,
        // The bounds and figures are constants within hdrhistogram's limits.
        Err(e) => unreachable!("histogram bounds: {e}"),
    }
}

impl Recorder {
    /// A recorder for a run of `tenants` tenants (indices `0..tenants`).
    pub fn new(start: Instant, tenants: usize) -> Self {
        Self {
            start,
            inner: Mutex::new(Inner {
                seconds: Vec::new(),
                overall: histogram(OVERALL_SIGFIG),
                requests: 0,
                failures: BTreeMap::new(),
                tenants: (0..tenants).map(|_| TenantLatency::new()).collect(),
            }),
        }
    }

    fn second_at(inner: &mut Inner, i: usize) -> &mut Second {
        while inner.seconds.len() <= i {
            inner.seconds.push(Second {
                requests: 0,
                failures: 0,
                latency: histogram(SECOND_SIGFIG),
                users: 0,
                procs: Vec::new(),
                connections: Vec::new(),
                metrics: Vec::new(),
            });
        }
        &mut inner.seconds[i]
    }

    /// One request of tenant `tenant` that ended now, after `took`: its
    /// latency when it succeeded, its failure otherwise (failed requests'
    /// latencies are not mixed into the percentiles). A tenant outside the
    /// recorder's counts only in the totals.
    pub fn record(&self, took: Duration, outcome: Result<(), Failure>, tenant: usize) {
        let i = self.start.elapsed().as_secs() as usize;
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).clamp(1, HIGHEST_US);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.requests += 1;
        if let Some(t) = inner.tenants.get_mut(tenant) {
            t.requests += 1;
            match &outcome {
                Ok(()) => t.latency.saturating_record(us),
                Err(_) => t.failures += 1,
            }
        }
        match outcome {
            Ok(()) => {
                inner.overall.saturating_record(us);
                let s = Self::second_at(&mut inner, i);
                s.requests += 1;
                s.latency.saturating_record(us);
            }
            Err(f) => {
                let entry = inner.failures.entry(f.code).or_insert((0, f.message));
                entry.0 += 1;
                let s = Self::second_at(&mut inner, i);
                s.requests += 1;
                s.failures += 1;
            }
        }
    }

    /// Notes the users active, the watched processes' samples, the counted
    /// servers' connections and the proxy's metrics for second `i`.
    pub fn tick(
        &self,
        i: usize,
        users: u32,
        procs: Vec<ProcSample>,
        connections: Vec<Option<u64>>,
        metrics: Vec<Option<f64>>,
    ) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let s = Self::second_at(&mut inner, i);
        s.users = users;
        s.procs = procs;
        s.connections = connections;
        s.metrics = metrics;
    }

    /// Requests, failures and percentiles of second `i` so far.
    pub fn second(&self, i: usize) -> (u64, u64, Percentiles) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.seconds.get(i).map_or((0, 0, Percentiles::default()), |s| {
            (s.requests, s.failures, Percentiles::of(&s.latency))
        })
    }

    /// Failures so far, all codes.
    pub fn failures(&self) -> u64 {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.failures.values().map(|(n, _)| n).sum()
    }

    /// Everything measured, for the report: the seconds (the first
    /// `keep`: the run's, not the tail of requests still in flight at its
    /// end), the overall histogram, requests, failures by code with their
    /// first message, and each tenant's. Takes them out: a user still
    /// finishing a request records into an empty recorder.
    pub fn finish(&self, keep: usize) -> Measured {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seconds = std::mem::take(&mut inner.seconds);
        seconds.truncate(keep);
        Measured {
            seconds,
            overall: std::mem::replace(&mut inner.overall, histogram(OVERALL_SIGFIG)),
            requests: std::mem::take(&mut inner.requests),
            failures: std::mem::take(&mut inner.failures),
            tenants: std::mem::take(&mut inner.tenants),
        }
    }
}

pub struct Measured {
    pub seconds: Vec<Second>,
    pub overall: Histogram<u64>,
    pub requests: u64,
    pub failures: BTreeMap<String, (u64, String)>,
    /// By tenant index.
    pub tenants: Vec<TenantLatency>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_land_in_their_second_and_failures_by_code() {
        let r = Recorder::new(Instant::now(), 2);
        for ms in [1, 2, 3, 4, 100] {
            r.record(Duration::from_millis(ms), Ok(()), usize::from(ms == 100));
        }
        r.record(Duration::from_millis(5), Err(Failure::new("42601", "syntax error")), 0);
        r.record(Duration::from_millis(5), Err(Failure::new("42601", "another")), 1);
        r.record(Duration::from_millis(5), Err(Failure::new("connect", "refused")), 7);
        r.tick(0, 3, Vec::new(), vec![Some(4)], vec![Some(2.0)]);
        let (requests, failures, p) = r.second(0);
        assert_eq!((requests, failures), (8, 3));
        assert!(p.p50 >= 2.9 && p.p50 <= 3.1 && p.max >= 99.0, "{p:?}");
        assert_eq!(r.failures(), 3);
        let m = r.finish(10);
        assert_eq!(m.requests, 8);
        assert_eq!(m.overall.len(), 5, "failed requests stay out of the percentiles");
        assert_eq!(m.failures.get("42601"), Some(&(2, "syntax error".to_string())));
        assert_eq!(m.seconds[0].users, 3);
        assert_eq!(m.seconds[0].connections, [Some(4)]);
        assert_eq!(m.seconds[0].metrics, [Some(2.0)]);
        let tenants: Vec<(u64, u64, u64)> = m
            .tenants
            .iter()
            .map(|t| (t.requests, t.failures, t.latency.len()))
            .collect();
        assert_eq!(tenants, [(5, 1, 4), (2, 1, 1)], "tenant 7 is outside: totals only");
        assert!(m.tenants[1].latency.max() >= 99_000);
    }
}
