//! `gatehouse-loadgen observe` around real load tools: pgbench against the
//! test kit's PostgreSQL and, when sysbench is installed, sysbench against
//! its MariaDB, each run's JSON checked against the tool's own log and
//! rendered by `report` (its charts' data lines counted in the page, as the
//! page's own script counts them); and a command's exit status and output
//! passed through without a server.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::{Cluster, Options};
use serde_json::Value;

mod common;
use common::{TempDir, pid_in};

fn scratch(name: &str) -> Result<TempDir> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    Ok(TempDir(
        std::env::temp_dir().join(format!("gh-observe-{name}-{}-{nanos}", std::process::id())),
    ))
}

/// Runs `gatehouse-loadgen` with `args`, and `env` set.
fn loadgen(args: &[&str], env: &[(&str, &str)]) -> Result<Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse-loadgen"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Ok(cmd.output()?)
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a command (a tool's set-up) and fails with its output unless it
/// succeeds.
fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().with_context(|| format!("starting {program}"))?;
    ensure!(out.status.success(), "{program} {args:?}: {}", text(&out));
    Ok(())
}

/// The number after `prefix` on the log's line starting with it.
fn logged(log: &str, prefix: &str) -> Option<u64> {
    log.lines()
        .find_map(|l| l.trim().strip_prefix(prefix))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `report` over `run`: the page's charts and, for each, how many of its
/// data lines have two points or more (what the page's script counts).
fn render(dir: &Path, run: &Path) -> Result<Vec<(String, usize)>> {
    let page = dir.join("report.html");
    let (page_arg, run_arg) = (page.display().to_string(), run.display().to_string());
    let out = loadgen(&["report", "--title", "observe", "--out", &page_arg, &run_arg], &[])?;
    ensure!(out.status.success(), "report: {}", text(&out));
    let html = std::fs::read_to_string(&page)?;
    Ok(html
        .split("<figure class=\"chart\" data-chart=\"")
        .skip(1)
        .map(|figure| {
            let id = figure.split('"').next().unwrap_or("").to_owned();
            let series = figure
                .split("<g class=\"series\">")
                .nth(1)
                .and_then(|s| s.split("</figure>").next())
                .unwrap_or("");
            let drawn = series
                .split("<polyline")
                .skip(1)
                .filter(|p| {
                    let points = p.split("points=\"").nth(1).and_then(|s| s.split('"').next());
                    points.is_some_and(|pts| pts.split_whitespace().count() >= 2)
                })
                .count();
            (id, drawn)
        })
        .collect())
}

fn drawn(charts: &[(String, usize)], id: &str) -> Option<usize> {
    charts.iter().find(|(c, _)| c == id).map(|(_, n)| *n)
}

/// Seconds the tool reported with requests.
fn busy_seconds(report: &Value) -> Result<Vec<&Value>> {
    Ok(report["seconds"]
        .as_array()
        .context("seconds")?
        .iter()
        .filter(|s| s["reported"] == true && s["requests"].as_u64() > Some(0))
        .collect())
}

#[test]
fn pgbench_progress_becomes_seconds_and_the_report_renders() -> Result<()> {
    let tmp = scratch("pgbench")?;
    let cluster = Cluster::up(&tmp.0, &Options::default())?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?;
    let port = pg.port.to_string();
    let env = [("PGPASSWORD", cluster.pg_password())];
    let conn = ["-h", &pg.host, "-p", &port, "-U", cluster.pg_user()];
    let mut init = vec!["-i", "-s", "1", "-q"];
    init.extend(conn);
    init.push("postgres");
    run("pgbench", &init, &env)?;

    let json = tmp.0.join("pgbench.json");
    let log = tmp.0.join("pgbench.log");
    let (json_arg, log_arg) = (json.display().to_string(), log.display().to_string());
    let watch = format!("postgres={}", pid_in(&pg.dir.join("data").join("postmaster.pid"))?);
    let count = format!(
        "pg=postgres://{}:{}@{}/postgres",
        cluster.pg_user(),
        cluster.pg_password(),
        pg.addr()
    );
    let mut args = vec![
        "observe",
        "--name",
        "pgbench",
        "--round",
        "1",
        "--json",
        &json_arg,
        "--log",
        &log_arg,
        "--watch",
        &watch,
        "--count-connections",
        &count,
        "--quiet",
        "--",
        "pgbench",
        "-S",
        "-T",
        "3",
        "-P",
        "1",
        "-c",
        "2",
    ];
    args.extend(conn);
    args.push("postgres");
    let out = loadgen(&args, &env)?;
    let printed = text(&out);
    ensure!(out.status.success(), "observe failed: {printed}");
    ensure!(
        !printed.contains("progress:"),
        "the tool's output goes to the log only: {printed}"
    );
    let log = std::fs::read_to_string(&log)?;
    let processed = logged(&log, "number of transactions actually processed:").context("no summary in the log")?;
    // pgbench's first progress line comes a second after its start,
    // later on a loaded machine ("progress: 1.3 s" in one full ./test run here).
    ensure!(
        log.lines()
            .any(|l| l.starts_with("progress: ") && l.contains(" tps, lat ")),
        "stderr (the progress) is in the log: {log}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let summary = &report["summary"];
    ensure!(
        summary["requests"].as_u64() == Some(processed) && summary["failures"] == 0,
        "{summary} vs {processed} processed"
    );
    ensure!(summary["mean_ms"].as_f64() > Some(0.0), "{summary}");
    for absent in ["p50_ms", "p90_ms", "p99_ms", "max_ms"] {
        ensure!(summary.get(absent).is_none(), "pgbench gives no {absent}: {summary}");
    }
    ensure!(
        report["engine"] == "postgres" && report["round"] == 1 && report["plan"]["tool"] == "pgbench",
        "{}",
        report["plan"]
    );
    let busy = busy_seconds(&report)?;
    ensure!(busy.len() >= 2, "seconds with requests: {:?}", report["seconds"]);
    for s in &busy {
        ensure!(
            s["mean_ms"].as_f64() > Some(0.0) && s.get("p50_ms").is_none() && s.get("p99_ms").is_none(),
            "{s}"
        );
        ensure!(s["users"].as_u64() <= Some(2), "pgbench's clients: {s}");
    }
    // The clients' count is sampled once a second: a loaded machine can
    // sample the first busy second before pgbench's connections are in
    // (`users` 0 there in one full ./test run); some second sees both.
    ensure!(
        busy.iter().any(|s| s["users"] == 2),
        "no second saw pgbench's 2 clients: {busy:?}"
    );
    let cpu = report["seconds"]
        .as_array()
        .context("seconds")?
        .iter()
        .filter_map(|s| s["processes"][0]["cpu_cores"].as_f64())
        .fold(0.0, f64::max);
    ensure!(cpu > 0.0, "the server's CPU was not sampled: {report}");
    // The most any second counted: a second's count can be missing when
    // its sample did not answer within the second on a loaded machine.
    let connections = report["seconds"]
        .as_array()
        .context("seconds")?
        .iter()
        .filter_map(|s| s["connections"][0]["count"].as_u64())
        .max();
    ensure!(connections >= Some(2), "pgbench's 2 clients: {connections:?}");

    let charts = render(&tmp.0, &json)?;
    for id in ["requests", "latency-mean", "cpu", "connections"] {
        ensure!(drawn(&charts, id) == Some(1), "{id} drew no line: {charts:?}");
    }
    ensure!(
        drawn(&charts, "latency-p50") == Some(0) && drawn(&charts, "latency-p99") == Some(0),
        "no percentile, no point: {charts:?}"
    );
    drop(cluster);
    Ok(())
}

#[test]
fn sysbench_histogram_gives_percentiles_up_to_its_max_and_the_report_renders() -> Result<()> {
    if Command::new("sysbench").arg("--version").output().is_err() {
        println!("skipped: sysbench is not installed (apt-get install sysbench)");
        return Ok(());
    }
    let tmp = scratch("sysbench")?;
    let opts = Options {
        pg: false,
        mysql: true,
        ..Options::default()
    };
    let cluster = Cluster::up(&tmp.0, &opts)?;
    let my = cluster.mysql_primary().context("no MariaDB")?;
    cluster.mysql_sql(&my.name, "CREATE DATABASE sbtest")?;
    let (host, port) = (format!("--mysql-host={}", my.host), format!("--mysql-port={}", my.port));
    let user = format!("--mysql-user={}", cluster.mysql_user());
    let password = format!("--mysql-password={}", cluster.mysql_password());
    let conn = [
        host.as_str(),
        &port,
        &user,
        &password,
        "--mysql-db=sbtest",
        "--tables=1",
        "--table-size=1000",
    ];
    let mut prepare = vec!["oltp_point_select"];
    prepare.extend(conn);
    prepare.push("prepare");
    run("sysbench", &prepare, &[])?;

    let json = tmp.0.join("sysbench.json");
    let log = tmp.0.join("sysbench.log");
    let (json_arg, log_arg) = (json.display().to_string(), log.display().to_string());
    let watch = format!("mariadb={}", pid_in(&my.dir.join("mariadbd.pid"))?);
    let mut args = vec![
        "observe",
        "--name",
        "sysbench",
        "--json",
        &json_arg,
        "--log",
        &log_arg,
        "--watch",
        &watch,
        "--quiet",
        "--",
        "sysbench",
        "oltp_point_select",
    ];
    args.extend(conn);
    args.extend([
        "--threads=2",
        "--time=3",
        "--report-interval=1",
        "--histogram=on",
        "--percentile=99",
        "run",
    ]);
    let out = loadgen(&args, &[])?;
    ensure!(out.status.success(), "observe failed: {}", text(&out));
    let log = std::fs::read_to_string(&log)?;
    let transactions = logged(&log, "transactions:").context("no summary in the log")?;
    let errors = logged(&log, "ignored errors:").context("no errors line in the log")?;
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let summary = &report["summary"];
    ensure!(
        summary["requests"].as_u64() == Some(transactions + errors) && transactions > 0,
        "{summary} vs {transactions} transactions, {errors} errors"
    );
    let number = |key: &str| summary[key].as_f64().unwrap_or(-1.0);
    let (p50, p90, p99, max) = (number("p50_ms"), number("p90_ms"), number("p99_ms"), number("max_ms"));
    ensure!(0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max, "{summary}");
    let histogram: u64 = report["latency_histogram_us"]
        .as_array()
        .context("no histogram")?
        .iter()
        .filter_map(|row| row[1].as_u64())
        .sum();
    ensure!(histogram == transactions, "histogram of {histogram} vs {transactions}");
    ensure!(
        report["engine"] == "mysql" && report["plan"]["latency_percentile"] == 99.0,
        "{}",
        report["plan"]
    );
    ensure!(
        !report.to_string().contains(cluster.mysql_password()),
        "the password is hidden: {}",
        report["plan"]["command"]
    );
    let busy = busy_seconds(&report)?;
    ensure!(busy.len() >= 2, "seconds with requests: {:?}", report["seconds"]);
    for s in &busy {
        // Threads running in the second (fewer in the last, as they stop).
        let threads = s["users"].as_u64().unwrap_or(0);
        ensure!(
            s["p99_ms"].as_f64() > Some(0.0) && s.get("p50_ms").is_none() && (1..=2).contains(&threads),
            "{s}"
        );
    }
    let rss = report["seconds"][0]["processes"][0]["rss_bytes"].as_u64();
    ensure!(rss > Some(0), "the server was not sampled: {:?}", report["seconds"][0]);

    let charts = render(&tmp.0, &json)?;
    for id in ["requests", "latency-p99", "cpu"] {
        ensure!(drawn(&charts, id) == Some(1), "{id} drew no line: {charts:?}");
    }
    drop(cluster);
    Ok(())
}

/// A command that prints progress in sysbench's format on stdout, a line
/// on stderr, and fails: `sh -c SCRIPT sysbench` (the word names the tool).
#[test]
fn the_commands_exit_status_and_both_streams_pass_through() -> Result<()> {
    let tmp = scratch("status")?;
    std::fs::create_dir_all(&tmp.0)?;
    let json = tmp.0.join("run.json");
    let log = tmp.0.join("run.log");
    let (json_arg, log_arg) = (json.display().to_string(), log.display().to_string());
    let script = "echo '[ 1s ] thds: 3 tps: 10.00 qps: 10.00 (r/w/o: 10.00/0.00/0.00) lat (ms,95%): 2.50 err/s: 1.00 reconn/s: 0.00'; \
                  echo 'FATAL: the server went away' >&2; exit 3";
    let observe = |script: &str| {
        loadgen(
            &[
                "observe", "--name", "fake", "--json", &json_arg, "--log", &log_arg, "--quiet", "--", "sh", "-c",
                script, "sysbench",
            ],
            &[],
        )
    };
    let out = observe(script)?;
    ensure!(out.status.code() == Some(3), "the command's status: {}", text(&out));
    let logged = std::fs::read_to_string(&log)?;
    ensure!(
        logged.contains("[ 1s ]") && logged.contains("FATAL: the server went away"),
        "{logged}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let first = &report["seconds"][0];
    ensure!(
        first["requests"] == 11 && first["failures"] == 1 && first["p95_ms"] == 2.5 && first["users"] == 3,
        "{first}"
    );
    ensure!(
        report["failures"]["ignored_errors"]["first"] == "FATAL: the server went away"
            && report["plan"]["exit"] == "exit 3",
        "{report}"
    );
    // Success without a per-second line is a failure.
    let out = observe("echo 'sysbench 1.0.20'")?;
    ensure!(out.status.code() == Some(1), "{}", text(&out));
    ensure!(text(&out).contains("no per-second line"), "{}", text(&out));
    Ok(())
}
