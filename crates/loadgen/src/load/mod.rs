//! The load engine, as the load tools users know work (Locust's users and
//! spawn rate, pgbench's fixed-time runs): virtual users are spawned at a
//! rate up to a count, and each loops one request until the run ends, then
//! thinks. A request is connect–query–disconnect (`connect_each`, the
//! serverless pattern) or a query on the user's own connection (reopened
//! after a failure). Any PostgreSQL or MySQL connection string is a target
//! ([`client::Target`]). Latencies go to HDR histograms per second and
//! overall, failures are counted by the server's error code, and once a
//! second the watched process trees are sampled, the counted servers'
//! client connections counted, and a progress line is printed. The report is a table and a JSON document with every second.

pub mod client;
pub mod conns;
pub mod procs;
pub mod record;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use self::client::{Conn, Failure, Target};
use self::procs::Sampler;
use self::record::{Measured, Percentiles, Recorder};

/// After a failure a user waits at least this long before its next
/// request, so a refusing target is not hammered in a busy loop.
const FAILURE_BACKOFF: Duration = Duration::from_millis(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Virtual users at full load.
    pub users: u32,
    /// Users started per second until all run.
    pub spawn_rate: f64,
    pub duration: Duration,
    /// Pause after each request.
    pub think: Duration,
    /// Connect, query and disconnect in each request (else each user keeps
    /// its connection).
    pub connect_each: bool,
    /// The request's SQL (text protocol; several statements allowed).
    pub sql: String,
    /// A request taking longer fails with code `timeout`.
    pub timeout: Duration,
}

/// A finished run.
pub struct LoadReport {
    pub target: String,
    pub engine: &'static str,
    pub plan: Plan,
    pub measured: Measured,
    pub watched: Vec<String>,
    /// The servers whose connections were counted.
    pub counted: Vec<String>,
    pub elapsed: Duration,
}

/// What a run watches besides its own requests.
pub struct Watch {
    pub processes: Sampler,
    pub servers: Vec<conns::Counted>,
}

/// Runs `plan` against `target` (named `name` in the report), sampling
/// `watch` and printing a progress line once a second when `progress`.
pub async fn run(name: &str, target: Target, plan: Plan, watch: Watch, progress: bool) -> LoadReport {
    let Watch {
        processes: mut sampler,
        servers: mut counted,
    } = watch;
    let start = Instant::now();
    let deadline = start + plan.duration;
    let recorder = Arc::new(Recorder::new(start));
    let active = Arc::new(AtomicU32::new(0));
    let target = Arc::new(target);
    let sql: Arc<str> = Arc::from(plan.sql.as_str());
    let spawner = {
        let (recorder, active, target, plan, sql) = (
            recorder.clone(),
            active.clone(),
            target.clone(),
            plan.clone(),
            sql.clone(),
        );
        tokio::spawn(async move {
            let mut users = tokio::task::JoinSet::new();
            let rate = if plan.spawn_rate > 0.0 {
                plan.spawn_rate
            } else {
                f64::INFINITY
            };
            for i in 0..plan.users {
                let at = start + Duration::from_secs_f64(f64::from(i) / rate);
                if at >= deadline {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                let user = User {
                    target: target.clone(),
                    recorder: recorder.clone(),
                    sql: sql.clone(),
                    plan: plan.clone(),
                    deadline,
                };
                active.fetch_add(1, Ordering::Relaxed);
                users.spawn(user.run());
            }
            while users.join_next().await.is_some() {}
        })
    };
    sampler.sample();
    let total = plan.duration.as_secs().max(1);
    let tty = std::io::stderr().is_terminal();
    for i in 0..total {
        tokio::time::sleep_until((start + Duration::from_secs(i + 1)).into()).await;
        let users = active.load(Ordering::Relaxed);
        let connections = conns::count_all(&mut counted).await;
        recorder.tick(i as usize, users, sampler.sample(), connections);
        if progress {
            let (requests, _, p) = recorder.second(i as usize);
            let line = format!(
                "users {users}/{} | {requests} req/s | p50 {:.2} ms | p99 {:.2} ms | failures {} | {}/{} s",
                plan.users,
                p.p50,
                p.p99,
                recorder.failures(),
                i + 1,
                total
            );
            if tty {
                eprint!("\r{line}   ");
            } else if (i + 1) % 5 == 0 || i + 1 == total {
                eprintln!("{line}");
            }
        }
    }
    if progress && tty {
        eprintln!();
    }
    // Users end their request in flight (at most its timeout), then stop.
    let grace = plan.timeout + Duration::from_secs(1);
    let mut spawner = spawner;
    if tokio::time::timeout(grace, &mut spawner).await.is_err() {
        spawner.abort();
    }
    let elapsed = start.elapsed().min(plan.duration);
    LoadReport {
        target: name.to_owned(),
        engine: target.engine(),
        measured: recorder.finish(total as usize),
        plan,
        watched: sampler.names(),
        counted: counted.iter().map(|c| c.name.clone()).collect(),
        elapsed,
    }
}

/// One virtual user.
struct User {
    target: Arc<Target>,
    recorder: Arc<Recorder>,
    sql: Arc<str>,
    plan: Plan,
    deadline: Instant,
}

impl User {
    async fn run(self) {
        let mut conn: Option<Conn> = None;
        while Instant::now() < self.deadline {
            let began = Instant::now();
            let outcome = match tokio::time::timeout(self.plan.timeout, self.request(&mut conn)).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    conn = None;
                    Err(Failure::new(
                        "timeout",
                        format!("no answer within {:?}", self.plan.timeout),
                    ))
                }
            };
            let failed = outcome.is_err();
            if failed {
                conn = None;
            }
            self.recorder.record(began.elapsed(), outcome);
            let pause = if failed {
                self.plan.think.max(FAILURE_BACKOFF)
            } else {
                self.plan.think
            };
            if !pause.is_zero() {
                let until = (Instant::now() + pause).min(self.deadline);
                tokio::time::sleep_until(until.into()).await;
            }
        }
        if let Some(c) = conn {
            c.close().await;
        }
    }

    async fn request(&self, conn: &mut Option<Conn>) -> Result<(), Failure> {
        let c = match conn {
            Some(c) => c,
            None => conn.insert(self.target.connect().await?),
        };
        c.query(&self.sql).await?;
        if self.plan.connect_each
            && let Some(c) = conn.take()
        {
            c.close().await;
        }
        Ok(())
    }
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

    /// The terminal summary.
    pub fn table(&self) -> String {
        let p = self.percentiles();
        let mut out = format!(
            "target {} ({}): {} users, spawn {}/s, {:?}, think {:?}, {}\n",
            self.target,
            self.engine,
            self.plan.users,
            self.plan.spawn_rate,
            self.plan.duration,
            self.plan.think,
            if self.plan.connect_each {
                "connect per request"
            } else {
                "one connection per user"
            }
        );
        out.push_str(&format!(
            "requests {} ({:.1}/s) | p50 {:.2} ms | p90 {:.2} ms | p99 {:.2} ms | max {:.2} ms | failures {}\n",
            self.measured.requests,
            self.rps(),
            p.p50,
            p.p90,
            p.p99,
            p.max,
            self.failures()
        ));
        for (code, (n, first)) in &self.measured.failures {
            out.push_str(&format!("  failed {n} x {code}: {first}\n"));
        }
        for (i, name) in self.watched.iter().enumerate() {
            let samples: Vec<_> = self.measured.seconds.iter().filter_map(|s| s.procs.get(i)).collect();
            if samples.is_empty() {
                continue;
            }
            let cpu = samples.iter().map(|s| s.cpu_cores).sum::<f64>() / samples.len() as f64;
            let rss = samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0);
            let procs = samples.iter().map(|s| s.processes).max().unwrap_or(0);
            out.push_str(&format!(
                "  {name}: {cpu:.2} cores on average, peak RSS {:.1} MiB, up to {procs} processes\n",
                rss as f64 / (1024.0 * 1024.0)
            ));
        }
        for (i, name) in self.counted.iter().enumerate() {
            let counts: Vec<u64> = self
                .measured
                .seconds
                .iter()
                .filter_map(|s| s.connections.get(i).copied().flatten())
                .collect();
            if counts.is_empty() {
                out.push_str(&format!("  {name}: connections not counted (no answer)\n"));
                continue;
            }
            let mean = counts.iter().sum::<u64>() as f64 / counts.len() as f64;
            let peak = counts.iter().max().copied().unwrap_or(0);
            out.push_str(&format!(
                "  {name}: {peak} client connections at peak, {mean:.1} on average\n"
            ));
        }
        out
    }

    /// The whole run as JSON: the plan, the summary, failures by code, and
    /// every second (users, requests, failures, percentiles, watched
    /// processes).
    pub fn json(&self) -> serde_json::Value {
        let p = self.percentiles();
        let seconds: Vec<serde_json::Value> = self
            .measured
            .seconds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let sp = Percentiles::of(&s.latency);
                let procs: Vec<serde_json::Value> = s
                    .procs
                    .iter()
                    .zip(&self.watched)
                    .map(|(ps, name)| {
                        serde_json::json!({
                            "name": name, "cpu_cores": ps.cpu_cores, "rss_bytes": ps.rss_bytes,
                            "processes": ps.processes,
                        })
                    })
                    .collect();
                let connections: Vec<serde_json::Value> = s
                    .connections
                    .iter()
                    .zip(&self.counted)
                    .map(|(n, name)| serde_json::json!({ "name": name, "count": n }))
                    .collect();
                serde_json::json!({
                    "second": i + 1, "users": s.users, "requests": s.requests, "failures": s.failures,
                    "p50_ms": sp.p50, "p90_ms": sp.p90, "p99_ms": sp.p99, "max_ms": sp.max, "processes": procs,
                    "connections": connections,
                })
            })
            .collect();
        let failures: serde_json::Map<String, serde_json::Value> = self
            .measured
            .failures
            .iter()
            .map(|(code, (n, first))| (code.clone(), serde_json::json!({ "count": n, "first": first })))
            .collect();
        serde_json::json!({
            "target": self.target,
            "engine": self.engine,
            "plan": {
                "users": self.plan.users, "spawn_rate": self.plan.spawn_rate,
                "duration_s": self.plan.duration.as_secs_f64(), "think_ms": self.plan.think.as_secs_f64() * 1000.0,
                "connect_each": self.plan.connect_each, "sql": self.plan.sql,
                "timeout_s": self.plan.timeout.as_secs_f64(),
            },
            "summary": {
                "requests": self.measured.requests, "requests_per_second": self.rps(),
                "failures": self.failures(), "p50_ms": p.p50, "p90_ms": p.p90, "p99_ms": p.p99, "max_ms": p.max,
            },
            "failures": failures,
            "seconds": seconds,
        })
    }
}
