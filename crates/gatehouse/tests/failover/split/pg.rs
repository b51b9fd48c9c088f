//! Split endpoints on PostgreSQL (primary pg0, replicas pg1 and pg2):
//! pgbench's scripts, pipelined clients, read-your-writes.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::{APPLY_DELAY, KvClient, SPLIT, SPLIT_STALE, run, ryw_case, stale_reads, wait_replicated};
use crate::Ctx;
use crate::common::{Rig, wait_until};

/// Index scans of `pgbench_accounts` a server has counted (its own
/// statistics: a replica counts the reads it ran).
fn pg_scans(rig: &Rig, server: &str) -> Result<i64> {
    let v = rig.cluster.pg_sql(
        server,
        "app1",
        "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_tables WHERE relname = 'pgbench_accounts'",
    )?;
    v.trim().parse().with_context(|| format!("idx_scan on {server}: {v}"))
}

fn pg_all_scans(rig: &Rig) -> Result<[i64; 3]> {
    Ok([pg_scans(rig, "pg0")?, pg_scans(rig, "pg1")?, pg_scans(rig, "pg2")?])
}

/// Each client's own account row: written, then read back at once; a read
/// that does not see the write ends the client with a division by zero.
const PGBENCH_RYW_SCRIPT: &str = r#"\set aid :client_id + 1
\set delta random(1, 1000000)
UPDATE pgbench_accounts SET abalance = :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid \gset
\if :abalance != :delta
\set stale 1 / 0
\endif
\set bid random(1, 1 * :scale)
SELECT bbalance FROM pgbench_branches WHERE bid = :bid;
BEGIN READ ONLY;
SELECT count(*) FROM pgbench_tellers WHERE bid = :bid;
COMMIT;
"#;

fn pgbench(rig: &Rig, args: &[&str]) -> Result<String> {
    let addr = rig.addr("split");
    let port = addr.port().to_string();
    let mut cmd = Command::new("pgbench");
    cmd.env("PGPASSWORD", "alice-pw")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "alice",
            "-n",
            "-c",
            "20",
            "-j",
            "2",
        ])
        .args(args)
        .arg("app1");
    // pgbench exits non-zero when a client aborted on an error.
    run(&mut cmd)
}

pub(super) fn pgbench_case(ctx: &Ctx) -> Result<()> {
    let rig = crate::pg::rig(ctx, "split_pgbench", 2, &[crate::pg::RW, SPLIT])?;
    let primary = rig.server_port("pg0")?.to_string();
    run(Command::new("pgbench").env("PGPASSWORD", "owner-pw").args([
        "-i",
        "-q",
        "-s",
        "1",
        "-h",
        "127.0.0.1",
        "-p",
        &primary,
        "-U",
        "app_owner",
        "app1",
    ]))?;
    wait_replicated("the pgbench tables", &["pg1", "pg2"], "1", |r| {
        rig.cluster.pg_sql(r, "app1", "SELECT count(*) FROM pgbench_branches")
    })?;
    rig.wait_roles("postgres", "pg0", &["pg1", "pg2"])?;

    // Select-only: every transaction a read, all on the replicas.
    let before = pg_all_scans(&rig)?;
    pgbench(&rig, &["-S", "-t", "200"])?;
    let reads = 20 * 200;
    let after = wait_until(
        "the replicas' statistics to show the reads",
        Duration::from_secs(20),
        || {
            let now = pg_all_scans(&rig)?;
            let replicas = (now[1] - before[1]) + (now[2] - before[2]);
            Ok(if replicas >= reads {
                Ok(now)
            } else {
                Err(format!("{now:?} from {before:?}"))
            })
        },
    )?;
    let on_primary = after[0] - before[0];
    ensure!(
        on_primary == 0,
        "pgbench -S through split: {on_primary} account reads ran on the primary (replicas: {} and {})",
        after[1] - before[1],
        after[2] - before[2]
    );
    ensure!(
        after[1] > before[1] && after[2] > before[2],
        "both replicas should serve reads: {before:?} -> {after:?}"
    );

    // The built-in read-write script: BEGIN ... END blocks that write, all
    // on the writer (a write on a replica would fail and abort pgbench).
    // (Not -M prepared: pgbench prepares synchronously, blocking its
    // thread's other clients, which hold their connections in open
    // transactions: with fewer connections than clients it deadlocks
    // itself, whatever the pooler.)
    pgbench(&rig, &["-t", "100"])?;
    pgbench(&rig, &["-t", "100", "-M", "extended"])?;

    // The custom script: a write, its read at once (it must see it), a
    // read alone, and a read-only block; simple and extended protocol.
    let script = rig.dir().join("ryw.sql");
    std::fs::write(&script, PGBENCH_RYW_SCRIPT)?;
    let script = script.display().to_string();
    let before = pg_all_scans(&rig)?;
    pgbench(&rig, &["-f", &script, "-t", "100"])?;
    pgbench(&rig, &["-f", &script, "-t", "100", "-M", "extended"])?;
    let routed_reader = rig.metric("gatehouse_routed_total", "reason=\"least_busy_reader\"")?;
    ensure!(routed_reader > 0.0, "no lease of the custom script went to a replica");
    let after = pg_all_scans(&rig)?;
    tracing::info!(?before, ?after, routed_reader, "custom script through split");
    Ok(())
}

/// A client that pipelines (tokio-postgres sends concurrent requests on
/// one connection without waiting): reads, a write queued behind them
/// before their answers are in, a read-only block; every write must land
/// on the writer (on a replica it would fail: 25006), every read succeed.
pub(super) fn pipelined(ctx: &Ctx) -> Result<()> {
    let rig = crate::pg::rig(ctx, "split_pg_pipelined", 2, &[SPLIT])?;
    rig.wait_roles("postgres", "pg0", &["pg1", "pg2"])?;
    let addr = rig.addr("split");
    let writer = rig.server_port("pg0")?;
    rig.handle().block_on(async move {
        let client = crate::pg::connect(addr).await?;
        let port = client.prepare("SELECT inet_server_port()").await?;
        for round in 0..50 {
            let tag = format!("pipelined-{round}");
            let insert = crate::pg::insert_sql(&tag);
            let (r1, w, r2) = tokio::join!(
                client.query_one(&port, &[]),
                client.query_one(insert.as_str(), &[]),
                client.query_one(&port, &[]),
            );
            let stored_on: i32 = w.with_context(|| format!("round {round}: the pipelined write"))?.get(0);
            ensure!(
                stored_on == i32::from(writer),
                "round {round}: the write landed on port {stored_on}"
            );
            r1?;
            r2?;
            // Simple queries, pipelined the same way.
            let simple_insert = format!("INSERT INTO t (who) VALUES ('{tag}-simple')");
            let (a, b) = tokio::join!(client.simple_query("SELECT 1"), client.simple_query(&simple_insert));
            a?;
            b.with_context(|| format!("round {round}: the pipelined simple write"))?;
        }
        // A read-only block on a replica (a new client: this one's reads
        // wait for the replicas to replay its writes): its reads succeed,
        // a write in it fails as it would on the writer.
        let client = crate::pg::connect(addr).await?;
        let port = client.prepare("SELECT inet_server_port()").await?;
        client.batch_execute("BEGIN READ ONLY").await?;
        let in_block: i32 = client.query_one(&port, &[]).await?.get(0);
        let err = client
            .simple_query("INSERT INTO t (who) VALUES ('in-a-read-only-block')")
            .await
            .err()
            .and_then(|e| e.code().cloned());
        ensure!(
            err == Some(tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION),
            "a write in a READ ONLY block: {err:?}"
        );
        client.batch_execute("ROLLBACK").await?;
        ensure!(in_block != i32::from(writer), "the read-only block ran on the writer");
        anyhow::Ok(())
    })
}

/// Sets every replica's apply delay (`recovery_min_apply_delay`).
fn pg_delay(rig: &Rig, delay: &str) -> Result<()> {
    for r in ["pg1", "pg2"] {
        rig.cluster.pg_sql(
            r,
            "postgres",
            &format!("ALTER SYSTEM SET recovery_min_apply_delay = '{delay}'"),
        )?;
        rig.cluster.pg_sql(r, "postgres", "SELECT pg_reload_conf()")?;
    }
    Ok(())
}

/// A tokio-postgres client of the read-your-writes check.
struct PgKv {
    client: tokio_postgres::Client,
    id: String,
}

impl KvClient for PgKv {
    async fn set(&mut self, v: i64, in_block: bool) -> Result<()> {
        let update = "UPDATE kv SET v = $2 WHERE k = $1";
        if in_block {
            self.client.batch_execute("BEGIN").await?;
            self.client.execute(update, &[&self.id, &v]).await?;
            self.client.batch_execute("COMMIT").await?;
        } else {
            self.client.execute(update, &[&self.id, &v]).await?;
        }
        Ok(())
    }

    async fn get(&mut self) -> Result<Option<i64>> {
        let row = self
            .client
            .query_opt("SELECT v FROM kv WHERE k = $1", &[&self.id])
            .await?;
        Ok(row.map(|r| r.get(0)))
    }
}

/// `clients` connections through `endpoint` in the read-your-writes check
/// ([`super::stale_reads`]).
fn pg_write_then_read(
    rig: &Rig,
    endpoint: &'static str,
    clients: usize,
    iterations: usize,
    pause: Duration,
) -> Result<usize> {
    let addr = rig.addr(endpoint);
    stale_reads(rig, clients, iterations, pause, |c| async move {
        let client = crate::pg::connect(addr).await?;
        let id = format!("{endpoint}-{c}");
        client
            .execute(
                "INSERT INTO kv (k, v) VALUES ($1, 0) ON CONFLICT (k) DO UPDATE SET v = 0",
                &[&id],
            )
            .await?;
        Ok(PgKv { client, id })
    })
}

pub(super) fn ryw(ctx: &Ctx) -> Result<()> {
    let rig = crate::pg::rig(ctx, "split_pg_ryw", 2, &[crate::pg::RW, SPLIT, SPLIT_STALE])?;
    rig.cluster.pg_sql(
        "pg0",
        "app1",
        "CREATE TABLE kv (k text PRIMARY KEY, v bigint NOT NULL); ALTER TABLE kv OWNER TO app_owner",
    )?;
    rig.wait_roles("postgres", "pg0", &["pg1", "pg2"])?;
    ryw_case(
        &rig,
        || pg_delay(&rig, APPLY_DELAY),
        |endpoint, clients, iterations, pause| pg_write_then_read(&rig, endpoint, clients, iterations, pause),
    )
}
