//! Parked MySQL sessions ([`gatehouse::park`]): an idle client without a
//! backend connection gives up its task and socket registration and comes
//! back with its prepared statements and session variables; `KILL`, its
//! idle timeout and shutdown still reach it while parked. The cases run a
//! proxy of their own, so the parking lot's count is theirs alone.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "park::parked_sessions_resume_with_their_state_and_can_be_killed",
            resume_and_kill,
        ),
        (
            "park::idle_timeout_and_shutdown_reach_parked_sessions",
            timeout_and_shutdown,
        ),
    ]
}

struct Own {
    rw: SocketAddr,
    idle: SocketAddr,
    core: std::sync::Arc<gatehouse::core::Core<gatehouse::engine::mysql::MyEngine>>,
    proxy: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(ctx: &Ctx) -> Result<Own> {
    let idle = r#"
[[endpoints]]
name = "idle"
listen = "127.0.0.1:0"
cluster = "my"
role = "read_write"
idle_client_timeout = "1500ms"
"#;
    let settings = crate::own_config(ctx, "park_idle_after = \"100ms\"", idle)?;
    let app = gatehouse::App::bind(settings).await?;
    let rw = app.local_addr("rw").context("rw")?;
    let idle = app.local_addr("idle").context("idle")?;
    let core = app.mysql_core();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let proxy = tokio::spawn(gatehouse::run(app, async {
        let _ = rx.await;
    }));
    Ok(Own {
        rw,
        idle,
        core,
        proxy,
        stop,
    })
}

impl Own {
    fn parked(&self) -> usize {
        self.core.parking.as_ref().map_or(0, |lot| lot.len())
    }

    async fn until_parked(&self, n: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.parked() != n {
            ensure!(Instant::now() < deadline, "{} parked, expected {n}", self.parked());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    async fn conn(&self, addr: SocketAddr) -> Result<mysql_async::Conn> {
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(addr.ip().to_string())
            .tcp_port(addr.port())
            .user(Some("alice"))
            .pass(Some("alice-pw"))
            .db_name(Some("app1"))
            .prefer_socket(false)
            .into();
        Ok(mysql_async::Conn::new(opts).await?)
    }
}

fn resume_and_kill(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = start(ctx).await?;
        let mut c = own.conn(own.rw).await?;
        c.query_drop("SET time_zone = '+05:00', sql_select_limit = 7").await?;
        let stmt = c.prep("SELECT ? + 1").await?;
        let two: Option<i64> = c.exec_first(&stmt, (1,)).await?;
        ensure!(two == Some(2));
        own.until_parked(1).await?;
        for round in 0..2 {
            // The statement id and the variables came back from the lot.
            let n: Option<i64> = c.exec_first(&stmt, (41,)).await?;
            ensure!(n == Some(42), "round {round}: {n:?}");
            let vars: Option<(String, u64)> = c.query_first("SELECT @@time_zone, @@sql_select_limit").await?;
            ensure!(
                vars == Some(("+05:00".into(), 7)),
                "round {round}: variables lost: {vars:?}"
            );
            own.until_parked(1).await?;
        }
        // KILL reaches a parked session: it is closed, the killer goes on.
        let mut killer = own.conn(own.rw).await?;
        own.until_parked(2).await?;
        killer.query_drop(format!("KILL {}", c.id())).await?;
        let e = c
            .query_drop("SELECT 1")
            .await
            .err()
            .context("the killed parked session still answers")?;
        ensure!(
            matches!(
                e,
                mysql_async::Error::Io(_) | mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed)
            ),
            "{e:?}"
        );
        let one: Option<i64> = killer.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        drop(killer);
        own.until_parked(0).await?;
        let _ = own.stop.send(());
        tokio::time::timeout(Duration::from_secs(15), own.proxy)
            .await
            .context("run() did not return")???;
        Ok(())
    })
}

fn timeout_and_shutdown(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = start(ctx).await?;
        // The idle timeout (1.5 s) runs on while the session is parked.
        let (mut timed, _) = crate::queries::raw_login_at(own.idle).await?;
        let logged_in = Instant::now();
        own.until_parked(1).await?;
        let p = tokio::time::timeout(Duration::from_secs(5), crate::queries::read_raw(&mut timed))
            .await
            .context("the parked session did not time out")??;
        // ER_NET_READ_ERROR, as for a session that timed out in its task.
        ensure!(crate::queries::err_code(&p) == Some(1158), "{p:?}");
        ensure!(
            logged_in.elapsed() >= Duration::from_millis(1200),
            "timed out after {:?}, before its 1.5 s",
            logged_in.elapsed()
        );
        own.until_parked(0).await?;
        // Shutdown reaches a parked session: 1053, at once.
        let (mut s, _) = crate::queries::raw_login_at(own.rw).await?;
        own.until_parked(1).await?;
        let _ = own.stop.send(());
        let p = tokio::time::timeout(Duration::from_secs(5), crate::queries::read_raw(&mut s))
            .await
            .context("the parked session was not ended")??;
        ensure!(crate::queries::err_code(&p) == Some(1053), "{p:?}");
        tokio::time::timeout(Duration::from_secs(15), own.proxy)
            .await
            .context("run() did not return")???;
        Ok(())
    })
}
