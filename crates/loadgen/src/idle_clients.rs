//! The idle-clients load: open many authenticated PostgreSQL connections
//! (startup + auth + one `SELECT 1` each, a bounded number of attempts in
//! flight), keep them all open and idle for a while, then close them. Used
//! to measure a proxy's memory per idle client connection.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use tokio_postgres::{Client, Config, NoTls, SimpleQueryMessage};

/// A connection attempt (connect + `SELECT 1`) taking longer than this fails.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Settings {
    pub config: Config,
    pub count: u32,
    pub concurrency: u32,
    pub hold: Duration,
    pub ready_file: Option<PathBuf>,
    /// Local addresses the connections are made from, in turn (none: the
    /// system's choice).
    pub sources: Vec<IpAddr>,
}

/// What happened to the connections.
pub struct Outcome {
    pub opened: u64,
    pub failed: u64,
    /// Opened connections that were closed (by the server or proxy) before
    /// the hold ended.
    pub lost: u64,
    pub first_error: Option<String>,
}

/// An open client plus the task driving its socket.
struct Held {
    _client: Client,
    driver: JoinHandle<Result<(), tokio_postgres::Error>>,
}

/// Open the connections, report readiness, hold them, and close them. Must
/// run inside a `LocalSet` (the attempts share an `Rc` semaphore).
pub async fn run(settings: &Settings) -> Result<Outcome> {
    let start = Instant::now();
    let limit = Rc::new(Semaphore::new(settings.concurrency as usize));
    let mut attempts = JoinSet::new();
    let destination = match settings.sources.is_empty() {
        true => None,
        false => Some(crate::bind::destination(&settings.config)?),
    };
    let config = Rc::new(settings.config.clone());
    for i in 0..settings.count {
        let limit = Rc::clone(&limit);
        let config = Rc::clone(&config);
        let route = destination.map(|to| (settings.sources[i as usize % settings.sources.len()], to));
        attempts.spawn_local(async move {
            let _permit = limit.acquire().await.map_err(|_| anyhow!("semaphore closed"))?;
            tokio::time::timeout(ATTEMPT_TIMEOUT, open(&config, route))
                .await
                .unwrap_or_else(|_| Err(anyhow!("timed out after {ATTEMPT_TIMEOUT:?}")))
        });
    }

    let mut held = Vec::with_capacity(settings.count as usize);
    let mut failed = 0u64;
    let mut first_error = None;
    while let Some(joined) = attempts.join_next().await {
        match joined.context("connection task panicked").and_then(|r| r) {
            Ok(h) => held.push(h),
            Err(err) => {
                failed += 1;
                first_error.get_or_insert_with(|| format!("{err:#}"));
            }
        }
    }
    let opened = held.len() as u64;
    eprintln!(
        "idle-clients: {opened} opened, {failed} failed in {:.1}s; holding for {:?}",
        start.elapsed().as_secs_f64(),
        settings.hold
    );
    if let Some(path) = &settings.ready_file {
        write_ready(path, opened)?;
    }

    tokio::time::sleep(settings.hold).await;
    let lost = held.iter().filter(|h| h.driver.is_finished()).count() as u64;
    drop(held);
    Ok(Outcome {
        opened,
        failed,
        lost,
        first_error,
    })
}

/// Connect (startup + auth), from `route`'s source address to its
/// destination when given, and run `SELECT 1`.
async fn open(config: &Config, route: Option<(IpAddr, SocketAddr)>) -> Result<Held> {
    let (client, driver) = match route {
        None => {
            let (client, connection) = config.connect(NoTls).await.context("connecting")?;
            (client, tokio::task::spawn_local(connection))
        }
        Some((from, to)) => {
            let stream = crate::bind::connect_from(from, to).await?;
            let (client, connection) = config.connect_raw(stream, NoTls).await.context("logging in")?;
            (client, tokio::task::spawn_local(connection))
        }
    };
    let rows = client.simple_query("SELECT 1").await.context("SELECT 1")?;
    let one = rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    });
    if one != Some("1") {
        return Err(anyhow!("SELECT 1 returned {one:?}"));
    }
    Ok(Held {
        _client: client,
        driver,
    })
}

/// Write the count atomically (temporary file + rename), so a poller never
/// reads a partial file.
fn write_ready(path: &PathBuf, opened: u64) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{opened}\n")).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}
