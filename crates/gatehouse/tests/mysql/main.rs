//! MySQL/MariaDB engine tests against one real MariaDB cluster (a primary
//! and a binlog replica from the test kit) and one in-process proxy in
//! front of it, with real clients (mysql_async, the `mysql` command-line
//! client, sysbench). Each case is a libtest-mimic trial sharing the cluster.

mod auth;
mod backend_tls;
mod caps;
mod console;
mod differential;
mod kill;
mod metrics;
#[path = "../common/openmetrics.rs"]
mod openmetrics;
mod park;
mod plugins;
mod queries;
#[path = "../common/refusal.rs"]
mod refusal;
mod reload;
mod rules;
mod rules_matrix;
#[path = "../rules_matrix_cases.rs"]
mod rules_matrix_cases;
mod session;
mod switch;
// Shared with the PostgreSQL tests: each binary uses its engine's part.
#[allow(dead_code)]
#[path = "../tls_probe.rs"]
mod tls_probe;
mod tls_reload;
mod tokens;
mod txn;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use gatehouse_proto_mysql::auth::native_password;
use gatehouse_testkit::{Cluster, Options, trials};
use tokio::runtime::Runtime;

/// Everything a case needs: the runtime, the proxy's endpoints, the cluster.
pub struct Ctx {
    pub rt: Runtime,
    pub cluster: Cluster,
    pub dir: PathBuf,
    pub endpoints: Vec<(String, SocketAddr)>,
    pub core: Arc<gatehouse::core::Core<gatehouse::engine::mysql::MyEngine>>,
    shutdown: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl Ctx {
    pub fn addr(&self, endpoint: &str) -> SocketAddr {
        self.endpoints
            .iter()
            .find(|(n, _)| n == endpoint)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("{endpoint}"))
    }

    /// mysql_async options for `endpoint` (no TLS).
    pub fn opts(&self, endpoint: &str, user: &str, password: &str, db: Option<&str>) -> mysql_async::Opts {
        opts_at(self.addr(endpoint), user, password, db)
    }

    /// Connects with mysql_async.
    pub async fn conn(&self, endpoint: &str, user: &str, password: &str, db: &str) -> Result<mysql_async::Conn> {
        Ok(mysql_async::Conn::new(self.opts(endpoint, user, password, Some(db))).await?)
    }

    /// mysql_async options straight to the primary, as the superuser.
    pub fn superuser_opts(&self) -> Result<mysql_async::Opts> {
        let p = self.cluster.mysql_primary().context("no primary")?;
        Ok(mysql_async::OptsBuilder::default()
            .ip_or_hostname(p.host.clone())
            .tcp_port(p.port)
            .user(Some(self.cluster.mysql_user()))
            .pass(Some(self.cluster.mysql_password()))
            .prefer_socket(false)
            .into())
    }

    /// mysql_async options straight to the primary, as the backend owner.
    pub fn direct_opts(&self, db: &str) -> Result<mysql_async::Opts> {
        let p = self.cluster.mysql_primary().context("no primary")?;
        Ok(mysql_async::OptsBuilder::default()
            .ip_or_hostname(p.host.clone())
            .tcp_port(p.port)
            .user(Some("app_owner"))
            .pass(Some(OWNER_PW))
            .db_name(Some(db))
            .prefer_socket(false)
            .into())
    }
}

/// mysql_async options for the endpoint at `addr` (no TLS): of the
/// binary's shared proxy or of a case's own.
pub fn opts_at(addr: SocketAddr, user: &str, password: &str, db: Option<&str>) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(user))
        .pass(Some(password))
        .db_name(db)
        .prefer_socket(false)
        .into()
}

pub const OWNER_PW: &str = "owner-pw";

/// What the `mysql` command-line client printed.
pub struct CliRun {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// The settings of a proxy of a test's own: one cluster on the primary, an
/// endpoint "rw", tenant alice (native password), `proxy` added to its
/// `[proxy]` section and `more` (TOML) after the endpoint.
pub fn own_config(ctx: &Ctx, proxy: &str, more: &str) -> Result<gatehouse::config::Settings> {
    let text = own_config_text(ctx, proxy, more)?;
    gatehouse::config::parse(&text, &ctx.dir).map_err(|p| anyhow::anyhow!("{p}"))
}

/// A proxy of the case's own (the shared one keeps running), with the
/// [`own_config`] endpoints `rw` (transaction mode) and `sess` (session
/// mode) and one more tenant, `tenant` with `password` on `database`,
/// backed by the server's superuser; `body` runs against (sess, rw), then
/// the proxy stops.
pub fn with_superuser_tenant_proxy<F, Fut>(
    ctx: &Ctx,
    tenant: &str,
    password: &str,
    database: &str,
    body: F,
) -> Result<()>
where
    F: FnOnce([SocketAddr; 2]) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let hash = native_password::format_stored(&native_password::stored_hash(password.as_bytes()));
    let more = format!(
        r#"
[[endpoints]]
name = "sess"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
pool_mode = "session"

[[tenants]]
name = "{tenant}"
databases = ["{database}"]
secret = "superuser"
mysql_native_password = "{hash}"
"#
    );
    let settings = own_config(ctx, "", &more)?;
    ctx.rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let addrs = [
            app.local_addr("sess").context("sess")?,
            app.local_addr("rw").context("rw")?,
        ];
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let checked = body(addrs).await;
        let _ = tx.send(());
        proxy.await??;
        checked
    })
}

/// The text [`own_config`] parses.
pub fn own_config_text(ctx: &Ctx, proxy: &str, more: &str) -> Result<String> {
    let p = ctx.cluster.mysql_primary().context("no primary")?;
    Ok(format!(
        r#"
[proxy]
log_filter = "warn"
{proxy}

[[clusters]]
name = "my"
engine = "mysql"
backends = ["{addr}"]
monitor_secret = "superuser"

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
{more}
[[tenants]]
name = "alice"
databases = ["app1"]
secret = "owner"
mysql_native_password = "{hash}"

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"

[[secrets]]
name = "owner"
user = "app_owner"
password = "{owner}"
"#,
        addr = p.addr(),
        hash = gatehouse_proto_mysql::auth::native_password::format_stored(
            &gatehouse_proto_mysql::auth::native_password::stored_hash(b"alice-pw")
        ),
        su = ctx.cluster.mysql_user(),
        su_pw = ctx.cluster.mysql_password(),
        owner = OWNER_PW,
    ))
}

/// Runs the `mysql` command-line client (MariaDB's) against `endpoint` as
/// `user` on database app1, batch mode without column names, with `tls`
/// (not verifying the test certificate) or `--skip-ssl`, plus `extra`
/// options, executing `sql`.
pub fn mysql_cli(
    ctx: &Ctx,
    endpoint: &str,
    user: &str,
    password: &str,
    tls: bool,
    extra: &[&str],
    sql: &str,
) -> Result<CliRun> {
    let a = ctx.addr(endpoint);
    let mut cmd = std::process::Command::new("mysql");
    cmd.args(["--no-defaults", "-h", &a.ip().to_string(), "-P", &a.port().to_string()])
        .args(["-u", user, &format!("-p{password}"), "-N", "-B"])
        .args(extra);
    if tls {
        cmd.args(["--ssl", "--ssl-verify-server-cert=0"]);
    } else {
        cmd.arg("--skip-ssl");
    }
    let out = cmd.args(["app1", "-e", sql]).output().context("running mysql")?;
    Ok(CliRun {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// The HS256 key tokens are signed with.
pub const TOKEN_KEY: &str = "gatehouse-mysql-test-hs256-key-0123456789";

/// Tenants: (name, password, databases).
pub const TENANTS: &[(&str, &str, &str)] = &[
    ("alice", "alice-pw", "\"app1\""),
    ("bob", "bob-pw", "\"app2\""),
    ("multi", "multi-pw", "\"app1\", \"app2\""),
    // caching_sha2_password cases: each starts with no cached verifier.
    ("carol", "carol-pw", "\"app1\""),
    ("dave", "dave-pw", "\"app1\""),
    ("erin", "erin-pw", "\"app1\""),
    // Reaches the cluster through the proxy's own "sha2" endpoint as carol.
    ("chained", "chained-pw", "\"app1\""),
    // gina: the "sha2" endpoint's user for chained2, through the chain.
    ("gina", "gina-pw", "\"app1\""),
    ("chained2", "chained2-pw", "\"app1\""),
];

fn config_text(cluster: &Cluster, dir: &Path, sha2_port: u16) -> Result<String> {
    let primary = cluster.mysql_primary().context("no primary")?;
    let backends: Vec<String> = std::iter::once(primary)
        .chain(cluster.mysql_replicas())
        .map(|s| format!("\"{}:{}\"", s.host, s.port))
        .collect();
    let backends = backends.join(", ");
    let mut text = format!(
        r#"
[proxy]
login_timeout = "2s"
client_message_timeout = "2s"
# Idle sessions park after 100-200 ms, so every case also runs its sessions
# through the parking lot whenever it pauses (the default is 250 ms).
park_idle_after = "100ms"
max_message_bytes = 1048576
log_filter = "warn"
auth_failures_per_minute_per_address = 1000
auth_failures_per_minute_per_user = 50

[[clusters]]
name = "my"
engine = "mysql"
backends = [{backends}]
monitor_secret = "superuser"
health_check_interval = "1s"
pool = {{ size = 10, borrow_timeout = "3s" }}

[[clusters]]
name = "mysmall"
engine = "mysql"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 4, borrow_timeout = "10s" }}

[[clusters]]
name = "mykill"
engine = "mysql"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 2, borrow_timeout = "10s" }}

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
tls = {{ cert = "{d}/server.pem", key = "{d}/server.key" }}

[[endpoints]]
name = "ro"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_only"

[[endpoints]]
name = "small"
listen = "127.0.0.1:0"
cluster = "mysmall"
role = "read_write"

[[endpoints]]
name = "kill"
listen = "127.0.0.1:0"
cluster = "mykill"
role = "read_write"

[[endpoints]]
name = "sess"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
pool_mode = "session"

[tokens]
issuer = "gatehouse-test"
hs256_secret_file = "{d}/token-hs256.secret"

[[endpoints]]
name = "tok"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
client_auth = "password"
tls = {{ cert = "{d}/server.pem", key = "{d}/server.key" }}

# MySQL 8's default plugin, with the RSA exchange for plain TCP.
[[endpoints]]
name = "sha2"
listen = "127.0.0.1:{sha2_port}"
cluster = "my"
role = "read_write"
mysql_default_auth = "caching_sha2_password"
mysql_rsa_key = "{d}/rsa.pem"

# A cluster whose one backend is the proxy's own "sha2" endpoint: its
# backend logins run caching_sha2_password's full and fast paths.
[[clusters]]
name = "mychain"
engine = "mysql"
backends = ["127.0.0.1:{sha2_port}"]
monitor_secret = "via_sha2_monitor"
health_check_interval = "1s"
pool = {{ size = 2, borrow_timeout = "5s" }}

[[endpoints]]
name = "chain"
listen = "127.0.0.1:0"
cluster = "mychain"
role = "read_write"

# The same backend for the tenant-switch case alone (its pools and share
# apart from the chain's).
[[clusters]]
name = "mychainsw"
engine = "mysql"
backends = ["127.0.0.1:{sha2_port}"]
monitor_secret = "via_sha2_monitor"
health_check_interval = "1s"
# Three connections (1 % of the server's 300): the switch case holds two
# and the tenants take turns on the third.
pool = {{ size = 3, borrow_timeout = "5s", max_connections_percent = 1 }}

[[endpoints]]
name = "chainsw"
listen = "127.0.0.1:0"
cluster = "mychainsw"
role = "read_write"

[[secrets]]
name = "via_sha2"
user = "carol"
password = "carol-pw"

[[secrets]]
name = "via_sha2_gina"
user = "gina"
password = "gina-pw"

[[secrets]]
name = "via_sha2_monitor"
user = "alice"
password = "alice-pw"

# MariaDB's ed25519 for every client; frank has only an ed25519 key.
[[endpoints]]
name = "ed"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
mysql_default_auth = "client_ed25519"

[[tenants]]
name = "frank"
databases = ["app1"]
secret = "owner"
mysql_ed25519 = "{frank_key}"

[[tenants]]
name = "tina"
databases = ["app1"]
secret = "owner"
token = true

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"

[[secrets]]
name = "owner"
user = "app_owner"
password = "{OWNER_PW}"
"#,
        d = dir.display(),
        su = cluster.mysql_user(),
        su_pw = cluster.mysql_password(),
        frank_key = {
            use base64::Engine as _;
            let key = gatehouse_proto_mysql::auth::ed25519::public_key(b"frank-pw");
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(key)
        },
    );
    for (name, pw, dbs) in TENANTS {
        let hash = native_password::format_stored(&native_password::stored_hash(pw.as_bytes()));
        let secret = match *name {
            "chained" => "via_sha2",
            "chained2" => "via_sha2_gina",
            _ => "owner",
        };
        text.push_str(&format!(
            "\n[[tenants]]\nname = \"{name}\"\ndatabases = [{dbs}]\nsecret = \"{secret}\"\nmysql_native_password = \"{hash}\"\n"
        ));
    }
    Ok(text)
}

fn tls_files(dir: &Path) -> Result<()> {
    use rcgen::{CertificateParams, DnType, KeyPair};
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    std::fs::write(dir.join("server.pem"), cert.pem())?;
    std::fs::write(dir.join("server.key"), key.serialize_pem())?;
    // The RSA key of caching_sha2_password's exchange over plain TCP.
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(dir.join("rsa.pem"))
        .output()
        .context("running openssl genpkey")?;
    anyhow::ensure!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn prepare_cluster(cluster: &Cluster) -> Result<()> {
    let p = cluster.mysql_primary().context("no primary")?.name.clone();
    cluster.mysql_sql(
        &p,
        &format!(
            "CREATE USER 'app_owner'@'%' IDENTIFIED BY '{OWNER_PW}'; \
             CREATE DATABASE app1; CREATE DATABASE app2; CREATE DATABASE other; \
             GRANT ALL ON app1.* TO 'app_owner'@'%'; GRANT ALL ON app2.* TO 'app_owner'@'%'; \
             GRANT ALL ON other.* TO 'app_owner'@'%'; \
             CREATE TABLE app1.t (id INT PRIMARY KEY, v VARCHAR(64)); \
             INSERT INTO app1.t VALUES (1, 'one'), (2, 'two'), (3, 'three'); \
             CREATE TABLE app1.killed (id INT PRIMARY KEY); CREATE TABLE app2.killed (id INT PRIMARY KEY);"
        ),
    )?;
    Ok(())
}

fn setup() -> Result<Arc<Ctx>> {
    trials::init_tracing();
    let dir = trials::scratch_dir("mysql")?;
    let opts = Options {
        pg: false,
        mysql: true,
        mysql_replicas: 1,
        mysql_max_connections: 300,
        ..Options::default()
    };
    let cluster = Cluster::up(&dir.join("cluster"), &opts)?;
    prepare_cluster(&cluster)?;
    tls_files(&dir)?;
    std::fs::write(dir.join("token-hs256.secret"), TOKEN_KEY)?;
    let sha2_port = gatehouse_testkit::ports::free_port(&[])?;
    let text = config_text(&cluster, &dir, sha2_port)?;
    std::fs::write(dir.join("gatehouse.toml"), &text)?;
    let settings = gatehouse::config::load(&dir.join("gatehouse.toml")).map_err(|p| anyhow::anyhow!("{p}"))?;
    let rt = trials::runtime()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (endpoints, core) = rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let endpoints = [
            "rw", "ro", "small", "kill", "sess", "tok", "sha2", "chain", "chainsw", "ed",
        ]
        .iter()
        .map(|n| (n.to_string(), app.local_addr(n).unwrap_or_else(|| panic!("{n}"))))
        .collect::<Vec<_>>();
        let core = app.mysql_core();
        tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        anyhow::Ok((endpoints, core))
    })?;
    Ok(Arc::new(Ctx {
        rt,
        cluster,
        dir,
        endpoints,
        core,
        shutdown: std::sync::Mutex::new(Some(tx)),
    }))
}

type Case = trials::Case<Ctx>;

fn main() -> ExitCode {
    let mut cases: Vec<(&'static str, Case)> = Vec::new();
    cases.extend(auth::cases());
    cases.extend(queries::cases());
    cases.extend(caps::cases());
    cases.extend(txn::cases());
    cases.extend(session::cases());
    cases.extend(kill::cases());
    cases.extend(console::cases());
    cases.extend(tokens::cases());
    cases.extend(differential::cases());
    cases.extend(plugins::cases());
    cases.extend(park::cases());
    cases.extend(reload::cases());
    cases.extend(tls_reload::cases());
    cases.extend(rules::cases());
    cases.extend(rules_matrix::cases());
    cases.extend(metrics::cases());
    cases.extend(backend_tls::cases());
    cases.extend(switch::cases());
    trials::run(cases, setup, teardown)
}

/// Stops the proxy, then the cluster (dropping the last `Ctx`), then removes
/// the directory they lived in.
fn teardown(ctx: Arc<Ctx>) {
    if let Some(tx) = ctx.shutdown.lock().ok().and_then(|mut s| s.take()) {
        let _ = tx.send(());
    }
    let dir = ctx.dir.clone();
    drop(ctx); // stops the cluster
    let _ = std::fs::remove_dir_all(dir);
}
