//! Session-mode pooling: a backend connection is reused only after a reset
//! that leaves nothing of the previous client; limits answer with 53300;
//! shutdown ends idle sessions with 57P01, and a reload it interrupts
//! leaves no listener open.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::raw::Raw;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("session::reused_connection_is_clean", reused_connection_is_clean),
        ("session::limits_answer_53300", limits),
        (
            "session::startup_parameters_are_the_reset_values_and_pg_settings_shows_them",
            startup_parameters_are_reset_values,
        ),
        ("session::shutdown_ends_idle_sessions", shutdown),
        (
            "session::an_endpoint_a_reload_adds_during_shutdown_does_not_listen",
            reload_during_shutdown,
        ),
    ]
}

fn reused_connection_is_clean(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let a = ctx.client("solo", "alice", "alice-pw", "app1").await?;
        let pid_a: i32 = a.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        a.batch_execute(
            "SET search_path = pg_catalog; SET application_name = 'dirty';
             CREATE TEMP TABLE leak(x int); PREPARE leaked AS SELECT 1;
             SELECT pg_advisory_lock(4242); LISTEN leaked_channel; BEGIN; SELECT 1",
        )
        .await?;
        drop(a); // leaves mid-transaction
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let b = loop {
            match ctx.client("solo", "alice", "alice-pw", "app1").await {
                Ok(b) => break b,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        };
        let pid_b: i32 = b.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        ensure!(
            pid_a == pid_b,
            "pool of one should have reused the backend ({pid_a} vs {pid_b})"
        );
        let row = b
            .query_one(
                "SELECT current_setting('search_path'), current_setting('application_name'),
                        to_regclass('pg_temp.leak') IS NULL,
                        (SELECT count(*) FROM pg_prepared_statements WHERE name = 'leaked'),
                        (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()),
                        (SELECT count(*) FROM pg_listening_channels())",
                &[],
            )
            .await?;
        ensure!(row.get::<_, String>(0) == "\"$user\", public", "search_path leaked");
        ensure!(row.get::<_, String>(1) != "dirty", "application_name leaked");
        ensure!(row.get::<_, bool>(2), "temporary table leaked");
        ensure!(row.get::<_, i64>(3) == 0, "prepared statement leaked");
        ensure!(row.get::<_, i64>(4) == 0, "advisory lock leaked");
        ensure!(row.get::<_, i64>(5) == 0, "LISTEN leaked");
        // In a fresh implicit transaction the transaction started with the statement.
        let fresh = b.simple_query("SELECT now() = statement_timestamp()").await?;
        let fresh = fresh.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        });
        ensure!(
            fresh.as_deref() == Some("t"),
            "still inside the previous client's transaction"
        );
        Ok(())
    })
}

/// A client on "solo" (session mode, pool 1) with `extra` in its conninfo.
async fn solo_with(ctx: &Ctx, extra: &str) -> Result<tokio_postgres::Client> {
    let info = format!("{} {extra}", ctx.conninfo("solo", "alice", "alice-pw", "app1"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        // The pool of one may still be giving back the previous client's connection.
        match tokio_postgres::connect(&info, tokio_postgres::NoTls).await {
            Ok((client, conn)) => {
                tokio::spawn(conn);
                return Ok(client);
            }
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// What a session-mode client connected with (startup parameters and
/// `options`, tracked or not) is what `RESET`, `RESET ALL` and `DISCARD
/// ALL` return to and what `pg_settings.reset_val` shows, as on a direct
/// connection; the next client with other startup parameters sees none
/// of them, and one with the same set reuses the connection.
fn startup_parameters_are_reset_values(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        const STARTUP: &str =
            "application_name=gh_startup options='-c datestyle=Postgres,MDY -c timezone=PST8PDT -c enable_seqscan=off'";
        const SHOW: &str = "SELECT current_setting('datestyle'), current_setting('timezone'), \
                            current_setting('enable_seqscan'), current_setting('application_name')";
        const RESET_VALS: &str = "SELECT string_agg(name || '=' || reset_val, ' ' ORDER BY name) FROM pg_settings \
                                  WHERE name IN ('DateStyle', 'TimeZone', 'enable_seqscan', 'application_name')";
        async fn show(c: &tokio_postgres::Client) -> Result<[String; 4]> {
            let r = c.query_one(SHOW, &[]).await?;
            Ok([r.get(0), r.get(1), r.get(2), r.get(3)])
        }
        let startup = ["Postgres, MDY", "PST8PDT", "off", "gh_startup"].map(String::from);
        let a = solo_with(ctx, STARTUP).await?;
        let pid_a: i32 = a.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        ensure!(show(&a).await? == startup, "at login: {:?}", show(&a).await?);
        let reset_vals: String = a.query_one(RESET_VALS, &[]).await?.get(0);
        ensure!(
            reset_vals == "DateStyle=Postgres, MDY TimeZone=PST8PDT application_name=gh_startup enable_seqscan=off",
            "pg_settings.reset_val: {reset_vals}"
        );
        for reset in [
            "RESET datestyle; RESET timezone; RESET enable_seqscan; RESET application_name",
            "SET datestyle TO DEFAULT; SET timezone TO DEFAULT; SET enable_seqscan TO DEFAULT; SET application_name TO DEFAULT",
            "RESET ALL",
            "DISCARD ALL",
        ] {
            a.batch_execute("SET datestyle = 'ISO, DMY'; SET timezone = 'UTC'; SET enable_seqscan = on; SET application_name = 'other'")
                .await?;
            ensure!(show(&a).await?[0] == "ISO, DMY", "SET not kept before {reset}");
            a.batch_execute(reset).await?;
            ensure!(show(&a).await? == startup, "after {reset}: {:?}", show(&a).await?);
        }
        drop(a);
        // The same set again: the connection opened with it is reused.
        let c = solo_with(ctx, STARTUP).await?;
        let pid_c: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        ensure!(pid_c == pid_a, "a connection opened with the same startup set was not reused ({pid_a} vs {pid_c})");
        ensure!(show(&c).await? == startup, "reused: {:?}", show(&c).await?);
        drop(c);
        // Another client (other startup parameters) gets none of them: on
        // this pool of one, its connection replaces the idle one opened
        // with them (the pools of one key share its size).
        let b = solo_with(ctx, "").await?;
        let seen = show(&b).await?;
        ensure!(seen[0] != startup[0] && seen[1] != startup[1], "startup values leaked: {seen:?}");
        ensure!(seen[2] == "on" && seen[3] != "gh_startup", "startup values leaked: {seen:?}");
        b.batch_execute("RESET ALL").await?;
        ensure!(show(&b).await?[2] == "on", "RESET ALL took another client's startup value");
        let pid_b: i32 = b.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        ensure!(pid_b != pid_a, "a connection opened with other startup parameters was given to another client");
        Ok(())
    })
}

fn limits(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // "tiny": 2 client connections, a pool of 1 with a 500 ms borrow timeout.
        let holder = ctx.client("tiny", "alice", "alice-pw", "app1").await?;
        holder.simple_query("SELECT 1").await?;
        let mut silent = Raw::connect(ctx.addr("tiny")).await?; // takes the second slot
        tokio::time::sleep(Duration::from_millis(100)).await;
        let e = match ctx.try_client("tiny", "alice", "alice-pw", "app1").await {
            Ok(_) => anyhow::bail!("a third client got in"),
            Err(e) => e,
        };
        ensure!(e.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{e:?}");
        ensure!(crate::db_message(&e).contains("too many clients"), "{e:?}");
        ensure!(
            silent.closed_within(Duration::from_secs(5)).await,
            "login timeout did not close the silent client"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let e = match ctx.try_client("tiny", "alice", "alice-pw", "app1").await {
            Ok(_) => anyhow::bail!("got a backend connection the pool does not have"),
            Err(e) => e,
        };
        ensure!(e.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{e:?}");
        ensure!(
            crate::db_message(&e).contains("no backend connection became free"),
            "{e:?}"
        );
        ensure!(
            started.elapsed() >= Duration::from_millis(450),
            "gave up before the borrow timeout"
        );
        holder
            .simple_query("SELECT 1")
            .await
            .context("the holder was disturbed")?;
        Ok(())
    })
}

fn shutdown(ctx: &Ctx) -> Result<()> {
    let settings = crate::reload::settings(ctx, |t| t)?;
    ctx.rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let addr = app.local_addr("rw").context("rw")?;
        // Held past shutdown (as an admin request or a reload may hold
        // them): the listener closes all the same.
        let held = app.endpoints();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let mut raw = Raw::connect(addr).await?;
        raw.login(&[("user", "alice"), ("database", "app1")], "alice-pw")
            .await?;
        ensure!(raw.query("SELECT 'before'").await? == ["before"]);
        shutdown_ends(&mut raw, tx, proxy, addr).await?;
        drop(held);
        Ok(())
    })
}

/// A reload that bound its new endpoint's listener before the shutdown and
/// commits after it (the reloader and the shutdown run apart): once
/// committed, the endpoint is known but refuses connections, as every
/// endpoint does after shutdown.
fn reload_during_shutdown(ctx: &Ctx) -> Result<()> {
    let settings = crate::reload::settings(ctx, |t| t)?;
    let added = crate::reload::settings(ctx, |t| {
        t + "\n[[endpoints]]\nname = \"late\"\nlisten = \"127.0.0.1:0\"\ncluster = \"main\"\nrole = \"read_write\"\n"
    })?;
    ctx.rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let endpoints = app.endpoints();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let prepared = endpoints.prepare(&added).await?;
        let _ = tx.send(());
        tokio::time::timeout(Duration::from_secs(10), proxy)
            .await
            .context("run() did not return")???;
        let (_, stopped) = endpoints.commit(&added, prepared);
        for t in stopped {
            let _ = t.await;
        }
        let addr = endpoints
            .local_addr("late")
            .context("the reload's endpoint was not committed")?;
        ensure!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "the endpoint a reload added during the shutdown accepts at {addr}"
        );
        Ok(())
    })
}

/// Stops the proxy through `stop`: the idle client `raw` gets 57P01 and is
/// closed, `run` returns, and `addr` no longer accepts.
pub async fn shutdown_ends(
    raw: &mut Raw,
    stop: tokio::sync::oneshot::Sender<()>,
    proxy: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    addr: std::net::SocketAddr,
) -> Result<()> {
    let _ = stop.send(());
    let f = raw.expect_error(Duration::from_secs(5)).await?;
    ensure!(f.code == "57P01", "{f:?}");
    ensure!(raw.closed_within(Duration::from_secs(5)).await);
    tokio::time::timeout(Duration::from_secs(10), proxy)
        .await
        .context("run() did not return")???;
    ensure!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
    Ok(())
}
