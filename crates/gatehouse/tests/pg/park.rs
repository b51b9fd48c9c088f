//! Parked sessions ([`gatehouse::park`]): an idle transaction-pooled client
//! gives up its task and socket registration, and comes back with all its
//! state when it speaks; its idle timeout and shutdown still reach it; TLS
//! sessions stay tasks. Each case runs its own proxy (same configuration:
//! `park_idle_after = "100ms"`), so the lot's count is its own.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::raw::Raw;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("park::parked_sessions_resume_with_their_state", resume_with_state),
        ("park::idle_timeout_reaches_a_parked_session", idle_timeout),
        ("park::shutdown_reaches_a_parked_session", shutdown),
        ("park::tls_sessions_stay_tasks", tls_stays),
    ]
}

/// A proxy of its own: its endpoints' addresses, its PostgreSQL core, the
/// handle of `run`, and the sender that stops it.
struct Own {
    app_addrs: Vec<(String, SocketAddr)>,
    admin: SocketAddr,
    core: std::sync::Arc<gatehouse::core::Core<gatehouse::engine::pg::PgEngine>>,
    proxy: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Own {
    async fn start(ctx: &Ctx) -> Result<Own> {
        let settings = crate::reload::settings(ctx, |t| t)?;
        ensure!(
            settings.proxy.park_idle_after == Some(Duration::from_millis(100)),
            "the test configuration parks after 100 ms"
        );
        let app = gatehouse::App::bind(settings).await?;
        let app_addrs = ["tx", "life", "tls_only"]
            .iter()
            .map(|n| Ok((n.to_string(), app.local_addr(n).context("endpoint")?)))
            .collect::<Result<Vec<_>>>()?;
        let core = app.pg_core();
        let admin = app.admin_addr().context("no admin listener")?;
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        Ok(Own {
            app_addrs,
            admin,
            core,
            proxy,
            stop,
        })
    }

    fn addr(&self, endpoint: &str) -> SocketAddr {
        self.app_addrs
            .iter()
            .find(|(n, _)| n == endpoint)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("{endpoint}"))
    }

    fn parked(&self) -> usize {
        self.core.parking.as_ref().map_or(0, |lot| lot.len())
    }

    /// Waits until `n` sessions are parked.
    async fn until_parked(&self, n: usize) -> Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.parked() != n {
            ensure!(
                tokio::time::Instant::now() < deadline,
                "{} sessions parked, expected {n}",
                self.parked()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(15), self.proxy)
            .await
            .context("run() did not return")???;
        Ok(())
    }
}

async fn client(own: &Own, endpoint: &str) -> Result<tokio_postgres::Client> {
    let a = own.addr(endpoint);
    let info = format!(
        "host={} port={} user=alice password=alice-pw dbname=app1 sslmode=disable",
        a.ip(),
        a.port()
    );
    let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

fn resume_with_state(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(ctx).await?;
        let c = client(&own, "tx").await?;
        c.batch_execute("SET search_path = pg_catalog, public; SET application_name = 'parked-app'")
            .await?;
        let stmt = c.prepare("SELECT $1::int + 1").await?;
        ensure!(c.query_one(&stmt, &[&1i32]).await?.get::<_, i32>(0) == 2);
        own.until_parked(1).await?;
        let metrics = gatehouse_testkit::http::request(own.admin, "GET", "/metrics", Some(&ctx.admin_token))?.body;
        ensure!(
            crate::admin::sample(&metrics, "gatehouse_parked_sessions", &[]) == Some(1.0),
            "the metrics do not show the parked session"
        );
        // Parked and back, twice: the statement and the settings came along.
        for round in 0..2 {
            let n: i32 = c.query_one(&stmt, &[&41i32]).await?.get(0);
            ensure!(n == 42, "round {round}: {n}");
            let row = c
                .query_one(
                    "SELECT current_setting('search_path'), current_setting('application_name')",
                    &[],
                )
                .await?;
            ensure!(
                row.get::<_, String>(0) == "pg_catalog, public",
                "round {round}: search_path lost"
            );
            ensure!(
                row.get::<_, String>(1) == "parked-app",
                "round {round}: application_name lost"
            );
            own.until_parked(1).await?;
        }
        // A transaction opened after a resume works as usual.
        c.batch_execute("BEGIN; CREATE TEMP TABLE t_park(x int) ON COMMIT DROP; COMMIT")
            .await?;
        drop(c);
        own.until_parked(0).await?;
        own.stop().await
    })
}

fn idle_timeout(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(ctx).await?;
        // "life" has idle_client_timeout = "2s".
        let mut raw = Raw::connect(own.addr("life")).await?;
        raw.login(&[("user", "alice"), ("database", "app1")], "alice-pw")
            .await?;
        let logged_in = tokio::time::Instant::now();
        own.until_parked(1).await?;
        let f = raw.expect_error(Duration::from_secs(5)).await?;
        let after = logged_in.elapsed();
        ensure!(f.code == SqlState::IDLE_SESSION_TIMEOUT.code(), "{f:?}");
        ensure!(
            after >= Duration::from_millis(1500),
            "timed out after {after:?}, before its 2 s"
        );
        ensure!(raw.closed_within(Duration::from_secs(5)).await);
        own.until_parked(0).await?;
        own.stop().await
    })
}

fn shutdown(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(ctx).await?;
        let mut raw = Raw::connect(own.addr("tx")).await?;
        raw.login(&[("user", "alice"), ("database", "app1")], "alice-pw")
            .await?;
        ensure!(raw.query("SELECT 'before'").await? == ["before"]);
        own.until_parked(1).await?;
        let addr = own.addr("tx");
        crate::session::shutdown_ends(&mut raw, own.stop, own.proxy, addr).await
    })
}

fn tls_stays(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(ctx).await?;
        let a = own.addr("tls_only");
        let info = format!(
            "host=localhost hostaddr={} port={} user=alice password=alice-pw dbname=app1 sslmode=require",
            a.ip(),
            a.port()
        );
        let (tls, conn) = tokio_postgres::connect(&info, crate::tokens::tls_connector(ctx)?).await?;
        tokio::spawn(conn);
        let plain = client(&own, "tx").await?;
        plain.simple_query("SELECT 1").await?;
        tls.simple_query("SELECT 1").await?;
        // The plain session parks; the TLS one, idle as long, does not.
        own.until_parked(1).await?;
        tokio::time::sleep(Duration::from_millis(400)).await;
        ensure!(own.parked() == 1, "{} parked", own.parked());
        let n: i64 = tls.query_one("SELECT 7::bigint", &[]).await?.get(0);
        ensure!(n == 7);
        drop((tls, plain));
        own.until_parked(0).await?;
        own.stop().await
    })
}
