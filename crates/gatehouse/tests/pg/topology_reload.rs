//! Reloads that change the topology itself, on a proxy of the test's own
//! read from a file of its own (the reload reads the file again, as SIGHUP
//! does): a cluster and an endpoint added (a listener bound, the cluster
//! probed, clients served through it), the pool size of a pool in use
//! raised, then both removed (the listener closes, the endpoint's sessions
//! end between transactions, other endpoints' sessions go on); and a
//! reload that cannot bind a new address changes nothing at all.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::Ctx;
use crate::own::OwnFile;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "reload::cluster_and_endpoint_added_then_removed_without_restart",
            added_then_removed,
        ),
        (
            "reload::an_address_that_cannot_be_bound_changes_nothing",
            unbindable_changes_nothing,
        ),
    ]
}

/// A cluster "late" over the test cluster's primary and replica, with a
/// pool of `size`, its endpoint "late_rw" on `port`, and a session-mode
/// endpoint "late_s".
fn late(ctx: &Ctx, size: u32, port: u16) -> Result<String> {
    let primary = ctx.cluster.pg_primary().context("no primary")?;
    let replica = ctx.cluster.pg_replicas().first().cloned().context("no replica")?;
    Ok(format!(
        r#"
[[clusters]]
name = "late"
engine = "postgres"
backends = ["{}", "{}"]
monitor_secret = "superuser"
health_check_interval = "200ms"
pool = {{ size = {size}, borrow_timeout = "5s" }}

[[endpoints]]
name = "late_rw"
listen = "127.0.0.1:{port}"
cluster = "late"
role = "read_write"

[[endpoints]]
name = "late_s"
listen = "127.0.0.1:0"
cluster = "late"
role = "read_write"
pool_mode = "session"
"#,
        primary.addr(),
        replica.addr()
    ))
}

async fn connect(addr: SocketAddr) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let conninfo = format!(
        "host={} port={} user=alice password=alice-pw dbname=app1 sslmode=disable",
        addr.ip(),
        addr.port()
    );
    let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

fn added_then_removed(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OwnFile::start(ctx, "own-topology.toml").await?;
        let primary = ctx.cluster.pg_primary().context("no primary")?;
        let port = gatehouse_testkit::ports::free_port(&[])?;
        let rw = connect(own.addr("rw")?).await?;

        // Added: the reload says so, the new address answers, and its
        // first transaction reaches the writer the new cluster's probe found.
        let outcome = own.reload_with(&late(ctx, 2, port)?).await?;
        let said = |what: &str| outcome.applied.iter().any(|a| a.contains(what));
        ensure!(said("cluster \"late\" added"), "{outcome:?}");
        ensure!(said("endpoint \"late_rw\" added"), "{outcome:?}");
        ensure!(own.addr("late_rw")?.port() == port);
        let c = connect(own.addr("late_rw")?).await?;
        let s = connect(own.addr("late_s")?).await?;
        let one: i32 = s.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1);
        let server: i32 = c.query_one("SELECT inet_server_port()", &[]).await?.get(0);
        ensure!(server == i32::from(primary.port), "late_rw reached {server}");
        let view = own.core.topology.cluster("late").context("late not listed")?;
        ensure!(
            view.writer().is_some_and(|w| w.addr == primary.addr()),
            "the new cluster elected no writer"
        );

        // The pool in use grows from 2 to 6: the session-mode client holds
        // one, and five transactions open at once get five more.
        let outcome = own.reload_with(&late(ctx, 6, port)?).await?;
        ensure!(
            outcome
                .applied
                .iter()
                .any(|a| a.contains("cluster \"late\": pool.size changed")),
            "{outcome:?}"
        );
        let sizes: Vec<usize> = own
            .core
            .pools
            .all()
            .iter()
            .filter(|p| p.key().cluster == "late")
            .map(|p| p.size())
            .collect();
        ensure!(
            !sizes.is_empty() && sizes.iter().all(|s| *s == 6),
            "pool sizes {sizes:?}"
        );
        let mut clients = Vec::new();
        for _ in 0..5 {
            clients.push(connect(own.addr("late_rw")?).await?);
        }
        // Each holds its transaction open until all five have their
        // connection: with the old size the fifth could not get one.
        let all_in = Arc::new(tokio::sync::Barrier::new(clients.len()));
        let pids = futures_util::future::try_join_all(clients.iter().map(|c| {
            let all_in = all_in.clone();
            async move {
                c.batch_execute("BEGIN").await?;
                let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
                all_in.wait().await;
                c.batch_execute("COMMIT").await?;
                anyhow::Ok(pid)
            }
        }))
        .await?;
        let mut pids = pids;
        pids.sort_unstable();
        pids.dedup();
        ensure!(
            pids.len() == 5,
            "5 concurrent transactions used {} backend connections",
            pids.len()
        );

        // Removed: the reload says so, the address refuses, the endpoints'
        // idle sessions (transaction and session mode) are closed, other
        // endpoints' sessions go on.
        let outcome = own.reload_with("").await?;
        let said = |what: &str| outcome.applied.iter().any(|a| a.contains(what));
        ensure!(said("endpoint \"late_rw\" removed"), "{outcome:?}");
        ensure!(said("cluster \"late\" removed"), "{outcome:?}");
        ensure!(own.core.topology.cluster("late").is_none());
        let refused = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
        ensure!(refused.is_err(), "the removed endpoint still accepts connections");
        let started = Instant::now();
        while !c.is_closed() || !s.is_closed() {
            ensure!(
                started.elapsed() < Duration::from_secs(5),
                "an idle session of a removed endpoint was not closed (transaction mode: {}, session mode: {})",
                c.is_closed(),
                s.is_closed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ensure!(c.simple_query("SELECT 1").await.is_err());
        let one: i32 = rw.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1, "a session of a kept endpoint was disturbed");
        Ok(())
    })
}

fn unbindable_changes_nothing(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OwnFile::start(ctx, "own-unbindable.toml").await?;
        // Someone else holds the address the new endpoint wants.
        let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = taken.local_addr()?.port();
        let refused = own.reload_with(&late(ctx, 2, port)?).await;
        let Err(e) = refused else {
            anyhow::bail!("a reload whose listener cannot be bound was applied")
        };
        ensure!(e.to_string().contains("cannot listen"), "{e}");
        ensure!(
            own.core.topology.cluster("late").is_none(),
            "the refused reload's cluster was added"
        );
        ensure!(own.app_endpoints.local_addr("late_rw").is_none());
        let (applied, refused) = own.reloader.counts();
        ensure!(applied == 0 && refused == 1, "counts {applied}/{refused}");
        // The proxy goes on as before.
        let one: i32 = connect(own.addr("rw")?).await?.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1);
        drop(taken);
        Ok(())
    })
}
