//! Limits: a share of the server's max_connections, init_query, client idle
//! timeout, server lifetime, per-tenant client limits, statement mode.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("limits::init_query_idle_timeout_and_lifetime", init_idle_lifetime),
        ("limits::per_tenant_client_limit", tenant_limit),
        ("limits::statement_mode_refuses_transaction_blocks", statement_mode),
    ]
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
        // With its client gone and its connections past their lifetime, the
        // pool itself is dropped by the sweep.
        let life_pools = || {
            ctx.core
                .pools
                .all()
                .iter()
                .filter(|p| p.key().cluster == "life")
                .count()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while life_pools() > 0 && std::time::Instant::now() < deadline {
            ctx.core.pools.sweep();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ensure!(life_pools() == 0, "an unused pool was kept");
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
