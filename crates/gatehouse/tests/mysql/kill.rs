//! `KILL [CONNECTION] <id>` and COM_PROCESS_KILL through the proxy: the
//! killed session is closed like the server closes one (no reply, busy or
//! idle), its running query is cancelled, its transaction rolled back, and
//! its backend connection is neither leaked nor handed on dirty. Other
//! tenants' ids are unknown threads; one's own id answers as the server does.
//! The "kill" endpoint has a cluster and pool of its own (size 2), so pool
//! counts here are not disturbed by other cases.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;
use tokio::io::AsyncWriteExt;

use crate::Ctx;
use crate::queries::{err_code, raw_login_id, read_raw};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("kill::kill_connection_ends_an_idle_session", kill_idle),
        ("kill::kill_connection_stops_a_running_transaction", kill_busy),
        (
            "kill::kill_connection_other_tenant_own_id_and_com_process_kill",
            kill_edges,
        ),
        ("kill::a_late_kill_query_reaches_no_other_client", late_kill_query),
        (
            "kill::connection_id_processlist_and_kill_share_one_id_space",
            one_id_space,
        ),
        (
            "kill::kill_query_reaches_a_statement_waiting_for_a_connection",
            waiting_kill_query,
        ),
    ]
}

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

/// `CONNECTION_ID()` (text and prepared), `SHOW PROCESSLIST` and `KILL`
/// agree: the id is the one the handshake gave, whichever backend
/// connection runs the statement; the list holds this tenant's sessions
/// only; the id it lists for another session is the one `KILL` ends.
fn one_id_space(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut a = ctx.conn("kill", "alice", "alice-pw", "app1").await?;
        let mut b = ctx.conn("kill", "alice", "alice-pw", "app1").await?;
        let other = ctx.conn("kill", "bob", "bob-pw", "app2").await?;
        let said: Option<u64> = a.query_first("SELECT CONNECTION_ID()").await?;
        ensure!(said == Some(u64::from(a.id())), "{said:?} vs handshake id {}", a.id());
        let prepared: Option<u64> = a.exec_first("SELECT CONNECTION_ID() + ?", (0,)).await?;
        ensure!(prepared == Some(u64::from(a.id())), "prepared: {prepared:?}");
        let b_said: Option<u64> = b.query_first("select connection_id()").await?;
        ensure!(b_said == Some(u64::from(b.id())), "{b_said:?}");
        let other_id = other.id();

        let rows: Vec<mysql_async::Row> = a.query("SHOW PROCESSLIST").await?;
        let listed: Vec<(u64, String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.get::<u64, _>("Id").unwrap_or_default(),
                    r.get::<String, _>("User").unwrap_or_default(),
                    r.get::<String, _>("Command").unwrap_or_default(),
                )
            })
            .collect();
        ensure!(
            listed
                .iter()
                .any(|(id, user, _)| *id == u64::from(a.id()) && user == "alice"),
            "{listed:?}"
        );
        ensure!(
            listed
                .iter()
                .any(|(id, _, cmd)| *id == u64::from(b.id()) && cmd == "Sleep"),
            "{listed:?}"
        );
        ensure!(
            listed.iter().all(|(id, ..)| *id != u64::from(other_id)),
            "another tenant listed: {listed:?}"
        );
        let full: Vec<mysql_async::Row> = a.query("SHOW FULL PROCESSLIST").await?;
        ensure!(full.len() == rows.len());

        // The id the list gives ends that session.
        a.query_drop(format!("KILL {}", b.id())).await?;
        let after = tokio::time::timeout(Duration::from_secs(5), b.query_drop("SELECT 1"))
            .await
            .context("the killed session hung")?;
        ensure!(after.as_ref().is_err_and(connection_gone), "{after:?}");
        Ok(())
    })
}

/// What a client of a killed connection sees: the connection closed (or
/// ER_CONNECTION_KILLED, which the server sends on one's own id).
fn connection_gone(e: &mysql_async::Error) -> bool {
    matches!(
        e,
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed)
    ) || server_code(e) == Some(1927)
}

/// Sessions ended by a `KILL` so far, from the proxy's error stats.
fn terminated(ctx: &Ctx) -> u64 {
    ctx.core
        .stats
        .errors()
        .get(&("client", "terminated"))
        .copied()
        .unwrap_or(0)
}

/// (idle, leased) backend connections of the kill cluster's pool for `db`.
fn kill_pool(ctx: &Ctx, db: &str) -> (usize, usize) {
    ctx.core
        .pools
        .all()
        .iter()
        .filter(|p| p.key().cluster == "mykill" && p.key().database == db)
        .fold((0, 0), |(i, l), p| (i + p.idle_count(), l + p.leased_count()))
}

/// Waits (up to 10 s) until the pool for `db` lends nothing.
async fn until_nothing_leased(ctx: &Ctx, db: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while kill_pool(ctx, db).1 != 0 {
        ensure!(
            Instant::now() < deadline,
            "a backend connection stayed leased: {:?}",
            kill_pool(ctx, db)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn kill_idle(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let before = terminated(ctx);
        let mut killer = ctx.conn("kill", "bob", "bob-pw", "app2").await?;
        // Idle outside a transaction (it holds no backend connection).
        let mut idle = ctx.conn("kill", "bob", "bob-pw", "app2").await?;
        idle.query_drop("SELECT 1").await?;
        killer.query_drop(format!("KILL {}", idle.id())).await?;
        let e = idle
            .query_drop("SELECT 1")
            .await
            .err()
            .context("the killed session still answers")?;
        ensure!(connection_gone(&e), "{e:?}");
        // Idle inside a transaction: its backend connection is rolled back
        // and goes back to the pool (the only one there, so the next client
        // gets it). The reply to the SELECT above reaches the client a moment
        // before its lease is returned: wait for that, or the transaction
        // below would open a second connection.
        until_nothing_leased(ctx, "app2").await?;
        let mut txn = ctx.conn("kill", "bob", "bob-pw", "app2").await?;
        txn.query_drop("BEGIN").await?;
        txn.query_drop("INSERT INTO killed VALUES (1)").await?;
        let backend: Option<u64> = txn.query_first("SELECT @@pseudo_thread_id").await?;
        killer.query_drop(format!("KILL CONNECTION {}", txn.id())).await?;
        let e = txn
            .query_drop("SELECT 1")
            .await
            .err()
            .context("the killed session still answers")?;
        ensure!(connection_gone(&e), "{e:?}");
        until_nothing_leased(ctx, "app2").await?;
        let pool = kill_pool(ctx, "app2");
        ensure!(pool == (1, 0), "the backend connection was not returned: {pool:?}");
        let mut next = ctx.conn("kill", "bob", "bob-pw", "app2").await?;
        let row: Option<(u64, i64, i64)> = next
            .query_first("SELECT @@pseudo_thread_id, @@in_transaction, (SELECT COUNT(*) FROM killed)")
            .await?;
        let backend = backend.context("no connection id")?;
        ensure!(
            row == Some((backend, 0, 0)),
            "not the same clean connection: {row:?} (was {backend})"
        );
        // The killer's own session goes on.
        let one: Option<i64> = killer.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        ensure!(
            terminated(ctx) >= before + 2,
            "kills not counted as session-ending errors"
        );
        Ok(())
    })
}

fn kill_busy(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut victim = ctx.conn("kill", "alice", "alice-pw", "app1").await?;
        let id = victim.id();
        victim.query_drop("BEGIN").await?;
        victim.query_drop("INSERT INTO killed VALUES (1)").await?;
        let backend: u64 = victim
            .query_first("SELECT @@pseudo_thread_id")
            .await?
            .context("no connection id")?;
        let started = Instant::now();
        let running = tokio::spawn(async move {
            let r: Result<Option<i64>, _> = victim.query_first("SELECT SLEEP(30)").await;
            r
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut killer = ctx.conn("kill", "alice", "alice-pw", "app1").await?;
        killer.query_drop(format!("KILL {id}")).await?;
        let r = tokio::time::timeout(Duration::from_secs(20), running)
            .await
            .context("the killed query still runs")??;
        ensure!(
            started.elapsed() < Duration::from_secs(10),
            "the kill took {:?}",
            started.elapsed()
        );
        let e = r.err().context("the killed query returned a result")?;
        ensure!(connection_gone(&e), "{e:?}");
        // On the server, the backend connection that ran it ends and its
        // transaction is rolled back.
        let mut su = mysql_async::Conn::new(ctx.superuser_opts()?).await?;
        // The thread goes at once. Its transaction is then rolled back by
        // the server, which under load has been seen to keep it "ROLLING
        // BACK" for over 40 s after the thread is gone (one row): that the
        // server is rolling it back is what the proxy can cause; the row
        // staying invisible and the next client's clean connection are
        // checked below.
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let alive: Option<i64> = su
                .query_first(format!(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {backend}"
                ))
                .await?;
            let trx: Option<i64> = su
                .query_first(format!(
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = {backend}"
                ))
                .await?;
            if alive == Some(0) && trx == Some(0) {
                break;
            }
            if alive == Some(0) {
                let state: Option<String> = su
                    .query_first(format!(
                        "SELECT trx_state FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = {backend}"
                    ))
                    .await?;
                if state.as_deref() == Some("ROLLING BACK") {
                    break;
                }
            }
            if Instant::now() >= deadline {
                let state: Option<(String, Option<String>, Option<String>)> = su
                    .query_first(format!(
                        "SELECT trx_state, trx_operation_state, trx_query FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = {backend}"
                    ))
                    .await?;
                let list: Vec<(u64, String, Option<String>)> = su
                    .query("SELECT ID, USER, STATE FROM information_schema.PROCESSLIST")
                    .await?;
                anyhow::bail!("backend connection {backend} lives on: {alive:?} {trx:?} {state:?} {list:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rows: Option<i64> = su.query_first("SELECT COUNT(*) FROM app1.killed").await?;
        ensure!(rows == Some(0), "the killed transaction's insert is visible: {rows:?}");
        // Nothing leaked in the pool, and the next client of that small pool
        // gets a clean connection (no transaction, the row lock released).
        until_nothing_leased(ctx, "app1").await?;
        let mut next = ctx.conn("kill", "alice", "alice-pw", "app1").await?;
        let row: Option<(i64, i64)> = next
            .query_first("SELECT @@in_transaction, COUNT(*) FROM killed")
            .await?;
        ensure!(row == Some((0, 0)), "{row:?}");
        next.query_drop("INSERT INTO killed VALUES (1)").await?;
        next.query_drop("DELETE FROM killed").await?;
        let one: Option<i64> = killer.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        // (`next` keeps its lease for a few commands after its INSERT.)
        next.disconnect().await?;
        until_nothing_leased(ctx, "app1").await?;
        Ok(())
    })
}

/// Sends COM_PROCESS_KILL for `id` on a raw connection and reads the reply.
async fn process_kill(s: &mut tokio::net::TcpStream, id: u32) -> Result<Vec<u8>> {
    let mut packet = vec![5, 0, 0, 0, 0x0c];
    packet.extend_from_slice(&id.to_le_bytes());
    s.write_all(&packet).await?;
    read_raw(s).await
}

fn kill_edges(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut alice = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let id = alice.id();
        // Another tenant (on the same backend user) sees no such session.
        let mut bob = ctx.conn("rw", "bob", "bob-pw", "app2").await?;
        for kill in [format!("KILL {id}"), format!("KILL CONNECTION {id}")] {
            let e = bob.query_drop(&kill).await.err();
            ensure!(e.as_ref().and_then(server_code) == Some(1094), "{kill}: {e:?}");
        }
        let one: Option<i64> = alice.query_first("SELECT 1").await?;
        ensure!(one == Some(1), "another tenant's KILL reached the session");
        for unknown in ["KILL 4000000000", "KILL CONNECTION 0"] {
            let e = alice.query_drop(unknown).await.err();
            ensure!(e.as_ref().and_then(server_code) == Some(1094), "{unknown}: {e:?}");
        }
        // One's own id, as on the server: KILL QUERY interrupts itself (1317)
        // and the session goes on; KILL answers 1927 and ends it.
        let e = alice.query_drop(format!("KILL QUERY {id}")).await.err();
        ensure!(e.as_ref().and_then(server_code) == Some(1317), "{e:?}");
        let one: Option<i64> = alice.query_first("SELECT 1").await?;
        ensure!(one == Some(1), "KILL QUERY of one's own id ended the session");
        let e = alice
            .query_drop(format!("KILL {id}"))
            .await
            .err()
            .context("KILL of one's own id answered OK")?;
        ensure!(server_code(&e) == Some(1927), "{e:?}");
        let e = alice
            .query_drop("SELECT 1")
            .await
            .err()
            .context("the session survived its own KILL")?;
        ensure!(connection_gone(&e), "{e:?}");
        // COM_PROCESS_KILL is KILL CONNECTION.
        let (mut raw, raw_id) = raw_login_id(ctx).await?;
        let mut victim = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let p = process_kill(&mut raw, victim.id()).await?;
        ensure!(<[u8]>::first(&p) == Some(&0), "COM_PROCESS_KILL: {p:?}");
        let e = victim
            .query_drop("SELECT 1")
            .await
            .err()
            .context("COM_PROCESS_KILL left the session")?;
        ensure!(connection_gone(&e), "{e:?}");
        let p = process_kill(&mut raw, 4_000_000_000).await?;
        ensure!(err_code(&p) == Some(1094), "{p:?}");
        let other = ctx.conn("rw", "bob", "bob-pw", "app2").await?;
        let p = process_kill(&mut raw, other.id()).await?;
        ensure!(err_code(&p) == Some(1094), "another tenant's session: {p:?}");
        let p = process_kill(&mut raw, raw_id).await?;
        ensure!(err_code(&p) == Some(1927), "own id: {p:?}");
        ensure!(
            read_raw(&mut raw).await.is_err(),
            "the connection stayed open after killing itself"
        );
        Ok(())
    })
}

/// Session A's short query is stopped with `KILL QUERY` at moments swept
/// across its end, while session B waits for the one backend connection
/// (a pool of 1) with a query of its own: a `KILL QUERY` that lands after
/// A's query finished must find the connection idle, never running B's
/// statement (a killed `SLEEP` answers 1 instead of 0).
fn late_kill_query(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (opts, stop, proxy) = crate::txn::one_connection_proxy(ctx).await?;
        let result = async {
            let a = mysql_async::Conn::new(opts.clone()).await?;
            let b = mysql_async::Conn::new(opts.clone()).await?;
            let mut killer = mysql_async::Conn::new(opts.clone()).await?;
            let id = a.id();
            let (mut a, mut b) = (Some(a), Some(b));
            let (mut a_killed, mut a_finished) = (0, 0);
            for step in 0..60u64 {
                let mut a_conn = a.take().context("a")?;
                let a_query = tokio::spawn(async move {
                    let r: Result<Option<i64>, _> = a_conn.query_first("SELECT SLEEP(0.02)").await;
                    (r, a_conn)
                });
                tokio::time::sleep(Duration::from_millis(2)).await;
                let mut b_conn = b.take().context("b")?;
                let b_query = tokio::spawn(async move {
                    let r: Result<Option<(i64, i64)>, _> = b_conn.query_first("SELECT SLEEP(0.03), 7").await;
                    (r, b_conn)
                });
                // From well inside A's query to past its end.
                tokio::time::sleep(Duration::from_micros(8_000 + step * 300)).await;
                killer.query_drop(format!("KILL QUERY {id}")).await?;
                let (r, a_conn) = a_query.await?;
                match r {
                    Ok(Some(0)) => a_finished += 1,
                    Ok(Some(1)) => a_killed += 1,
                    Err(e) if server_code(&e) == Some(1317) => a_killed += 1,
                    other => anyhow::bail!("step {step}: A answered {other:?}"),
                }
                let (r, b_conn) = b_query.await?;
                let row = r.with_context(|| format!("step {step}: B failed"))?;
                ensure!(
                    row == Some((0, 7)),
                    "step {step}: B's query was hit by A's KILL QUERY: {row:?}"
                );
                a = Some(a_conn);
                b = Some(b_conn);
            }
            ensure!(a_killed > 0, "no KILL QUERY landed in A's query");
            eprintln!("late KILL QUERY: A killed {a_killed} times, finished first {a_finished} times");
            Ok(())
        }
        .await;
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(15), proxy).await;
        result
    })
}

/// H holds the one backend connection in a transaction; W's statement
/// waits for it. `KILL QUERY` of W ends the wait: the statement answers
/// 1317 without running, and W's session goes on once H is done.
fn waiting_kill_query(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (opts, stop, proxy) = crate::txn::one_connection_proxy(ctx).await?;
        let result = async {
            let mut h = mysql_async::Conn::new(opts.clone()).await?;
            let w = mysql_async::Conn::new(opts.clone()).await?;
            let mut killer = mysql_async::Conn::new(opts.clone()).await?;
            h.query_drop("BEGIN").await?;
            h.query_drop("SELECT 1").await?;
            let id = w.id();
            let mut w = Some(w);
            for prepared in [false, true] {
                let mut conn = w.take().context("w")?;
                let waiting = tokio::spawn(async move {
                    let r: Result<Option<i64>, _> = if prepared {
                        conn.exec_first("SELECT ?", (42,)).await
                    } else {
                        conn.query_first("SELECT 42").await
                    };
                    (r, conn)
                });
                tokio::time::sleep(Duration::from_millis(300)).await;
                killer.query_drop(format!("KILL QUERY {id}")).await?;
                let (r, conn) = waiting.await?;
                let e = r.err().context("the waiting statement ran")?;
                ensure!(server_code(&e) == Some(1317), "prepared={prepared}: {e:?}");
                w = Some(conn);
            }
            h.query_drop("COMMIT").await?;
            let mut w = w.context("w")?;
            let n: Option<i64> = w.query_first("SELECT 7").await?;
            ensure!(n == Some(7), "W after its KILL QUERY: {n:?}");
            let n: Option<i64> = w.exec_first("SELECT ?", (8,)).await?;
            ensure!(n == Some(8), "W's prepared statement after its KILL QUERY: {n:?}");
            Ok(())
        }
        .await;
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(15), proxy).await;
        result
    })
}
