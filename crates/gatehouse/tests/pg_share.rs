//! The share of the server's `max_connections` all pools on a backend may
//! use, tested alone against its own PostgreSQL: with the other integration
//! cases running in parallel, their load makes the count of connections
//! this case sees depend on timing.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_testkit::{Cluster, Options};
use tokio_postgres::error::SqlState;

fn config(cluster: &Cluster) -> Result<String> {
    let p = cluster.pg_primary().context("no primary")?;
    let verifier = ScramVerifier::from_password("alice-pw", &random_salt(), 4096);
    Ok(format!(
        r#"
[[clusters]]
name = "pct"
engine = "postgres"
backends = ["{}:{}"]
monitor_secret = "superuser"
pool = {{ size = 10, borrow_timeout = "1s", max_connections_percent = 2 }}

[[endpoints]]
name = "pct"
listen = "127.0.0.1:0"
cluster = "pct"
role = "read_write"

[[tenants]]
name = "alice"
databases = ["app1"]
secret = "owner"
scram_verifier = "{verifier}"

[[secrets]]
name = "owner"
user = "app_owner"
password = "owner-pw"

[[secrets]]
name = "superuser"
user = "{}"
password = "{}"
"#,
        p.host,
        p.port,
        cluster.pg_user(),
        cluster.pg_password()
    ))
}

async fn connect(addr: std::net::SocketAddr) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (c, conn) = tokio_postgres::connect(
        &format!(
            "host={} port={} user=alice password=alice-pw dbname=app1 sslmode=disable",
            addr.ip(),
            addr.port()
        ),
        tokio_postgres::NoTls,
    )
    .await?;
    tokio::spawn(conn);
    Ok(c)
}

#[test]
fn share_of_server_max_connections() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("gatehouse-pg-share-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = Cluster::up(
        &dir,
        &Options {
            pg_max_connections: 200,
            ..Options::default()
        },
    )?;
    let primary = cluster.pg_primary().context("no primary")?;
    let primary_addr = format!("{}:{}", primary.host, primary.port);
    let name = primary.name.clone();
    cluster.pg_sql(&name, "postgres", "CREATE ROLE app_owner LOGIN PASSWORD 'owner-pw'")?;
    cluster.pg_sql(&name, "postgres", "CREATE DATABASE app1 OWNER app_owner")?;
    let settings = gatehouse::config::parse(&config(&cluster)?, &dir).map_err(|p| anyhow::anyhow!("{p}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let addr = app.local_addr("pct").context("pct")?;
        let core = app.pg_core();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let known = Instant::now() + Duration::from_secs(20);
        while core
            .topology
            .cluster("pct")
            .and_then(|c| c.max_connections(&primary_addr))
            .is_none()
        {
            ensure!(
                Instant::now() < known,
                "the proxy never learned the server's max_connections"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // 2% of the server's 200 connections: 4.
        let cap = 4;
        let mut holders = Vec::new();
        for _ in 0..cap {
            let c = connect(addr).await.context("holder connect")?;
            c.batch_execute("BEGIN; SELECT 1").await.context("holder BEGIN")?;
            holders.push(c);
        }
        // The extra client needs a backend connection to log in (for the
        // server's parameters) or for its first query: either way it waits
        // for the borrow timeout and is told which limit it hit.
        let started = Instant::now();
        let err = match connect(addr).await {
            Err(e) => e,
            Ok(extra) => extra
                .simple_query("SELECT 1")
                .await
                .err()
                .with_context(|| format!("a backend connection beyond the cap of {cap} was opened"))?,
        };
        ensure!(err.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{err:?}");
        let message = err.as_db_error().map(|d| d.message().to_string()).unwrap_or_default();
        ensure!(message.contains("max_connections_percent"), "{message}");
        ensure!(
            started.elapsed() >= Duration::from_millis(900),
            "gave up before the borrow timeout"
        );
        for h in &holders {
            h.batch_execute("COMMIT").await.context("holder COMMIT")?;
        }
        let again = connect(addr).await.context("client after COMMIT")?;
        again.simple_query("SELECT 1").await.context("query after COMMIT")?;
        drop((holders, again));
        let _ = tx.send(());
        tokio::time::timeout(Duration::from_secs(15), proxy)
            .await
            .context("run() did not return")???;
        anyhow::Ok(())
    });
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    result
}
