//! Session-level commands through the proxy: `KILL QUERY` with the
//! handshake's connection id (the same tenant only; other forms refused),
//! COM_CHANGE_USER authenticated by the proxy (and a failed one ending the
//! session), COM_RESET_CONNECTION clearing what the client had set, and
//! shutdown ending idle sessions at once.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("session::kill_query_reaches_only_the_tenants_session", kill_query),
        ("session::change_user_authenticates_through_the_proxy", change_user),
        ("session::reset_connection_clears_session_state", reset_connection),
        ("session::shutdown_ends_idle_sessions", shutdown),
        ("session::health_checks_keep_their_connection", monitor_kept),
        (
            "session::set_global_reaches_the_next_clients_session",
            set_global_next_session,
        ),
    ]
}

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn kill_query(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut sleeper = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let id = sleeper.id();
        let started = Instant::now();
        let running = tokio::spawn(async move {
            let r: Result<Option<i64>, _> = sleeper.query_first("SELECT SLEEP(20)").await;
            (r, sleeper)
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Another tenant (on the same backend user) sees no such session.
        let mut bob = ctx.conn("rw", "bob", "bob-pw", "app2").await?;
        let e = bob.query_drop(format!("KILL QUERY {id}")).await.err();
        ensure!(e.as_ref().and_then(server_code) == Some(1094), "{e:?}");
        for refused in ["KILL USER app_owner", "KILL QUERY ID 1"] {
            let e = bob.query_drop(refused).await.err();
            ensure!(e.as_ref().and_then(server_code) == Some(1235), "{refused}: {e:?}");
        }
        // The same tenant stops the query.
        let mut alice = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        alice.query_drop(format!("KILL QUERY {id}")).await?;
        let (r, mut sleeper) = running.await?;
        ensure!(started.elapsed() < Duration::from_secs(10), "the query ran on");
        // MariaDB answers a killed SLEEP with 1 (or error 1317).
        match r {
            Ok(v) => ensure!(v == Some(1), "{v:?}"),
            Err(e) => ensure!(server_code(&e) == Some(1317), "{e:?}"),
        }
        let one: Option<i64> = sleeper.query_first("SELECT 1").await?;
        ensure!(one == Some(1), "the session did not survive its query's cancel");
        // Unknown ids.
        let e = alice.query_drop("KILL QUERY 4000000000").await.err();
        ensure!(e.as_ref().and_then(server_code) == Some(1094), "{e:?}");
        Ok(())
    })
}

fn change_user(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        c.query_drop("SET @mine = 7").await?;
        c.change_user(
            mysql_async::ChangeUserOpts::default()
                .with_user(Some("bob".into()))
                .with_pass(Some("bob-pw".into()))
                .with_db_name(Some("app2".into())),
        )
        .await?;
        let row: Option<(Option<String>, Option<i64>)> = c.query_first("SELECT DATABASE(), @mine").await?;
        ensure!(row == Some((Some("app2".into()), None)), "{row:?}");
        // Bob may not use alice's database.
        let e = c.query_drop("USE app1").await.err();
        ensure!(e.as_ref().and_then(server_code) == Some(1044), "{e:?}");
        // A wrong password ends the session.
        let mut d = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let e = d
            .change_user(
                mysql_async::ChangeUserOpts::default()
                    .with_user(Some("bob".into()))
                    .with_pass(Some("not-bobs".into())),
            )
            .await
            .err()
            .context("a wrong password was accepted")?;
        ensure!(server_code(&e) == Some(1045), "{e:?}");
        ensure!(!format!("{e:?}").contains("not-bobs"));
        Ok(())
    })
}

fn reset_connection(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        c.query_drop("SET @x = 1").await?;
        c.query_drop("SET time_zone = '+03:00'").await?;
        c.query_drop("BEGIN").await?;
        c.reset().await?;
        let row: Option<(Option<i64>, String, i64)> = c.query_first("SELECT @x, @@time_zone, @@in_transaction").await?;
        let row = row.context("no row")?;
        ensure!(row.0.is_none() && row.1 != "+03:00" && row.2 == 0, "{row:?}");
        Ok(())
    })
}

/// A proxy of its own (so the shared one keeps running): an idle client,
/// then shutdown. The idle session is woken and ends with
/// ER_SERVER_SHUTDOWN, so `run` returns at once rather than after the
/// shutdown timeout, and the port stops accepting.
fn shutdown(ctx: &Ctx) -> Result<()> {
    let settings = crate::own_config(ctx, "shutdown_timeout = \"20s\"", "")?;
    ctx.rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let addr = app.local_addr("rw").context("rw")?;
        // Held past shutdown: the listener closes all the same.
        let held = app.endpoints();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let (mut s, _) = crate::queries::raw_login_at(addr).await?;
        let _ = tx.send(());
        let started = Instant::now();
        let p = tokio::time::timeout(Duration::from_secs(5), crate::queries::read_raw(&mut s))
            .await
            .context("the idle session was not ended")??;
        ensure!(crate::queries::err_code(&p) == Some(1053), "{p:?}");
        tokio::time::timeout(Duration::from_secs(10), proxy)
            .await
            .context("run() did not return")???;
        ensure!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        ensure!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "still accepting after shutdown"
        );
        drop(held);
        Ok(())
    })
}

/// The health check (every second here) keeps its monitor connection: the
/// same server thread ids of the monitor user sleep between checks, instead
/// of a login per check.
fn monitor_kept(ctx: &Ctx) -> Result<()> {
    let primary = ctx.cluster.mysql_primary().context("no primary")?.name.clone();
    let sql = format!(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = '{}' AND COMMAND = 'Sleep'",
        ctx.cluster.mysql_user()
    );
    let ids = || -> Result<std::collections::HashSet<String>> {
        Ok(ctx
            .cluster
            .mysql_sql(&primary, &sql)?
            .lines()
            .map(str::to_owned)
            .collect())
    };
    // A probe that times out under load starts a new connection: look a
    // few times. Without reuse no monitor connection is ever seen asleep.
    let mut seen = Vec::new();
    for _ in 0..4 {
        let before = ids()?;
        std::thread::sleep(Duration::from_millis(3500));
        let after = ids()?;
        if before.intersection(&after).next().is_some() {
            return Ok(());
        }
        seen.push((before, after));
    }
    anyhow::bail!("no monitor connection outlived 3 health checks: {seen:?}")
}

/// `SET GLOBAL max_allowed_packet` (the session value is the global one at
/// connect, and COM_RESET_CONNECTION does not read it again): the next
/// client's session has the new value, as on a new direct connection, in
/// session and transaction mode; the pooled connections opened before are
/// replaced.
fn set_global_next_session(ctx: &Ctx) -> Result<()> {
    crate::with_superuser_tenant_proxy(ctx, "admin", "admin-pw", "app1", |addrs| async move {
        let session_value = |a| async move {
            let mut c = mysql_async::Conn::new(crate::opts_at(a, "admin", "admin-pw", Some("app1"))).await?;
            let v: Option<u64> = c.query_first("SELECT @@session.max_allowed_packet").await?;
            c.disconnect().await?;
            v.context("no value")
        };
        let before = session_value(addrs[0]).await?;
        session_value(addrs[1]).await?;
        let wanted = if before == 33_554_432 { 50_331_648 } else { 33_554_432 };
        for (round, a) in addrs.into_iter().enumerate() {
            let mut admin = mysql_async::Conn::new(crate::opts_at(a, "admin", "admin-pw", Some("app1"))).await?;
            admin
                .query_drop(format!(
                    "SET GLOBAL max_allowed_packet = {}",
                    wanted + round as u64 * 1024
                ))
                .await?;
            admin.disconnect().await?;
            let got = session_value(a).await?;
            ensure!(
                got == wanted + round as u64 * 1024,
                "{a}: the next session has max_allowed_packet {got}, the global is {}",
                wanted + round as u64 * 1024
            );
        }
        let mut admin = mysql_async::Conn::new(crate::opts_at(addrs[1], "admin", "admin-pw", Some("app1"))).await?;
        admin
            .query_drop(format!("SET GLOBAL max_allowed_packet = {before}"))
            .await?;
        admin.disconnect().await?;
        Ok(())
    })
}
