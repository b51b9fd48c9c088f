//! Restarting without dropping clients, with the real binary: a proxy runs
//! with `[proxy] upgrade_socket`, clients of both engines connect and run
//! transactions without pause (a new connection each, as serverless
//! functions do, and long transactions in flight across the swap), and a
//! copy of the binary (the "new version") takes over with `gatehouse
//! upgrade`, then a third takes over from it. No client sees an error: no
//! connection is refused, none is reset, every transaction commits; the old
//! processes exit on their own once their sessions are done, and the admin
//! API answers throughout.

#[path = "common/binary.rs"]
mod binary;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use binary::{TempDir, TwoEngines, free_port, hash};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_testkit::{Cluster, Options};
use mysql_async::prelude::Queryable;

/// A proxy process, killed if the test ends before it exits.
struct Proxy {
    child: Child,
    log: std::path::PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    fn start(binary: &std::path::Path, verb: &str, config: &std::path::Path, log: std::path::PathBuf) -> Result<Self> {
        let child = Command::new(binary)
            .args([verb, "--config"])
            .arg(config)
            .env_remove("RUST_LOG")
            .stdout(std::fs::File::create(&log)?)
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self { child, log })
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit on its own; its exit status.
    fn exited_within(&mut self, limit: Duration) -> Result<std::process::ExitStatus> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("still running after {limit:?}; its log:\n{}", self.logs())
    }
}

/// Transactions and failures, counted by the clients.
#[derive(Default)]
struct Tally {
    committed: AtomicU64,
    failed: AtomicU64,
    first_failure: std::sync::Mutex<Option<String>>,
}

impl Tally {
    fn record(&self, r: Result<()>) {
        match r {
            Ok(()) => {
                self.committed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.first_failure
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert(format!("{e:#}"));
            }
        }
    }
}

/// One PostgreSQL transaction on a connection of its own.
async fn pg_transaction(port: u16, sleep: f64) -> Result<()> {
    let info = format!("host=127.0.0.1 port={port} user=app password=app-pw dbname=postgres sslmode=disable");
    let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(conn);
    client
        .batch_execute(&format!("BEGIN; SELECT pg_sleep({sleep}); SELECT 1; COMMIT"))
        .await?;
    drop(client);
    let _ = driver.await;
    Ok(())
}

/// One MariaDB transaction on a connection of its own.
async fn my_transaction(port: u16, sleep: f64) -> Result<()> {
    let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("myapp"))
        .pass(Some("app-pw"))
        .db_name(Some("mysql"))
        .prefer_socket(false)
        .into();
    let mut c = mysql_async::Conn::new(opts).await?;
    c.query_drop("START TRANSACTION").await?;
    c.query_drop(format!("DO SLEEP({sleep})")).await?;
    c.query_drop("COMMIT").await?;
    c.disconnect().await?;
    Ok(())
}

#[test]
fn upgrade_swaps_the_binary_under_load_with_no_client_error() -> Result<()> {
    let dir = TempDir(std::env::temp_dir().join(format!("gh-upgrade-{}", std::process::id())));
    let cluster = Cluster::up(
        &dir.0,
        &Options {
            mysql: true,
            ..Options::default()
        },
    )?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?;
    let my = cluster.mysql_primary().context("no MariaDB")?;
    let (pg_port, my_port, admin_port) = (free_port()?, free_port()?, free_port()?);
    let head = format!(
        r#"[proxy]
log_format = "json"
log_filter = "info"
upgrade_socket = "upgrade.sock"
shutdown_timeout = "30s"

[admin]
listen = "127.0.0.1:{admin_port}"
"#
    );
    let config = TwoEngines::new(&cluster, &head)
        .cluster("pgc", "postgres", &pg.addr(), "")
        .cluster("myc", "mysql", &my.addr(), "")
        .endpoint("pg_rw", &format!("127.0.0.1:{pg_port}"), "pgc")
        .endpoint("my_rw", &format!("127.0.0.1:{my_port}"), "myc")
        .pg_tenant("app", &hash("app-pw", &[])?)
        .my_tenant("myapp", &hash("app-pw", &["--mysql"])?)
        .text();
    let path = dir.0.join("gatehouse.toml");
    std::fs::write(&path, config)?;
    // The "new version": a copy of the binary at another path.
    let new_binary = dir.0.join("gatehouse-new");
    std::fs::copy(env!("CARGO_BIN_EXE_gatehouse"), &new_binary)?;
    let old_binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_gatehouse"));

    let mut first = Proxy::start(&old_binary, "run", &path, dir.0.join("first.log"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let ready = Instant::now();
        while pg_transaction(pg_port, 0.0).await.is_err() || my_transaction(my_port, 0.0).await.is_err() {
            ensure!(
                ready.elapsed() < Duration::from_secs(20),
                "the first proxy never served:\n{}",
                first.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::Ok(())
    })?;

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for i in 0..6u16 {
        let (tally, stop) = (tally.clone(), stop.clone());
        load.push(rt.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = if i % 2 == 0 {
                    pg_transaction(pg_port, 0.02).await
                } else {
                    my_transaction(my_port, 0.02).await
                };
                tally.record(r);
            }
        }));
    }
    // Long transactions in flight while the listeners change hands: they
    // finish on the old process.
    let long: Vec<_> = (0..4)
        .map(|i| {
            let tally = tally.clone();
            rt.spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let r = if i % 2 == 0 {
                    pg_transaction(pg_port, 2.0).await
                } else {
                    my_transaction(my_port, 2.0).await
                };
                tally.record(r);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));

    let mut second = Proxy::start(&new_binary, "upgrade", &path, dir.0.join("second.log"))?;
    let status = first.exited_within(Duration::from_secs(40))?;
    ensure!(
        status.success(),
        "the first proxy exited with {status}:\n{}",
        first.logs()
    );
    let handed = tally.committed.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1500));
    let health = rt.block_on(async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", admin_port)).await?;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /api/health HTTP/1.0\r\n\r\n").await?;
        let mut out = String::new();
        s.read_to_string(&mut out).await?;
        anyhow::Ok(out)
    })?;
    ensure!(
        health.starts_with("HTTP/1.0 200") || health.starts_with("HTTP/1.1 200"),
        "{health}"
    );

    // And once more: the successor offers its listeners in turn.
    let third = Proxy::start(&old_binary, "upgrade", &path, dir.0.join("third.log"))?;
    let status = second.exited_within(Duration::from_secs(40))?;
    ensure!(
        status.success(),
        "the second proxy exited with {status}:\n{}",
        second.logs()
    );
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for t in load.into_iter().chain(long) {
            t.await?;
        }
        anyhow::Ok(())
    })?;
    let committed = tally.committed.load(Ordering::Relaxed);
    let failed = tally.failed.load(Ordering::Relaxed);
    let first_failure = tally
        .first_failure
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    ensure!(
        failed == 0,
        "{failed} client errors (first: {first_failure:?}); committed {committed}\nfirst:\n{}\nsecond:\n{}",
        first.logs(),
        second.logs()
    );
    ensure!(
        committed > handed && handed > 10,
        "too little traffic: {handed} before the first hand-over, {committed} in all"
    );
    ensure!(
        first.logs().contains("a successor took the listeners over"),
        "{}",
        first.logs()
    );
    ensure!(second.logs().contains("upgrade done"), "{}", second.logs());
    ensure!(third.logs().contains("upgrade done"), "{}", third.logs());
    drop(third);
    Ok(())
}
