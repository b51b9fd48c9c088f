//! `gatehouse-loadgen relay` end to end: the relay started as the binary
//! (its listening address read from its stdout) between `load` and the
//! test kit's real PostgreSQL, with a 20 ms one-way delay. A
//! connect-query-close iteration pays every round trip of the login (the
//! startup and SCRAM's two exchanges) and the query's, and a query on an
//! open connection pays one; both succeed through the relay, and SIGTERM
//! stops it cleanly. (The relay's own behaviour, in process, is tested in
//! its module.)

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_testkit::{Cluster, Options};

mod common;
use common::{TempDir, load};

/// One-way delay the relay adds.
const DELAY_MS: u64 = 20;
/// Round trips of a PostgreSQL connect (SCRAM) and `SELECT 1`: startup →
/// SASL offer, client-first → server-first, client-final → server-final and
/// ready, the query → its rows and ready.
const CONNECT_QUERY_ROUND_TRIPS: u64 = 4;

/// The relay process, killed if the test ends without stopping it.
struct Relay {
    child: Child,
    addr: String,
}

impl Relay {
    /// Starts `gatehouse-loadgen relay` in front of `to`; its address from
    /// the first line it prints.
    fn start(to: &str, delay_ms: u64) -> Result<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gatehouse-loadgen"))
            .args(["relay", "--listen", "127.0.0.1:0", "--to", to, "--delay-ms"])
            .arg(delay_ms.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the relay")?;
        let mut line = String::new();
        let stdout = child.stdout.take().context("the relay's stdout")?;
        BufReader::new(stdout).read_line(&mut line)?;
        let addr = line.trim().to_owned();
        let relay = Self { child, addr };
        ensure!(
            relay.addr.starts_with("127.0.0.1:"),
            "the relay printed {line:?}, not its address"
        );
        Ok(relay)
    }

    /// SIGTERM, then its exit status within a few seconds.
    fn terminate(mut self) -> Result<bool> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -TERM failed");
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(10) {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status.success());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("the relay still runs 10 s after SIGTERM")
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn load_through_the_relay_pays_each_added_round_trip() -> Result<()> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let tmp = TempDir(std::env::temp_dir().join(format!("gh-relay-{}-{nanos}", std::process::id())));
    let cluster = Cluster::up(&tmp.0, &Options::default())?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?;
    let relay = Relay::start(&pg.addr(), DELAY_MS)?;
    let url = format!(
        "postgres://{}:{}@{}/postgres",
        cluster.pg_user(),
        cluster.pg_password(),
        relay.addr
    );
    let round_trip_ms = 2.0 * DELAY_MS as f64;
    for (name, seconds, extra, round_trips) in [
        ("connect-each", "2", Some("--connect-each"), CONNECT_QUERY_ROUND_TRIPS),
        ("persistent", "1", None, 1),
    ] {
        let mut args = vec![
            "--target",
            &url,
            "--users",
            "1",
            "--think-ms",
            "0",
            "--seconds",
            seconds,
        ];
        args.extend(extra);
        let (ok, report) = load(&tmp.0, name, &args)?;
        let summary = &report["summary"];
        ensure!(ok, "{name}: the run failed: {summary}");
        ensure!(summary["failures"] == 0, "{name}: {summary}");
        ensure!(summary["requests"].as_u64() >= Some(2), "{name}: {summary}");
        let p50 = summary["p50_ms"].as_f64().context("p50_ms")?;
        let floor = round_trips as f64 * round_trip_ms;
        ensure!(
            p50 >= floor,
            "{name}: p50 {p50} ms, under the {round_trips} added round trips ({floor} ms): {summary}"
        );
    }
    ensure!(relay.terminate()?, "the relay exited with failure on SIGTERM");
    Ok(())
}
