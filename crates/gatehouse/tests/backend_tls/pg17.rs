//! Cases that need PostgreSQL 17: direct TLS (`backend_tls_negotiation =
//! "direct"`, libpq's `sslnegotiation=direct`: the handshake straight
//! after the TCP connection, with no SSLRequest), and `prefer` going plain
//! after a handshake that failed (PostgreSQL 15's OpenSSL 3 here will not
//! offer only TLS 1.1; 17's build will, and rustls refuses it). Debian here
//! has PostgreSQL 15, so the first of these cases starts a PostgreSQL 17
//! of the binary's own (`scripts/pg17/setup.sh` installs its binaries
//! outside the clone), with TLS and the server's connection tracing on:
//! its log says, per connection, whether TLS came by an SSLRequest or
//! directly. Against the binary's PostgreSQL 15 direct TLS is refused,
//! with the reason in the proxy's log only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::PoisonError;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::{Cluster, Options};

use crate::Ctx;

fn run(f: impl std::future::Future<Output = Result<()>>) -> Result<()> {
    gatehouse_testkit::trials::runtime()?.block_on(f)
}

/// The PostgreSQL 17 binaries (installed once, outside the clone).
fn pg17_bindir() -> Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg17/setup.sh");
    let out = Command::new(&script)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// A proxy with one PostgreSQL cluster `pg` on `backend`, TLS as `tls`
/// says, and the tenant `app` logging in as the kit's superuser.
async fn start(ctx: &Ctx, case: &str, cluster: &Cluster, tls: &str) -> Result<DirectProxy> {
    let backend = cluster.pg_primary().context("no PostgreSQL")?.addr();
    let config = format!(
        r#"[proxy]
log_filter = "warn"

[[clusters]]
name = "pg"
engine = "postgres"
backends = ["{backend}"]
monitor_secret = "super"
health_check_interval = "200ms"
connect_timeout = "3s"
failover_hold = "1s"
{tls}
[clusters.pool]
size = 2
borrow_timeout = "3s"

[[endpoints]]
name = "pg"
listen = "127.0.0.1:0"
cluster = "pg"
role = "read_write"

[[tenants]]
name = "app"
databases = ["postgres"]
secret = "super"
scram_verifier = "{verifier}"

[[secrets]]
name = "super"
user = "{user}"
password = "{password}"
"#,
        verifier = ctx.pg_verifier,
        user = cluster.pg_user(),
        password = cluster.pg_password(),
    );
    let path = ctx.root.join(format!("{case}.toml"));
    std::fs::write(&path, config)?;
    let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
    let app = gatehouse::App::bind(settings).await?;
    let port = app.local_addr("pg").context("no endpoint pg")?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(gatehouse::run(app, async {
        let _ = stopped.await;
    }));
    Ok(DirectProxy { port, run, stop })
}

struct DirectProxy {
    port: u16,
    run: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl DirectProxy {
    async fn client(&self) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let info = format!(
            "host=127.0.0.1 port={} user=app password=app-pw dbname=postgres sslmode=disable",
            self.port
        );
        let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        Ok(client)
    }

    async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(15), self.run)
            .await
            .context("the proxy did not stop")???;
        Ok(())
    }
}

/// Cancels the session's `pg_sleep(30)` from the side; it must end with
/// 57014 promptly.
pub async fn cancel_a_sleep(client: tokio_postgres::Client) -> Result<()> {
    let token = client.cancel_token();
    let sleeping = tokio::spawn(async move { client.simple_query("SELECT pg_sleep(30)").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    token.cancel_query(tokio_postgres::NoTls).await?;
    let ended = tokio::time::timeout(Duration::from_secs(10), sleeping)
        .await
        .context("the cancelled query went on")??;
    let e = ended.err().context("the cancelled query finished")?;
    ensure!(
        e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
        "{e}"
    );
    Ok(())
}

/// A client of a proxy whose cluster on `cluster` takes `tls` is refused
/// with the proxy's own message, which says nothing of TLS, and a log line
/// names the server and says `why`.
async fn refused(ctx: &Ctx, case: &str, cluster: &Cluster, tls: &str, why: &str) -> Result<()> {
    let proxy = start(ctx, case, cluster, tls).await?;
    let refused = match proxy.client().await {
        Err(e) => Some(e),
        Ok(client) => client.simple_query("SELECT 1").await.err(),
    };
    proxy.stop().await?;
    let e = refused.with_context(|| format!("{case}: a query ran"))?;
    let told = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_owned());
    ensure!(
        crate::cases::UNREACHABLE.iter().any(|u| told.contains(u)),
        "{case}: the client was told {told:?}"
    );
    ensure!(
        !told.to_lowercase().contains("tls"),
        "{case}: the client was told {told:?}"
    );
    let addr = cluster.pg_primary().context("no PostgreSQL")?.addr();
    let log = ctx.log.text();
    ensure!(
        log.lines().any(|l| l.contains(why) && l.contains(&addr)),
        "{case}: no log line with {addr} says {why:?}: {log}"
    );
    Ok(())
}

/// How many connections the server's log says took TLS each way.
fn negotiations(cluster: &Cluster) -> Result<(usize, usize)> {
    let server = cluster.pg_primary().context("no PostgreSQL")?;
    let log = std::fs::read_to_string(server.dir.join("postgres.log"))?;
    Ok((
        log.matches("direct SSL connection accepted").count(),
        log.matches("SSLRequest accepted").count(),
    ))
}

/// Runs `case` with the PostgreSQL 17 server of the binary, started by
/// the first case that asks, with connection tracing on. The cases run in
/// parallel and reconfigure the server: one at a time holds it.
fn with_pg17(ctx: &Ctx, case: impl FnOnce(&Cluster) -> Result<()>) -> Result<()> {
    let mut slot = ctx.pg17.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.is_none() {
        let opts = Options {
            tls: true,
            pg_bindir: Some(pg17_bindir()?),
            ..Options::default()
        };
        let mut pg17 = Cluster::up(&ctx.root.join("pg17"), &opts)?;
        let name = pg17.pg_primary().context("no PostgreSQL")?.name.clone();
        let version = pg17.pg_sql(&name, "postgres", "SHOW server_version_num")?;
        ensure!(
            version.trim().parse::<u32>().is_ok_and(|v| v >= 170_000),
            "not PostgreSQL 17: {version}"
        );
        // A server-start setting: the log then names each connection's way in.
        pg17.pg_sql(&name, "postgres", "ALTER SYSTEM SET trace_connection_negotiation = on")?;
        pg17.stop(&name)?;
        pg17.restart(&name)?;
        *slot = Some(pg17);
    }
    case(slot.as_ref().context("no PostgreSQL 17")?)
}

/// Runs each statement (ALTER SYSTEM, one at a time) on the PostgreSQL 17
/// server and reloads its configuration.
fn reconfigure(pg17: &Cluster, statements: &[&str]) -> Result<()> {
    let name = &pg17.pg_primary().context("no PostgreSQL")?.name;
    for sql in statements {
        pg17.pg_sql(name, "postgres", sql)?;
    }
    pg17.pg_sql(name, "postgres", "SELECT pg_reload_conf()")?;
    // The postmaster rereads its files; new connections see the change.
    std::thread::sleep(Duration::from_millis(500));
    Ok(())
}

pub fn direct_negotiation_reaches_postgresql_17_and_is_refused_by_a_server_without_it(ctx: &Ctx) -> Result<()> {
    with_pg17(ctx, |pg17| direct(ctx, pg17))
}

fn direct(ctx: &Ctx, pg17: &Cluster) -> Result<()> {
    let ca = pg17.tls_ca().context("no CA")?;
    let before = negotiations(pg17)?;

    run(async {
        let tls = format!(
            "backend_tls = \"verify-full\"\nbackend_tls_ca = \"{}\"\nbackend_tls_negotiation = \"direct\"\n",
            ca.display()
        );
        let proxy = start(ctx, "direct-17", pg17, &tls).await?;
        let checked = async {
            let client = proxy.client().await?;
            let row = client
                .query_one("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                .await?;
            ensure!(row.get::<_, bool>(0), "the backend connection is not under TLS");
            let tls_version: Option<String> = row.get(1);
            ensure!(
                tls_version.as_deref().is_some_and(|v| v.starts_with("TLS")),
                "{tls_version:?}"
            );
            // A cancel goes over a connection of its own, direct too.
            cancel_a_sleep(client).await
        }
        .await;
        proxy.stop().await?;
        checked?;
        let (direct, requested) = negotiations(pg17)?;
        // The pool's connection and the cancel's, at least; the health
        // probes come on top.
        ensure!(
            direct >= before.0 + 2,
            "the server saw {} direct TLS connections",
            direct - before.0
        );
        ensure!(
            requested == before.1,
            "the proxy sent {} SSLRequests",
            requested - before.1
        );

        // PostgreSQL 15 takes a ClientHello for a broken startup packet.
        let ca15 = ctx.ca.display();
        let tls = format!(
            "backend_tls = \"verify-full\"\nbackend_tls_ca = \"{ca15}\"\nbackend_tls_negotiation = \"direct\"\n"
        );
        refused(
            ctx,
            "direct-15",
            &ctx.cluster,
            &tls,
            "backend_tls_negotiation = \"direct\"",
        )
        .await
    })
}

pub fn prefer_goes_plain_after_a_failed_handshake_and_require_is_refused(ctx: &Ctx) -> Result<()> {
    with_pg17(ctx, |pg17| prefer(ctx, pg17))
}

fn prefer(ctx: &Ctx, pg17: &Cluster) -> Result<()> {
    // TLS 1.0 and 1.1 only: the server answers the SSLRequest with `S`,
    // and the handshake fails (rustls speaks 1.2 and 1.3).
    reconfigure(
        pg17,
        &[
            "ALTER SYSTEM SET ssl_min_protocol_version = 'TLSv1'",
            "ALTER SYSTEM SET ssl_max_protocol_version = 'TLSv1.1'",
        ],
    )?;
    let checked = run(async {
        let addr = pg17.pg_primary().context("no PostgreSQL")?.addr();
        let proxy = start(ctx, "prefer-17", pg17, "backend_tls = \"prefer\"\n").await?;
        let plain = async {
            let client = proxy.client().await?;
            let row = client
                .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                .await?;
            ensure!(!row.get::<_, bool>(0), "prefer: the connection is under TLS");
            // A cancel opens its connection the same way.
            cancel_a_sleep(client).await
        }
        .await;
        proxy.stop().await?;
        plain?;
        let log = ctx.log.text();
        ensure!(
            log.lines()
                .any(|l| l.contains("connecting again without TLS") && l.contains(&addr)),
            "no log line says prefer went plain with {addr}: {log}"
        );

        let require = "backend_tls = \"require\"\n";
        refused(
            ctx,
            "require-17",
            pg17,
            require,
            "backend_tls = \"require\": TLS handshake",
        )
        .await
    });
    reconfigure(
        pg17,
        &[
            "ALTER SYSTEM RESET ssl_min_protocol_version",
            "ALTER SYSTEM RESET ssl_max_protocol_version",
        ],
    )?;
    checked
}
