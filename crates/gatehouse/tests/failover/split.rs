//! Split endpoints in front of a primary and two replicas, both engines:
//! the standard benchmarks' read and write workloads through a split
//! endpoint whose pool is much smaller than the clients (pgbench's
//! built-in scripts and a custom one; sysbench's OLTP scripts) with no
//! errors, the servers' own counters showing the replicas served the reads
//! and the primary every write; and read-your-writes, with the replicas'
//! apply delayed: 10,000 write-then-read iterations see every write with
//! it on, and stale reads are counted with it off.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::Queryable;

use crate::Ctx;
use crate::common::{Rig, wait_until};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("split::pg::pgbench_reads_on_replicas_writes_on_the_writer", pg_pgbench),
        ("split::pg::reads_see_the_clients_writes_with_replicas_delayed", pg_ryw),
        (
            "split::pg::a_write_pipelined_behind_a_read_runs_on_the_writer",
            pg_pipelined,
        ),
        (
            "split::mysql::sysbench_reads_on_replicas_writes_on_the_writer",
            mysql_sysbench,
        ),
        (
            "split::mysql::reads_see_the_clients_writes_with_replicas_delayed",
            mysql_ryw,
        ),
        (
            "split::mysql::writes_after_reads_with_warnings_run_on_the_writer",
            mysql_kept_read_lease,
        ),
    ]
}

/// A split endpoint (read-your-writes on, the default) and one with it off.
const SPLIT: (&str, &str) = (
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

const SPLIT_STALE: (&str, &str) = (
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
const RYW_ITERATIONS: usize = 10_000;
const RYW_CLIENTS: usize = 10;
/// With it off: enough to see stale reads.
const STALE_ITERATIONS: usize = 1_000;
/// How far behind the replicas apply what they receive.
const APPLY_DELAY: &str = "1s";

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "{cmd:?} failed: {text}");
    Ok(text)
}

// ---------------------------------------------------------------- PostgreSQL

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

fn pg_pgbench(ctx: &Ctx) -> Result<()> {
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
    for r in ["pg1", "pg2"] {
        wait_until(
            &format!("{r} to have the pgbench tables"),
            Duration::from_secs(30),
            || {
                Ok(
                    match rig.cluster.pg_sql(r, "app1", "SELECT count(*) FROM pgbench_branches") {
                        Ok(v) if v.trim() == "1" => Ok(()),
                        Ok(v) => Err(v),
                        Err(e) => Err(format!("{e:#}")),
                    },
                )
            },
        )?;
    }
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
fn pg_pipelined(ctx: &Ctx) -> Result<()> {
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

/// `clients` connections through `endpoint`, each `iterations` times
/// setting its own row to a new value and reading it back at once;
/// returns the stale reads counted.
fn pg_write_then_read(rig: &Rig, endpoint: &'static str, clients: usize, iterations: usize) -> Result<usize> {
    let addr = rig.addr(endpoint);
    rig.handle().block_on(async move {
        let mut tasks = Vec::new();
        for c in 0..clients {
            tasks.push(tokio::spawn(async move {
                let client = crate::pg::connect(addr).await?;
                let id = format!("{endpoint}-{c}");
                client
                    .execute(
                        "INSERT INTO kv (k, v) VALUES ($1, 0) ON CONFLICT (k) DO UPDATE SET v = 0",
                        &[&id],
                    )
                    .await?;
                let mut stale = 0usize;
                for i in 1..=iterations as i64 {
                    // Every other write in an explicit block (whose BEGIN
                    // alone says nothing of writing).
                    if i % 2 == 0 {
                        client.batch_execute("BEGIN").await?;
                        client.execute("UPDATE kv SET v = $2 WHERE k = $1", &[&id, &i]).await?;
                        client.batch_execute("COMMIT").await?;
                    } else {
                        client.execute("UPDATE kv SET v = $2 WHERE k = $1", &[&id, &i]).await?;
                    }
                    // A replica behind may not have the row at all yet.
                    let row = client.query_opt("SELECT v FROM kv WHERE k = $1", &[&id]).await?;
                    if row.map(|r| r.get::<_, i64>(0)) != Some(i) {
                        stale += 1;
                    }
                }
                anyhow::Ok(stale)
            }));
        }
        let mut stale = 0;
        for t in tasks {
            stale += t.await??;
        }
        anyhow::Ok(stale)
    })
}

fn pg_ryw(ctx: &Ctx) -> Result<()> {
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
        |endpoint, clients, iterations| pg_write_then_read(&rig, endpoint, clients, iterations),
    )
}

/// The read-your-writes check, the same for both engines: replicas
/// delayed by `delay`, 10,000 iterations with it on (no stale read, the
/// writer served those reads), then with it off (stale reads counted).
fn ryw_case(
    rig: &Rig,
    delay: impl FnOnce() -> Result<()>,
    write_then_read: impl Fn(&'static str, usize, usize) -> Result<usize>,
) -> Result<()> {
    // Reads with no write before them go to the replicas.
    let readers0 = rig.metric("gatehouse_routed_total", "reason=\"least_busy_reader\"")?;
    write_then_read("split", 2, 10)?;
    delay()?;
    let fresh0 = rig.metric("gatehouse_routed_total", "reason=\"writer_read_your_writes\"")?;
    let started = Instant::now();
    let stale = write_then_read("split", RYW_CLIENTS, RYW_ITERATIONS / RYW_CLIENTS)?;
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
    let stale_off = write_then_read("split_stale", RYW_CLIENTS, STALE_ITERATIONS / RYW_CLIENTS)?;
    ensure!(
        stale_off > 0,
        "with read_your_writes off and replicas {APPLY_DELAY} behind, no stale read in {STALE_ITERATIONS}: \
         were the reads on the replicas?"
    );
    let readers = rig.metric("gatehouse_routed_total", "reason=\"least_busy_reader\"")? - readers0;
    ensure!(readers > 0.0, "no read went to a replica");
    tracing::info!(
        ?took,
        fresh,
        stale_off,
        readers,
        "read-your-writes: {RYW_ITERATIONS} iterations, 0 stale; off: {stale_off} of {STALE_ITERATIONS} stale"
    );
    Ok(())
}

// ---------------------------------------------------------------- MariaDB

/// A server's `Com_*` counters of interest: select, insert, update, delete.
fn com_counters(rig: &Rig, server: &str) -> Result<[i64; 4]> {
    let out = rig.cluster.mysql_sql(
        server,
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN \
         ('COM_SELECT','COM_INSERT','COM_UPDATE','COM_DELETE') ORDER BY FIELD(VARIABLE_NAME, \
         'COM_SELECT','COM_INSERT','COM_UPDATE','COM_DELETE')",
    )?;
    let v: Vec<i64> = out.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    ensure!(v.len() == 4, "Com_* counters of {server}: {out}");
    Ok([v[0], v[1], v[2], v[3]])
}

fn sysbench(rig: &Rig, endpoint: &str, script: &str, extra: &[&str]) -> Result<String> {
    let port = rig.addr(endpoint).port().to_string();
    let mut cmd = Command::new("sysbench");
    cmd.arg(script)
        .args([
            "--mysql-host=127.0.0.1",
            &format!("--mysql-port={port}"),
            "--mysql-user=alice",
            "--mysql-password=alice-pw",
            "--mysql-db=app1",
            "--mysql-ssl=off",
            "--tables=2",
            "--table-size=2000",
            "--threads=16",
            "--events=2000",
            "--time=0",
        ])
        .args(extra)
        .arg("run");
    run(&mut cmd)
}

/// sysbench's "ignored errors" count in its summary.
fn ignored_errors(out: &str) -> Option<u64> {
    let line = out.lines().find(|l| l.contains("ignored errors:"))?;
    line.split(':').nth(1)?.split_whitespace().next()?.parse().ok()
}

fn mysql_sysbench(ctx: &Ctx) -> Result<()> {
    let rig = crate::mysql::rig_endpoints(ctx, "split_sysbench", 2, &[SPLIT, SPLIT_STALE])?;
    let primary = rig.server_port("my0")?.to_string();
    run(Command::new("sysbench").arg("oltp_read_write").args([
        "--mysql-host=127.0.0.1",
        &format!("--mysql-port={primary}"),
        "--mysql-user=app_owner",
        "--mysql-password=owner-pw",
        "--mysql-db=app1",
        "--mysql-ssl=off",
        "--tables=2",
        "--table-size=2000",
        "prepare",
    ]))?;
    for r in ["my1", "my2"] {
        wait_until(
            &format!("{r} to have the sysbench tables"),
            Duration::from_secs(30),
            || {
                Ok(match rig.cluster.mysql_sql(r, "SELECT COUNT(*) FROM app1.sbtest2") {
                    Ok(v) if v.trim() == "2000" => Ok(()),
                    Ok(v) => Err(v),
                    Err(e) => Err(format!("{e:#}")),
                })
            },
        )?;
    }
    rig.wait_roles("mysql", "my0", &["my1", "my2"])?;
    let servers = ["my0", "my1", "my2"];
    let counters = || -> Result<Vec<[i64; 4]>> { servers.iter().map(|s| com_counters(&rig, s)).collect() };
    // Read-only, statement by statement (--skip_trx: sysbench's BEGIN ...
    // COMMIT blocks are explicit transactions, which stay on the writer),
    // text and binary protocol; read-write the same way (without
    // read-your-writes: with it, a client writing all the time reads on
    // the writer until the replicas' probed positions show they caught
    // up; and with it, which must be error-free all the same); then
    // write-only and read-write with their transactions.
    let runs: [(&str, &str, &[&str]); 6] = [
        ("split", "oltp_read_only", &["--skip_trx=on", "--db-ps-mode=disable"]),
        ("split", "oltp_read_only", &["--skip_trx=on", "--db-ps-mode=auto"]),
        // (Statement by statement, sysbench's DELETE then INSERT of one
        // id races another thread's: duplicate keys, direct or not.)
        (
            "split_stale",
            "oltp_read_write",
            &["--skip_trx=on", "--delete_inserts=0"],
        ),
        ("split", "oltp_read_write", &["--skip_trx=on", "--delete_inserts=0"]),
        ("split", "oltp_write_only", &[]),
        ("split", "oltp_read_write", &[]),
    ];
    let mut report = Vec::new();
    for (endpoint, script, extra) in runs {
        let before = counters()?;
        let out = sysbench(&rig, endpoint, script, extra)?;
        let after = counters()?;
        let d: Vec<[i64; 4]> = before
            .iter()
            .zip(&after)
            .map(|(b, a)| [a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]])
            .collect();
        let ignored = ignored_errors(&out);
        report.push(format!(
            "{endpoint} {script} {extra:?}: Com_select/insert/update/delete per server {d:?}, ignored errors {ignored:?}"
        ));
        // sysbench stops at any error but the deadlocks and lock wait
        // timeouts of its own transactions (it retries those, and meets
        // them direct as well): statement by statement, none at all.
        let statement_by_statement = extra.contains(&"--skip_trx=on");
        ensure!(
            ignored == Some(0) || (!statement_by_statement && ignored.is_some()),
            "{script}: errors: {report:?}"
        );
        // Writes ran on the primary: a replica counts the ones it applies
        // from the primary's binary log, never more (a write sent to a
        // replica would have failed: read_only).
        for (i, name) in servers.iter().enumerate().skip(1) {
            ensure!(
                (1..4).all(|k| d[i][k] <= d[0][k]),
                "{script}: {name} ran writes of its own: {report:?}"
            );
        }
        let writes = d[0][1] + d[0][2] + d[0][3];
        let replica_selects = d[1][0] + d[2][0];
        let primary_selects = d[0][0];
        if script != "oltp_read_only" {
            ensure!(writes > 0, "{script}: no write reached the primary: {report:?}");
        }
        if statement_by_statement && endpoint == "split_stale" || script == "oltp_read_only" {
            ensure!(
                replica_selects > 4 * primary_selects.max(1) && d[1][0] > 0 && d[2][0] > 0,
                "{endpoint} {script}: the replicas should serve most reads: {report:?}"
            );
        }
        if !statement_by_statement && script == "oltp_read_write" {
            // In its transactions, read-write runs whole on the writer
            // (a replica's count is the monitor's probes).
            ensure!(
                replica_selects * 100 < primary_selects,
                "{script} in transactions: {report:?}"
            );
        }
    }
    tracing::info!(?report, "sysbench through split");
    Ok(())
}

/// Sets every replica's apply delay (`MASTER_DELAY`, seconds).
fn mysql_delay(rig: &Rig, seconds: u32) -> Result<()> {
    for r in ["my1", "my2"] {
        rig.cluster.mysql_sql(
            r,
            &format!("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = {seconds}; START SLAVE"),
        )?;
    }
    Ok(())
}

fn mysql_write_then_read(rig: &Rig, endpoint: &'static str, clients: usize, iterations: usize) -> Result<usize> {
    let addr = rig.addr(endpoint);
    rig.handle().block_on(async move {
        let mut tasks = Vec::new();
        for c in 0..clients {
            tasks.push(tokio::spawn(async move {
                let mut conn = crate::mysql::connect(addr).await?;
                let id = format!("{endpoint}-{c}");
                conn.exec_drop("REPLACE INTO kv (k, v) VALUES (?, 0)", (&id,)).await?;
                let mut stale = 0usize;
                for i in 1..=iterations as i64 {
                    // Every other write in an explicit block.
                    if i % 2 == 0 {
                        conn.query_drop("START TRANSACTION").await?;
                        conn.exec_drop("UPDATE kv SET v = ? WHERE k = ?", (i, &id)).await?;
                        conn.query_drop("COMMIT").await?;
                    } else {
                        conn.exec_drop("UPDATE kv SET v = ? WHERE k = ?", (i, &id)).await?;
                    }
                    let v: Option<i64> = conn.exec_first("SELECT v FROM kv WHERE k = ?", (&id,)).await?;
                    if v != Some(i) {
                        stale += 1;
                    }
                }
                conn.disconnect().await?;
                anyhow::Ok(stale)
            }));
        }
        let mut stale = 0;
        for t in tasks {
            stale += t.await??;
        }
        anyhow::Ok(stale)
    })
}

fn mysql_ryw(ctx: &Ctx) -> Result<()> {
    let rig = crate::mysql::rig_endpoints(ctx, "split_mysql_ryw", 2, &[SPLIT, SPLIT_STALE])?;
    rig.cluster.mysql_sql(
        "my0",
        "CREATE TABLE app1.kv (k VARCHAR(64) PRIMARY KEY, v BIGINT NOT NULL)",
    )?;
    for r in ["my1", "my2"] {
        wait_until(&format!("{r} to have table kv"), Duration::from_secs(30), || {
            Ok(
                match rig.cluster.mysql_sql(
                    r,
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'kv'",
                ) {
                    Ok(v) if v.trim() == "1" => Ok(()),
                    Ok(v) => Err(v),
                    Err(e) => Err(format!("{e:#}")),
                },
            )
        })?;
    }
    rig.wait_roles("mysql", "my0", &["my1", "my2"])?;
    ryw_case(
        &rig,
        || mysql_delay(&rig, 1),
        |endpoint, clients, iterations| mysql_write_then_read(&rig, endpoint, clients, iterations),
    )
}

/// Reads with warnings, then a write, over and over: each read on a
/// replica, each write on the writer (a read's lease never carries the
/// next command to a replica). Without read-your-writes, so every round's
/// read is on a replica.
fn mysql_kept_read_lease(ctx: &Ctx) -> Result<()> {
    let rig = crate::mysql::rig_endpoints(ctx, "split_mysql_kept", 2, &[SPLIT_STALE])?;
    rig.wait_roles("mysql", "my0", &["my1", "my2"])?;
    let addr = rig.addr("split_stale");
    let writer = rig.server_port("my0")?;
    rig.handle().block_on(async move {
        let mut conn = crate::mysql::connect(addr).await?;
        for round in 0..20 {
            // A warning (truncated conversion) on a read.
            let read_on: Option<u16> = conn.query_first("SELECT @@port + CAST('1x' AS SIGNED) - 1").await?;
            ensure!(read_on != Some(writer), "round {round}: the read ran on the writer");
            conn.query_drop(format!("INSERT INTO t (who) VALUES ('kept-{round}')"))
                .await?;
            let port: Option<u16> = conn
                .query_first(format!("SELECT port FROM t WHERE who = 'kept-{round}' FOR UPDATE"))
                .await?;
            ensure!(port == Some(writer), "round {round}: the write landed on {port:?}");
        }
        conn.disconnect().await?;
        anyhow::Ok(())
    })
}
