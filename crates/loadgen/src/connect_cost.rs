//! The connection-cost experiment: per target, the wall time of a full
//! connect (startup + auth) → `SELECT 1` → close cycle, and of a single
//! prepared `SELECT 1` on an open connection, alternating targets
//! round-robin so load drift hits every target alike.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

use crate::report::Report;
use crate::series::Series;
use crate::target::Target;

/// Measurement names, in report order.
pub const CONNECT: &str = "connect";
pub const QUERY: &str = "query";

/// An iteration taking longer than this is abandoned and counted as failed.
const ITERATION_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Settings {
    pub iterations: u32,
    pub rounds: u32,
}

/// Run the experiment and return one row per (target, measurement).
pub async fn run(targets: &[Target], settings: &Settings) -> Result<Report> {
    let mut connect: Vec<Series> = vec![Series::default(); targets.len()];
    let mut query: Vec<Series> = vec![Series::default(); targets.len()];
    for round in 1..=settings.rounds {
        for (target, series) in targets.iter().zip(&mut connect) {
            eprintln!("round {round}/{}: {CONNECT} {}", settings.rounds, target.name);
            for _ in 0..settings.iterations {
                series.record(with_timeout(connect_once(&target.config)).await);
            }
        }
        for (target, series) in targets.iter().zip(&mut query) {
            eprintln!("round {round}/{}: {QUERY} {}", settings.rounds, target.name);
            query_series(&target.config, settings.iterations, series).await;
        }
    }

    let mut report = Report::new(
        "connect-cost",
        vec![
            ("iterations".into(), settings.iterations.to_string()),
            ("rounds".into(), settings.rounds.to_string()),
        ],
    );
    for (target, (c, q)) in targets.iter().zip(connect.into_iter().zip(query)) {
        report.push(&target.name, CONNECT, c);
        report.push(&target.name, QUERY, q);
    }
    Ok(report)
}

/// One `connect` iteration; the clock stops once the socket is closed.
async fn connect_once(config: &Config) -> Result<Duration> {
    let start = Instant::now();
    let session = Session::open(config).await?;
    let rows = session.client.simple_query("SELECT 1").await;
    let closed = session.close().await;
    let elapsed = start.elapsed();
    check_simple_one(&rows.context("SELECT 1")?)?;
    closed?;
    Ok(elapsed)
}

/// All `query` iterations of one round on one connection.
async fn query_series(config: &Config, iterations: u32, series: &mut Series) {
    let prepared = async {
        let session = Session::open(config).await?;
        match session.client.prepare("SELECT 1").await {
            Ok(statement) => Ok((session, statement)),
            Err(err) => {
                let _ = session.close().await;
                Err(anyhow!(err).context("preparing SELECT 1"))
            }
        }
    };
    let (session, statement) = match with_timeout(prepared).await {
        Ok(ready) => ready,
        Err(err) => {
            series.record_failures(u64::from(iterations), &err);
            return;
        }
    };
    for _ in 0..iterations {
        let once = async {
            let start = Instant::now();
            let row = session.client.query_one(&statement, &[]).await;
            let elapsed = start.elapsed();
            let value: i32 = row.context("SELECT 1")?.try_get(0)?;
            if value != 1 {
                bail!("SELECT 1 returned {value}");
            }
            Ok(elapsed)
        };
        series.record(with_timeout(once).await);
    }
    if let Err(err) = session.close().await {
        eprintln!("warning: closing query connection: {err:#}");
    }
}

/// A client plus the task driving its socket.
struct Session {
    client: Client,
    driver: JoinHandle<Result<(), tokio_postgres::Error>>,
}

impl Session {
    async fn open(config: &Config) -> Result<Self> {
        let (client, connection) = config.connect(NoTls).await.context("connecting")?;
        let driver = tokio::spawn(connection);
        Ok(Self { client, driver })
    }

    /// Drop the client (sends Terminate) and wait for the socket to close.
    async fn close(self) -> Result<()> {
        drop(self.client);
        self.driver
            .await
            .context("connection task panicked")?
            .context("closing connection")
    }
}

fn check_simple_one(messages: &[SimpleQueryMessage]) -> Result<()> {
    let value = messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => Some(row.get(0)),
        _ => None,
    });
    match value {
        Some(Some("1")) => Ok(()),
        other => bail!("SELECT 1 returned {other:?}"),
    }
}

async fn with_timeout<T>(fut: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(ITERATION_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| bail!("timed out after {ITERATION_TIMEOUT:?}"))
}
