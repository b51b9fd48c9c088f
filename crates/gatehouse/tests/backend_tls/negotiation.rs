//! How TLS is asked for, on the spare servers ([`crate::spare`]): direct
//! TLS to PostgreSQL 17 (`backend_tls_negotiation = "direct"`, libpq's
//! `sslnegotiation=direct`: the handshake straight after the TCP
//! connection, with no SSLRequest), refused by the binary's PostgreSQL 15;
//! and `prefer` going plain after a handshake that failed with a server
//! that offered TLS, on both engines, while `require` is refused.

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::Cluster;
use mysql_async::prelude::Queryable;

use crate::spare::{Engine, cancel_a_sleep, negotiations, reconfigure_pg, refused, with_spare};
use crate::{BackendUser, Ctx, Proxy};

fn run(f: impl std::future::Future<Output = Result<()>>) -> Result<()> {
    gatehouse_testkit::trials::runtime()?.block_on(f)
}

pub fn direct_negotiation_reaches_postgresql_17_and_is_refused_by_a_server_without_it(ctx: &Ctx) -> Result<()> {
    with_spare(ctx, |spare| direct(ctx, spare))
}

fn direct(ctx: &Ctx, spare: &Cluster) -> Result<()> {
    let ca = spare.tls_ca().context("no CA")?;
    let before = negotiations(spare)?;
    let tls = |ca: &std::path::Path| {
        format!(
            "backend_tls = \"verify-full\"\nbackend_tls_ca = \"{}\"\nbackend_tls_negotiation = \"direct\"\n",
            ca.display()
        )
    };
    run(async {
        // The MariaDB cluster beside takes no direct negotiation, so this
        // proxy has the PostgreSQL one only.
        let proxy = Proxy::start_pg_only(ctx, "direct-17", spare, &tls(&ca)).await?;
        let checked = async {
            let client = proxy.pg().await?;
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
        let (direct, requested) = negotiations(spare)?;
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
        Ok(())
    })?;

    // PostgreSQL 15 takes a ClientHello for a broken startup packet.
    run(refused_pg_only(ctx, &tls(&ctx.ca)))
}

/// [`refused`] on the binary's PostgreSQL 15, by a proxy without MariaDB.
async fn refused_pg_only(ctx: &Ctx, tls: &str) -> Result<()> {
    let proxy = Proxy::start_pg_only(ctx, "direct-15", &ctx.cluster, tls).await?;
    let told = crate::cases::pg_refused(&proxy).await;
    proxy.stop().await?;
    let told = told?;
    ensure!(
        crate::cases::UNREACHABLE.iter().any(|u| told.contains(u)) && !told.to_lowercase().contains("tls"),
        "the client was told {told:?}"
    );
    let addr = ctx.cluster.pg_primary().context("no PostgreSQL")?.addr();
    let log = ctx.log.text();
    ensure!(
        log.lines()
            .any(|l| l.contains("backend_tls_negotiation = \"direct\"") && l.contains(&addr)),
        "no log line with {addr} names the direct negotiation: {log}"
    );
    Ok(())
}

pub fn prefer_goes_plain_after_a_failed_handshake_and_require_is_refused(ctx: &Ctx) -> Result<()> {
    with_spare(ctx, |spare| {
        // TLS 1.0 and 1.1 only: PostgreSQL answers the SSLRequest with `S`
        // and MariaDB offers CLIENT_SSL, and every handshake fails (rustls
        // speaks 1.2 and 1.3; MariaDB's OpenSSL 3 serves neither, and
        // answers with an alert).
        reconfigure_pg(
            spare,
            &[
                "ALTER SYSTEM SET ssl_min_protocol_version = 'TLSv1'",
                "ALTER SYSTEM SET ssl_max_protocol_version = 'TLSv1.1'",
            ],
        )?;
        let my = spare.mysql_primary().context("no MariaDB")?.name.clone();
        spare.stop(&my)?;
        spare.restart_with(&my, &["--tls-version=TLSv1.1"])?;
        let checked = prefer(ctx, spare);
        reconfigure_pg(
            spare,
            &[
                "ALTER SYSTEM RESET ssl_min_protocol_version",
                "ALTER SYSTEM RESET ssl_max_protocol_version",
            ],
        )?;
        spare.stop(&my)?;
        spare.restart(&my)?;
        checked
    })
}

fn prefer(ctx: &Ctx, spare: &Cluster) -> Result<()> {
    run(async {
        let proxy = Proxy::start_on(ctx, "prefer", spare, "backend_tls = \"prefer\"\n", BackendUser::Super).await?;
        let plain = async {
            let client = proxy.pg().await?;
            let row = client
                .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                .await?;
            ensure!(!row.get::<_, bool>(0), "prefer: the connection is under TLS");
            // Three transactions at once hold three pooled connections,
            // each opened after a failed handshake: the log has one line
            // for all of them (once a minute per server).
            let held = [proxy.pg().await?, proxy.pg().await?, proxy.pg().await?];
            for c in &held {
                c.batch_execute("BEGIN; SELECT 1").await?;
            }
            let pooled = proxy.servers_tls().await?;
            ensure!(
                pooled.iter().filter(|(cluster, _)| cluster == "pg").count() >= 3,
                "prefer: SHOW SERVERS {pooled:?}"
            );
            drop(held);
            // A cancel opens its connection the same way.
            cancel_a_sleep(client).await?;
            let mut conn = proxy.my().await?;
            let row: Option<(String, String)> = conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_version'").await?;
            conn.disconnect().await?;
            let version = row.map(|r| r.1).unwrap_or_default();
            ensure!(version.is_empty(), "prefer: the MariaDB connection is under {version}");
            // The console shows which connections went plain.
            let servers = proxy.servers_tls().await?;
            ensure!(
                servers.len() >= 2 && servers.iter().all(|(_, tls)| tls.is_none()),
                "prefer: SHOW SERVERS {servers:?}"
            );
            Ok(())
        }
        .await;
        proxy.stop().await?;
        plain?;
        let log = ctx.log.text();
        for server in [spare.pg_primary(), spare.mysql_primary()] {
            let addr = server.context("a server is missing")?.addr();
            let lines = log
                .lines()
                .filter(|l| l.contains("connecting again without TLS") && l.contains(&addr))
                .count();
            ensure!(
                lines == 1,
                "{lines} log lines (not one) say prefer went plain with {addr}: {log}"
            );
        }
        let require = "backend_tls = \"require\"\n";
        let why = "backend_tls = \"require\": TLS handshake";
        refused(ctx, "require-pg", spare, Engine::Pg, require, why).await?;
        refused(ctx, "require-my", spare, Engine::My, require, why).await
    })
}
