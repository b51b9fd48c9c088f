//! A backend connection changes hands only when nothing of its last client
//! can still reach it: a cancel on its way to the server (PostgreSQL's
//! postmaster forks and signals the backend twice), or an extended-query
//! exchange that failed and waits for its Sync. Each case runs a proxy of
//! its own whose transaction pool ("tx") has one connection, so the next
//! client always gets the same backend connection.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use bytes::BytesMut;
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::raw::Raw;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("cancel::a_late_cancel_reaches_no_other_client", late_cancel),
        (
            "cancel::a_failed_extended_query_keeps_its_connection_until_sync",
            unsynced_error,
        ),
        (
            "cancel::a_cancel_reaches_a_statement_waiting_for_a_connection",
            waiting_cancel,
        ),
    ]
}

/// A proxy of the test's own, whose "tx" pool has one connection.
pub(crate) struct OnePool {
    pub(crate) tx: SocketAddr,
    own: crate::own::Own,
}

impl OnePool {
    pub(crate) async fn start(ctx: &Ctx) -> Result<OnePool> {
        let from = "pool = { size = 2, borrow_timeout = \"10s\" }";
        let settings = crate::reload::settings(ctx, |t| {
            t.replace(from, "pool = { size = 1, borrow_timeout = \"10s\" }")
        })?;
        let own = crate::own::Own::start(settings).await?;
        Ok(OnePool {
            tx: own.addr("tx")?,
            own,
        })
    }

    async fn client(&self) -> Result<tokio_postgres::Client> {
        self.own.client("tx").await
    }

    pub(crate) async fn stop(self) -> Result<()> {
        self.own.stop().await
    }
}

/// Client A's short query is cancelled at moments swept across its end,
/// while client B waits for the one connection with a query of its own: a
/// cancel that lands after A's query finished must find the connection
/// still A's (idle), never B's statement.
fn late_cancel(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OnePool::start(ctx).await?;
        let result = async {
            let a = std::sync::Arc::new(own.client().await?);
            let b = std::sync::Arc::new(own.client().await?);
            let token = a.cancel_token();
            let (mut a_cancelled, mut a_finished) = (0, 0);
            for step in 0..80u64 {
                let a_query = tokio::spawn({
                    let a = a.clone();
                    async move { a.simple_query("SELECT pg_sleep(0.02)").await }
                });
                tokio::time::sleep(Duration::from_millis(2)).await;
                let b_query = tokio::spawn({
                    let b = b.clone();
                    async move { b.query_one("SELECT pg_sleep(0.03), 7", &[]).await }
                });
                // From well inside A's query to just past its end.
                tokio::time::sleep(Duration::from_micros(8_000 + step * 200)).await;
                token.cancel_query(tokio_postgres::NoTls).await?;
                match a_query.await? {
                    Ok(_) => a_finished += 1,
                    Err(e) if e.code() == Some(&SqlState::QUERY_CANCELED) => a_cancelled += 1,
                    Err(e) => bail!("step {step}: A failed otherwise: {e}"),
                }
                let row = b_query
                    .await?
                    .with_context(|| format!("step {step}: B's query was hit by A's cancel"))?;
                ensure!(row.get::<_, i32>(1) == 7, "step {step}: B's answer");
            }
            ensure!(a_cancelled > 0, "no cancel landed in A's query");
            eprintln!("late cancel: A cancelled {a_cancelled} times, finished first {a_finished} times");
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}

/// A client's Parse fails and it has not sent Sync yet: the server skips
/// everything up to that Sync, so the connection stays the client's; B's
/// query runs once A's Sync came.
fn unsynced_error(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OnePool::start(ctx).await?;
        let result = async {
            // B logs in first: a login may need the connection too.
            let b = own.client().await?;
            let mut a = Raw::connect(own.tx).await?;
            a.login(&[("user", "alice"), ("database", "app1")], "alice-pw").await?;
            let mut out = BytesMut::new();
            gatehouse_proto_pg::extended::put_parse(&mut out, "", "SELECT * FROM no_such_table", &[0, 0]);
            gatehouse_proto_pg::messages::put_message(&mut out, b'H', |_| {});
            a.send(&out).await?;
            let e = a.expect_error(Duration::from_secs(10)).await?;
            ensure!(e.code == SqlState::UNDEFINED_TABLE.code(), "{e:?}");
            let b_query = tokio::spawn(async move { b.query_one("SELECT 7", &[]).await });
            // Whatever B does meanwhile, A's Sync ends A's exchange.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut sync = BytesMut::new();
            gatehouse_proto_pg::extended::put_sync(&mut sync);
            a.send(&sync).await?;
            loop {
                let m = a.read(Duration::from_secs(10)).await?.context("A closed")?;
                match m[0] {
                    b'Z' => break,
                    b'E' => bail!("A: {:?}", gatehouse_proto_pg::messages::parse_error(&m)?),
                    _ => {}
                }
            }
            let row = tokio::time::timeout(Duration::from_secs(10), b_query)
                .await
                .context("B never got the connection")???;
            ensure!(row.get::<_, i32>(0) == 7);
            ensure!(a.query("SELECT 'a again'").await? == ["a again"]);
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}

/// H holds the one connection in a transaction; W's statements wait for
/// it. A cancel for W ends the wait: W's statement answers 57014 without
/// running (a simple query, then one in the extended protocol), and W's
/// session goes on once H is done.
fn waiting_cancel(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OnePool::start(ctx).await?;
        let result = async {
            let h = own.client().await?;
            let w = std::sync::Arc::new(own.client().await?);
            h.batch_execute("BEGIN; SELECT 1").await?;
            let token = w.cancel_token();
            for extended in [false, true] {
                let waiting = tokio::spawn({
                    let w = w.clone();
                    async move {
                        if extended {
                            w.query_one("SELECT $1::int", &[&42i32]).await.map(|_| ())
                        } else {
                            w.simple_query("SELECT 42").await.map(|_| ())
                        }
                    }
                });
                tokio::time::sleep(Duration::from_millis(300)).await;
                token.cancel_query(tokio_postgres::NoTls).await?;
                let e = waiting.await?.err().context("the waiting statement ran")?;
                ensure!(
                    e.code() == Some(&SqlState::QUERY_CANCELED),
                    "extended={extended}: {e} {:?}",
                    e.as_db_error()
                );
            }
            h.batch_execute("COMMIT").await?;
            let n: i32 = w.query_one("SELECT $1::int", &[&7i32]).await?.get(0);
            ensure!(n == 7, "W after its cancels: {n}");
            ensure!(
                crate::txn::text(&w, "SELECT 'w again'").await? == ["w again"],
                "W's simple query after its cancels"
            );
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}
