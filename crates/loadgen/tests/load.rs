//! The load engine (`gatehouse-loadgen load`) against real servers started
//! by the test kit, one PostgreSQL and one MariaDB: virtual users spawned at
//! a rate, every second of the run in the JSON report with its requests,
//! percentiles, the watched server's process tree and its client
//! connections counted, for both the persistent and the connect-per-request
//! pattern; a target joining mid-run (`--target-from`) reached only from
//! its second on; and a failing statement counted by the server's own
//! error code.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::{Cluster, Options};
use serde_json::Value;

mod common;
use common::{TempDir, load, pid_in};

/// What every successful run must show: requests each second, none failed,
/// ordered percentiles, all users started, the server's tree sampled.
fn check_run(name: &str, report: &Value, seconds: usize, users: u64) -> Result<()> {
    let summary = &report["summary"];
    ensure!(summary["failures"] == 0, "{name}: {summary}");
    ensure!(summary["requests"].as_u64() > Some(10), "{name}: {summary}");
    let (p50, p99, max) = (
        summary["p50_ms"].as_f64().unwrap_or(-1.0),
        summary["p99_ms"].as_f64().unwrap_or(-1.0),
        summary["max_ms"].as_f64().unwrap_or(-1.0),
    );
    ensure!(0.0 < p50 && p50 <= p99 && p99 <= max, "{name}: {summary}");
    let per_second = report["seconds"].as_array().context("seconds")?;
    ensure!(per_second.len() == seconds, "{name}: {} seconds", per_second.len());
    // Every second has requests (one stall of the whole machine spared).
    let quiet = per_second.iter().filter(|s| s["requests"].as_u64() == Some(0)).count();
    ensure!(quiet <= 1, "{name}: seconds without requests: {per_second:?}");
    ensure!(
        per_second.last().and_then(|s| s["users"].as_u64()) == Some(users),
        "{name}: not every user started: {per_second:?}"
    );
    let server = &per_second[seconds - 1]["processes"][0];
    ensure!(
        server["processes"].as_u64() >= Some(1) && server["rss_bytes"].as_u64() > Some(0),
        "{name}: the server's tree was not sampled: {server}"
    );
    Ok(())
}

#[test]
fn load_runs_against_postgres_and_mariadb_with_each_second_reported() -> Result<()> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let tmp = TempDir(std::env::temp_dir().join(format!("gh-load-{}-{nanos}", std::process::id())));
    let opts = Options {
        mysql: true,
        ..Options::default()
    };
    let cluster = Cluster::up(&tmp.0, &opts)?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?;
    let my = cluster.mysql_primary().context("no MariaDB")?;
    let pg_url = format!(
        "postgres://{}:{}@{}/postgres",
        cluster.pg_user(),
        cluster.pg_password(),
        pg.addr()
    );
    let my_url = format!(
        "mysql://{}:{}@{}/mysql",
        cluster.mysql_user(),
        cluster.mysql_password(),
        my.addr()
    );
    let pg_watch = format!("postgres={}", pid_in(&pg.dir.join("data").join("postmaster.pid"))?);
    let my_watch = format!("mariadb={}", pid_in(&my.dir.join("mariadbd.pid"))?);
    let common = [
        "--users",
        "6",
        "--spawn-rate",
        "4",
        "--seconds",
        "3",
        "--think-ms",
        "20",
    ];
    for (name, url, watch) in [("pg", &pg_url, &pg_watch), ("my", &my_url, &my_watch)] {
        for pattern in ["persistent", "connect_each"] {
            let run = format!("{name}-{pattern}");
            let mut args: Vec<&str> = common.to_vec();
            let count = format!("server={url}");
            args.extend(["--target", url, "--watch", watch, "--count-connections", &count]);
            if pattern == "connect_each" {
                args.push("--connect-each");
            }
            let (ok, report) = load(&tmp.0, &run, &args)?;
            ensure!(ok, "{run}: failed: {report}");
            check_run(&run, &report, 3, 6)?;
            // Users start at 4/s: one in the first second's sample has not.
            let first = report["seconds"][0]["users"].as_u64();
            ensure!(first < Some(6), "{run}: all users started at once: {first:?}");
            // The server's client connections, the counting one left out:
            // after 2 s each of the 6 users holds one of its own (at 3 s,
            // the end, they are closing theirs).
            let last = &report["seconds"][1]["connections"][0];
            ensure!(last["name"] == "server" && last["count"].is_u64(), "{run}: {last}");
            if pattern == "persistent" {
                ensure!(last["count"].as_u64() >= Some(6), "{run}: {last}");
            }
        }
        // A target that joins at second 2 (nothing listens there): no
        // request reaches it before, and some after.
        let gone = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let joining = url.replacen(
            &format!("@{}", if name == "pg" { pg.addr() } else { my.addr() }),
            &format!("@{gone}"),
            1,
        );
        ensure!(joining != *url, "{name}: {joining}");
        let from = format!("2={joining}");
        let (_, report) = load(
            &tmp.0,
            &format!("{name}-joining"),
            &[
                "--target",
                url,
                "--target-from",
                &from,
                "--users",
                "4",
                "--spawn-rate",
                "0",
                "--seconds",
                "4",
                "--think-ms",
                "20",
                "--connect-each",
            ],
        )?;
        let seconds = report["seconds"].as_array().context("seconds")?;
        let failed = |i: usize| seconds.get(i).and_then(|s| s["failures"].as_u64());
        ensure!(
            failed(0) == Some(0) && failed(1) == Some(0),
            "{name}: failures before the target joined: {seconds:?}"
        );
        ensure!(
            failed(2) > Some(0) && failed(3) > Some(0),
            "{name}: the joined target had no request: {seconds:?}"
        );
        ensure!(
            report["plan"]["targets_added_at_s"] == serde_json::json!([2]),
            "{name}: {}",
            report["plan"]
        );
        // A statement the server refuses: counted by its own code, and the
        // run fails.
        let (ok, report) = load(
            &tmp.0,
            &format!("{name}-bad"),
            &["--target", url, "--users", "2", "--seconds", "1", "--sql", "SELEC 1"],
        )?;
        let code = if name == "pg" { "42601" } else { "1064" };
        ensure!(!ok, "{name}: a run of failures succeeded");
        ensure!(
            report["failures"][code]["count"].as_u64() > Some(0)
                && report["summary"]["requests"] == report["summary"]["failures"],
            "{name}: {report}"
        );
    }
    drop(cluster);
    Ok(())
}
