//! The soak load: a mixed workload held for a long time against several
//! targets at once (a PostgreSQL and a MySQL endpoint of one proxy), for
//! `scripts/soak.sh` to watch the proxy's memory, descriptors and leases
//! under it. Per target four kinds of client run side by side ([`work`]):
//! `tx` users (multi-statement transactions with prepared statements, on a
//! connection of their own), `prep` users (prepared statements outside
//! transactions, re-prepared under a new text every few executions, the old
//! ones closed), `churn` users (connect, one transaction, disconnect) and
//! `idle` clients (opened at the start, held, checked with `SELECT 1` at
//! the end). Every workload counts what it completed and its failures;
//! the counters are written to a status file once a second, one line per
//! workload (`name done errors`), and failures are logged as they happen.

pub mod work;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use tokio::task::JoinSet;

use crate::load::client::{Failure, Target};

/// How many failures of one workload are logged (all are counted).
const LOGGED_FAILURES: u64 = 20;

#[derive(Args)]
pub struct SoakArgs {
    /// NAME=URL: a target (`postgres://…` or `mysql://…`); repeat. Its
    /// workloads are reported as NAME.tx, NAME.prep, NAME.churn, NAME.idle.
    #[arg(long = "target", required = true, value_name = "NAME=URL", value_parser = crate::parse_named)]
    pub targets: Vec<(String, String)>,
    /// Length of the run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Transaction users per target.
    #[arg(long, default_value_t = 4)]
    pub tx_users: u32,
    /// Prepared-statement users per target.
    #[arg(long, default_value_t = 2)]
    pub prep_users: u32,
    /// Connect-transaction-disconnect users per target.
    #[arg(long, default_value_t = 2)]
    pub churn_users: u32,
    /// Idle clients held open per target.
    #[arg(long, default_value_t = 50)]
    pub idle: u32,
    /// Pause after each transaction or statement, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2)]
    pub think_ms: u64,
    /// Write the counters to FILE once a second (`name done errors` lines).
    #[arg(long, value_name = "FILE")]
    pub status: Option<PathBuf>,
}

/// What the workloads do, besides their target.
#[derive(Clone, Copy)]
pub struct Plan {
    pub deadline: Instant,
    pub think: Duration,
}

/// Counters of one workload on one target.
pub struct Counters {
    pub name: String,
    done: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    fn new(name: String) -> Self {
        Self {
            name,
            done: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    pub fn done(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a failure; logs the first few of this workload.
    pub fn failed(&self, failure: &Failure) {
        let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= LOGGED_FAILURES {
            eprintln!("soak: {} failure {n}: {} {}", self.name, failure.code, failure.message);
        }
    }

    fn line(&self) -> String {
        format!(
            "{} {} {}\n",
            self.name,
            self.done.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed)
        )
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// Runs every workload of every target until the deadline (the idle
/// clients' final check after it); returns the counters.
pub async fn run(args: &SoakArgs) -> Result<Vec<Arc<Counters>>> {
    let mut targets = Vec::new();
    for (name, url) in &args.targets {
        let target = Target::parse(url).with_context(|| format!("target {name}"))?;
        work::setup(&target)
            .await
            .map_err(|f| anyhow::anyhow!("setting up {name}: {} {}", f.code, f.message))?;
        targets.push((name.clone(), target));
    }
    let plan = Plan {
        deadline: Instant::now() + Duration::from_secs(args.seconds),
        think: Duration::from_millis(args.think_ms),
    };
    let mut all = Vec::new();
    let mut tasks = JoinSet::new();
    let mut seed = 0u64;
    for (name, target) in &targets {
        let users = [
            (work::Kind::Tx, args.tx_users),
            (work::Kind::Prep, args.prep_users),
            (work::Kind::Churn, args.churn_users),
        ];
        for (kind, n) in users {
            let counters = Arc::new(Counters::new(format!("{name}.{}", kind.name())));
            for _ in 0..n {
                seed += 1;
                tasks.spawn(work::user(kind, target.clone(), plan, Arc::clone(&counters), seed));
            }
            all.push(counters);
        }
        let counters = Arc::new(Counters::new(format!("{name}.idle")));
        tasks.spawn(work::idle(target.clone(), args.idle, plan, Arc::clone(&counters)));
        all.push(counters);
    }

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => write_status(args.status.as_deref(), &all)?,
            joined = tasks.join_next() => match joined {
                None => break,
                Some(Ok(())) => {}
                Some(Err(e)) => anyhow::bail!("a soak task failed: {e}"),
            },
        }
    }
    write_status(args.status.as_deref(), &all)?;
    Ok(all)
}

/// The counters as `name done errors` lines, written atomically
/// (temporary file + rename) so a reader never sees half a file.
fn write_status(path: Option<&Path>, all: &[Arc<Counters>]) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let text: String = all.iter().map(|c| c.line()).collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// The final counters as a table.
pub fn table(all: &[Arc<Counters>]) -> String {
    let mut out = format!("{:<16} {:>12} {:>8}\n", "workload", "done", "errors");
    for c in all {
        out += &format!(
            "{:<16} {:>12} {:>8}\n",
            c.name,
            c.done.load(Ordering::Relaxed),
            c.errors()
        );
    }
    out
}
