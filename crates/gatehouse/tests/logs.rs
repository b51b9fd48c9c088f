//! What `gatehouse run` logs, from the real binary. Why a backend down
//! from the start is down (text without colours, values quoted; or JSON
//! lines), a new log filter taken at a reload, and, against a real
//! PostgreSQL and MariaDB from the test kit, the lines an operator reads
//! for every client session, one mechanism for both engines: a `client logged in` line
//! (tenant, database, endpoint, client address, TLS) and, when the client
//! leaves, a `client session ended` line with its duration, the
//! transactions and statements it ran, the backend leases it took (one a
//! transaction) and why it was pinned. A MySQL
//! COM_CHANGE_USER ends one tenant's session and logs the other's login.

#[path = "common/binary.rs"]
mod binary;

use std::process::Stdio;
use std::time::Duration;

use binary::{TempDir, TwoEngines, free_port, gatehouse, hash};

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::{Cluster, Options};
use mysql_async::prelude::Queryable;

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("gatehouse-logs-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

/// The JSON log lines with `message`, parsed.
fn lines_with(logs: &str, message: &str) -> Vec<serde_json::Value> {
    logs.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == message)
        .collect()
}

#[test]
fn each_session_logs_its_login_and_its_end_with_leases_and_pin_reason_on_both_engines() -> Result<()> {
    let dir = TempDir(std::env::temp_dir().join(format!("gh-session-logs-{}", std::process::id())));
    let opts = Options {
        mysql: true,
        ..Options::default()
    };
    let cluster = Cluster::up(&dir.0, &opts)?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?;
    let my = cluster.mysql_primary().context("no MariaDB")?;
    let (pg_port, my_port) = (free_port()?, free_port()?);
    let my_hash = hash("my-app-pw", &["--mysql"])?;
    let config = TwoEngines::new(&cluster, "[proxy]\nlog_format = \"json\"\nlog_filter = \"info\"\n")
        .cluster("pgc", "postgres", &pg.addr(), "")
        .cluster("myc", "mysql", &my.addr(), "")
        .endpoint("pg_rw", &format!("127.0.0.1:{pg_port}"), "pgc")
        .endpoint("my_rw", &format!("127.0.0.1:{my_port}"), "myc")
        .pg_tenant("pgapp", &hash("pg-app-pw", &[])?)
        .my_tenant("myapp", &my_hash)
        .my_tenant("myother", &my_hash)
        .text();
    let path = dir.0.join("gatehouse.toml");
    std::fs::write(&path, config)?;
    let log_path = dir.0.join("gatehouse.log");
    let mut proxy = gatehouse()
        .arg("run")
        .arg("--config")
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdout(std::fs::File::create(&log_path)?)
        .stderr(Stdio::null())
        .spawn()?;
    let run = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = run.block_on(async {
        for port in [pg_port, my_port] {
            for _ in 0..100 {
                if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // PostgreSQL: three transactions, then a temporary table pins.
        let info =
            format!("host=127.0.0.1 port={pg_port} user=pgapp password=pg-app-pw dbname=postgres sslmode=disable");
        let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(conn);
        for _ in 0..3 {
            client.simple_query("SELECT 1").await?;
        }
        client.simple_query("CREATE TEMPORARY TABLE t (a int)").await?;
        client.simple_query("SELECT 2").await?;
        drop(client);
        let _ = driver.await;
        // MariaDB: two statements, then a named lock pins.
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(my_port)
            .user(Some("myapp"))
            .pass(Some("my-app-pw"))
            .db_name(Some("mysql"))
            .prefer_socket(false)
            .into();
        let mut my = mysql_async::Conn::new(opts).await?;
        my.query_drop("SELECT 1").await?;
        my.query_drop("SELECT 2").await?;
        my.query_drop("SELECT GET_LOCK('gatehouse-log-test', 1)").await?;
        // COM_CHANGE_USER: myapp's session ends, myother's begins.
        my.change_user(
            mysql_async::ChangeUserOpts::default()
                .with_user(Some("myother".into()))
                .with_pass(Some("my-app-pw".into()))
                .with_db_name(Some("mysql".into())),
        )
        .await?;
        my.query_drop("SELECT 3").await?;
        my.disconnect().await?;
        // The end lines are written as the sessions wind down.
        tokio::time::sleep(Duration::from_millis(500)).await;
        anyhow::Ok(())
    });
    let _ = proxy.kill();
    let _ = proxy.wait();
    result?;
    let logs = std::fs::read_to_string(&log_path)?;
    if std::env::var("GH_SHOW_LOGS").is_ok() {
        eprintln!("{logs}");
    }
    for (tenant, endpoint, database, min_leases) in [("pgapp", "pg_rw", "postgres", 4), ("myapp", "my_rw", "mysql", 3)]
    {
        let logins: Vec<_> = lines_with(&logs, "client logged in")
            .into_iter()
            .filter(|v| v["tenant"] == tenant)
            .collect();
        ensure!(logins.len() == 1, "{tenant}: {} login lines:\n{logs}", logins.len());
        let login = &logins[0];
        ensure!(
            login["endpoint"] == endpoint
                && login["database"] == database
                && login["client"] == "127.0.0.1"
                && login["level"] == "INFO"
                && login["tls"] == false,
            "{login}"
        );
        let ends: Vec<_> = lines_with(&logs, "client session ended")
            .into_iter()
            .filter(|v| v["tenant"] == tenant)
            .collect();
        ensure!(ends.len() == 1, "{tenant}: {} end lines:\n{logs}", ends.len());
        let end = &ends[0];
        ensure!(end["endpoint"] == endpoint && end["level"] == "INFO", "{end}");
        ensure!(end["leases"].as_u64() >= Some(min_leases), "{tenant}: {end}");
        // Each statement here is a transaction of its own (autocommit).
        ensure!(end["transactions"].as_u64() >= Some(min_leases), "{tenant}: {end}");
        ensure!(
            end["queries"].as_u64() >= end["transactions"].as_u64(),
            "{tenant}: {end}"
        );
        ensure!(
            end["pinned"].as_str().is_some_and(|p| p != "no"),
            "{tenant} was pinned: {end}"
        );
        ensure!(end["duration"].as_str().is_some_and(|d| !d.is_empty()), "{end}");
    }
    let other_logins = lines_with(&logs, "client logged in")
        .into_iter()
        .filter(|v| v["tenant"] == "myother")
        .count();
    let other_ends: Vec<_> = lines_with(&logs, "client session ended")
        .into_iter()
        .filter(|v| v["tenant"] == "myother")
        .collect();
    ensure!(
        other_logins == 1 && other_ends.len() == 1,
        "after COM_CHANGE_USER:\n{logs}"
    );
    ensure!(other_ends[0]["leases"].as_u64() >= Some(1), "{}", other_ends[0]);
    drop(cluster);
    Ok(())
}

/// A `gatehouse run` whose only backend refuses connections, with probes
/// every 100 ms, for `secs`; its standard output (a pipe, not a terminal).
fn run_against_a_closed_port(label: &str, proxy_section: &str, secs: u64) -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let text = format!(
        r#"[proxy]
{proxy_section}

[[clusters]]
name = "gone"
engine = "postgres"
backends = ["{closed}"]
monitor_secret = "monitor"
health_check_interval = "100ms"

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "gone"
role = "read_write"

[[secrets]]
name = "monitor"
user = "monitor"
password = "not-used"
"#
    );
    let path = temp_file(&format!("{label}.toml"), &text);
    let mut child = gatehouse()
        .arg("run")
        .arg("--config")
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(secs));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(path);
    String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap()
}

#[test]
fn logs_say_why_a_backend_down_from_the_start_is_down_without_colours_and_with_quoted_values() {
    let text = run_against_a_closed_port("probe-text", "log_filter = \"info\"", 2);
    assert!(!text.contains('\u{1b}'), "ANSI escapes written to a pipe:\n{text}");
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("backend health probe failed"))
        .collect();
    // Probes every 100 ms for 2 s fail with one error: logged once.
    assert_eq!(failed.len(), 1, "{text}");
    let line = failed[0];
    assert!(line.contains(" WARN ") && line.contains("cluster=gone"), "{line}");
    // The error holds spaces: quoted, so the line splits into fields.
    let error = line.split(" error=").nth(1).unwrap_or("");
    assert!(
        error.starts_with('"') && error.ends_with('"') && error.len() > 2,
        "{line}"
    );
}

#[test]
fn json_logs_are_one_object_a_line_with_the_probes_cause() {
    let text = run_against_a_closed_port("probe-json", "log_format = \"json\"", 2);
    let mut probe = None;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{line}");
        if v["message"] == "backend health probe failed" {
            probe = Some(v);
        }
    }
    let probe = probe.unwrap_or_else(|| panic!("no probe failure logged:\n{text}"));
    assert_eq!(probe["level"], "WARN");
    assert_eq!(probe["cluster"], "gone");
    assert!(probe["error"].as_str().is_some_and(|e| !e.is_empty()), "{probe}");
}

#[test]
fn a_reload_applies_a_new_log_filter() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let config = |filter: &str| {
        format!(
            r#"[proxy]
log_filter = "{filter}"

[admin]
listen = "{admin}"

[[clusters]]
name = "main"
engine = "postgres"
backends = ["{closed}"]

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
"#
        )
    };
    let path = temp_file("reload-filter.toml", &config("error"));
    let mut child = gatehouse()
        .arg("run")
        .arg("--config")
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut answer = None;
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::write(&path, config("info")).unwrap();
        if let Ok(r) = gatehouse_testkit::http::request(admin, "POST", "/api/reload", None) {
            answer = Some(r);
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&path);
    let logs = String::from_utf8(out.stdout).unwrap();
    let answer = answer.expect("the admin API never answered");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("proxy.log_filter: "), "{}", answer.body);
    // At "error" the start logged nothing at INFO; the reload's own INFO
    // lines come after the new filter took effect.
    let before = logs.lines().take_while(|l| !l.contains("reloaded"));
    assert!(before.filter(|l| l.contains(" INFO ")).count() == 0, "{logs}");
    assert!(logs.contains("configuration reloaded"), "{logs}");
}
