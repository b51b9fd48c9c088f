//! The load engine, as the load tools users know work (Locust's users and
//! spawn rate, pgbench's fixed-time runs): virtual users are spawned at a
//! rate up to a count, and each loops one request until the run ends, then
//! thinks. A request is connect–query–disconnect (`connect_each`, the
//! serverless pattern) or a query on the user's own connection (reopened
//! after a failure). Any PostgreSQL or MySQL connection string is a target
//! ([`client::Target`]). Latencies go to HDR histograms per second and
//! overall, failures are counted by the server's error code, and once a
//! second the watched process trees are sampled, the counted servers'
//! client connections counted, the proxy's metrics read, and a progress
//! line is printed. With tenants, each request (or each user, on its own
//! connection) logs in as a random tenant, and the request's SQL may name
//! it and random ids ([`scenario`]); each tenant's latencies are kept too,
//! to show one served worse than the others. The report ([`report`]) is a
//! table and a JSON document with every second and every tenant.

pub mod client;
pub mod conns;
pub mod metrics;
pub mod procs;
pub mod record;
pub mod report;
pub mod scenario;
pub mod tenants;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use self::client::{Conn, Failure};
use self::procs::{Sampler, Watched};
use self::record::{Measured, Recorder};
use self::scenario::Sql;
use self::tenants::Tenant;

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
    /// The request's SQL (text protocol; several statements allowed), as
    /// given (a [`scenario`] template).
    pub sql: String,
    /// A request taking longer fails with code `timeout`.
    pub timeout: Duration,
    /// Tenants the users pick from (0: one target, no tenants).
    pub tenants: u32,
    /// `password` or `token`.
    pub auth: &'static str,
    /// Whether connections use TLS.
    pub tls: bool,
    /// The round of an experiment this run is, if one.
    pub round: Option<u32>,
    /// Seconds into the run at which targets were added (`--target-from`).
    pub targets_added_at: Vec<u64>,
}

/// A finished run.
pub struct LoadReport {
    pub target: String,
    pub engine: &'static str,
    pub plan: Plan,
    pub measured: Measured,
    pub watched: Vec<Watched>,
    /// The servers whose connections were counted.
    pub counted: Vec<String>,
    /// The proxy metrics' series sampled.
    pub metrics: Vec<String>,
    /// The tenants' names, in the order of `measured.tenants`.
    pub tenants: Vec<String>,
    pub elapsed: Duration,
}

/// What a run watches besides its own requests.
pub struct Watch {
    pub processes: Sampler,
    pub servers: Vec<conns::Counted>,
    pub metrics: Option<metrics::Scraper>,
}

/// Runs `plan` against `tenants` (named `name` in the report), sampling
/// `watch` and printing a progress line once a second when `progress`.
/// Each request picks among the tenants whose `from` has passed.
pub async fn run(
    name: &str,
    mut tenants: Vec<Tenant>,
    sql: Sql,
    plan: Plan,
    watch: Watch,
    progress: bool,
) -> LoadReport {
    tenants.sort_by_key(|t| t.from);
    // A tenant reached through several targets is one tenant in the
    // measurements: `slots[i]` is tenant `i`'s place among the names.
    let mut names: Vec<String> = Vec::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let slots: Vec<usize> = tenants
        .iter()
        .map(|t| {
            *seen.entry(t.name.as_str()).or_insert_with(|| {
                names.push(t.name.clone());
                names.len() - 1
            })
        })
        .collect();
    let Watch {
        processes: mut sampler,
        servers: mut counted,
        metrics: scraper,
    } = watch;
    let engine = tenants.first().map_or("none", |t| t.target.engine());
    let start = Instant::now();
    let deadline = start + plan.duration;
    let recorder = Arc::new(Recorder::new(start, names.len()));
    let active = Arc::new(AtomicU32::new(0));
    let tenants = Arc::new(tenants);
    let slots = Arc::new(slots);
    let sql = Arc::new(sql);
    let spawner = {
        let (recorder, active, tenants, slots, plan, sql) = (
            recorder.clone(),
            active.clone(),
            tenants.clone(),
            slots.clone(),
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
                    start,
                    tenants: tenants.clone(),
                    slots: slots.clone(),
                    recorder: recorder.clone(),
                    sql: sql.clone(),
                    plan: plan.clone(),
                    deadline,
                    rng: StdRng::from_entropy(),
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
        let (connections, metrics) = match &scraper {
            Some(s) => tokio::join!(conns::count_all(&mut counted), s.sample()),
            None => (conns::count_all(&mut counted).await, Vec::new()),
        };
        recorder.tick(i as usize, users, sampler.sample(), connections, metrics);
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
        engine,
        measured: recorder.finish(total as usize),
        plan,
        watched: sampler.watched().to_vec(),
        counted: counted.iter().map(|c| c.name.clone()).collect(),
        metrics: scraper.map_or_else(Vec::new, |s| s.series.iter().map(|m| m.shown.clone()).collect()),
        tenants: names,
        elapsed,
    }
}

/// One virtual user.
struct User {
    start: Instant,
    /// Ordered by `from` ([`run`]'s contract).
    tenants: Arc<Vec<Tenant>>,
    /// Each tenant's place in the recorder (its name's).
    slots: Arc<Vec<usize>>,
    recorder: Arc<Recorder>,
    sql: Arc<Sql>,
    plan: Plan,
    deadline: Instant,
    rng: StdRng,
}

impl User {
    async fn run(mut self) {
        let mut conn: Option<Conn> = None;
        // On its own connection a user stays one tenant; connecting for
        // each request, it picks one each time.
        let mut tenant = self.pick();
        while Instant::now() < self.deadline {
            if self.plan.connect_each {
                tenant = self.pick();
            }
            let sql = match self.tenants.get(tenant) {
                Some(t) => self.sql.render(&t.name, &mut self.rng),
                None => break,
            };
            let began = Instant::now();
            let outcome = match tokio::time::timeout(self.plan.timeout, self.request(&mut conn, tenant, &sql)).await {
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
            let slot = self.slots.get(tenant).copied().unwrap_or(usize::MAX);
            self.recorder.record(began.elapsed(), outcome, slot);
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

    /// A random tenant among those that have joined by now.
    fn pick(&mut self) -> usize {
        let now = self.start.elapsed();
        let joined = self.tenants.partition_point(|t| t.from <= now);
        self.rng.gen_range(0..joined.max(1))
    }

    async fn request(&self, conn: &mut Option<Conn>, tenant: usize, sql: &str) -> Result<(), Failure> {
        let c = match conn {
            Some(c) => c,
            None => {
                let target = &self
                    .tenants
                    .get(tenant)
                    .ok_or_else(|| Failure::new("connect", "no target"))?
                    .target;
                conn.insert(target.connect().await?)
            }
        };
        c.query(sql).await?;
        if self.plan.connect_each
            && let Some(c) = conn.take()
        {
            c.close().await;
        }
        Ok(())
    }
}
