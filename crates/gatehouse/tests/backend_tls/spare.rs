//! The binary's spare servers, for the cases that reconfigure or restart
//! theirs: a PostgreSQL 17 (Debian here has 15, which has no direct TLS;
//! `scripts/pg17/setup.sh` installs 17's binaries outside the clone), with
//! the server's connection tracing on, so its log says per connection
//! whether TLS came by an SSLRequest or directly; and a MariaDB. Both
//! take TLS (and plain connections). They start with the first case that
//! asks for them, and one case at a time holds them. Also here: the
//! check that a client is refused with the proxy's own message while the
//! log says why, and a cancel of a sleeping query.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::PoisonError;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::{Cluster, Options};

use crate::cases::{UNREACHABLE, my_refused, pg_refused};
use crate::{BackendUser, Ctx, Proxy};

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

/// Runs `case` with the spare servers, started by the first case that
/// asks. The cases run in parallel: one at a time holds the servers.
pub fn with_spare(ctx: &Ctx, case: impl FnOnce(&mut Cluster) -> Result<()>) -> Result<()> {
    let mut slot = ctx.spare.lock().unwrap_or_else(PoisonError::into_inner);
    if slot.is_none() {
        let opts = Options {
            mysql: true,
            tls: true,
            pg_bindir: Some(pg17_bindir()?),
            ..Options::default()
        };
        let mut spare = Cluster::up(&ctx.root.join("spare"), &opts)?;
        let name = spare.pg_primary().context("no PostgreSQL")?.name.clone();
        let version = spare.pg_sql(&name, "postgres", "SHOW server_version_num")?;
        ensure!(
            version.trim().parse::<u32>().is_ok_and(|v| v >= 170_000),
            "not PostgreSQL 17: {version}"
        );
        // A server-start setting: the log then names each connection's way in.
        spare.pg_sql(&name, "postgres", "ALTER SYSTEM SET trace_connection_negotiation = on")?;
        spare.stop(&name)?;
        spare.restart(&name)?;
        *slot = Some(spare);
    }
    case(slot.as_mut().context("no spare servers")?)
}

/// Runs each statement (ALTER SYSTEM, one at a time) on the spare
/// PostgreSQL and reloads its configuration.
pub fn reconfigure_pg(spare: &Cluster, statements: &[&str]) -> Result<()> {
    let name = &spare.pg_primary().context("no PostgreSQL")?.name;
    for sql in statements {
        spare.pg_sql(name, "postgres", sql)?;
    }
    spare.pg_sql(name, "postgres", "SELECT pg_reload_conf()")?;
    // The postmaster rereads its files; new connections see the change.
    std::thread::sleep(Duration::from_millis(500));
    Ok(())
}

/// How many connections the spare PostgreSQL's log says took TLS by each
/// way: (directly, after an SSLRequest).
pub fn negotiations(spare: &Cluster) -> Result<(usize, usize)> {
    let server = spare.pg_primary().context("no PostgreSQL")?;
    let log = std::fs::read_to_string(server.dir.join("postgres.log"))?;
    Ok((
        log.matches("direct SSL connection accepted").count(),
        log.matches("SSLRequest accepted").count(),
    ))
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

/// Which of a proxy's clusters a check is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Engine {
    Pg,
    My,
}

/// A client of a proxy whose clusters on `cluster` take `tls` is refused
/// on `engine` with the proxy's own message, which says nothing of TLS,
/// and a log line names the server and says `why`.
pub async fn refused(ctx: &Ctx, case: &str, cluster: &Cluster, engine: Engine, tls: &str, why: &str) -> Result<()> {
    let proxy = Proxy::start_on(ctx, case, cluster, tls, BackendUser::Super).await?;
    let told = match engine {
        Engine::Pg => pg_refused(&proxy).await,
        Engine::My => my_refused(&proxy).await,
    };
    proxy.stop().await?;
    let told = told.with_context(|| format!("{case}: {engine:?}"))?;
    ensure!(
        UNREACHABLE.iter().any(|u| told.contains(u)),
        "{case}: the client was told {told:?}"
    );
    ensure!(
        !told.to_lowercase().contains("tls"),
        "{case}: the client was told {told:?}"
    );
    let addr = match engine {
        Engine::Pg => cluster.pg_primary(),
        Engine::My => cluster.mysql_primary(),
    }
    .context("no such server")?
    .addr();
    let log = ctx.log.text();
    ensure!(
        log.lines().any(|l| l.contains(why) && l.contains(&addr)),
        "{case}: no log line with {addr} says {why:?}: {log}"
    );
    Ok(())
}
