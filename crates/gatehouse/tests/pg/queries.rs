//! The data path with real clients: simple and extended protocol, COPY both
//! ways, notices and notifications, large results, cancel, psql, pgbench,
//! and routing of the read-only endpoint.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures_util::{SinkExt, StreamExt};
use tokio_postgres::AsyncMessage;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("queries::simple_and_extended_protocol", simple_and_extended),
        ("queries::copy_in_and_out", copy_in_and_out),
        ("queries::notices_and_notifications", notices_and_notifications),
        ("queries::large_results_stream_through", large_results),
        (
            "queries::cancel_reaches_only_that_query",
            cancel_reaches_only_that_query,
        ),
        ("queries::psql_runs_a_script", psql_runs_a_script),
        ("queries::pgbench_select_only", pgbench_select_only),
        ("queries::read_only_endpoint_reaches_the_replica", read_only_endpoint),
    ]
}

fn simple_and_extended(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let rows = c.simple_query("SELECT 1 AS one, 'two' AS two").await?;
        let row = rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        });
        let row = row.context("no row")?;
        ensure!(row.get(0) == Some("1") && row.get(1) == Some("two"));
        c.batch_execute("DROP TABLE IF EXISTS t_ext; CREATE TABLE t_ext (id int primary key, v text)")
            .await?;
        let stmt = c.prepare("INSERT INTO t_ext VALUES ($1, $2)").await?;
        for i in 0..50i32 {
            c.execute(&stmt, &[&i, &format!("v{i}")]).await?;
        }
        let rows = c
            .query("SELECT id, v FROM t_ext WHERE id >= $1 ORDER BY id", &[&45i32])
            .await?;
        let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        ensure!(
            got == (45..50).map(|i| (i, format!("v{i}"))).collect::<Vec<_>>(),
            "{got:?}"
        );
        // A failing statement in a transaction, then recovery.
        c.batch_execute("BEGIN").await?;
        let err = c
            .execute("INSERT INTO t_ext VALUES (1, 'dup')", &[])
            .await
            .err()
            .context("duplicate accepted")?;
        ensure!(
            err.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION),
            "{err}"
        );
        c.batch_execute("ROLLBACK").await?;
        let n: i64 = c.query_one("SELECT count(*) FROM t_ext", &[]).await?.get(0);
        ensure!(n == 50);
        c.batch_execute("DROP TABLE t_ext").await?;
        Ok(())
    })
}

fn copy_in_and_out(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        c.batch_execute("DROP TABLE IF EXISTS t_copy; CREATE TABLE t_copy (id int, v text)")
            .await?;
        let sink = c.copy_in("COPY t_copy FROM STDIN").await?;
        futures_util::pin_mut!(sink);
        let mut data = String::new();
        for i in 0..20_000 {
            data.push_str(&format!("{i}\trow {i}\n"));
        }
        sink.send(bytes::Bytes::from(data.clone())).await?;
        let n = sink.finish().await?;
        ensure!(n == 20_000, "copied {n}");
        let stream = c.copy_out("COPY (SELECT * FROM t_copy ORDER BY id) TO STDOUT").await?;
        futures_util::pin_mut!(stream);
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            out.extend_from_slice(&chunk?);
        }
        ensure!(
            out == data.as_bytes(),
            "COPY OUT returned {} bytes, expected {}",
            out.len(),
            data.len()
        );
        c.batch_execute("DROP TABLE t_copy").await?;
        Ok(())
    })
}

fn notices_and_notifications(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (listener, mut conn) =
            tokio_postgres::connect(&ctx.conninfo("rw", "alice", "alice-pw", "app1"), tokio_postgres::NoTls).await?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
            while let Some(Ok(m)) = messages.next().await {
                let _ = tx.send(m);
            }
        });
        listener
            .batch_execute("DO $$ BEGIN RAISE NOTICE 'hello from %', 'plpgsql'; END $$")
            .await?;
        listener.batch_execute("LISTEN gatehouse_chan").await?;
        let other = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        other.batch_execute("NOTIFY gatehouse_chan, 'payload-1'").await?;
        let mut notice = false;
        let mut notification = false;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(notice && notification) && Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
                Ok(Some(AsyncMessage::Notice(n))) => notice |= n.message() == "hello from plpgsql",
                Ok(Some(AsyncMessage::Notification(n))) => {
                    notification |= n.channel() == "gatehouse_chan" && n.payload() == "payload-1"
                }
                Ok(Some(_)) => {}
                Ok(None) => bail!("connection ended"),
                Err(_) => {
                    // Notifications are delivered when the listener next reads.
                    listener.batch_execute("SELECT 1").await?;
                }
            }
        }
        ensure!(notice, "no NoticeResponse relayed");
        ensure!(notification, "no NotificationResponse relayed");
        Ok(())
    })
}

fn large_results(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        // One 64 MiB value: far beyond what the relay holds whole.
        let row = c.query_one("SELECT repeat('x', 64 * 1024 * 1024)", &[]).await?;
        let v: &str = row.get(0);
        ensure!(v.len() == 64 * 1024 * 1024 && v.bytes().all(|b| b == b'x'));
        let rows = c
            .query("SELECT g, md5(g::text) FROM generate_series(1, 200000) g", &[])
            .await?;
        ensure!(rows.len() == 200_000);
        let last: i32 = rows[199_999].get(0);
        ensure!(last == 200_000);
        Ok(())
    })
}

fn cancel_reaches_only_that_query(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let victim = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let bystander = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let token = victim.cancel_token();
        let started = Instant::now();
        let slow = tokio::spawn(async move { victim.simple_query("SELECT pg_sleep(20)").await });
        let steady = tokio::spawn(async move { bystander.query_one("SELECT pg_sleep(1.5), 42", &[]).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(tokio_postgres::NoTls).await?;
        let err = slow.await?.err().context("the cancelled query succeeded")?;
        ensure!(
            err.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
            "{err}"
        );
        ensure!(
            started.elapsed() < Duration::from_secs(10),
            "cancel took {:?}",
            started.elapsed()
        );
        let row = steady.await??;
        ensure!(row.get::<_, i32>(1) == 42, "the other session's query was disturbed");
        // A cancel with a wrong key reaches nothing.
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let mut raw = crate::raw::Raw::connect(ctx.addr("rw")).await?;
        raw.send(&gatehouse_proto_pg::startup::cancel_request(1, 2)).await?;
        ensure!(raw.closed_within(Duration::from_secs(5)).await);
        c.simple_query("SELECT 1").await?;
        Ok(())
    })
}

fn psql(ctx: &Ctx, endpoint: &str, user: &str, password: &str, extra: &str, sql: &str) -> std::process::Output {
    let a = ctx.addr(endpoint);
    Command::new("psql")
        .arg(format!(
            "host={} port={} user={user} dbname=app1 {extra}",
            a.ip(),
            a.port()
        ))
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .unwrap_or_else(|e| panic!("psql: {e}"))
}

pub fn psql_ok(ctx: &Ctx, endpoint: &str, user: &str, password: &str, extra: &str, sql: &str) -> Result<String> {
    let out = psql(ctx, endpoint, user, password, extra, sql);
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

pub fn psql_err(ctx: &Ctx, endpoint: &str, user: &str, password: &str, extra: &str, sql: &str) -> Result<String> {
    let out = psql(ctx, endpoint, user, password, extra, sql);
    ensure!(!out.status.success(), "psql unexpectedly succeeded");
    Ok(String::from_utf8(out.stderr)?)
}

fn psql_runs_a_script(ctx: &Ctx) -> Result<()> {
    let out = psql_ok(
        ctx,
        "rw",
        "alice",
        "alice-pw",
        "sslmode=disable",
        "CREATE TEMP TABLE tt(x int); INSERT INTO tt SELECT generate_series(1,10); SELECT sum(x) FROM tt",
    )?;
    ensure!(out.lines().last() == Some("55"), "{out}");
    Ok(())
}

fn pgbench_select_only(ctx: &Ctx) -> Result<()> {
    let a = ctx.addr("rw");
    let run = |args: &[&str]| -> Result<String> {
        let out = Command::new("pgbench")
            .args(["-h", &a.ip().to_string(), "-p", &a.port().to_string(), "-U", "bob"])
            .args(args)
            .arg("app2")
            .env("PGPASSWORD", "bob-pw")
            .output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ensure!(out.status.success(), "pgbench {args:?} failed: {text}");
        Ok(text)
    };
    let text = run(&["-S", "-c", "8", "-j", "2", "-t", "300"])?;
    ensure!(
        text.contains("number of transactions actually processed: 2400/2400"),
        "{text}"
    );
    ensure!(text.contains("number of failed transactions: 0"), "{text}");
    let text = run(&["-S", "-C", "-c", "4", "-t", "50"])?;
    ensure!(
        text.contains("number of transactions actually processed: 200/200"),
        "{text}"
    );
    Ok(())
}

fn read_only_endpoint(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let replica_port = ctx.cluster.pg_replicas().first().context("no replica")?.port;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match ctx.client("ro", "alice", "alice-pw", "app1").await {
                Ok(c) => {
                    let row = c
                        .query_one("SELECT pg_is_in_recovery(), inet_server_port()", &[])
                        .await?;
                    ensure!(row.get::<_, bool>(0), "read-only endpoint reached the writer");
                    ensure!(row.get::<_, i32>(1) == i32::from(replica_port));
                    break;
                }
                // The replica may still be replaying the database's creation.
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => return Err(e),
            }
        }
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let row = c.query_one("SELECT pg_is_in_recovery()", &[]).await?;
        ensure!(!row.get::<_, bool>(0), "read/write endpoint reached a replica");
        Ok(())
    })
}
