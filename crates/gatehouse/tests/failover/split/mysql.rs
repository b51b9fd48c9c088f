//! Split endpoints on MariaDB (primary my0, replicas my1 and my2):
//! sysbench's OLTP scripts, reads with warnings, read-your-writes.

use std::process::Command;
use std::time::Duration;

use anyhow::{Result, ensure};
use mysql_async::prelude::Queryable;

use super::{KvClient, SPLIT, SPLIT_STALE, run, ryw_case, stale_reads, wait_replicated};
use crate::Ctx;
use crate::common::Rig;

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

pub(super) fn sysbench_case(ctx: &Ctx) -> Result<()> {
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
    wait_replicated("the sysbench tables", &["my1", "my2"], "2000", |r| {
        rig.cluster.mysql_sql(r, "SELECT COUNT(*) FROM app1.sbtest2")
    })?;
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

/// The replicas' `MASTER_DELAY` in the read-your-writes check (see there).
const MASTER_DELAY_SECONDS: u32 = 2;

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

/// A mysql_async client of the read-your-writes check.
struct MyKv {
    conn: mysql_async::Conn,
    id: String,
}

impl KvClient for MyKv {
    async fn set(&mut self, v: i64, in_block: bool) -> Result<()> {
        let update = "UPDATE kv SET v = ? WHERE k = ?";
        if in_block {
            self.conn.query_drop("START TRANSACTION").await?;
            self.conn.exec_drop(update, (v, &self.id)).await?;
            self.conn.query_drop("COMMIT").await?;
        } else {
            self.conn.exec_drop(update, (v, &self.id)).await?;
        }
        Ok(())
    }

    async fn get(&mut self) -> Result<Option<i64>> {
        Ok(self
            .conn
            .exec_first("SELECT v FROM kv WHERE k = ?", (&self.id,))
            .await?)
    }
}

/// `clients` connections through `endpoint` in the read-your-writes check
/// ([`super::stale_reads`]).
fn mysql_write_then_read(
    rig: &Rig,
    endpoint: &'static str,
    clients: usize,
    iterations: usize,
    pause: Duration,
) -> Result<usize> {
    let addr = rig.addr(endpoint);
    stale_reads(rig, clients, iterations, pause, |c| async move {
        let mut conn = crate::mysql::connect(addr).await?;
        let id = format!("{endpoint}-{c}");
        conn.exec_drop("REPLACE INTO kv (k, v) VALUES (?, 0)", (&id,)).await?;
        Ok(MyKv { conn, id })
    })
}

pub(super) fn ryw(ctx: &Ctx) -> Result<()> {
    let rig = crate::mysql::rig_endpoints(ctx, "split_mysql_ryw", 2, &[SPLIT, SPLIT_STALE])?;
    rig.cluster.mysql_sql(
        "my0",
        "CREATE TABLE app1.kv (k VARCHAR(64) PRIMARY KEY, v BIGINT NOT NULL)",
    )?;
    wait_replicated("table kv", &["my1", "my2"], "1", |r| {
        rig.cluster.mysql_sql(
            r,
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'kv'",
        )
    })?;
    rig.wait_roles("mysql", "my0", &["my1", "my2"])?;
    // MASTER_DELAY holds an event until N seconds after the timestamp the
    // primary gave it, and that timestamp has whole seconds: a delay of 1
    // holds a write anywhere from 0 to 1 s. With 2, every write stays at
    // least 1 s behind, as PostgreSQL's recovery_min_apply_delay of 1 s.
    ryw_case(
        &rig,
        || mysql_delay(&rig, MASTER_DELAY_SECONDS),
        |endpoint, clients, iterations, pause| mysql_write_then_read(&rig, endpoint, clients, iterations, pause),
    )
}

/// Reads with warnings, then a write, over and over: each read on a
/// replica, each write on the writer (a read's lease never carries the
/// next command to a replica). Without read-your-writes, so every round's
/// read is on a replica.
pub(super) fn kept_read_lease(ctx: &Ctx) -> Result<()> {
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
