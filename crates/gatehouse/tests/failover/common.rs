//! What every failover case needs, whatever the engine: a [`Rig`] (a
//! cluster of the case's own and an in-process proxy of its own in front
//! of it, with its runtime and admin API), the admin API's view of the
//! topology ([`BackendRow`]), bounded waits, and the bookkeeping of
//! clients that loop over statements while servers die ([`Loopers`],
//! [`Attempt`]).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_testkit::http::request;
use gatehouse_testkit::{Cluster, trials};
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

/// The monitor's probe period in every case's configuration.
pub const INTERVAL: Duration = Duration::from_millis(500);
/// How long new transactions wait for a writer in every case's configuration.
pub const FAILOVER_HOLD: Duration = Duration::from_secs(20);
/// A statement that has not answered after this long is taken as hung: no
/// wait the proxy may impose (failover_hold, borrow_timeout) is that long.
pub const ATTEMPT_LIMIT: Duration = Duration::from_secs(30);
/// Looping clients rest this long between statements.
pub const LOOP_PAUSE: Duration = Duration::from_millis(20);

/// The `[[clusters]]` keys every case configures: probes every 500 ms, a
/// probe slower than 1 s failed, two failures to mark a backend down and
/// two successes to mark it up, new transactions wait up to 20 s for a
/// writer; pools of 5 connections per (backend, user, database).
pub const HEALTH_KEYS: &str = r#"health_check_interval = "500ms"
health_check_timeout = "1s"
health_check_failures = 2
health_check_successes = 2
failover_hold = "20s"
pool = { size = 5, borrow_timeout = "20s" }"#;

/// Removes a case's directory once everything in it has stopped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A case's own cluster and proxy. Dropping it stops the proxy (and the
/// tasks of the case still running on its runtime), then the servers, then
/// removes the directory.
pub struct Rig {
    rt: Option<Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    endpoints: Vec<(String, SocketAddr)>,
    admin: SocketAddr,
    token: String,
    /// When the proxy started: timelines in messages count from here.
    pub t0: Instant,
    /// Dropped after the proxy has stopped (fields drop in order).
    pub cluster: Cluster,
    _dir: RemoveOnDrop,
}

impl Rig {
    /// Writes `config` (TOML naming `DIR/admin.token` as the admin token
    /// file) to `dir/gatehouse.toml`, and starts a proxy with it on a
    /// runtime of its own. `endpoints` are the endpoint names to look up.
    pub fn start(dir: &Path, cluster: Cluster, config: &str, endpoints: &[&str]) -> Result<Rig> {
        let token = format!("failover-admin-{}", std::process::id());
        std::fs::write(dir.join("admin.token"), &token)?;
        std::fs::write(dir.join("gatehouse.toml"), config)?;
        let settings = gatehouse::config::parse(config, dir).map_err(|p| anyhow::anyhow!("configuration: {p}"))?;
        let rt = trials::runtime()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (endpoints, admin) = rt.block_on(async {
            let app = gatehouse::App::bind(settings).await?;
            let endpoints = endpoints
                .iter()
                .map(|n| {
                    Ok((
                        n.to_string(),
                        app.local_addr(n).with_context(|| format!("endpoint {n}"))?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            let admin = app.admin_addr().context("no admin listener")?;
            tokio::spawn(gatehouse::run(app, async {
                let _ = rx.await;
            }));
            anyhow::Ok((endpoints, admin))
        })?;
        Ok(Rig {
            rt: Some(rt),
            stop: Some(tx),
            endpoints,
            admin,
            token,
            t0: Instant::now(),
            cluster,
            _dir: RemoveOnDrop(dir.to_path_buf()),
        })
    }

    /// The case's directory (its configuration, the admin token).
    pub fn dir(&self) -> &Path {
        &self._dir.0
    }

    /// `POST path` on the admin API from a thread of its own (an
    /// operator command that waits, like a switchover).
    pub fn post_async(&self, path: &str) -> std::thread::JoinHandle<Result<gatehouse_testkit::http::Response>> {
        let (admin, token, path) = (self.admin, self.token.clone(), path.to_string());
        std::thread::spawn(move || request(admin, "POST", &path, Some(&token)))
    }

    /// The proxy's runtime, to run and spawn the case's clients on.
    pub fn handle(&self) -> Handle {
        match &self.rt {
            Some(rt) => rt.handle().clone(),
            None => unreachable!("the runtime lives until the rig is dropped"),
        }
    }

    pub fn addr(&self, endpoint: &str) -> SocketAddr {
        self.endpoints
            .iter()
            .find(|(n, _)| n == endpoint)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("no endpoint {endpoint}"))
    }

    /// "127.0.0.1:PORT" of the server called `name`.
    pub fn server_addr(&self, name: &str) -> Result<String> {
        Ok(self.cluster.server(name)?.addr())
    }

    pub fn server_port(&self, name: &str) -> Result<u16> {
        Ok(self.cluster.server(name)?.port)
    }

    /// `GET path` on the admin API with the admin token: the body.
    pub fn get(&self, path: &str) -> Result<String> {
        let r = request(self.admin, "GET", path, Some(&self.token))?;
        ensure!(r.status == 200, "{path}: {} {}", r.status, r.body);
        Ok(r.body)
    }

    /// A counter of `/metrics`: the sum of the samples of `name` whose
    /// labels contain `labels` (e.g. `reason="writer"`).
    pub fn metric(&self, name: &str, labels: &str) -> Result<f64> {
        let body = self.get("/metrics")?;
        Ok(body
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(labels))
            .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
            .sum())
    }

    /// `GET /api/health` with the admin token: how long it took to answer.
    pub fn health(&self) -> Result<Duration> {
        let start = Instant::now();
        let r = request(self.admin, "GET", "/api/health", Some(&self.token))?;
        ensure!(r.status == 200, "/api/health: {} {}", r.status, r.body);
        Ok(start.elapsed())
    }

    /// The backends of `engine` ("postgres" or "mysql") in `/api/backends`.
    pub fn backends(&self, engine: &str) -> Result<Vec<BackendRow>> {
        let r = request(self.admin, "GET", "/api/backends", Some(&self.token))?;
        ensure!(r.status == 200, "/api/backends: {} {}", r.status, r.body);
        let all: Vec<serde_json::Value> =
            serde_json::from_str(&r.body).with_context(|| format!("/api/backends: {}", r.body))?;
        let list = all
            .iter()
            .find(|e| e["engine"] == engine)
            .with_context(|| format!("no {engine} in /api/backends: {}", r.body))?;
        serde_json::from_value(list["backends"].clone())
            .with_context(|| format!("the {engine} backends in /api/backends: {}", r.body))
    }

    /// Polls `/api/backends` (every 100 ms, up to `limit`) until `ok` holds
    /// for the backends of `engine`; returns them.
    pub fn wait_backends(
        &self,
        engine: &str,
        what: &str,
        limit: Duration,
        ok: impl Fn(&Backends) -> bool,
    ) -> Result<Backends> {
        wait_until(what, limit, || {
            let rows = Backends(self.backends(engine)?);
            Ok(if ok(&rows) { Ok(rows) } else { Err(format!("{rows}")) })
        })
    }

    /// Waits until the replica `name` reports its replication lag (small:
    /// it replicates) and position, as its probes read them.
    pub fn wait_replica_reports(&self, engine: &str, name: &str) -> Result<Backends> {
        let a = self.server_addr(name)?;
        self.wait_backends(
            engine,
            &format!("{name} to report lag and position"),
            Duration::from_secs(10),
            |b| {
                b.get(&a).is_some_and(|r| {
                    r.lag_seconds.is_some_and(|l| l < 5.0) && r.position.as_ref().is_some_and(|p| !p.is_empty())
                })
            },
        )
    }

    /// Waits until `writer` is the cluster's elected, up, unfenced writer
    /// and every one of `readers` is up as a reader.
    pub fn wait_roles(&self, engine: &str, writer: &str, readers: &[&str]) -> Result<Backends> {
        let w = self.server_addr(writer)?;
        let rs = readers
            .iter()
            .map(|r| self.server_addr(r))
            .collect::<Result<Vec<_>>>()?;
        self.wait_backends(
            engine,
            &format!("{writer} elected writer and {readers:?} up readers"),
            Duration::from_secs(15),
            |b| {
                b.get(&w)
                    .is_some_and(|r| r.elected && r.up && !r.fenced && r.role == "writer")
                    && rs
                        .iter()
                        .all(|a| b.get(a).is_some_and(|r| r.up && r.role == "reader" && !r.elected))
            },
        )
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// One backend as `GET /api/backends` shows it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BackendRow {
    pub cluster: String,
    /// "host:port" as configured.
    pub backend: String,
    /// "writer", "reader" or "unknown".
    pub role: String,
    pub up: bool,
    /// Was the writer, was lost, and another backend was elected since.
    pub fenced: bool,
    /// The cluster's current writer.
    pub elected: bool,
    pub lag_seconds: Option<f64>,
    /// Replication position (PostgreSQL LSN, MariaDB GTID), when probed.
    pub position: Option<String>,
    /// Leases outstanding on it now.
    pub leases: u64,
    /// Transactions routed to it so far.
    pub routed: u64,
    pub max_connections: Option<u64>,
}

/// The backends of one engine, as one `/api/backends` answer showed them.
pub struct Backends(pub Vec<BackendRow>);

impl Backends {
    pub fn get(&self, addr: &str) -> Option<&BackendRow> {
        self.0.iter().find(|r| r.backend == addr)
    }

    /// The row of `addr`, or an error showing all of them.
    pub fn row(&self, addr: &str) -> Result<&BackendRow> {
        self.get(addr).with_context(|| format!("no backend {addr} in {self}"))
    }
}

impl std::fmt::Display for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for r in &self.0 {
            write!(
                f,
                "[{} {} role={} up={} fenced={} elected={} lag={:?} leases={} routed={} max_connections={:?}] ",
                r.cluster,
                r.backend,
                r.role,
                r.up,
                r.fenced,
                r.elected,
                r.lag_seconds,
                r.leases,
                r.routed,
                r.max_connections
            )?;
        }
        Ok(())
    }
}

/// The failed checks of a case, collected so that one does not hide the
/// others (a closed connection and a misplaced row are both reported).
#[derive(Default)]
pub struct Problems(Vec<String>);

impl Problems {
    pub fn check(&mut self, r: Result<()>) {
        if let Err(e) = r {
            self.0.push(format!("{e:#}"));
        }
    }

    pub fn add(&mut self, what: String) {
        self.0.push(what);
    }

    /// Notes `what` unless `ok`.
    pub fn require(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    /// Fails with every problem found, one a line.
    pub fn finish(self) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        bail!("{} problem(s):\n  {}", self.0.len(), self.0.join("\n  "))
    }
}

/// Polls `poll` every 100 ms for up to `limit`: `Ok(Ok(v))` is done,
/// `Ok(Err(why))` is not yet (the last `why` is reported on timeout), `Err`
/// aborts at once.
pub fn wait_until<T>(what: &str, limit: Duration, mut poll: impl FnMut() -> Result<Result<T, String>>) -> Result<T> {
    let start = Instant::now();
    loop {
        let why = match poll()? {
            Ok(v) => return Ok(v),
            Err(why) => why,
        };
        if start.elapsed() > limit {
            bail!("timed out after {limit:?} waiting for {what}; last seen: {why}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `t` relative to `t0`, signed: "+1.23s" or "-0.40s".
pub fn offset(t: Instant, t0: Instant) -> String {
    if t >= t0 {
        format!("+{:.2}s", (t - t0).as_secs_f64())
    } else {
        format!("-{:.2}s", (t0 - t).as_secs_f64())
    }
}

/// How one statement of a looping client ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Answered; the server's port when the statement reports it.
    Ok { port: Option<u16> },
    /// An error answer: PostgreSQL's SQLSTATE (as both `code` and `state`),
    /// or MySQL's error code and SQLSTATE.
    Failed { code: String, state: String, text: String },
    /// The connection ended without an error answer.
    Closed(String),
    /// No answer within [`ATTEMPT_LIMIT`].
    Hung,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ok { port: Some(p) } => write!(f, "ok on port {p}"),
            Outcome::Ok { port: None } => write!(f, "ok"),
            Outcome::Failed { code, state, text } if code == state => write!(f, "error {code}: {text}"),
            Outcome::Failed { code, state, text } => write!(f, "error {code} ({state}): {text}"),
            Outcome::Closed(why) => write!(f, "connection closed: {why}"),
            Outcome::Hung => write!(f, "no answer within {ATTEMPT_LIMIT:?}"),
        }
    }
}

/// One statement of a looping client.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Unique per attempt; written into the row of an INSERT.
    pub tag: String,
    pub start: Instant,
    pub end: Instant,
    pub outcome: Outcome,
}

impl Attempt {
    pub fn ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok { .. })
    }

    pub fn port(&self) -> Option<u16> {
        match self.outcome {
            Outcome::Ok { port } => port,
            _ => None,
        }
    }

    pub fn took(&self) -> Duration {
        self.end.saturating_duration_since(self.start)
    }

    /// "tag at +1.23s (took 0.456s): outcome", times counted from `t0`.
    pub fn show(&self, t0: Instant) -> String {
        format!(
            "{} at {} (took {:.3}s): {}",
            self.tag,
            offset(self.start, t0),
            self.took().as_secs_f64(),
            self.outcome
        )
    }
}

/// A looping client's attempts so far, and the one it waits for.
#[derive(Debug, Clone, Default)]
pub struct LoopLog {
    pub attempts: Vec<Attempt>,
    pub in_flight: Option<(String, Instant)>,
}

impl LoopLog {
    /// The last attempt and the one in flight, times counted from `t0`.
    fn show_last(&self, t0: Instant) -> String {
        let last = self.attempts.last().map_or("none".to_string(), |a| a.show(t0));
        match &self.in_flight {
            Some((tag, start)) => format!("last {last}; {tag} in flight since {}", offset(*start, t0)),
            None => format!("last {last}"),
        }
    }
}

pub type Log = Arc<Mutex<LoopLog>>;

/// Notes that the attempt `tag` starts now; returns its start.
pub fn begin(log: &Log, tag: &str) -> Instant {
    let start = Instant::now();
    log.lock().unwrap_or_else(PoisonError::into_inner).in_flight = Some((tag.to_string(), start));
    start
}

/// Appends an attempt that started at `start` and ends now.
pub fn record(log: &Log, tag: String, start: Instant, outcome: Outcome) {
    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
    log.in_flight = None;
    log.attempts.push(Attempt {
        tag,
        start,
        end: Instant::now(),
        outcome,
    });
}

/// A looping client's attempts and its connection, once it stopped.
pub struct Finished<C> {
    pub name: String,
    pub client: C,
    pub attempts: Vec<Attempt>,
}

impl<C> Finished<C> {
    pub fn errors(&self) -> Vec<&Attempt> {
        self.attempts.iter().filter(|a| !a.ok()).collect()
    }

    /// Every attempt that was not answered normally, for messages.
    pub fn show_errors(&self, t0: Instant) -> String {
        let e: Vec<String> = self.errors().iter().map(|a| a.show(t0)).collect();
        format!(
            "{}: {} attempts, errors [{}]",
            self.name,
            self.attempts.len(),
            e.join("; ")
        )
    }
}

/// Clients that each run statements in a loop on one connection until told
/// to stop, recording every attempt.
pub struct Loopers<C> {
    stop: Arc<AtomicBool>,
    running: Vec<(String, Log, JoinHandle<C>)>,
}

impl<C> Default for Loopers<C> {
    fn default() -> Self {
        Loopers {
            stop: Arc::new(AtomicBool::new(false)),
            running: Vec::new(),
        }
    }
}

impl<C: Send + 'static> Loopers<C> {
    /// Spawns `body(name, log, stop)`: it loops, records into `log`, ends
    /// when `stop` is set (or its connection is gone) and returns the client.
    pub fn spawn<F, Fut>(&mut self, h: &Handle, name: &str, body: F)
    where
        F: FnOnce(String, Log, Arc<AtomicBool>) -> Fut,
        Fut: Future<Output = C> + Send + 'static,
    {
        let log: Log = Arc::default();
        let task = h.spawn(body(name.to_string(), log.clone(), self.stop.clone()));
        self.running.push((name.to_string(), log, task));
    }

    /// Each looper's log so far.
    pub fn logs(&self) -> Vec<(String, LoopLog)> {
        self.running
            .iter()
            .map(|(n, log, _)| (n.clone(), log.lock().unwrap_or_else(PoisonError::into_inner).clone()))
            .collect()
    }

    /// Waits (up to `limit`) until every looper has an attempt that started
    /// after `since` and satisfies `ok`. On timeout, the loopers behind
    /// are shown with times counted from `since`.
    pub fn wait_each(&self, what: &str, limit: Duration, since: Instant, ok: impl Fn(&Attempt) -> bool) -> Result<()> {
        wait_until(what, limit, || {
            // A looper that ended on its own (its connection gone) will
            // never catch up.
            if let Some((name, log, _)) = self.running.iter().find(|(_, _, t)| t.is_finished()) {
                let log = log.lock().unwrap_or_else(PoisonError::into_inner).clone();
                bail!(
                    "{name} stopped (its connection is gone) while waiting for {what}; times from the mark: {}",
                    log.show_last(since)
                );
            }
            let behind: Vec<String> = self
                .logs()
                .into_iter()
                .filter(|(_, log)| !log.attempts.iter().any(|a| a.start > since && ok(a)))
                .map(|(name, log)| format!("{name} (times from the mark: {})", log.show_last(since)))
                .collect();
            Ok(if behind.is_empty() {
                Ok(())
            } else {
                Err(behind.join("; "))
            })
        })
    }

    /// Tells every looper to stop and collects them (each must end within
    /// [`ATTEMPT_LIMIT`] plus a margin: its statements never hang).
    pub fn stop(self, h: &Handle) -> Result<Vec<Finished<C>>> {
        self.stop.store(true, Ordering::SeqCst);
        h.block_on(async {
            let mut out = Vec::new();
            for (name, log, task) in self.running {
                let client = tokio::time::timeout(ATTEMPT_LIMIT + Duration::from_secs(5), task)
                    .await
                    .with_context(|| format!("{name} did not stop"))?
                    .with_context(|| format!("{name} panicked"))?;
                let attempts = log.lock().unwrap_or_else(PoisonError::into_inner).attempts.clone();
                out.push(Finished { name, client, attempts });
            }
            Ok(out)
        })
    }
}

/// Every error the loopers saw, as "name: outcome", for the case's summary.
pub fn all_errors<C>(loopers: &[Finished<C>]) -> Vec<String> {
    loopers
        .iter()
        .flat_map(|l| {
            l.errors()
                .into_iter()
                .map(move |a| format!("{}: {}", l.name, a.outcome))
        })
        .collect()
}

/// The first answered attempt, across loopers, that ended after `t`: how
/// long after `t` it ended.
pub fn first_ok_after<C>(loopers: &[Finished<C>], t: Instant) -> Option<Duration> {
    loopers
        .iter()
        .flat_map(|l| &l.attempts)
        .filter(|a| a.ok() && a.end > t)
        .map(|a| a.end.saturating_duration_since(t))
        .min()
}
