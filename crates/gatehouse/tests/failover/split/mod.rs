//! Split endpoints in front of a primary and two replicas, both engines:
//! the standard benchmarks' read and write workloads through a split
//! endpoint whose pool is much smaller than the clients (pgbench's
//! built-in scripts and a custom one; sysbench's OLTP scripts) with no
//! errors, the servers' own counters showing the replicas served the reads
//! and the primary every write; and read-your-writes, with the replicas'
//! apply delayed: 10,000 write-then-read iterations see every write with
//! it on, and stale reads are counted with it off. The cases of each
//! engine are in `pg.rs` and `mysql.rs`; what both use is here.

mod mysql;
mod pg;

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::common::{Rig, wait_until};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "split::pg::pgbench_reads_on_replicas_writes_on_the_writer",
            pg::pgbench_case,
        ),
        ("split::pg::reads_see_the_clients_writes_with_replicas_delayed", pg::ryw),
        (
            "split::pg::a_write_pipelined_behind_a_read_runs_on_the_writer",
            pg::pipelined,
        ),
        (
            "split::mysql::sysbench_reads_on_replicas_writes_on_the_writer",
            mysql::sysbench_case,
        ),
        (
            "split::mysql::reads_see_the_clients_writes_with_replicas_delayed",
            mysql::ryw,
        ),
        (
            "split::mysql::writes_after_reads_with_warnings_run_on_the_writer",
            mysql::kept_read_lease,
        ),
    ]
}

/// A split endpoint (read-your-writes on, the default) and one with it off.
pub(super) const SPLIT: (&str, &str) = (
    "split",
    r#"
[[endpoints]]
name = "split"
listen = "127.0.0.1:0"
cluster = "main"
role = "split"
pool_mode = "transaction"
"#,
);

pub(super) const SPLIT_STALE: (&str, &str) = (
    "split_stale",
    r#"
[[endpoints]]
name = "split_stale"
listen = "127.0.0.1:0"
cluster = "main"
role = "split"
pool_mode = "transaction"
read_your_writes = false
"#,
);

/// Write-then-read iterations with read-your-writes on, over this many
/// clients (half the writes in autocommit, half in explicit blocks).
pub(super) const RYW_ITERATIONS: usize = 10_000;
pub(super) const RYW_CLIENTS: usize = 10;
/// With it off: enough to see stale reads.
pub(super) const STALE_ITERATIONS: usize = 1_000;
/// How far behind the replicas apply what they receive.
pub(super) const APPLY_DELAY: &str = "1s";

pub(super) fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "{cmd:?} failed: {text}");
    Ok(text)
}

/// The read-your-writes check, the same for both engines: replicas
/// delayed by `delay`, 10,000 iterations with it on (no stale read, the
/// writer served those reads), then with it off (stale reads counted).
pub(super) fn ryw_case(
    rig: &Rig,
    delay: impl FnOnce() -> Result<()>,
    write_then_read: impl Fn(&'static str, usize, usize, Duration) -> Result<usize>,
) -> Result<()> {
    let readers0 = rig.metric("gatehouse_routed_total", "reason=\"least_busy_reader\"")?;
    // Undelayed replicas replay a write within the 100 ms pause, before
    // the next probe (every 500 ms) shows it, most of the time: the read
    // goes to a replica asked how far it is on the connection lent.
    let caught_up0 = rig.metric("gatehouse_routed_total", "reason=\"caught_up_reader\"")?;
    let stale = write_then_read("split", 1, 10, Duration::from_millis(100))?;
    let caught_up = rig.metric("gatehouse_routed_total", "reason=\"caught_up_reader\"")? - caught_up0;
    ensure!(stale == 0, "{stale} stale reads from undelayed replicas");
    ensure!(
        caught_up > 0.0,
        "no read after a write was served by a replica that had caught up"
    );
    delay()?;
    let fresh0 = rig.metric("gatehouse_routed_total", "reason=\"writer_read_your_writes\"")?;
    let started = Instant::now();
    let stale = write_then_read("split", RYW_CLIENTS, RYW_ITERATIONS / RYW_CLIENTS, Duration::ZERO)?;
    let took = started.elapsed();
    let fresh = rig.metric("gatehouse_routed_total", "reason=\"writer_read_your_writes\"")? - fresh0;
    ensure!(
        stale == 0,
        "{stale} of {RYW_ITERATIONS} reads missed the client's own write with read_your_writes on"
    );
    // Each read after a write went to the writer: no replica had replayed it.
    ensure!(
        fresh >= (RYW_ITERATIONS as f64) * 0.9,
        "only {fresh} reads were sent to the writer for read-your-writes"
    );
    let stale_off = write_then_read(
        "split_stale",
        RYW_CLIENTS,
        STALE_ITERATIONS / RYW_CLIENTS,
        Duration::ZERO,
    )?;
    ensure!(
        stale_off > 0,
        "with read_your_writes off and replicas {APPLY_DELAY} behind, no stale read in {STALE_ITERATIONS}: \
         were the reads on the replicas?"
    );
    let readers = rig.metric("gatehouse_routed_total", "reason=\"least_busy_reader\"")? - readers0;
    ensure!(readers > 0.0, "no read went to a replica");
    tracing::info!(
        ?took,
        caught_up,
        fresh,
        stale_off,
        readers,
        "read-your-writes: {RYW_ITERATIONS} iterations, 0 stale; off: {stale_off} of {STALE_ITERATIONS} stale"
    );
    Ok(())
}

/// Waits (30 s at most) until `ask` on each of `replicas` answers `want`:
/// what was made on the primary has replicated.
pub(super) fn wait_replicated(
    what: &str,
    replicas: &[&str],
    want: &str,
    ask: impl Fn(&str) -> Result<String>,
) -> Result<()> {
    for r in replicas {
        wait_until(&format!("{r} to have {what}"), Duration::from_secs(30), || {
            Ok(match ask(r) {
                Ok(v) if v.trim() == want => Ok(()),
                Ok(v) => Err(v),
                Err(e) => Err(format!("{e:#}")),
            })
        })?;
    }
    Ok(())
}

/// One client of the read-your-writes check, over either engine's driver:
/// it owns one row of table `kv`.
pub(super) trait KvClient {
    /// Sets the client's row to `v`, in an explicit block when `in_block`.
    async fn set(&mut self, v: i64, in_block: bool) -> Result<()>;
    /// The client's row as read now (`None`: a replica behind may not have
    /// the row at all yet).
    async fn get(&mut self) -> Result<Option<i64>>;
}

/// `clients` clients made by `connect` (given their number), run at once,
/// each `iterations` times setting its row to a new value (every other
/// time in an explicit block, whose BEGIN alone says nothing of writing),
/// waiting `pause`, and reading it back; the stale reads counted.
pub(super) fn stale_reads<C, F, Fut>(
    rig: &Rig,
    clients: usize,
    iterations: usize,
    pause: Duration,
    connect: F,
) -> Result<usize>
where
    C: KvClient,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Result<C>>,
{
    let one = |c: usize| {
        let connecting = connect(c);
        async move {
            let mut client = connecting.await?;
            let mut stale = 0usize;
            for i in 1..=iterations as i64 {
                client.set(i, i % 2 == 0).await?;
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                if client.get().await? != Some(i) {
                    stale += 1;
                }
            }
            anyhow::Ok(stale)
        }
    };
    rig.handle().block_on(async {
        let all = futures_util::future::join_all((0..clients).map(one)).await;
        all.into_iter().sum()
    })
}
