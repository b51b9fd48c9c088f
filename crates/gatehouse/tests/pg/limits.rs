//! Limits: a share of the server's max_connections, init_query, client idle
//! timeout, server lifetime, per-tenant client and backend connection
//! limits, statement mode.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("limits::init_query_idle_timeout_and_lifetime", init_idle_lifetime),
        ("limits::per_tenant_client_limit", tenant_limit),
        ("limits::statement_mode_refuses_transaction_blocks", statement_mode),
        ("limits::per_tenant_backend_connections", tenant_backend_cap),
        (
            "limits::a_lease_waiting_for_the_backend_share_gets_the_place_another_pool_gives_back",
            share_handover,
        ),
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

fn tenant_backend_cap(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // bea may hold one backend connection at a time (the pool has 10).
        let a = ctx.client("rw", "bea", "bea-pw", "app1").await?;
        let b = ctx.client("rw", "bea", "bea-pw", "app1").await?;
        let other = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        a.batch_execute("BEGIN; SELECT 1").await?;
        // Another tenant is not held up.
        let quick = tokio::time::timeout(Duration::from_secs(1), other.simple_query("SELECT 1")).await;
        ensure!(quick.is_ok_and(|r| r.is_ok()), "another tenant waited for bea's cap");
        // bea's second session waits the borrow timeout (3 s), then 53300.
        let started = std::time::Instant::now();
        let err = b
            .simple_query("SELECT 1")
            .await
            .err()
            .context("second backend connection lent")?;
        ensure!(
            started.elapsed() >= Duration::from_millis(2500),
            "refused without waiting"
        );
        ensure!(err.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{err:?}");
        let msg = crate::db_message(&err);
        ensure!(msg.contains("limit of 1 backend connections for user \"bea\""), "{msg}");
        a.batch_execute("COMMIT").await?;
        // With the slot free again, bea's sessions go on one at a time.
        let c = ctx.client("rw", "bea", "bea-pw", "app1").await?;
        for _ in 0..3 {
            let (x, y) = tokio::join!(a.simple_query("SELECT 1"), c.simple_query("SELECT 2"));
            x?;
            y?;
        }
        Ok(())
    })
}

/// Connections the "pct" cluster may open to its backend: 1 % of the
/// test server's `max_connections` (400).
const PCT_CAP: usize = 4;

/// The "pct" cluster may open [`PCT_CAP`] connections to its backend, with
/// a borrow timeout of 1 s. Alice's sessions (pool app1) hold them all in
/// open transactions; bob (pool app2) waits for a place; one of alice's
/// transactions ends 200 ms later. Its connection must not stay idle in
/// alice's pool while bob waits: it is closed and bob's lease opens a
/// connection in its place, well before the timeout.
fn share_handover(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // Bob logs in first: a login may need a backend connection too.
        let b = ctx.client("pct", "bob", "bob-pw", "app2").await?;
        let mut alice = Vec::new();
        for _ in 0..PCT_CAP {
            let c = ctx.client("pct", "alice", "alice-pw", "app1").await?;
            c.batch_execute("BEGIN; SELECT 1")
                .await
                .context("alice's transaction")?;
            alice.push(c);
        }
        let waiting = tokio::spawn(async move { b.simple_query("SELECT current_database()").await.map(drop) });
        tokio::time::sleep(Duration::from_millis(200)).await;
        ensure!(
            !waiting.is_finished(),
            "bob's lease did not wait: the share is not full"
        );
        alice[0].batch_execute("COMMIT").await.context("alice's commit")?;
        waiting
            .await?
            .context("bob's lease was not given the place alice's pool gave back")?;
        // Alice's other sessions still hold their connections; her next
        // transaction gets a place again once bob's has ended.
        for c in &alice[1..] {
            c.batch_execute("COMMIT").await.context("alice's other commits")?;
        }
        alice[0].simple_query("SELECT 1").await.context("alice's next")?;
        Ok(())
    })
}
