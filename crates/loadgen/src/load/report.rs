//! A finished run's report: the terminal table and the JSON document (the
//! plan, the summary, the overall latency histogram for exact merging of
//! rounds, failures by code, every second with its percentiles, the
//! watched processes, the counted connections and the proxy's metrics, and
//! with tenants each tenant's requests and latency histogram), which
//! `gatehouse-loadgen report` puts side by side.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::LoadReport;
use super::procs::{ProcSample, Watched};
use super::record::Percentiles;
use crate::html::merge::{fairness, from_histogram};

/// One second's samples as the run's JSON has them, each with its name:
/// the watched processes, the counted servers' connections and the proxy's
/// metrics (shared with `observe`).
pub fn sampled_json(
    (procs, watched): (&[ProcSample], &[Watched]),
    (connections, counted): (&[Option<u64>], &[String]),
    (metrics, names): (&[Option<f64>], &[String]),
) -> [Value; 3] {
    let procs = procs
        .iter()
        .zip(watched)
        .map(|(ps, w)| {
            json!({
                "name": w.name, "role": w.role.as_str(), "cpu_cores": ps.cpu_cores,
                "rss_bytes": ps.rss_bytes, "processes": ps.processes,
            })
        })
        .collect();
    let connections = connections
        .iter()
        .zip(counted)
        .map(|(n, name)| json!({ "name": name, "count": n }))
        .collect();
    let metrics = metrics
        .iter()
        .zip(names)
        .map(|(v, name)| json!({ "name": name, "value": v }))
        .collect();
    [Value::Array(procs), Value::Array(connections), Value::Array(metrics)]
}

/// One second's samples: the watched processes, the counted servers'
/// connections and the proxy's metrics.
pub type Sampled<'a> = (&'a [ProcSample], &'a [Option<u64>], &'a [Option<f64>]);

/// The terminal lines of what was sampled over the run (shared with
/// `observe`): each watched process tree's mean CPU, peak RSS and
/// processes, each counted server's peak and mean connections, each proxy
/// metric's peak and mean.
pub fn sampled_table(seconds: &[Sampled<'_>], watched: &[Watched], counted: &[String], metrics: &[String]) -> String {
    let mut out = String::new();
    for (i, w) in watched.iter().enumerate() {
        let samples: Vec<_> = seconds.iter().filter_map(|s| s.0.get(i)).collect();
        if samples.is_empty() {
            continue;
        }
        let cpu = samples.iter().map(|s| s.cpu_cores).sum::<f64>() / samples.len() as f64;
        let rss = samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0);
        let procs = samples.iter().map(|s| s.processes).max().unwrap_or(0);
        out.push_str(&format!(
            "  {} ({}): {cpu:.2} cores on average, peak RSS {:.1} MiB, up to {procs} processes\n",
            w.name,
            w.role.as_str(),
            rss as f64 / (1024.0 * 1024.0)
        ));
    }
    for (i, name) in counted.iter().enumerate() {
        let counts: Vec<u64> = seconds.iter().filter_map(|s| s.1.get(i).copied().flatten()).collect();
        match counts.iter().max() {
            None => out.push_str(&format!("  {name}: connections not counted (no answer)\n")),
            Some(peak) => {
                let mean = counts.iter().sum::<u64>() as f64 / counts.len() as f64;
                out.push_str(&format!(
                    "  {name}: {peak} client connections at peak, {mean:.1} on average\n"
                ));
            }
        }
    }
    for (i, name) in metrics.iter().enumerate() {
        let values: Vec<f64> = seconds.iter().filter_map(|s| s.2.get(i).copied().flatten()).collect();
        if let Some(peak) = values.iter().copied().reduce(f64::max) {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            out.push_str(&format!("  {name}: {peak} at peak, {mean:.1} on average\n"));
        }
    }
    out
}

/// A histogram's recorded buckets, `value_us → count` (the value each
/// bucket's latencies are counted at).
pub fn buckets(h: &Histogram<u64>) -> BTreeMap<u64, u64> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// Buckets as the JSON has them: `[[value_us, count], ...]`.
fn buckets_json(h: &Histogram<u64>) -> Value {
    buckets(h).into_iter().map(|(v, n)| json!([v, n])).collect()
}

impl LoadReport {
    /// Requests per second over the run.
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.measured.requests as f64 / secs
        } else {
            0.0
        }
    }

    pub fn failures(&self) -> u64 {
        self.measured.failures.values().map(|(n, _)| n).sum()
    }

    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(&self.measured.overall)
    }

    /// Mean latency of the successful requests, in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        if self.measured.overall.is_empty() {
            0.0
        } else {
            self.measured.overall.mean() / 1000.0
        }
    }

    /// The terminal summary.
    pub fn table(&self) -> String {
        let p = self.percentiles();
        let tenants = match self.plan.tenants {
            0 => String::new(),
            n => format!(", {n} tenants"),
        };
        let mut out = format!(
            "target {} ({}{}): {} users, spawn {}/s, {:?}, think {:?}, {}, {}{}{tenants}\n",
            self.target,
            self.engine,
            self.plan.round.map_or(String::new(), |r| format!(", round {r}")),
            self.plan.users,
            self.plan.spawn_rate,
            self.plan.duration,
            self.plan.think,
            if self.plan.connect_each {
                "connect per request"
            } else {
                "one connection per user"
            },
            self.plan.auth,
            if self.plan.tls { " over TLS" } else { "" },
        );
        out.push_str(&format!(
            "requests {} ({:.1}/s) | p50 {:.2} ms | p90 {:.2} ms | p99 {:.2} ms | max {:.2} ms | mean {:.2} ms | failures {}\n",
            self.measured.requests,
            self.rps(),
            p.p50,
            p.p90,
            p.p99,
            p.max,
            self.mean_ms(),
            self.failures()
        ));
        for (code, (n, first)) in &self.measured.failures {
            out.push_str(&format!("  failed {n} x {code}: {first}\n"));
        }
        if self.plan.tenants > 0 {
            out.push_str(&self.fairness_line());
        }
        let seconds: Vec<Sampled<'_>> = self
            .measured
            .seconds
            .iter()
            .map(|s| (s.procs.as_slice(), s.connections.as_slice(), s.metrics.as_slice()))
            .collect();
        out.push_str(&sampled_table(&seconds, &self.watched, &self.counted, &self.metrics));
        out
    }

    /// How evenly the tenants were served: the median and worst of their
    /// p99s, and how many are above twice the p99 of all requests.
    fn fairness_line(&self) -> String {
        let per_tenant: Vec<BTreeMap<u64, u64>> = self.measured.tenants.iter().map(|t| buckets(&t.latency)).collect();
        let overall = from_histogram(&buckets(&self.measured.overall)).p99;
        let named = self.tenants.iter().map(String::as_str).zip(&per_tenant);
        match fairness(named, overall) {
            None => "  per tenant: no successful request\n".to_owned(),
            Some(f) => format!(
                "  per tenant ({} with a successful request): p99 median {:.2} ms, worst {:.2} ms ({}), {} over 2× the p99 of all\n",
                f.tenants, f.p99_median_ms, f.p99_worst_ms, f.worst, f.over_twice_overall
            ),
        }
    }

    /// The whole run as JSON.
    pub fn json(&self) -> Value {
        let p = self.percentiles();
        let seconds: Vec<Value> = self
            .measured
            .seconds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let sp = Percentiles::of(&s.latency);
                let [procs, connections, metrics] = sampled_json(
                    (&s.procs, &self.watched),
                    (&s.connections, &self.counted),
                    (&s.metrics, &self.metrics),
                );
                json!({
                    "second": i + 1, "users": s.users, "requests": s.requests, "failures": s.failures,
                    "p50_ms": sp.p50, "p90_ms": sp.p90, "p99_ms": sp.p99, "max_ms": sp.max, "processes": procs,
                    "connections": connections, "metrics": metrics,
                })
            })
            .collect();
        let failures: serde_json::Map<String, Value> = self
            .measured
            .failures
            .iter()
            .map(|(code, (n, first))| (code.clone(), json!({ "count": n, "first": first })))
            .collect();
        let histogram = buckets_json(&self.measured.overall);
        let tenants: Vec<Value> = if self.plan.tenants == 0 {
            Vec::new()
        } else {
            self.tenants
                .iter()
                .zip(&self.measured.tenants)
                .map(|(name, t)| {
                    json!({
                        "name": name, "requests": t.requests, "failures": t.failures,
                        "latency_histogram_us": buckets_json(&t.latency),
                    })
                })
                .collect()
        };
        let watched: Vec<Value> = self
            .watched
            .iter()
            .map(|w| json!({ "name": w.name, "role": w.role.as_str() }))
            .collect();
        json!({
            "target": self.target,
            "engine": self.engine,
            "round": self.plan.round,
            "plan": {
                "users": self.plan.users, "spawn_rate": self.plan.spawn_rate,
                "duration_s": self.plan.duration.as_secs_f64(), "think_ms": self.plan.think.as_secs_f64() * 1000.0,
                "connect_each": self.plan.connect_each, "sql": self.plan.sql,
                "timeout_s": self.plan.timeout.as_secs_f64(), "tenants": self.plan.tenants,
                "auth": self.plan.auth, "tls": self.plan.tls,
                "targets_added_at_s": self.plan.targets_added_at,
            },
            "summary": {
                "requests": self.measured.requests, "requests_per_second": self.rps(),
                "failures": self.failures(), "p50_ms": p.p50, "p90_ms": p.p90, "p99_ms": p.p99, "max_ms": p.max,
                "mean_ms": self.mean_ms(),
            },
            "latency_histogram_us": histogram,
            "failures": failures,
            "watched": watched,
            "counted": self.counted,
            "metrics": self.metrics,
            "seconds": seconds,
            "tenants": tenants,
        })
    }
}
