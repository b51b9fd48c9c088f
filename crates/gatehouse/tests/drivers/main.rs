//! The real-driver matrix: the drivers people run (Python, Node.js, Go,
//! Java; see `drivers/README.md`), each with many concurrent workers,
//! through one in-process proxy in transaction mode whose pools are several
//! times smaller than the worker count, in front of a real PostgreSQL and a
//! real MariaDB primary. Each trial runs one driver program in one mode
//! (`drivers/run LANG DRIVER MODE`), which checks every result it gets and
//! exits non-zero on the first wrong one; `all_at_once` runs every program
//! together, the load under which rare desyncs show; and
//! `mysql_programs_as_many_tenants_on_four_connections` runs every MariaDB
//! program twice at once, each run as a tenant of its own (its own backend
//! user and database), on a cluster whose share of the server is 4
//! connections: nearly every lease moves a connection to another tenant
//! (COM_CHANGE_USER).
//!
//! A driver's toolchain packages are installed on first use by
//! `drivers/setup LANG` into `$HOME/.cache/gatehouse-drivers` (outside the
//! clone, so CI reuses them).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gatehouse_proto_mysql::auth::native_password;
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_testkit::{Cluster, Options, trials};
use tokio::runtime::Runtime;

mod cases;
use cases::{all_at_once, many_tenants, one, reload_secrets};

/// Concurrent workers per driver program: four times the pool size.
const WORKERS: usize = 20;
/// Backend connections per (backend, user, database) pool.
const POOL_SIZE: usize = 5;
/// Iterations of the program's scenario per worker.
const ITERATIONS: usize = 30;
/// How long one driver program may run before it counts as hung.
const PROGRAM_LIMIT: Duration = Duration::from_secs(300);
/// When all programs run at once (21 of them, with their runtimes, the
/// servers and the proxy on this machine's 2 cores), each may take this
/// long: on a slower machine of the same kind they were at iteration 24 to
/// 27 of 30 at 240 s, still progressing. Their own watchdogs (which name
/// the stuck workers of a hung run) fire 60 s before.
const ALL_AT_ONCE_LIMIT: Duration = Duration::from_secs(600);

/// Tenants of the PostgreSQL and the MariaDB cluster (one password).
const PG_TENANT: &str = "drv_pg";
const MY_TENANT: &str = "drv_my";
const TENANT_PW: &str = "drv-pw";
/// One backend user name on both servers, with a password of each's own:
/// two secrets sharing a user name (see `engines::reload_*`).
const OWNER: &str = "drv_owner";
const PG_OWNER_PW: &str = "drv-owner-pg-pw";
const MY_OWNER_PW: &str = "drv-owner-my-pw";
const DATABASE: &str = "drv";
/// Tenants of the "mymany" endpoint, each with a backend user and a
/// database of its own (`drv_tNN`, `drv_uNN`, `drv_dNN`).
const MANY_TENANTS: usize = 20;
/// Iterations per worker there (20 programs at once on 4 connections).
const MANY_ITERATIONS: usize = 6;
/// mymany's share of the server's 200 connections: 2 % = 4.
const MANY_SHARE_PERCENT: u32 = 2;
const ADMIN_TOKEN: &str = "drivers-admin-token-0123456789";

/// Every program of the matrix: (language, driver, engine, mode).
const PROGRAMS: &[(&str, &str, &str, &str)] = &[
    ("python", "pymysql", "mysql", "default"),
    ("python", "mysql_connector", "mysql", "default"),
    ("python", "mysql_connector", "mysql", "prepared"),
    ("python", "psycopg", "postgres", "default"),
    ("python", "psycopg", "postgres", "prepared"),
    ("python", "sqlalchemy", "postgres", "default"),
    ("python", "asyncpg", "postgres", "default"),
    ("python", "asyncpg", "postgres", "prepared"),
    ("node", "mysql2", "mysql", "default"),
    ("node", "mysql2", "mysql", "prepared"),
    ("node", "pg", "postgres", "default"),
    ("node", "pg", "postgres", "prepared"),
    ("go", "mysql", "mysql", "default"),
    ("go", "mysql", "mysql", "prepared"),
    ("go", "pgx", "postgres", "default"),
    ("go", "pgx", "postgres", "prepared"),
    ("java", "connectorj", "mysql", "default"),
    ("java", "connectorj", "mysql", "prepared"),
    ("java", "pgjdbc", "postgres", "default"),
    ("java", "pgjdbc", "postgres", "prepared"),
    ("cli", "mysql", "mysql", "default"),
];

pub struct Ctx {
    _rt: Runtime,
    cluster: Cluster,
    dir: PathBuf,
    pg: SocketAddr,
    my: SocketAddr,
    my_many: SocketAddr,
    admin: SocketAddr,
    /// Languages whose packages are installed already.
    ready: Mutex<Vec<&'static str>>,
    /// Taken shared by a trial that runs one program, and alone by one that
    /// runs many at once (`all_at_once`, the many tenants): the test
    /// harness runs two trials at a time, and a program's limits are for a
    /// machine it shares with at most one other program, not with 21 (a
    /// poisoned gate guards nothing, so it is taken anyway).
    gate: RwLock<()>,
    shutdown: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

fn repo_root() -> PathBuf {
    // The package directory cargo gives the test process (not the one
    // compiled in: a binary reused from a shared build cache may point at
    // another checkout).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.join("../..")
}

/// Tenant `i` of the "mymany" endpoint: (tenant, backend user, database).
fn many(i: usize) -> (String, String, String) {
    (format!("drv_t{i:02}"), format!("drv_u{i:02}"), format!("drv_d{i:02}"))
}

fn config_text(cluster: &Cluster, dir: &Path) -> Result<String> {
    let pg = cluster.pg_primary().context("no PostgreSQL primary")?;
    let my = cluster.mysql_primary().context("no MariaDB primary")?;
    let verifier = ScramVerifier::from_password(TENANT_PW, &random_salt(), 4096).to_string();
    let native = native_password::format_stored(&native_password::stored_hash(TENANT_PW.as_bytes()));
    let mut many_tenants = String::new();
    for i in 0..MANY_TENANTS {
        let (tenant, user, db) = many(i);
        many_tenants.push_str(&format!(
            "\n[[tenants]]\nname = \"{tenant}\"\ndatabases = [\"{db}\"]\nsecret = \"{user}\"\n\
             mysql_native_password = \"{native}\"\n\n[[secrets]]\nname = \"{user}\"\nuser = \"{user}\"\n\
             password = \"{MY_OWNER_PW}\"\n"
        ));
    }
    let text = format!(
        r#"
[proxy]
log_filter = "warn"
park_idle_after = "100ms"
auth_failures_per_minute_per_address = 1000
auth_failures_per_minute_per_user = 100

[admin]
listen = "127.0.0.1:0"
token_file = "{token}"

[[clusters]]
name = "pg"
engine = "postgres"
backends = ["{pg}"]
monitor_secret = "pg_superuser"
pool = {{ size = {POOL_SIZE}, borrow_timeout = "60s" }}

[[clusters]]
name = "my"
engine = "mysql"
backends = ["{my}"]
monitor_secret = "my_superuser"
pool = {{ size = {POOL_SIZE}, borrow_timeout = "60s" }}

[[clusters]]
name = "mymany"
engine = "mysql"
backends = ["{my}"]
monitor_secret = "my_superuser"
pool = {{ size = {POOL_SIZE}, borrow_timeout = "60s", max_connections_percent = {MANY_SHARE_PERCENT} }}

[[endpoints]]
name = "mymany"
listen = "127.0.0.1:0"
cluster = "mymany"
role = "read_write"
pool_mode = "transaction"

[[endpoints]]
name = "pg"
listen = "127.0.0.1:0"
cluster = "pg"
role = "read_write"
pool_mode = "transaction"

[[endpoints]]
name = "my"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
pool_mode = "transaction"

[[tenants]]
name = "{PG_TENANT}"
databases = ["{DATABASE}"]
secret = "pg_owner"
scram_verifier = "{verifier}"

[[tenants]]
name = "{MY_TENANT}"
databases = ["{DATABASE}"]
secret = "my_owner"
mysql_native_password = "{native}"

[[secrets]]
name = "pg_superuser"
user = "{pg_su}"
password = "{pg_su_pw}"

[[secrets]]
name = "my_superuser"
user = "{my_su}"
password = "{my_su_pw}"

[[secrets]]
name = "pg_owner"
user = "{OWNER}"
password = "{PG_OWNER_PW}"

[[secrets]]
name = "my_owner"
user = "{OWNER}"
password = "{MY_OWNER_PW}"
"#,
        token = dir.join("admin.token").display(),
        pg = pg.addr(),
        my = my.addr(),
        pg_su = cluster.pg_user(),
        pg_su_pw = cluster.pg_password(),
        my_su = cluster.mysql_user(),
        my_su_pw = cluster.mysql_password(),
    );
    Ok(text + &many_tenants)
}

fn prepare_cluster(cluster: &Cluster) -> Result<()> {
    let pg = cluster.pg_primary().context("no PostgreSQL primary")?.name.clone();
    cluster.pg_sql(
        &pg,
        "postgres",
        &format!("CREATE ROLE {OWNER} LOGIN PASSWORD '{PG_OWNER_PW}'"),
    )?;
    cluster.pg_sql(&pg, "postgres", &format!("CREATE DATABASE {DATABASE} OWNER {OWNER}"))?;
    let my = cluster.mysql_primary().context("no MariaDB primary")?.name.clone();
    cluster.mysql_sql(
        &my,
        &format!(
            "CREATE USER '{OWNER}'@'%' IDENTIFIED BY '{MY_OWNER_PW}'; CREATE DATABASE {DATABASE}; \
             GRANT ALL ON {DATABASE}.* TO '{OWNER}'@'%';"
        ),
    )?;
    let mut sql = String::new();
    for i in 0..MANY_TENANTS {
        let (_, user, db) = many(i);
        sql.push_str(&format!(
            "CREATE USER '{user}'@'%' IDENTIFIED BY '{MY_OWNER_PW}'; CREATE DATABASE {db}; \
             GRANT ALL ON {db}.* TO '{user}'@'%';"
        ));
    }
    cluster.mysql_sql(&my, &sql)?;
    Ok(())
}

fn setup() -> Result<Arc<Ctx>> {
    trials::init_tracing();
    let dir = trials::scratch_dir("drivers")?;
    let opts = Options {
        pg: true,
        mysql: true,
        pg_max_connections: 100,
        mysql_max_connections: 200,
        ..Options::default()
    };
    let cluster = Cluster::up(&dir.join("cluster"), &opts)?;
    prepare_cluster(&cluster)?;
    std::fs::write(dir.join("admin.token"), ADMIN_TOKEN)?;
    let text = config_text(&cluster, &dir)?;
    std::fs::write(dir.join("gatehouse.toml"), &text)?;
    let settings = gatehouse::config::load(&dir.join("gatehouse.toml")).map_err(|p| anyhow::anyhow!("{p}"))?;
    let rt = trials::runtime()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (pg, my, my_many, admin) = rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let pg = app.local_addr("pg").context("pg endpoint")?;
        let my = app.local_addr("my").context("my endpoint")?;
        let my_many = app.local_addr("mymany").context("mymany endpoint")?;
        let admin = app.admin_addr().context("admin listener")?;
        tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        anyhow::Ok((pg, my, my_many, admin))
    })?;
    Ok(Arc::new(Ctx {
        _rt: rt,
        cluster,
        dir,
        pg,
        my,
        my_many,
        admin,
        ready: Mutex::new(Vec::new()),
        gate: RwLock::new(()),
        shutdown: Mutex::new(Some(tx)),
    }))
}

impl Ctx {
    /// Installs `lang`'s packages once (`drivers/setup LANG`).
    fn ensure(&self, lang: &'static str) -> Result<()> {
        let mut ready = self.ready.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if ready.contains(&lang) {
            return Ok(());
        }
        let out = Command::new(repo_root().join("drivers/setup"))
            .arg(lang)
            .stdin(Stdio::null())
            .output()
            .context("running drivers/setup")?;
        if !out.status.success() {
            bail!(
                "drivers/setup {lang} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        ready.push(lang);
        Ok(())
    }

    /// Starts one driver program; its output goes to a log file. `run`
    /// names the run in the program's tag (its tables and schemas are named
    /// after it), so a program running alone and the same one in
    /// `all_at_once` (trials run in parallel) never share a table.
    fn spawn(&self, program: (&'static str, &str, &str, &str), run: &str, limit: Duration) -> Result<Running> {
        let login = if program.2 == "mysql" {
            Login {
                addr: self.my,
                tenant: MY_TENANT.into(),
                database: DATABASE.into(),
                iterations: ITERATIONS,
            }
        } else {
            Login {
                addr: self.pg,
                tenant: PG_TENANT.into(),
                database: DATABASE.into(),
                iterations: ITERATIONS,
            }
        };
        self.spawn_as(program, run, limit, &login)
    }

    /// [`Ctx::spawn`] as the tenant `login` names.
    fn spawn_as(
        &self,
        (lang, driver, engine, mode): (&'static str, &str, &str, &str),
        run: &str,
        limit: Duration,
        login: &Login,
    ) -> Result<Running> {
        self.ensure(lang)?;
        let addr = login.addr;
        let tag = format!("{lang}_{driver}_{mode}{run}");
        let log = self.dir.join(format!("{tag}.log"));
        let file = std::fs::File::create(&log)?;
        let child = Command::new(repo_root().join("drivers/run"))
            .args([lang, driver, mode])
            .env("GH_ENGINE", engine)
            .env("GH_HOST", addr.ip().to_string())
            .env("GH_PORT", addr.port().to_string())
            .env("GH_USER", &login.tenant)
            .env("GH_PASSWORD", TENANT_PW)
            .env("GH_DATABASE", &login.database)
            .env("GH_WORKERS", WORKERS.to_string())
            .env("GH_ITERATIONS", login.iterations.to_string())
            .env("GH_POOL_SIZE", POOL_SIZE.to_string())
            .env("GH_MODE", mode)
            .env("GH_TAG", &tag)
            .env(
                "GH_WATCHDOG",
                limit.saturating_sub(Duration::from_secs(60)).as_secs().to_string(),
            )
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting drivers/run {lang} {driver} {mode}"))?;
        Ok(Running {
            tag,
            log,
            child,
            started: Instant::now(),
            limit,
        })
    }
}

/// Where and as whom a driver program logs in.
struct Login {
    addr: SocketAddr,
    tenant: String,
    database: String,
    iterations: usize,
}

struct Running {
    tag: String,
    log: PathBuf,
    child: std::process::Child,
    started: Instant,
    /// Killed and failed past this.
    limit: Duration,
}

impl Running {
    /// Waits for the program; its log is the error if it failed.
    fn wait(mut self) -> Result<()> {
        loop {
            if let Some(status) = self.child.try_wait()? {
                let out = std::fs::read_to_string(&self.log).unwrap_or_default();
                if !status.success() {
                    bail!("{} failed ({status}):\n{}", self.tag, tail(&out, 60));
                }
                eprintln!("{}", out.lines().last().unwrap_or(""));
                return Ok(());
            }
            if self.started.elapsed() > self.limit {
                let _ = self.child.kill();
                let out = std::fs::read_to_string(&self.log).unwrap_or_default();
                bail!("{} did not finish in {:?}:\n{}", self.tag, self.limit, tail(&out, 60));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

macro_rules! programs {
    ($($name:ident => ($lang:literal, $driver:literal, $mode:literal)),* $(,)?) => {
        $(fn $name(ctx: &Ctx) -> Result<()> { one(ctx, $lang, $driver, $mode) })*
        const CASES: &[(&str, trials::Case<Ctx>)] = &[
            $((concat!("drivers::", stringify!($name)), $name),)*
            ("drivers::all_at_once", all_at_once),
            ("drivers::mysql_programs_as_many_tenants_on_four_connections", many_tenants),
            ("engines::reload_keeps_each_pool_on_its_own_secret", reload_secrets),
        ];
    };
}

programs! {
    mysql_pymysql => ("python", "pymysql", "default"),
    mysql_connector_python => ("python", "mysql_connector", "default"),
    mysql_connector_python_prepared => ("python", "mysql_connector", "prepared"),
    mysql_mysql2_query => ("node", "mysql2", "default"),
    mysql_mysql2_execute => ("node", "mysql2", "prepared"),
    mysql_go_sql_driver_interpolated => ("go", "mysql", "default"),
    mysql_go_sql_driver_prepared => ("go", "mysql", "prepared"),
    mysql_connectorj_hikari => ("java", "connectorj", "default"),
    mysql_connectorj_hikari_server_prepared => ("java", "connectorj", "prepared"),
    mysql_cli => ("cli", "mysql", "default"),
    pg_psycopg => ("python", "psycopg", "default"),
    pg_psycopg_prepared_pipeline => ("python", "psycopg", "prepared"),
    pg_sqlalchemy_queuepool => ("python", "sqlalchemy", "default"),
    pg_asyncpg => ("python", "asyncpg", "default"),
    pg_asyncpg_statement_cache => ("python", "asyncpg", "prepared"),
    pg_node_postgres => ("node", "pg", "default"),
    pg_node_postgres_named => ("node", "pg", "prepared"),
    pg_pgx => ("go", "pgx", "default"),
    pg_pgx_statement_cache_batches => ("go", "pgx", "prepared"),
    pg_pgjdbc_hikari => ("java", "pgjdbc", "default"),
    pg_pgjdbc_hikari_prepare_threshold_1 => ("java", "pgjdbc", "prepared"),
}

fn main() -> ExitCode {
    trials::run(CASES.to_vec(), setup, teardown)
}

fn teardown(ctx: Arc<Ctx>) {
    if let Some(tx) = ctx.shutdown.lock().ok().and_then(|mut s| s.take()) {
        let _ = tx.send(());
    }
    let dir: &Path = &ctx.dir;
    let dir = dir.to_path_buf();
    let _ = &ctx.cluster;
    drop(ctx);
    let _ = std::fs::remove_dir_all(dir);
}
