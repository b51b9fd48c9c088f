//! Reloads that change the topology itself, for MariaDB, on a proxy of the
//! test's own read from a file of its own (the reload reads it again, as
//! SIGHUP does): a cluster and an endpoint added (a listener bound, the
//! cluster probed, clients served through it), the pool size of a pool in
//! use raised, then both removed (the listener closes, the endpoint's idle
//! sessions, parked ones too, are closed; other endpoints' sessions go on).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::Queryable;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "reload::cluster_and_endpoint_added_then_removed_without_restart",
        added_then_removed,
    )]
}

/// A cluster "late" over the primary and the replica, with a pool of
/// `size`, and its endpoint "late_rw" on `port`.
fn late(ctx: &Ctx, size: u32, port: u16) -> Result<String> {
    let primary = ctx.cluster.mysql_primary().context("no primary")?;
    let replica = ctx.cluster.mysql_replicas().first().cloned().context("no replica")?;
    Ok(format!(
        r#"
[[clusters]]
name = "late"
engine = "mysql"
backends = ["{}", "{}"]
monitor_secret = "superuser"
health_check_interval = "200ms"
pool = {{ size = {size}, borrow_timeout = "5s" }}

[[endpoints]]
name = "late_rw"
listen = "127.0.0.1:{port}"
cluster = "late"
role = "read_write"
"#,
        primary.addr(),
        replica.addr()
    ))
}

fn opts(addr: SocketAddr) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("alice"))
        .pass(Some("alice-pw"))
        .db_name(Some("app1"))
        .prefer_socket(false)
        .into()
}

fn added_then_removed(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // Idle sessions park after 100-200 ms: the removal must reach them.
        let base = crate::own_config_text(ctx, "park_idle_after = \"100ms\"", "")?;
        let path = ctx.dir.join("own-topology.toml");
        std::fs::write(&path, &base)?;
        let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
        let app = gatehouse::App::bind(settings).await?;
        let (endpoints, reloader, core) = (app.endpoints(), app.reloader(), app.mysql_core());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(gatehouse::run(app, async {
            let _ = stopped.await;
        }));
        let reload_with = |extra: String| {
            let (path, base, reloader) = (path.clone(), base.clone(), reloader.clone());
            async move {
                std::fs::write(&path, format!("{base}\n{extra}"))?;
                anyhow::Ok(reloader.reload().await?)
            }
        };
        let result = async {
            let primary = ctx.cluster.mysql_primary().context("no primary")?;
            let port = gatehouse_testkit::ports::free_port(&[])?;
            let mut rw = mysql_async::Conn::new(opts(endpoints.local_addr("rw").context("no rw")?)).await?;

            let outcome = reload_with(late(ctx, 2, port)?).await?;
            let said = |what: &str| outcome.applied.iter().any(|a| a.contains(what));
            ensure!(said("cluster \"late\" added"), "{outcome:?}");
            ensure!(said("endpoint \"late_rw\" added"), "{outcome:?}");
            let late_addr = endpoints.local_addr("late_rw").context("late_rw not listening")?;
            ensure!(late_addr.port() == port);
            let mut c = mysql_async::Conn::new(opts(late_addr)).await?;
            let server: Option<u16> = c.query_first("SELECT @@port").await?;
            ensure!(server == Some(primary.port), "late_rw reached {server:?}");

            // The pool in use grows from 2 to 4: four transactions open at
            // once get four backend connections.
            let outcome = reload_with(late(ctx, 4, port)?).await?;
            ensure!(
                outcome
                    .applied
                    .iter()
                    .any(|a| a.contains("cluster \"late\": pool.size changed")),
                "{outcome:?}"
            );
            let mut clients = Vec::new();
            for _ in 0..4 {
                clients.push(mysql_async::Conn::new(opts(late_addr)).await?);
            }
            // Each holds its transaction open until all four have their
            // connection: with the old size the third could not get one.
            let all_in = std::sync::Arc::new(tokio::sync::Barrier::new(clients.len()));
            let ids = futures_util::future::try_join_all(clients.iter_mut().map(|c| {
                let all_in = all_in.clone();
                async move {
                    c.query_drop("START TRANSACTION").await?;
                    let id: Option<u64> = c.query_first("SELECT @@pseudo_thread_id").await?;
                    all_in.wait().await;
                    c.query_drop("COMMIT").await?;
                    anyhow::Ok(id)
                }
            }))
            .await?;
            let mut ids: Vec<u64> = ids.into_iter().flatten().collect();
            ids.sort_unstable();
            ids.dedup();
            ensure!(
                ids.len() == 4,
                "4 concurrent transactions used {} backend connections",
                ids.len()
            );
            ensure!(
                core.pools
                    .all()
                    .iter()
                    .filter(|p| p.key().cluster == "late")
                    .all(|p| p.size() == 4),
                "a pool of late kept its old size"
            );
            for c in clients {
                c.disconnect().await?;
            }

            // Let the idle session park, then remove the cluster and its endpoint.
            tokio::time::sleep(Duration::from_millis(400)).await;
            let outcome = reload_with(String::new()).await?;
            let said = |what: &str| outcome.applied.iter().any(|a| a.contains(what));
            ensure!(said("endpoint \"late_rw\" removed"), "{outcome:?}");
            ensure!(said("cluster \"late\" removed"), "{outcome:?}");
            ensure!(core.topology.cluster("late").is_none());
            ensure!(
                tokio::net::TcpStream::connect(late_addr).await.is_err(),
                "the removed endpoint still accepts connections"
            );
            let started = Instant::now();
            loop {
                if c.ping().await.is_err() {
                    break;
                }
                ensure!(
                    started.elapsed() < Duration::from_secs(5),
                    "an idle session of the removed endpoint was not closed"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let one: Option<i32> = rw.query_first("SELECT 1").await?;
            ensure!(one == Some(1), "a session of a kept endpoint was disturbed");
            Ok(())
        }
        .await;
        let _ = stop.send(());
        result
    })
}
