//! The cases: each mode against servers that require TLS, a CA that did
//! not sign the servers' certificate, a host name the certificate does not
//! name, a client certificate, and cancels, on both engines.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_testkit::TLS_CLIENT_CN;
use mysql_async::prelude::Queryable;

use crate::{BackendUser, Ctx, Proxy};

type Case = fn(&Ctx) -> Result<()>;

pub fn cases() -> Vec<(&'static str, Case)> {
    vec![
        (
            "backend_tls::each_mode_against_servers_that_require_tls",
            each_mode_against_servers_that_require_tls,
        ),
        (
            "backend_tls::a_ca_that_did_not_sign_the_server_is_refused_and_only_the_log_says_why",
            a_ca_that_did_not_sign_the_server_is_refused_and_only_the_log_says_why,
        ),
        (
            "backend_tls::a_host_name_the_certificate_does_not_name_is_refused_by_verify_full_only",
            a_host_name_the_certificate_does_not_name_is_refused_by_verify_full_only,
        ),
        (
            "backend_tls::a_client_certificate_logs_in_where_the_server_requires_one",
            a_client_certificate_logs_in_where_the_server_requires_one,
        ),
        (
            "backend_tls::cancels_reach_servers_that_require_tls",
            cancels_reach_servers_that_require_tls,
        ),
        (
            "backend_tls::direct_negotiation_reaches_postgresql_17_and_is_refused_by_a_server_without_it",
            crate::negotiation::direct_negotiation_reaches_postgresql_17_and_is_refused_by_a_server_without_it,
        ),
        (
            "backend_tls::prefer_goes_plain_after_a_failed_handshake_and_require_is_refused",
            crate::negotiation::prefer_goes_plain_after_a_failed_handshake_and_require_is_refused,
        ),
    ]
}

/// What a client is told when the proxy cannot reach the server: the
/// server could not be connected to, or (once the health probes, which
/// fail the same way, have marked it down) no writer was found, or the
/// server refused the login (MariaDB refuses a user without its required
/// certificate as it refuses a wrong password).
pub const UNREACHABLE: [&str; 3] = [
    "could not connect to the database server",
    "no writable backend",
    "could not log in to the database server",
];

fn run(f: impl std::future::Future<Output = Result<()>>) -> Result<()> {
    gatehouse_testkit::trials::runtime()?.block_on(f)
}

/// `backend_tls = "{mode}"` with the servers' CA (and `extra` lines).
fn tls(ctx: &Ctx, mode: &str, extra: &str) -> String {
    format!(
        "backend_tls = \"{mode}\"\nbackend_tls_ca = \"{}\"\n{extra}",
        ctx.ca.display()
    )
}

/// Whether the PostgreSQL session's backend connection is under TLS.
async fn pg_backend_tls(proxy: &Proxy) -> Result<bool> {
    let client = proxy.pg().await?;
    let row = client
        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .await?;
    Ok(row.get(0))
}

/// The TLS version of the MariaDB session's backend connection ("" without TLS).
async fn my_backend_tls(proxy: &Proxy) -> Result<String> {
    let mut conn = proxy.my().await?;
    let row: Option<(String, String)> = conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_version'").await?;
    conn.disconnect().await?;
    Ok(row.map(|r| r.1).unwrap_or_default())
}

/// Both engines' sessions run over TLS to their servers, and the
/// console's `SHOW SERVERS` says so of each pooled connection.
async fn both_over_tls(proxy: &Proxy, what: &str) -> Result<()> {
    ensure!(
        pg_backend_tls(proxy).await?,
        "{what}: PostgreSQL backend connection without TLS"
    );
    let version = my_backend_tls(proxy).await?;
    ensure!(
        version.starts_with("TLS"),
        "{what}: MariaDB backend connection without TLS ({version:?})"
    );
    let servers = proxy.servers_tls().await?;
    for cluster in ["pg", "my"] {
        let tls: Vec<_> = servers.iter().filter(|(c, _)| c == cluster).map(|(_, t)| t).collect();
        ensure!(
            !tls.is_empty()
                && tls
                    .iter()
                    .all(|t| t.as_deref().is_some_and(|t| t.starts_with("TLSv1.") && t.contains('/'))),
            "{what}: SHOW SERVERS of {cluster}: {servers:?}"
        );
    }
    Ok(())
}

/// The error a PostgreSQL client gets (at login or at its first query);
/// a failure when both succeed.
pub async fn pg_refused(proxy: &Proxy) -> Result<String> {
    let client = match proxy.pg().await {
        Err(e) => return Ok(message(&e)),
        Ok(c) => c,
    };
    match client.simple_query("SELECT 1").await {
        Err(e) => Ok(db_message(&e)),
        Ok(_) => bail!("a PostgreSQL query ran"),
    }
}

/// The error a MariaDB client gets (at login or at its first query).
pub async fn my_refused(proxy: &Proxy) -> Result<String> {
    let mut conn = match proxy.my().await {
        Err(e) => return Ok(e.to_string()),
        Ok(c) => c,
    };
    match conn.query_drop("SELECT 1").await {
        Err(e) => Ok(e.to_string()),
        Ok(()) => bail!("a MariaDB query ran"),
    }
}

fn message(e: &anyhow::Error) -> String {
    match e.downcast_ref::<tokio_postgres::Error>() {
        Some(pg) => db_message(pg),
        None => format!("{e:#}"),
    }
}

fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_else(|| e.to_string())
}

/// Both engines' clients are refused with the proxy's own message, which
/// says nothing of TLS or certificates.
async fn both_refused(proxy: &Proxy, what: &str) -> Result<()> {
    for (engine, told) in [
        ("PostgreSQL", pg_refused(proxy).await?),
        ("MariaDB", my_refused(proxy).await?),
    ] {
        ensure!(
            UNREACHABLE.iter().any(|u| told.contains(u)),
            "{what}: the {engine} client was told {told:?}"
        );
        let lower = told.to_lowercase();
        for secret in ["certificate", "issuer", "tls", "ssl", "hba", "x509", "secure"] {
            ensure!(
                !lower.contains(secret),
                "{what}: the {engine} client was told why ({told:?})"
            );
        }
    }
    Ok(())
}

/// Waits (up to 10 s) until the captured log has a line with all of `words`.
async fn logged(ctx: &Ctx, words: &[&str]) -> Result<String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let text = ctx.log.text();
        if let Some(line) = text.lines().find(|l| words.iter().all(|w| l.contains(w))) {
            return Ok(line.to_owned());
        }
        if Instant::now() > until {
            bail!("no log line with {words:?} in:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `disable` is refused by servers that require TLS; every other mode
/// connects, over TLS, with the servers' CA.
fn each_mode_against_servers_that_require_tls(ctx: &Ctx) -> Result<()> {
    run(async {
        for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            let proxy = Proxy::start(ctx, &format!("mode-{mode}"), &tls(ctx, mode, ""), BackendUser::Super).await?;
            let checked = if mode == "disable" {
                both_refused(&proxy, mode).await
            } else {
                both_over_tls(&proxy, mode).await
            };
            proxy.stop().await?;
            checked?;
        }
        Ok(())
    })
}

/// `verify-ca` and `verify-full` with a CA that signed nothing the
/// servers present: refused; the client hears only that the server could
/// not be reached, the log names the mode and the unknown issuer.
/// `require` takes the same servers (it does not verify).
fn a_ca_that_did_not_sign_the_server_is_refused_and_only_the_log_says_why(ctx: &Ctx) -> Result<()> {
    run(async {
        let wrong = |mode: &str| {
            format!(
                "backend_tls = \"{mode}\"\nbackend_tls_ca = \"{}\"\n",
                ctx.other_ca.display()
            )
        };
        for mode in ["verify-ca", "verify-full"] {
            let proxy = Proxy::start(ctx, &format!("wrong-ca-{mode}"), &wrong(mode), BackendUser::Super).await?;
            let checked = both_refused(&proxy, mode).await;
            proxy.stop().await?;
            checked?;
            for server in [ctx.cluster.pg_primary(), ctx.cluster.mysql_primary()] {
                let addr = server.context("no server")?.addr();
                let line = logged(ctx, &[&addr, mode, "UnknownIssuer"]).await?;
                ensure!(line.contains("WARN"), "{line}");
            }
        }
        let proxy = Proxy::start(ctx, "wrong-ca-require", &wrong("require"), BackendUser::Super).await?;
        let checked = both_over_tls(&proxy, "require with another CA").await;
        proxy.stop().await?;
        checked
    })
}

/// With `backend_tls_server_name` naming a host the servers' certificate
/// does not name: `verify-full` refuses (and logs the name), `verify-ca`
/// connects.
fn a_host_name_the_certificate_does_not_name_is_refused_by_verify_full_only(ctx: &Ctx) -> Result<()> {
    run(async {
        let name = "backend_tls_server_name = \"db.example.com\"";
        let proxy = Proxy::start(ctx, "name-full", &tls(ctx, "verify-full", name), BackendUser::Super).await?;
        let checked = both_refused(&proxy, "verify-full, another name").await;
        proxy.stop().await?;
        checked?;
        for server in [ctx.cluster.pg_primary(), ctx.cluster.mysql_primary()] {
            let addr = server.context("no server")?.addr();
            logged(ctx, &[&addr, "verify-full", "not valid for name", "db.example.com"]).await?;
        }
        let proxy = Proxy::start(ctx, "name-ca", &tls(ctx, "verify-ca", name), BackendUser::Super).await?;
        let checked = both_over_tls(&proxy, "verify-ca, another name").await;
        proxy.stop().await?;
        checked
    })
}

/// The certificate user: PostgreSQL lets it in by the certificate alone,
/// MariaDB by password and certificate. With `backend_tls_cert` and
/// `backend_tls_key` the tenants' sessions run as that user; without
/// them they are refused.
fn a_client_certificate_logs_in_where_the_server_requires_one(ctx: &Ctx) -> Result<()> {
    run(async {
        let (cert, key) = &ctx.client;
        let with_cert = tls(
            ctx,
            "verify-full",
            &format!(
                "backend_tls_cert = \"{}\"\nbackend_tls_key = \"{}\"",
                cert.display(),
                key.display()
            ),
        );
        let proxy = Proxy::start(ctx, "mtls", &with_cert, BackendUser::Certificate).await?;
        let checked = async {
            let pg = proxy.pg().await?;
            let user: String = pg.query_one("SELECT current_user::text", &[]).await?.get(0);
            ensure!(user == TLS_CLIENT_CN, "PostgreSQL session as {user}");
            let mut my = proxy.my().await?;
            let user: Option<String> = my.query_first("SELECT CURRENT_USER()").await?;
            ensure!(
                user.as_deref() == Some(&format!("{TLS_CLIENT_CN}@%")),
                "MariaDB session as {user:?}"
            );
            my.disconnect().await?;
            both_over_tls(&proxy, "mutual TLS").await
        }
        .await;
        proxy.stop().await?;
        checked?;
        let proxy = Proxy::start(ctx, "mtls-none", &tls(ctx, "verify-full", ""), BackendUser::Certificate).await?;
        let checked = both_refused(&proxy, "no client certificate").await;
        proxy.stop().await?;
        checked
    })
}

/// A cancel of a PostgreSQL query and a `KILL QUERY` of a MariaDB one,
/// sent by clients to the proxy, reach servers that take nothing but TLS
/// (the `KILL` needs a login of its own there).
fn cancels_reach_servers_that_require_tls(ctx: &Ctx) -> Result<()> {
    run(async {
        let proxy = Proxy::start(ctx, "cancel", &tls(ctx, "verify-full", ""), BackendUser::Super).await?;
        let checked = async {
            crate::spare::cancel_a_sleep(proxy.pg().await?).await?;

            let mut sleeper = proxy.my().await?;
            let id: u32 = sleeper.query_first("SELECT CONNECTION_ID()").await?.context("no id")?;
            let sleeping = tokio::spawn(async move { sleeper.query_first::<i64, _>("SELECT SLEEP(30)").await });
            tokio::time::sleep(Duration::from_millis(500)).await;
            let mut killer = proxy.my().await?;
            killer.query_drop(format!("KILL QUERY {id}")).await?;
            let started = Instant::now();
            let ended = tokio::time::timeout(Duration::from_secs(10), sleeping)
                .await
                .context("the killed MariaDB query went on")??;
            // SLEEP() interrupted returns 1 (or the server reports the interruption).
            ensure!(
                matches!(ended, Ok(Some(1)) | Err(_)),
                "the killed query ended with {ended:?} after {:?}",
                started.elapsed()
            );
            killer.disconnect().await?;
            Ok(())
        }
        .await;
        proxy.stop().await?;
        checked
    })
}
