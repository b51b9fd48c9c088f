//! Runs grouped by target (in the order targets first appear, the first
//! one the baseline) and each target's rounds merged into one set of
//! numbers: requests and requests/s, latency percentiles from the merged
//! histograms (exact) or the median of the rounds' own, failures by code,
//! the counted servers' connections, the watched servers' and proxy's CPU
//! and RSS, and how evenly the tenants were served (each tenant's p99 from
//! its rounds' histograms added up).

use std::collections::BTreeMap;

use super::run::{Role, Run};

/// One target: its runs, each with its round number, and their merge.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub engine: String,
    /// The runs in the order given, with their round (the file's, else the
    /// run's place among the target's runs, from 1).
    pub runs: Vec<(u64, Run)>,
    pub merged: Merged,
}

/// Latency of successful requests over all rounds, in milliseconds; `None`
/// when no round knows it (no successful request, or a load tool that
/// gives no such number).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// From the merged histograms (else the median of the rounds' values).
    pub exact: bool,
}

/// CPU of one role's processes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cpu {
    /// Cores used, summed over the role's processes each second, averaged
    /// over the seconds.
    pub mean_cores: f64,
    /// Core-seconds used per 1,000 successful requests (`None`: none).
    pub core_s_per_1k: Option<f64>,
}

/// A target's rounds merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    pub rounds: usize,
    pub requests: u64,
    pub duration_s: f64,
    pub requests_per_second: f64,
    pub latency: Latency,
    pub failures: u64,
    /// Count and the first message seen (in run order), by code.
    pub failures_by_code: BTreeMap<String, (u64, String)>,
    /// Client connections, summed over the counted servers each second:
    /// the highest and the mean of those sums.
    pub connections_peak: Option<f64>,
    pub connections_mean: Option<f64>,
    pub backend_cpu: Option<Cpu>,
    pub proxy_cpu: Option<Cpu>,
    /// RSS of the proxy processes summed each second, the highest.
    pub proxy_rss_peak_bytes: Option<f64>,
    /// The tenants' p99s, when the runs kept each tenant's latencies.
    pub fairness: Option<Fairness>,
}

/// How evenly tenants were served: the p99 of each tenant's successful
/// requests, compared across tenants and to the p99 of all requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fairness {
    /// Tenants with a successful request (the others have no p99).
    pub tenants: usize,
    pub p99_median_ms: f64,
    pub p99_worst_ms: f64,
    /// The tenant with the worst p99.
    pub worst: String,
    /// Tenants whose p99 is above twice the overall p99.
    pub over_twice_overall: usize,
}

/// The tenants' p99s (`(name, histogram of µs)`) against `overall_p99_ms`
/// (`None`: none above it is counted); `None` when no tenant has a
/// successful request.
pub fn fairness<'a>(
    tenants: impl IntoIterator<Item = (&'a str, &'a BTreeMap<u64, u64>)>,
    overall_p99_ms: Option<f64>,
) -> Option<Fairness> {
    let p99s: Vec<(&str, f64)> = tenants
        .into_iter()
        .filter_map(|(name, h)| Some((name, from_histogram(h).p99?)))
        .collect();
    let (worst, p99_worst_ms) = p99s.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(Fairness {
        tenants: p99s.len(),
        p99_median_ms: median(p99s.iter().map(|(_, p)| *p).collect())?,
        p99_worst_ms,
        worst: worst.to_owned(),
        over_twice_overall: overall_p99_ms.map_or(0, |o| p99s.iter().filter(|(_, p)| *p > 2.0 * o).count()),
    })
}

/// Adds a histogram's `[value, count]` buckets into `into`.
fn add_buckets(into: &mut BTreeMap<u64, u64>, buckets: &[(u64, u64)]) {
    for &(value, n) in buckets {
        *into.entry(value).or_insert(0) += n;
    }
}

/// Groups runs by target in first-seen order.
pub fn group(runs: Vec<Run>) -> Vec<Target> {
    let mut targets: Vec<Target> = Vec::new();
    for run in runs {
        let i = match targets.iter().position(|t| t.name == run.target) {
            Some(i) => i,
            None => {
                targets.push(Target {
                    name: run.target.clone(),
                    engine: run.engine.clone(),
                    runs: Vec::new(),
                    merged: Merged::default(),
                });
                targets.len() - 1
            }
        };
        let t = &mut targets[i];
        let round = run.round.unwrap_or(t.runs.len() as u64 + 1);
        t.runs.push((round, run));
    }
    for t in &mut targets {
        let runs: Vec<&Run> = t.runs.iter().map(|(_, r)| r).collect();
        t.merged = merge(&runs);
    }
    targets
}

/// Merges one target's rounds.
pub fn merge(runs: &[&Run]) -> Merged {
    let requests: u64 = runs.iter().map(|r| r.summary.requests).sum();
    let duration_s: f64 = runs.iter().map(|r| r.duration_s).sum();
    let mut failures_by_code: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for run in runs {
        for (code, (n, first)) in &run.failures {
            failures_by_code.entry(code.clone()).or_insert((0, first.clone())).0 += n;
        }
    }
    let connections: Vec<f64> = runs
        .iter()
        .flat_map(|r| &r.seconds)
        .filter_map(|s| {
            let counts: Vec<f64> = s.connections.iter().filter_map(|(_, n)| *n).collect();
            (!counts.is_empty()).then(|| counts.iter().sum())
        })
        .collect();
    let proxy_rss = per_second(runs, Role::Proxy, |p| p.rss_bytes);
    let failures: u64 = runs.iter().map(|r| r.summary.failures).sum();
    let latency = latency(runs);
    let mut tenants: BTreeMap<&str, BTreeMap<u64, u64>> = BTreeMap::new();
    for t in runs.iter().flat_map(|r| &r.tenants) {
        add_buckets(tenants.entry(t.name.as_str()).or_default(), &t.histogram);
    }
    let fairness = fairness(tenants.iter().map(|(n, h)| (*n, h)), latency.p99);
    Merged {
        rounds: runs.len(),
        requests,
        duration_s,
        requests_per_second: if duration_s > 0.0 {
            requests as f64 / duration_s
        } else {
            0.0
        },
        latency,
        failures,
        failures_by_code,
        connections_peak: connections.iter().copied().reduce(f64::max),
        connections_mean: mean(&connections),
        // CPU per request done: a refused connection is cheap, and counting
        // it would flatter the target that refuses.
        backend_cpu: cpu(runs, Role::Server, requests.saturating_sub(failures)),
        proxy_cpu: cpu(runs, Role::Proxy, requests.saturating_sub(failures)),
        proxy_rss_peak_bytes: proxy_rss.into_iter().reduce(f64::max),
        fairness,
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// Each second (of every run) that sampled a process of `role`: the sum of
/// `value` over those processes.
fn per_second(runs: &[&Run], role: Role, value: impl Fn(&super::run::Proc) -> f64) -> Vec<f64> {
    runs.iter()
        .flat_map(|r| &r.seconds)
        .filter_map(|s| {
            let mut procs = s.processes.iter().filter(|p| p.role == role).peekable();
            procs.peek()?;
            Some(procs.map(&value).sum())
        })
        .collect()
}

fn cpu(runs: &[&Run], role: Role, requests: u64) -> Option<Cpu> {
    let cores = per_second(runs, role, |p| p.cpu_cores);
    let mean_cores = mean(&cores)?;
    // Each sample is the cores used over one second: core-seconds.
    let core_s: f64 = cores.iter().sum();
    Some(Cpu {
        mean_cores,
        core_s_per_1k: (requests > 0).then(|| core_s * 1000.0 / requests as f64),
    })
}

/// Percentiles from the rounds' histograms added up, when every round has
/// one; else the median of the rounds' own values (of the rounds with a
/// successful request that give the value), and the highest maximum.
fn latency(runs: &[&Run]) -> Latency {
    let histograms: Option<Vec<&Vec<(u64, u64)>>> = runs.iter().map(|r| r.histogram.as_ref()).collect();
    if let Some(histograms) = histograms.filter(|h| !h.is_empty()) {
        let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
        for h in histograms {
            add_buckets(&mut merged, h);
        }
        return from_histogram(&merged);
    }
    let answered: Vec<&&Run> = runs
        .iter()
        .filter(|r| r.summary.requests > r.summary.failures)
        .collect();
    let med = |f: fn(&Run) -> Option<f64>| median(answered.iter().filter_map(|r| f(r)).collect());
    Latency {
        p50: med(|r| r.summary.p50_ms),
        p90: med(|r| r.summary.p90_ms),
        p99: med(|r| r.summary.p99_ms),
        max: answered.iter().filter_map(|r| r.summary.max_ms).reduce(f64::max),
        mean: median(answered.iter().filter_map(|r| r.summary.mean_ms).collect()),
        exact: false,
    }
}

/// Percentiles (nearest rank: the smallest value with at least
/// ceil(q × total) values at or below it), maximum and mean, in ms, of a
/// histogram of microseconds (all `None` when it is empty).
pub fn from_histogram(h: &BTreeMap<u64, u64>) -> Latency {
    let total: u64 = h.values().sum();
    if total == 0 {
        return Latency {
            exact: true,
            ..Latency::default()
        };
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let at = |q: f64| {
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (&value, &n) in h {
            seen += n;
            if seen >= rank {
                return ms(value);
            }
        }
        0.0
    };
    let sum: f64 = h.iter().map(|(&v, &n)| v as f64 * n as f64).sum();
    Latency {
        p50: Some(at(0.50)),
        p90: Some(at(0.90)),
        p99: Some(at(0.99)),
        max: h.iter().rev().find(|(_, n)| **n > 0).map(|(&v, _)| ms(v)),
        mean: Some(sum / total as f64 / 1000.0),
        exact: true,
    }
}

#[cfg(test)]
mod tests {
    use super::super::run::{Proc, Second, Summary, TenantRun};
    use super::*;

    fn run(target: &str, requests: u64, duration_s: f64) -> Run {
        Run {
            source: format!("{target}.json"),
            target: target.to_owned(),
            engine: "postgres".to_owned(),
            duration_s,
            summary: Summary {
                requests,
                ..Summary::default()
            },
            ..Run::default()
        }
    }

    fn second(procs: &[(&str, Role, f64, f64)], conns: &[Option<f64>]) -> Second {
        Second {
            processes: procs
                .iter()
                .map(|&(name, role, cpu_cores, rss_bytes)| Proc {
                    name: name.to_owned(),
                    role,
                    cpu_cores,
                    rss_bytes,
                })
                .collect(),
            connections: conns.iter().enumerate().map(|(i, n)| (format!("s{i}"), *n)).collect(),
            ..Second::default()
        }
    }

    #[test]
    fn runs_group_by_target_in_first_seen_order_with_rounds_numbered() {
        let mut b2 = run("b", 1, 1.0);
        b2.round = Some(7);
        let targets = group(vec![run("b", 1, 1.0), run("a", 1, 1.0), b2, run("a", 1, 1.0)]);
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        let rounds: Vec<u64> = targets[0].runs.iter().map(|(r, _)| *r).collect();
        assert_eq!(rounds, [1, 7]);
        assert_eq!(targets[1].merged.rounds, 2);
    }

    #[test]
    fn rounds_merge_their_histograms_exactly() {
        let mut a = run("t", 100, 10.0);
        a.histogram = Some((1..=100).map(|ms| (ms * 1000, 1)).collect());
        a.summary.p50_ms = Some(999.0);
        let mut b = run("t", 100, 10.0);
        b.histogram = Some(vec![(200_000, 100)]);
        let m = merge(&[&a, &b]);
        // 200 values: 1..=100 ms once each, then 200 ms a hundred times.
        assert_eq!(
            (m.latency.p50, m.latency.p90, m.latency.p99),
            (Some(100.0), Some(200.0), Some(200.0))
        );
        assert_eq!(m.latency.max, Some(200.0));
        assert_eq!(m.latency.mean, Some((5050.0 + 20_000.0) / 200.0));
        assert!(m.latency.exact);
        assert_eq!((m.requests, m.requests_per_second), (200, 10.0));
    }

    #[test]
    fn rounds_without_histograms_take_the_median_of_their_percentiles() {
        let runs: Vec<Run> = [(1.0, 10.0), (3.0, 30.0), (2.0, 50.0)]
            .iter()
            .map(|&(p50, max)| {
                let mut r = run("t", 10, 1.0);
                r.summary.p50_ms = Some(p50);
                r.summary.max_ms = Some(max);
                r
            })
            .collect();
        let mut failed = run("t", 5, 1.0);
        failed.summary.failures = 5;
        let refs: Vec<&Run> = runs.iter().chain([&failed]).collect();
        let m = merge(&refs);
        assert_eq!(
            (m.latency.p50, m.latency.max, m.latency.exact),
            (Some(2.0), Some(50.0), false)
        );
        assert_eq!(m.latency.mean, None);
    }

    #[test]
    fn a_percentile_no_round_gives_stays_unknown() {
        // pgbench: a mean, no percentile, no maximum; one round with a p99.
        let mut a = run("t", 10, 1.0);
        a.summary.mean_ms = Some(1.5);
        let mut b = a.clone();
        b.summary.p99_ms = Some(4.0);
        let m = merge(&[&a, &b]);
        assert_eq!((m.latency.p50, m.latency.p99, m.latency.max), (None, Some(4.0), None));
        assert_eq!(m.latency.mean, Some(1.5));
        assert_eq!(from_histogram(&BTreeMap::new()).p50, None);
    }

    #[test]
    fn failures_add_up_by_code_keeping_the_first_message() {
        let mut a = run("t", 10, 1.0);
        a.summary.failures = 3;
        a.failures.insert("53300".into(), (3, "first".into()));
        let mut b = run("t", 10, 1.0);
        b.summary.failures = 2;
        b.failures.insert("53300".into(), (1, "second".into()));
        b.failures.insert("timeout".into(), (1, "slow".into()));
        let m = merge(&[&a, &b]);
        assert_eq!(m.failures, 5);
        assert_eq!(m.failures_by_code["53300"], (4, "first".to_owned()));
        assert_eq!(m.failures_by_code["timeout"], (1, "slow".to_owned()));
    }

    #[test]
    fn connections_sum_over_servers_each_second_and_skip_unanswered_seconds() {
        let mut a = run("t", 10, 1.0);
        a.seconds = vec![
            second(&[], &[Some(4.0), Some(6.0)]),
            second(&[], &[None, Some(2.0)]),
            second(&[], &[None, None]),
        ];
        let m = merge(&[&a]);
        assert_eq!((m.connections_peak, m.connections_mean), (Some(10.0), Some(6.0)));
        assert_eq!(merge(&[&run("t", 1, 1.0)]).connections_peak, None);
    }

    #[test]
    fn tenants_merge_over_rounds_and_compare_their_p99_to_the_overall() {
        let tenant = |name: &str, ms: &[u64]| TenantRun {
            name: name.to_owned(),
            requests: ms.len() as u64,
            failures: 0,
            histogram: ms.iter().map(|m| (m * 1000, 1)).collect(),
        };
        let mut a = run("t", 10, 1.0);
        a.tenants = vec![tenant("t000", &[1, 2]), tenant("t001", &[3]), tenant("t002", &[])];
        a.histogram = Some(vec![(1000, 1), (2000, 1), (3000, 1)]);
        let mut b = run("t", 10, 1.0);
        b.tenants = vec![tenant("t001", &[9])];
        b.histogram = Some(vec![(9000, 1)]);
        let f = merge(&[&a, &b]).fairness.unwrap_or_default();
        // t000: p99 2 ms; t001 (both rounds): 9 ms; t002 nothing; overall p99 9 ms.
        assert_eq!((f.tenants, f.p99_median_ms, f.p99_worst_ms), (2, 5.5, 9.0));
        assert_eq!((f.worst.as_str(), f.over_twice_overall), ("t001", 0));
        let one = BTreeMap::from([(50_000, 1)]);
        let f = fairness([("x", &one)], Some(20.0));
        assert_eq!(f.map(|f| f.over_twice_overall), Some(1));
        assert_eq!(merge(&[&run("t", 1, 1.0)]).fairness, None);
    }

    #[test]
    fn cpu_splits_servers_from_the_proxy_per_second_and_per_request() {
        let mut a = run("t", 2000, 2.0);
        a.seconds = vec![
            second(
                &[("pg", Role::Server, 0.5, 10.0), ("gh", Role::Proxy, 0.25, 100.0)],
                &[],
            ),
            second(
                &[("pg", Role::Server, 1.5, 10.0), ("gh", Role::Proxy, 0.75, 300.0)],
                &[],
            ),
        ];
        let m = merge(&[&a]);
        let backend = m.backend_cpu.unwrap_or_default();
        assert_eq!((backend.mean_cores, backend.core_s_per_1k), (1.0, Some(1.0)));
        let proxy = m.proxy_cpu.unwrap_or_default();
        assert_eq!((proxy.mean_cores, proxy.core_s_per_1k), (0.5, Some(0.5)));
        assert_eq!(m.proxy_rss_peak_bytes, Some(300.0));
        let direct = merge(&[&run("t", 1, 1.0)]);
        assert_eq!((direct.proxy_cpu, direct.proxy_rss_peak_bytes), (None, None));
    }
}
