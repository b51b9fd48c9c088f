//! TLS from the proxy to its databases, against real servers that require
//! it: one PostgreSQL and one MariaDB from the test kit, started with TLS
//! (the kit's CA, a server certificate for `127.0.0.1` and `localhost`,
//! and a client certificate), then made to refuse anything else:
//! PostgreSQL's pg_hba rejects connections without encryption and lets
//! [`TLS_CLIENT_CN`] in by its certificate alone; MariaDB runs with
//! `require_secure_transport` and has a user that needs an X.509
//! certificate. Each case starts a proxy of its own, in-process, whose two
//! clusters (`pg`, `my`) use the `backend_tls` settings the case gives;
//! clients reach them in plain text. What the proxy logs is captured, so a
//! case can look for the line that explains a refusal.

mod cases;
mod negotiation;
mod spare;

// The proxy runs in-process here: of the binary's helpers, the cases take
// `hash-password` and the configuration.
#[allow(dead_code)]
#[path = "../common/binary.rs"]
mod binary;

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result};
use binary::{TwoEngines, hash};
use gatehouse_testkit::{Cluster, Options, TLS_CLIENT_CN, trials};

/// The shared servers, what every case's configuration needs, and the log.
pub struct Ctx {
    pub cluster: Cluster,
    pub root: PathBuf,
    /// The kit's CA, and a CA of this binary's own that signed nothing
    /// the servers present.
    pub ca: PathBuf,
    pub other_ca: PathBuf,
    /// The client certificate and key the servers' CA signed.
    pub client: (PathBuf, PathBuf),
    pg_verifier: String,
    my_hash: String,
    pub log: Log,
    /// Servers the cases may reconfigure and restart ([`spare`]).
    pub spare: Mutex<Option<Cluster>>,
}

/// Everything the proxies of every case logged (WARN and up), as text.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The password of MariaDB's certificate user (it needs both).
pub const CERT_USER_PASSWORD: &str = "cert-pw";

fn setup() -> Result<Arc<Ctx>> {
    let log = Log::default();
    let writer = log.clone();
    let _ = tracing_subscriber::fmt()
        .with_env_filter("gatehouse=warn")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init();
    let root = trials::scratch_dir("backend-tls")?;
    let opts = Options {
        mysql: true,
        tls: true,
        ..Options::default()
    };
    let cluster = Cluster::up(&root.join("cluster"), &opts)?;
    let ca = cluster.tls_ca().context("the cluster has no CA")?;
    let client = cluster.tls_client().context("the cluster has no client certificate")?;
    let pg = cluster.pg_primary().context("no PostgreSQL")?.name.clone();
    let my = cluster.mysql_primary().context("no MariaDB")?.name.clone();

    // PostgreSQL: the certificate user first, then nothing without TLS
    // (each rule goes before the ones already there).
    cluster.pg_sql(&pg, "postgres", &format!("CREATE ROLE {TLS_CLIENT_CN} LOGIN"))?;
    cluster.add_pg_hba_rule("hostnossl all all 127.0.0.1/32 reject")?;
    cluster.add_pg_hba_rule(&format!("hostssl all {TLS_CLIENT_CN} 127.0.0.1/32 cert"))?;
    // MariaDB: TCP only under TLS, and a user that needs a certificate.
    cluster.mysql_sql(
        &my,
        &format!(
            "SET GLOBAL require_secure_transport = ON; \
             CREATE USER '{TLS_CLIENT_CN}'@'%' IDENTIFIED BY '{CERT_USER_PASSWORD}' REQUIRE X509; \
             GRANT ALL ON *.* TO '{TLS_CLIENT_CN}'@'%'"
        ),
    )?;

    let other = rcgen::CertificateParams::new(Vec::<String>::new())?;
    let mut other = other;
    other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    other
        .distinguished_name
        .push(rcgen::DnType::CommonName, "a CA the servers do not use");
    let other = other.self_signed(&rcgen::KeyPair::generate()?)?;
    let other_ca = root.join("other-ca.pem");
    std::fs::write(&other_ca, other.pem())?;

    Ok(Arc::new(Ctx {
        cluster,
        root,
        ca,
        other_ca,
        client,
        pg_verifier: hash("app-pw", &[])?,
        my_hash: hash("app-pw", &["--mysql"])?,
        log,
        spare: Mutex::new(None),
    }))
}

fn teardown(ctx: Arc<Ctx>) {
    let root = ctx.root.clone();
    drop(ctx);
    let _ = std::fs::remove_dir_all(root);
}

fn main() -> ExitCode {
    trials::run(cases::cases(), setup, teardown)
}

/// Who the tenants' sessions are on the servers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum BackendUser {
    /// The kit's superusers (password).
    Super,
    /// [`TLS_CLIENT_CN`]: PostgreSQL by certificate alone, MariaDB by
    /// password and certificate.
    Certificate,
}

/// A proxy of a case's own, and how to stop it.
pub struct Proxy {
    addrs: HashMap<String, SocketAddr>,
    pub admin: SocketAddr,
    run: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Proxy {
    /// Starts a proxy whose two clusters take `tls` (the `backend_tls*`
    /// lines of a cluster), probed every 200 ms by the superusers, with
    /// tenants `app` (PostgreSQL) and `myapp` (MariaDB) logging in to the
    /// servers as `user`.
    pub async fn start(ctx: &Ctx, case: &str, tls: &str, user: BackendUser) -> Result<Proxy> {
        Self::start_on(ctx, case, &ctx.cluster, tls, user).await
    }

    /// [`start`](Self::start), in front of the servers of `cluster`.
    pub async fn start_on(ctx: &Ctx, case: &str, cluster: &Cluster, tls: &str, user: BackendUser) -> Result<Proxy> {
        Self::start_with(ctx, case, cluster, tls, user, true).await
    }

    /// [`start_on`](Self::start_on) with the PostgreSQL cluster only (for
    /// settings a MySQL cluster refuses).
    pub async fn start_pg_only(ctx: &Ctx, case: &str, cluster: &Cluster, tls: &str) -> Result<Proxy> {
        Self::start_with(ctx, case, cluster, tls, BackendUser::Super, false).await
    }

    async fn start_with(
        ctx: &Ctx,
        case: &str,
        cluster: &Cluster,
        tls: &str,
        user: BackendUser,
        with_mysql: bool,
    ) -> Result<Proxy> {
        let mut backends = vec![("pg", "postgres", cluster.pg_primary().context("no PostgreSQL")?.addr())];
        if with_mysql {
            backends.push(("my", "mysql", cluster.mysql_primary().context("no MariaDB")?.addr()));
        }
        let mut config = TwoEngines::new(
            cluster,
            "[proxy]\nlog_filter = \"warn\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n\n\
             [console]\nadmin_users = [\"app\"]\n",
        );
        for (name, engine, backend) in backends {
            let settings = format!(
                "monitor_secret = \"{name}_super\"\nhealth_check_interval = \"200ms\"\n\
                 connect_timeout = \"3s\"\nfailover_hold = \"1s\"\n{tls}\n\
                 [clusters.pool]\nsize = 4\nborrow_timeout = \"3s\"\n"
            );
            config = config
                .cluster(name, engine, &backend, &settings)
                .endpoint(name, "127.0.0.1:0", name);
        }
        let (pg_secret, my_secret) = match user {
            BackendUser::Super => ("pg_super", "my_super"),
            BackendUser::Certificate => ("pg_cert", "my_cert"),
        };
        let config = config
            .pg_tenant_as("app", &ctx.pg_verifier, pg_secret)
            .my_tenant_as("myapp", &ctx.my_hash, my_secret)
            .secret("pg_cert", TLS_CLIENT_CN, "not-used-by-cert-authentication")
            .secret("my_cert", TLS_CLIENT_CN, CERT_USER_PASSWORD)
            .text();
        let path = ctx.root.join(format!("{case}.toml"));
        std::fs::write(&path, config)?;
        let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
        let app = gatehouse::App::bind(settings).await?;
        let addrs = ["pg", "my"]
            .iter()
            .filter_map(|e| Some((e.to_string(), app.local_addr(e)?)))
            .collect();
        let admin = app.admin_addr().context("no admin listener")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(gatehouse::run(app, async {
            let _ = stopped.await;
        }));
        Ok(Proxy {
            addrs,
            admin,
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

    /// A PostgreSQL session (tenant app), its connection driven.
    pub async fn pg(&self) -> Result<tokio_postgres::Client> {
        let info = format!(
            "host=127.0.0.1 port={} user=app password=app-pw dbname=postgres sslmode=disable",
            self.addr("pg")?.port()
        );
        let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        Ok(client)
    }

    /// The console's `SHOW SERVERS`: each backend connection's cluster
    /// and TLS session (`None` in plain text).
    pub async fn servers_tls(&self) -> Result<Vec<(String, Option<String>)>> {
        let info = format!(
            "host=127.0.0.1 port={} user=app password=app-pw dbname=gatehouse sslmode=disable",
            self.addr("pg")?.port()
        );
        let (console, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        let mut out = Vec::new();
        for m in console.simple_query("SHOW SERVERS").await? {
            if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
                let cluster = r.try_get("cluster")?.unwrap_or_default().to_owned();
                out.push((cluster, r.try_get("tls")?.map(str::to_owned)));
            }
        }
        Ok(out)
    }

    /// A MariaDB session (tenant myapp).
    pub async fn my(&self) -> Result<mysql_async::Conn> {
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.addr("my")?.port())
            .user(Some("myapp"))
            .pass(Some("app-pw"))
            .db_name(Some("mysql"))
            .prefer_socket(false)
            .into();
        Ok(mysql_async::Conn::new(opts).await?)
    }

    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        tokio::time::timeout(std::time::Duration::from_secs(15), self.run)
            .await
            .context("the proxy did not stop")???;
        Ok(())
    }
}
