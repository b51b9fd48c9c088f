//! `gatehouse-loadgen report` end to end: real short `load` runs against
//! the test kit's PostgreSQL (two targets, two rounds each, alternating),
//! the report over their JSON, and the page opened in headless Chromium,
//! whose script must find data drawn in every chart.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_testkit::{Cluster, Options};
use serde_json::Value;

mod common;
use common::{TempDir, pid_in};

const CHROMIUM: &str = "/usr/bin/chromium";
/// Chromium gets this long to load the page and print its DOM.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs the binary with `args`; fails with its output unless it succeeds.
fn loadgen(args: &[&str]) -> Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse-loadgen"))
        .args(args)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "gatehouse-loadgen {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

/// Headless Chromium's DOM of `page` after its scripts ran.
fn dump_dom(page: &Path, dir: &Path) -> Result<String> {
    let profile = dir.join("chromium-profile");
    std::fs::create_dir_all(&profile)?;
    let dom = dir.join("dom.html");
    let log = dir.join("chromium.log");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&dom)?)
        .stderr(File::create(&log)?)
        .spawn()
        .context("starting chromium")?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > CHROMIUM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("chromium did not finish within {CHROMIUM_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&dom)?;
    ensure!(
        status.success() && !text.is_empty(),
        "chromium: {status}, no DOM: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    Ok(text)
}

/// The value of attribute `name` in the start tag `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// Each `<figure>`'s `data-chart` and `data-drawn`.
fn figures(dom: &str) -> Vec<(String, Option<u64>)> {
    dom.split("<figure")
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>')?];
            let chart = attr(tag, "data-chart")?.to_owned();
            Some((chart, attr(tag, "data-drawn").and_then(|n| n.parse().ok())))
        })
        .collect()
}

#[test]
fn report_renders_every_chart_with_data_in_chromium() -> Result<()> {
    ensure!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: ./test installs it (Debian's chromium, in GH_PACKAGES of scripts/lib.sh), \
         or run `apt-get install --no-install-recommends chromium`"
    );
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let tmp = TempDir(std::env::temp_dir().join(format!("gh-report-{}-{nanos}", std::process::id())));
    let cluster = Cluster::up(&tmp.0, &Options::default())?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?;
    let url = format!(
        "postgres://{}:{}@{}/postgres",
        cluster.pg_user(),
        cluster.pg_password(),
        pg.addr()
    );
    let watch = format!("postgres={}", pid_in(&pg.dir.join("data").join("postmaster.pid"))?);
    let count = format!("pg={url}");
    // Alternating, as experiments run: direct, persistent, direct, persistent.
    let mut runs = Vec::new();
    for round in ["1", "2"] {
        for target in ["direct", "persistent"] {
            let json = tmp.0.join(format!("{target}-{round}.json"));
            let json_arg = json.display().to_string();
            let mut args = vec![
                "load",
                "--target",
                &url,
                "--name",
                target,
                "--round",
                round,
                "--users",
                "4",
                "--spawn-rate",
                "0",
                "--seconds",
                "3",
                "--think-ms",
                "10",
                "--watch",
                &watch,
                "--count-connections",
                &count,
                "--quiet",
                "--json",
                &json_arg,
            ];
            if target == "direct" {
                args.push("--connect-each");
            }
            loadgen(&args)?;
            runs.push(json_arg);
        }
    }
    let page = tmp.0.join("report.html");
    let summary = tmp.0.join("summary.json");
    let (page_arg, summary_arg) = (page.display().to_string(), summary.display().to_string());
    let mut args = vec![
        "report",
        "--title",
        "Connect per request <vs> persistent",
        "--out",
        &page_arg,
        "--json-out",
        &summary_arg,
        "--config",
        "machine=test & CI",
        "--config",
        "users=4",
    ];
    args.extend(runs.iter().map(String::as_str));
    let table = loadgen(&args)?;
    ensure!(
        table.contains("direct (2 rounds)") && table.contains("persistent (2 rounds)") && table.contains("×"),
        "{table}"
    );
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(&summary)?)?;
    let targets = summary["targets"].as_array().context("targets")?;
    ensure!(targets.len() == 2 && summary["baseline"] == "direct", "{summary}");
    for t in targets {
        let v = &t["values"];
        ensure!(t["rounds"] == 2 && t["latency_from"] == "merged_histograms", "{t}");
        ensure!(v["requests"].as_f64() > Some(10.0) && v["failures"] == 0.0, "{t}");
        ensure!(
            v["backend_cpu_cores"].is_f64() && v["backend_connections_peak"].is_f64(),
            "{t}"
        );
    }
    ensure!(
        targets[1]["values"]["backend_connections_peak"].as_f64() >= Some(4.0),
        "{summary}"
    );
    ensure!(targets[1]["ratios"]["requests"].is_f64(), "{summary}");

    let html = std::fs::read_to_string(&page)?;
    ensure!(html.contains("Connect per request &lt;vs&gt; persistent") && html.contains("test &amp; CI"));
    let dom = dump_dom(&page, &tmp.0)?;
    let body = dom
        .split("<body")
        .nth(1)
        .and_then(|b| b.split('>').next())
        .unwrap_or("");
    let charts = figures(&dom);
    ensure!(
        attr(body, "data-charts-ok") == Some("true"),
        "the page's check failed: <body{body}>, charts {charts:?}"
    );
    for (chart, drawn) in &charts {
        ensure!(drawn >= &Some(1), "chart {chart} drew no data: {drawn:?}");
    }
    let names: Vec<&str> = charts.iter().map(|(c, _)| c.as_str()).collect();
    // No proxy was watched: no proxy RSS chart, and no proxy metrics.
    for expected in [
        "latency-p50",
        "latency-p99",
        "requests",
        "failures",
        "connections",
        "cpu",
    ] {
        ensure!(names.contains(&expected), "no {expected} chart in {names:?}");
    }
    // A line per target and round in the latency charts.
    let latency = charts.iter().find(|(c, _)| c == "latency-p99").and_then(|(_, n)| *n);
    ensure!(latency == Some(4), "latency-p99 drew {latency:?} lines, not 4");
    drop(cluster);
    Ok(())
}
