//! Limits: a share of the server's max_connections, init_query, client idle
//! timeout, server lifetime, per-tenant client limits, statement mode.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("limits::share_of_server_max_connections", server_share),
        ("limits::init_query_idle_timeout_and_lifetime", init_idle_lifetime),
        ("limits::per_tenant_client_limit", tenant_limit),
        ("limits::statement_mode_refuses_transaction_blocks", statement_mode),
    ]
}

fn server_share(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // "pct": max_connections_percent = 1 of the server's max_connections.
        let probe = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let max: String = probe.query_one("SHOW max_connections", &[]).await?.get(0);
        let cap = (max.parse::<usize>()? / 100).max(1);
        let mut holders = Vec::new();
        for _ in 0..cap {
            let c = ctx.client("pct", "alice", "alice-pw", "app1").await?;
            c.batch_execute("BEGIN; SELECT 1").await?;
            holders.push(c);
        }
        // The extra client needs a backend connection to log in (for the
        // server's parameters) or for its first query: either way it waits
        // for the borrow timeout and is told which limit it hit.
        let started = std::time::Instant::now();
        let err = match ctx.try_client("pct", "alice", "alice-pw", "app1").await {
            Err(e) => e,
            Ok(extra) => extra
                .simple_query("SELECT 1")
                .await
                .err()
                .context("a backend connection beyond the cap was opened")?,
        };
        ensure!(err.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{err:?}");
        ensure!(crate::db_message(&err).contains("max_connections_percent"), "{err:?}");
        ensure!(
            started.elapsed() >= Duration::from_millis(900),
            "gave up before the borrow timeout"
        );
        for h in &holders {
            h.batch_execute("COMMIT").await?;
        }
        let again = ctx.client("pct", "alice", "alice-pw", "app1").await?;
        again.simple_query("SELECT 1").await?;
        Ok(())
    })
}

fn init_idle_lifetime(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = ctx.client("life", "alice", "alice-pw", "app1").await?;
        let work_mem: String = c.query_one("SHOW work_mem", &[]).await?.get(0);
        ensure!(work_mem == "3MB", "init_query not run: work_mem = {work_mem}");
        let pid1: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        // server_lifetime is 1 s: the connection is not reused after that.
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let pid2: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        ensure!(pid1 != pid2, "a connection older than server_lifetime was reused");
        // idle_client_timeout is 2 s.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let err = c
            .simple_query("SELECT 1")
            .await
            .err()
            .context("idle client was not disconnected")?;
        ensure!(
            err.code() == Some(&SqlState::IDLE_SESSION_TIMEOUT) || err.is_closed(),
            "{err:?}"
        );
        Ok(())
    })
}

fn tenant_limit(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let a = ctx.client("rw", "erin", "erin-pw", "app1").await?;
        let b = ctx.client("rw", "erin", "erin-pw", "app1").await?;
        let err = match ctx.try_client("rw", "erin", "erin-pw", "app1").await {
            Ok(_) => anyhow::bail!("a third connection for a tenant limited to two"),
            Err(e) => e,
        };
        ensure!(err.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{err:?}");
        ensure!(crate::db_message(&err).contains("tenant"), "{err:?}");
        // Other tenants are unaffected.
        ctx.client("rw", "alice", "alice-pw", "app1")
            .await?
            .simple_query("SELECT 1")
            .await?;
        drop(a);
        tokio::time::sleep(Duration::from_millis(200)).await;
        ctx.client("rw", "erin", "erin-pw", "app1")
            .await?
            .simple_query("SELECT 1")
            .await?;
        b.simple_query("SELECT 1").await?;
        Ok(())
    })
}

fn statement_mode(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = ctx.client("stmt", "alice", "alice-pw", "app1").await?;
        let n: i32 = c.query_one("SELECT 41 + $1::int", &[&1i32]).await?.get(0);
        ensure!(n == 42);
        // The transaction block ends the session with 0A000 once BEGIN completes.
        let _ = c.batch_execute("BEGIN").await;
        let err = c
            .simple_query("SELECT 1")
            .await
            .err()
            .context("transaction block accepted in statement mode")?;
        ensure!(
            err.code() == Some(&SqlState::FEATURE_NOT_SUPPORTED) || err.is_closed(),
            "{err:?}"
        );
        Ok(())
    })
}
