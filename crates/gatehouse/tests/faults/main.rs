//! Network faults between the proxy and its databases, against real
//! servers: one PostgreSQL and one MariaDB from the test kit, shared by the
//! cases, each case with a proxy of its own started in-process, whose
//! relayed clusters (`pgc`, `myc`) reach their server through a
//! [`FaultRelay`] of the kit's, and whose direct clusters (`pgd`, `myd`)
//! reach the same servers without one. The relay resets connections, cuts
//! one mid-result, black-holes or refuses new ones; the cases check that
//! only the sessions on a broken connection see an error, and the engine's
//! proper one, that other sessions go on, that no lease leaks, and that the
//! proxy serves new clients afterwards. The relay also slows the network
//! down (latency with jitter, a bandwidth limit either way) and cuts a new
//! backend connection during its authentication (PostgreSQL's SCRAM
//! exchange, MariaDB's greeting or the reply to the login); those cases
//! check that results and large statements arrive whole and correct, that
//! pooled connections are reused, and that a failed open is counted and
//! retried or reported within the timeouts. An operator's pause, or drain
//! of the backend, that begins while a lease's connection is still being
//! opened holds that lease's statement until it is undone. Every
//! case ends with the process's file descriptors and its live heap bytes
//! back near where they were before it (the heap counted by a counting
//! global allocator, since the proxy and the test clients share the
//! process).

mod cases;
mod pause;
mod slow;
mod upstream;
// The proxy runs in-process here: of the binary's helpers, the cases take
// `hash-password` and the configuration.
#[allow(dead_code)]
#[path = "../common/binary.rs"]
mod binary;

use std::alloc::System;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use binary::{TwoEngines, hash};
use gatehouse_testkit::faults::FaultRelay;
use gatehouse_testkit::{Cluster, Options, trials};
use mysql_async::prelude::Queryable;

/// A generous bound for what should happen promptly.
pub const BOUND: Duration = Duration::from_secs(20);

/// The shared servers and what every case's configuration needs.
pub struct Ctx {
    pub cluster: Cluster,
    pub root: PathBuf,
    pg_verifier: String,
    my_hash: String,
}

fn setup() -> Result<Arc<Ctx>> {
    trials::init_tracing();
    let root = trials::scratch_dir("faults")?;
    let opts = Options {
        mysql: true,
        ..Options::default()
    };
    let cluster = Cluster::up(&root.join("cluster"), &opts)?;
    Ok(Arc::new(Ctx {
        cluster,
        root,
        pg_verifier: hash("app-pw", &[])?,
        my_hash: hash("app-pw", &["--mysql"])?,
    }))
}

fn teardown(ctx: Arc<Ctx>) {
    let root = ctx.root.clone();
    drop(ctx);
    let _ = std::fs::remove_dir_all(root);
}

/// Counts the heap bytes live in this process (no limit is set): the
/// proxy's and the test clients' alike.
#[global_allocator]
static HEAP: cap::Cap<System> = cap::Cap::new(System, usize::MAX);

/// Heap bytes allocated and not yet freed in this process now.
pub fn live_heap() -> usize {
    HEAP.allocated()
}

/// mysql_async keeps the buffers its connections give back in a pool of
/// the whole process (up to 128 of them, each kept up to 4 MiB), which
/// outlives the case's clients and would count as memory the case kept.
/// Under a size cap of 0 a buffer given back is freed, not kept.
const MYSQL_ASYNC_BUFFER_SIZE_CAP: &str = "MYSQL_ASYNC_BUFFER_SIZE_CAP";

fn main() -> ExitCode {
    if std::env::var_os(MYSQL_ASYNC_BUFFER_SIZE_CAP).is_none() {
        // Setting it in this process would take `unsafe` (the environment
        // is shared with other threads): run this binary again with it.
        return rerun_with(MYSQL_ASYNC_BUFFER_SIZE_CAP, "0");
    }
    trials::run(cases::cases(), setup, teardown)
}

/// Runs this test binary again, with the same arguments and `var` set to
/// `value`, and exits as it did.
fn rerun_with(var: &str, value: &str) -> ExitCode {
    let status = std::env::current_exe().and_then(|exe| {
        Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(var, value)
            .status()
    });
    match status {
        Ok(s) => s
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .map_or(ExitCode::FAILURE, ExitCode::from),
        Err(e) => {
            eprintln!("could not run the tests again with {var}={value}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A proxy of a case's own in front of the shared servers, its relays,
/// and how to stop it.
pub struct Proxy {
    pub pg_relay: FaultRelay,
    pub my_relay: FaultRelay,
    addrs: HashMap<String, SocketAddr>,
    pg: Arc<gatehouse::core::Core<gatehouse::engine::pg::PgEngine>>,
    my: Arc<gatehouse::core::Core<gatehouse::engine::mysql::MyEngine>>,
    run: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Proxy {
    /// Starts relays to both servers and a proxy whose relayed clusters
    /// use them (connect timeout 1 s, borrow timeout 2 s, pools of 8; a
    /// lease that cannot connect is routed again for a failover hold of
    /// 2 s, then fails).
    pub async fn start(ctx: &Ctx, case: &str) -> Result<Proxy> {
        let pg = ctx.cluster.pg_primary().context("no PostgreSQL")?;
        let my = ctx.cluster.mysql_primary().context("no MariaDB")?;
        let pg_relay = FaultRelay::start(pg.addr().parse()?).await?;
        let my_relay = FaultRelay::start(my.addr().parse()?).await?;
        let cluster_settings = "connect_timeout = \"1s\"\nfailover_hold = \"2s\"\n\
                        [clusters.pool]\nsize = 8\nborrow_timeout = \"2s\"\n";
        let mut config = TwoEngines::new(&ctx.cluster, "[proxy]\nlog_filter = \"warn\"\n");
        for (name, engine, backend) in [
            ("pgc", "postgres", pg_relay.addr_string()),
            ("pgd", "postgres", pg.addr()),
            ("myc", "mysql", my_relay.addr_string()),
            ("myd", "mysql", my.addr()),
        ] {
            config = config
                .cluster(name, engine, &backend, cluster_settings)
                .endpoint(name, "127.0.0.1:0", name);
        }
        let config = config
            .pg_tenant("app", &ctx.pg_verifier)
            .my_tenant("myapp", &ctx.my_hash)
            .text();
        let path = ctx.root.join(format!("{case}.toml"));
        std::fs::write(&path, config)?;
        let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
        let app = gatehouse::App::bind(settings).await?;
        let addrs = ["pgc", "pgd", "myc", "myd"]
            .iter()
            .filter_map(|e| Some((e.to_string(), app.local_addr(e)?)))
            .collect();
        let (pg, my) = (app.pg_core(), app.mysql_core());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(gatehouse::run(app, async {
            let _ = stopped.await;
        }));
        Ok(Proxy {
            pg_relay,
            my_relay,
            addrs,
            pg,
            my,
            run,
            stop,
        })
    }

    fn addr(&self, endpoint: &str) -> Result<SocketAddr> {
        self.addrs
            .get(endpoint)
            .copied()
            .with_context(|| format!("no endpoint {endpoint}"))
    }

    /// A PostgreSQL session (user app) on `endpoint`, its connection driven.
    pub async fn pg(&self, endpoint: &str) -> Result<tokio_postgres::Client> {
        let at = self.addr(endpoint)?;
        let info = format!(
            "host=127.0.0.1 port={} user=app password=app-pw dbname=postgres sslmode=disable",
            at.port()
        );
        let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        Ok(client)
    }

    /// A MariaDB session (user myapp) on `endpoint`.
    pub async fn my(&self, endpoint: &str) -> Result<mysql_async::Conn> {
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.addr(endpoint)?.port())
            .user(Some("myapp"))
            .pass(Some("app-pw"))
            .db_name(Some("mysql"))
            .prefer_socket(false)
            .into();
        Ok(mysql_async::Conn::new(opts).await?)
    }

    /// Backend connections lent out now, over every pool of both engines.
    pub fn leased(&self) -> usize {
        self.leased_where(|_| true)
    }

    /// Places lent now in `cluster`'s pools, a lease still opening its
    /// connection included.
    pub fn leased_in(&self, cluster: &str) -> usize {
        self.leased_where(|k| k.cluster == cluster)
    }

    fn leased_where(&self, keep: impl Fn(&gatehouse::pool::PoolKey) -> bool) -> usize {
        lent_where(&self.pg.pools, &keep) + lent_where(&self.my.pools, &keep)
    }

    /// Backend connections the proxy's pools have opened, and failed to
    /// open, to `cluster`'s backends so far.
    pub fn connects(&self, cluster: &str) -> (u64, u64) {
        let pg = self.pg.pools.backend_connects();
        let my = self.my.pools.backend_connects();
        pg.iter()
            .chain(my.iter())
            .filter(|c| c.cluster == cluster)
            .fold((0, 0), |(o, f), c| (o + c.opened, f + c.failed))
    }

    /// Waits (within [`BOUND`]) until no lease is out: none leaked.
    pub async fn no_lease_leaked(&self) -> Result<()> {
        let until = tokio::time::Instant::now() + BOUND;
        while self.leased() > 0 {
            if tokio::time::Instant::now() > until {
                bail!("{} backend connections still leased", self.leased());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Fresh clients of both engines run `SELECT 1` on every endpoint.
    pub async fn still_serving(&self) -> Result<()> {
        for endpoint in ["pgc", "pgd"] {
            let c = tokio::time::timeout(BOUND, self.pg(endpoint))
                .await
                .with_context(|| format!("{endpoint}: login hung"))??;
            let rows = c.simple_query("SELECT 1").await.context(endpoint)?;
            ensure!(!rows.is_empty(), "{endpoint}: no answer");
        }
        for endpoint in ["myc", "myd"] {
            let mut c = tokio::time::timeout(BOUND, self.my(endpoint))
                .await
                .with_context(|| format!("{endpoint}: login hung"))??;
            let one: Option<u32> = c.query_first("SELECT 1").await.context(endpoint)?;
            ensure!(one == Some(1), "{endpoint}: wrong answer {one:?}");
            c.disconnect().await?;
        }
        Ok(())
    }

    /// Stops the proxy and waits for `run` to return.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        tokio::time::timeout(BOUND, self.run)
            .await
            .context("run() did not return")???;
        Ok(())
    }
}

/// Places lent now in the pools of `pools` whose key `keep` keeps.
fn lent_where<E: gatehouse::engine::Engine>(
    pools: &gatehouse::pool::Pools<E>,
    keep: &impl Fn(&gatehouse::pool::PoolKey) -> bool,
) -> usize {
    pools
        .all()
        .iter()
        .filter(|p| keep(p.key()))
        .map(|p| p.leased_count())
        .sum()
}

/// The SQLSTATE of a tokio-postgres error, or what it was instead.
pub fn sqlstate(e: &tokio_postgres::Error) -> std::result::Result<String, String> {
    e.as_db_error()
        .map(|d| d.code().code().to_owned())
        .ok_or_else(|| format!("{e}"))
}

/// File descriptors open in this process now (the proxy runs in it).
pub fn open_fds() -> Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

/// The MariaDB error code of a mysql_async error, or what it was instead.
pub fn my_code(e: &mysql_async::Error) -> std::result::Result<u16, String> {
    match e {
        mysql_async::Error::Server(s) => Ok(s.code),
        other => Err(format!("{other}")),
    }
}
