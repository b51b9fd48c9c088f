//! Failover tests: the proxy in front of a replicated cluster whose
//! servers are killed, hung, promoted and restarted under load. Kills are
//! destructive, so unlike the `pg` and `mysql` binaries no fixture is
//! shared: every case brings up a cluster of its own (PostgreSQL primary +
//! replicas, or MariaDB primary + replica, from the test kit) under its own
//! directory, and an in-process proxy of its own in front of it (its own
//! runtime, configuration, ports and admin API), so cases run in parallel
//! without seeing each other.
//!
//! What they check is what a client sees (same connection, SQLSTATE or
//! MySQL error codes, which server answered, how long it took) and what
//! the servers hold afterwards (queried directly with the kit's SQL
//! helpers), plus the admin API's `/api/backends` view of the topology.

mod common;
mod mysql;
mod pg;
mod pg_ops;
mod replica;
mod split;
mod switchover;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use gatehouse_testkit::trials;

/// What the cases share: only the scratch directory their clusters live
/// under (one subdirectory each).
pub struct Ctx {
    pub root: PathBuf,
}

impl Ctx {
    /// A fresh directory for the case called `name`.
    pub fn case_dir(&self, name: &str) -> Result<PathBuf> {
        let dir = self.root.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

type Case = trials::Case<Ctx>;

fn setup() -> Result<Arc<Ctx>> {
    trials::init_tracing();
    Ok(Arc::new(Ctx {
        root: trials::scratch_dir("failover")?,
    }))
}

/// Every case stopped its own cluster and proxy; only the directory is left.
fn teardown(ctx: Arc<Ctx>) {
    let _ = std::fs::remove_dir_all(&ctx.root);
}

fn main() -> ExitCode {
    let mut cases: Vec<(&'static str, Case)> = Vec::new();
    cases.extend(pg::cases());
    cases.extend(mysql::cases());
    cases.extend(split::cases());
    trials::run(cases, setup, teardown)
}
