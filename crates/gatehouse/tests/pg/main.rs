//! PostgreSQL integration tests: one real cluster (primary + streaming
//! replica, from the test kit) and one in-process proxy are started once for
//! the whole binary; every case talks to them with real clients
//! (tokio-postgres, psql, pgbench) or, for bad input, raw bytes.

mod abuse;
mod admin;
mod auth;
mod backend_tls;
mod bad_input;
mod cancel;
mod chromium;
mod console;
mod dashboard;
mod differential;
mod limits;
mod metrics;
#[path = "../common/openmetrics.rs"]
mod openmetrics;
mod own;
mod park;
mod prepared;
mod queries;
mod raw;
#[path = "../common/refusal.rs"]
mod refusal;
mod reload;
mod rules;
mod rules_matrix;
#[path = "../rules_matrix_cases.rs"]
mod rules_matrix_cases;
mod scale;
mod session;
mod settings_reload;
// Shared with the MySQL tests: each binary uses its engine's part.
#[allow(dead_code)]
#[path = "../tls_probe.rs"]
mod tls_probe;
mod tokens;
mod topology_reload;
mod txn;
mod txn_resets;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use gatehouse_proto_pg::auth::md5::md5_stored;
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_testkit::{Cluster, Options, trials};
use tokio::runtime::Runtime;

/// Everything a case needs: the runtime, the proxy's endpoints, the cluster.
pub struct Ctx {
    pub rt: Runtime,
    pub cluster: Cluster,
    pub dir: PathBuf,
    pub ca: PathBuf,
    pub endpoints: Vec<(String, SocketAddr)>,
    pub core: Arc<gatehouse::core::Core<gatehouse::engine::pg::PgEngine>>,
    /// The admin API's address and the bearer token it requires.
    pub admin: SocketAddr,
    pub admin_token: String,
    shutdown: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// See [`Ctx::both_tx_connections`].
    tx_pair: std::sync::Mutex<()>,
}

impl Ctx {
    /// Held by a case that keeps one of the "tx" pool's two connections
    /// (pinned, or in a transaction) while it needs the other. Cases run in
    /// parallel: two such cases at once could each hold one connection and
    /// wait for the other until the borrow timeout fails one of them.
    pub fn both_tx_connections(&self) -> std::sync::MutexGuard<'_, ()> {
        self.tx_pair.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn addr(&self, endpoint: &str) -> SocketAddr {
        self.endpoints
            .iter()
            .find(|(n, _)| n == endpoint)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("{endpoint}"))
    }

    /// A libpq-style connection string to `endpoint`.
    pub fn conninfo(&self, endpoint: &str, user: &str, password: &str, dbname: &str) -> String {
        let a = self.addr(endpoint);
        format!(
            "host={} port={} user={user} password={password} dbname={dbname} sslmode=disable",
            a.ip(),
            a.port()
        )
    }

    /// Connects with tokio-postgres (no TLS) and drives the connection.
    pub async fn client(
        &self,
        endpoint: &str,
        user: &str,
        password: &str,
        dbname: &str,
    ) -> Result<tokio_postgres::Client> {
        Ok(self.try_client(endpoint, user, password, dbname).await?)
    }

    /// [`Ctx::client`] keeping the driver's error (and its SQLSTATE).
    pub async fn try_client(
        &self,
        endpoint: &str,
        user: &str,
        password: &str,
        dbname: &str,
    ) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let (client, conn) =
            tokio_postgres::connect(&self.conninfo(endpoint, user, password, dbname), tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        Ok(client)
    }
}

/// Tenants: (name, password, databases, secret, md5?).
pub const TENANTS: &[(&str, &str, &str, &str, bool)] = &[
    ("alice", "alice-pw", "\"app1\"", "owner", false),
    ("bob", "bob-pw", "\"app2\"", "owner", true),
    ("carol", "carol-pw", "\"app1\"", "md5_backend", false),
    ("dave", "dave-pw", "\"app1\"", "trust_backend", false),
    ("erin", "erin-pw", "\"app1\"", "owner", false),
    ("bea", "bea-pw", "\"app1\"", "owner", false),
    ("ivan", "ivan-pw", "\"app1\"", "owner", false),
    ("rita", "rita-pw", "\"app1\"", "owner", false),
];

fn tls_files(dir: &Path) -> Result<PathBuf> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Gatehouse Test CA");
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca, &ca_key)?;
    std::fs::write(dir.join("server.pem"), cert.pem())?;
    std::fs::write(dir.join("server.key"), key.serialize_pem())?;
    std::fs::write(dir.join("ca.pem"), ca.pem())?;
    Ok(dir.join("ca.pem"))
}

fn config_text(cluster: &Cluster, dir: &Path) -> Result<String> {
    let primary = cluster.pg_primary().context("no primary")?;
    let backends: Vec<String> = std::iter::once(primary)
        .chain(cluster.pg_replicas())
        .map(|s| format!("\"{}:{}\"", s.host, s.port))
        .collect();
    let first = backends[0].clone();
    let backends = backends.join(", ");
    let mut text = format!(
        r#"
[proxy]
tenant_directory = "tenants.jsonl"
login_timeout = "2s"
client_message_timeout = "2s"
# Idle sessions park after 100-200 ms, so every case also runs its sessions
# through the parking lot whenever it pauses (the default is 250 ms).
park_idle_after = "100ms"
max_message_bytes = 1048576
log_filter = "warn"
# Every case connects from 127.0.0.1: the per-address limit is shared by all
# of them (abuse.rs tests it on a second proxy); the per-user limit is high
# enough for the deliberate failures of auth.rs and tokens.rs.
auth_failures_per_minute_per_address = 1000
auth_failures_per_minute_per_user = 20

[[clusters]]
name = "main"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
health_check_interval = "1s"
pool = {{ size = 10, borrow_timeout = "3s" }}

[[clusters]]
name = "tiny"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 1, borrow_timeout = "500ms" }}

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
tls = {{ cert = "{d}/server.pem", key = "{d}/server.key" }}

[[endpoints]]
name = "tls_only"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
require_tls = true
tls = {{ cert = "{d}/server.pem", key = "{d}/server.key" }}

[[endpoints]]
name = "ro"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_only"

[[clusters]]
name = "solo"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 1, borrow_timeout = "3s" }}

[[endpoints]]
name = "solo"
listen = "127.0.0.1:0"
cluster = "solo"
role = "read_write"
pool_mode = "session"

[[clusters]]
name = "txpool"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 2, borrow_timeout = "10s" }}

[[endpoints]]
name = "tx"
listen = "127.0.0.1:0"
cluster = "txpool"
role = "read_write"
pool_mode = "transaction"
pinning_filter = ["geqo"]

[[clusters]]
name = "txpool10"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 10, borrow_timeout = "10s" }}

[[clusters]]
name = "pct"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 10, borrow_timeout = "1s", max_connections_percent = 1 }}

[[endpoints]]
name = "pct"
listen = "127.0.0.1:0"
cluster = "pct"
role = "read_write"

[[clusters]]
name = "life"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 4, init_query = "SET work_mem = '3MB'", server_lifetime = "1s" }}

[[endpoints]]
name = "life"
listen = "127.0.0.1:0"
cluster = "life"
role = "read_write"
idle_client_timeout = "2s"

[[endpoints]]
name = "stmt"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
pool_mode = "statement"

[[endpoints]]
name = "tx10"
listen = "127.0.0.1:0"
cluster = "txpool10"
role = "read_write"

# admin.rs pauses and drains these (operator commands).
[[clusters]]
name = "ops"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
pool = {{ size = 4 }}

[[endpoints]]
name = "ops_rw"
listen = "127.0.0.1:0"
cluster = "ops"
role = "read_write"

[[endpoints]]
name = "ops_ro"
listen = "127.0.0.1:0"
cluster = "ops"
role = "read_only"

# reload.rs adds the replica to this cluster while clients read.
[[clusters]]
name = "grow"
engine = "postgres"
backends = [{first}] # grow-backends
monitor_secret = "superuser"
pool = {{ size = 4 }}

[[endpoints]]
name = "grow_ro"
listen = "127.0.0.1:0"
cluster = "grow"
role = "read_only"

[[endpoints]]
name = "tiny"
listen = "127.0.0.1:0"
cluster = "tiny"
role = "read_write"
pool_mode = "session"
max_client_connections = 2

[admin]
listen = "127.0.0.1:0"
token_file = "{d}/admin.token"

[tokens]
issuer = "gatehouse-test"
hs256_secret_file = "{d}/token-hs256.secret"
jwks_file = "{d}/jwks.json"

[[endpoints]]
name = "tok"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
client_auth = "password"
tls = {{ cert = "{d}/server.pem", key = "{d}/server.key" }}

[[endpoints]]
name = "tok_plain"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"
client_auth = "password"
allow_plaintext_tokens = true

[[tenants]]
name = "tina"
databases = ["app1"]
secret = "owner"
token = true

[[tenants]]
name = "tom"
databases = ["app2"]
secret = "owner"
token = true
scram_verifier = "{tom_verifier}"

[[tenants]]
name = "rosa"
databases = ["app1"]
secret = "rot"
scram_verifier = "{rosa_verifier}"

[[secrets]]
name = "rot"
user = "rot_owner"
password = "rot-pw-1"

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"

[[secrets]]
name = "owner"
user = "app_owner"
password = "owner-pw"

[[secrets]]
name = "md5_backend"
user = "md5_owner"
password = "md5-pw"

[[secrets]]
name = "trust_backend"
user = "trust_owner"
password = "not-checked"
"#,
        d = dir.display(),
        su = cluster.pg_user(),
        su_pw = cluster.pg_password(),
        tom_verifier = ScramVerifier::from_password("tom-pw", &random_salt(), 4096),
        rosa_verifier = ScramVerifier::from_password("rosa-pw", &random_salt(), 4096),
    );
    for (name, pw, dbs, secret, md5) in TENANTS {
        let auth = if *md5 {
            format!("md5_hash = \"{}\"", md5_stored(name, pw))
        } else {
            format!(
                "scram_verifier = \"{}\"",
                ScramVerifier::from_password(pw, &random_salt(), 4096)
            )
        };
        text.push_str(&format!(
            "\n[[tenants]]\nname = \"{name}\"\ndatabases = [{dbs}]\nsecret = \"{secret}\"\n{auth}\n"
        ));
    }
    Ok(text
        .replace("name = \"erin\"\n", "name = \"erin\"\nmax_client_connections = 2\n")
        .replace("name = \"bea\"\n", "name = \"bea\"\nmax_backend_connections = 1\n")
        .replace(
            "name = \"rita\"\n",
            "name = \"rita\"\nconnection_rate = 1\nconnection_burst = 2\n",
        ))
}

fn prepare_cluster(cluster: &Cluster) -> Result<()> {
    let p = cluster.pg_primary().context("no primary")?.name.clone();
    cluster.pg_sql(&p, "postgres", "CREATE ROLE app_owner LOGIN PASSWORD 'owner-pw'")?;
    cluster.pg_sql(
        &p,
        "postgres",
        "SET password_encryption = 'md5'; CREATE ROLE md5_owner LOGIN PASSWORD 'md5-pw'",
    )?;
    cluster.pg_sql(&p, "postgres", "CREATE ROLE trust_owner LOGIN")?;
    cluster.pg_sql(&p, "postgres", "CREATE ROLE rot_owner LOGIN PASSWORD 'rot-pw-1'")?;
    for db in ["app1", "app2"] {
        cluster.pg_sql(&p, "postgres", &format!("CREATE DATABASE {db} OWNER app_owner"))?;
        cluster.pg_sql(&p, db, "GRANT ALL ON SCHEMA public TO PUBLIC")?;
    }
    let primary = cluster.pg_primary().context("no primary")?;
    let out = std::process::Command::new("pgbench")
        .args([
            "-i",
            "-q",
            "-s",
            "1",
            "-h",
            &primary.host,
            "-p",
            &primary.port.to_string(),
            "-U",
            "app_owner",
            "app2",
        ])
        .env("PGPASSWORD", "owner-pw")
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "pgbench -i: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.add_pg_hba_rule("host all md5_owner 127.0.0.1/32 md5")?;
    cluster.add_pg_hba_rule("host all trust_owner 127.0.0.1/32 trust")?;
    Ok(())
}

fn setup() -> Result<Arc<Ctx>> {
    trials::init_tracing();
    let dir = trials::scratch_dir("pg")?;
    let opts = Options {
        pg_replicas: 1,
        pg_max_connections: 400,
        ..Options::default()
    };
    let cluster = Cluster::up(&dir.join("cluster"), &opts)?;
    prepare_cluster(&cluster)?;
    let ca = tls_files(&dir)?;
    tokens::key_files(&dir)?;
    reload::write_directory(&dir, &["dora"])?;
    let admin_token = format!("admin-token-{}", rand_hex());
    std::fs::write(dir.join("admin.token"), &admin_token)?;
    let text = config_text(&cluster, &dir)?;
    std::fs::write(dir.join("gatehouse.toml"), &text)?;
    let settings = gatehouse::config::load(&dir.join("gatehouse.toml")).map_err(|p| anyhow::anyhow!("{p}"))?;
    let rt = trials::runtime()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (endpoints, core, admin) = rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let endpoints = [
            "rw",
            "tls_only",
            "ro",
            "tiny",
            "solo",
            "tx",
            "tx10",
            "grow_ro",
            "ops_rw",
            "ops_ro",
            "pct",
            "life",
            "stmt",
            "tok",
            "tok_plain",
        ]
        .iter()
        .map(|n| (n.to_string(), app.local_addr(n).unwrap_or_else(|| panic!("{n}"))))
        .collect::<Vec<_>>();
        let core = app.pg_core();
        let admin = app.admin_addr().context("no admin listener")?;
        tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        anyhow::Ok((endpoints, core, admin))
    })?;
    Ok(Arc::new(Ctx {
        rt,
        cluster,
        dir,
        ca,
        endpoints,
        core,
        admin,
        admin_token,
        shutdown: std::sync::Mutex::new(Some(tx)),
        tx_pair: std::sync::Mutex::new(()),
    }))
}

type Case = trials::Case<Ctx>;

fn main() -> ExitCode {
    let mut cases: Vec<(&'static str, Case)> = Vec::new();
    cases.extend(queries::cases());
    cases.extend(auth::cases());
    cases.extend(session::cases());
    cases.extend(bad_input::cases());
    cases.extend(txn::cases());
    cases.extend(txn_resets::cases());
    cases.extend(differential::cases());
    cases.extend(limits::cases());
    cases.extend(tokens::cases());
    cases.extend(reload::cases());
    cases.extend(topology_reload::cases());
    cases.extend(settings_reload::cases());
    cases.extend(scale::cases());
    cases.extend(abuse::cases());
    cases.extend(admin::cases());
    cases.extend(console::cases());
    cases.extend(dashboard::cases());
    cases.extend(metrics::cases());
    cases.extend(park::cases());
    cases.extend(cancel::cases());
    cases.extend(prepared::cases());
    cases.extend(rules::cases());
    cases.extend(rules_matrix::cases());
    cases.extend(backend_tls::cases());
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

/// The server's message in a driver error (its Display says only "db error").
pub fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

/// 32 random hex digits.
pub fn rand_hex() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::thread_rng().r#gen();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
