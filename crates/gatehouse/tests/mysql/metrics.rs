//! `/metrics` after known MariaDB traffic through a proxy of the case's
//! own, read with the strict OpenMetrics reader (`tests/common/openmetrics.rs`):
//! transactions and statements (text and binary protocol) counted exactly,
//! the histograms' counts equal to the statements and leases they timed,
//! logins that succeeded and failed (by reason), backend connections
//! opened and failed, bytes and the tenant's series: the same mechanism
//! and names as PostgreSQL's.

use anyhow::{Context, Result, anyhow, ensure};
use mysql_async::prelude::*;

use crate::Ctx;
use crate::openmetrics::{self, settled};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "metrics::transactions_and_queries_are_counted_and_histograms_agree",
        counted,
    )]
}

/// Transactions of `M` statements (BEGIN, `M - 2` prepared SELECTs,
/// COMMIT), and autocommit statements.
const N: usize = 5;
const M: usize = 4;
const K: usize = 3;

/// The names another engineer's dashboard reads, as MariaDB's sessions
/// export them too.
const CONTRACT: &[&str] = &[
    "gatehouse_client_connections_setup_succeeded_total",
    "gatehouse_client_connections_setup_failed_total",
    "gatehouse_database_connections_setup_succeeded_total",
    "gatehouse_database_connections_setup_failed_total",
    "gatehouse_database_connections",
    "gatehouse_database_connections_max_allowed",
    "gatehouse_lease_wait_seconds_bucket",
    "gatehouse_query_seconds_bucket",
    "gatehouse_database_response_seconds_bucket",
    "gatehouse_transactions_total",
    "gatehouse_queries_total",
    "gatehouse_client_bytes_received_total",
    "gatehouse_client_bytes_sent_total",
    "gatehouse_tenant_transactions_total",
    "gatehouse_tenant_queries_total",
    "gatehouse_backend_up",
    "gatehouse_client_connections",
];

/// A tenant whose database does not exist on the server.
const NODB: (&str, &str) = ("nadia", "nadia-pw");

fn opts(at: std::net::SocketAddr, user: &str, password: &str, db: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(at.ip().to_string())
        .tcp_port(at.port())
        .user(Some(user))
        .pass(Some(password))
        .db_name(Some(db))
        .prefer_socket(false)
        // Known already: the driver asks the server nothing at connect.
        .max_allowed_packet(Some(16 * 1024 * 1024))
        .wait_timeout(Some(28_800))
        .into()
}

fn counted(ctx: &Ctx) -> Result<()> {
    openmetrics::refuses_what_the_format_refuses().map_err(|e| anyhow!(e))?;
    let hash = gatehouse_proto_mysql::auth::native_password::format_stored(
        &gatehouse_proto_mysql::auth::native_password::stored_hash(NODB.1.as_bytes()),
    );
    let more = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[[tenants]]\nname = \"{}\"\ndatabases = [\"no_such_db\"]\nsecret = \"owner\"\nmysql_native_password = \"{hash}\"\n",
        NODB.0
    );
    let settings = crate::own_config(ctx, "", &more)?;
    ctx.rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let rw = app.local_addr("rw").context("rw")?;
        let admin = app.admin_addr().context("no admin listener")?;
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let result = counted_on(rw, admin).await;
        let _ = stop.send(());
        proxy.await??;
        result
    })
}

async fn counted_on(rw: std::net::SocketAddr, admin: std::net::SocketAddr) -> Result<()> {
    let before = openmetrics::scrape(admin, None)?;
    let mut c = mysql_async::Conn::new(opts(rw, "alice", "alice-pw", "app1")).await?;
    for i in 0..N {
        c.query_drop("BEGIN").await?;
        for j in 0..M - 2 {
            let v = i64::try_from(i * M + j)?;
            let got: Option<i64> = c.exec_first("SELECT ?", (v,)).await?;
            ensure!(got == Some(v), "{got:?}");
        }
        c.query_drop("COMMIT").await?;
    }
    for _ in 0..K {
        c.query_drop("SELECT 1").await?;
    }
    // Failed logins: a wrong password, a database not the tenant's.
    let e = mysql_async::Conn::new(opts(rw, "alice", "wrong", "app1"))
        .await
        .err()
        .context("a wrong password logged in")?;
    ensure!(matches!(&e, mysql_async::Error::Server(s) if s.code == 1045), "{e:?}");
    let e = mysql_async::Conn::new(opts(rw, "alice", "alice-pw", "app2"))
        .await
        .err()
        .context("alice reached app2")?;
    ensure!(matches!(&e, mysql_async::Error::Server(s) if s.code == 1044), "{e:?}");
    // A login whose database is missing on the server: it logs in, and its
    // statement finds no connection (the pool fails to open one).
    let mut nodb = mysql_async::Conn::new(opts(rw, NODB.0, NODB.1, "no_such_db")).await?;
    ensure!(
        nodb.query_drop("SELECT 1").await.is_err(),
        "a statement ran on a missing database"
    );

    let labels = [("engine", "mysql"), ("endpoint", "rw")];
    let statements = (N * M + K) as f64;
    let transactions = (N + K) as f64;
    let after = settled(admin, None, |e| {
        e.grew(&before, "gatehouse_transactions_total", &labels) >= transactions
            && e.grew(&before, "gatehouse_query_seconds_count", &labels) >= statements
    })
    .await?;
    let grew = |name: &str, labels: &[(&str, &str)]| after.grew(&before, name, labels);
    ensure!(
        grew("gatehouse_transactions_total", &labels) == transactions,
        "transactions {}",
        grew("gatehouse_transactions_total", &labels)
    );
    // nadia's statement was never sent: not counted.
    ensure!(
        grew("gatehouse_queries_total", &labels) == statements,
        "queries {}",
        grew("gatehouse_queries_total", &labels)
    );
    for h in ["gatehouse_query_seconds", "gatehouse_database_response_seconds"] {
        let count = grew(&format!("{h}_count"), &labels);
        ensure!(count == statements, "{h}_count grew by {count}");
        ensure!(grew(&format!("{h}_sum"), &labels) > 0.0, "{h}_sum did not grow");
    }
    let leases = grew("gatehouse_lease_wait_seconds_count", &labels);
    ensure!(leases == transactions, "lease waits {leases}");
    let ok = "gatehouse_client_connections_setup_succeeded_total";
    ensure!(
        grew(ok, &[("endpoint", "rw"), ("tls", "false")]) == 2.0,
        "logins (alice, nadia)"
    );
    ensure!(grew(ok, &[("endpoint", "rw"), ("tls", "true")]) == 0.0);
    let failed = "gatehouse_client_connections_setup_failed_total";
    ensure!(grew(failed, &[("engine", "mysql"), ("reason", "invalid_password")]) == 1.0);
    ensure!(grew(failed, &[("engine", "mysql"), ("reason", "unknown_database")]) == 1.0);
    for b in [
        "gatehouse_client_bytes_received_total",
        "gatehouse_client_bytes_sent_total",
    ] {
        ensure!(grew(b, &labels) > 0.0, "{b} did not grow");
    }
    ensure!(grew("gatehouse_tenant_transactions_total", &[("tenant", "alice")]) == transactions);
    ensure!(grew("gatehouse_tenant_queries_total", &[("tenant", "alice")]) == statements);
    let my = [("engine", "mysql"), ("cluster", "my")];
    ensure!(grew("gatehouse_database_connections_setup_succeeded_total", &my) >= 1.0);
    ensure!(
        grew("gatehouse_database_connections_setup_failed_total", &my) == 1.0,
        "backend connections failed {}",
        grew("gatehouse_database_connections_setup_failed_total", &my)
    );
    ensure!(after.total("gatehouse_database_connections", &my) >= 1.0);
    ensure!(
        after
            .sum("gatehouse_database_connections_max_allowed", &my)
            .is_some_and(|n| n > 0.0),
        "no max allowed for the MariaDB backend"
    );
    let exported = after.sample_names();
    let missing: Vec<&&str> = CONTRACT.iter().filter(|n| !exported.contains(**n)).collect();
    ensure!(missing.is_empty(), "not exported: {missing:?}");
    let buckets = after
        .named("gatehouse_query_seconds_bucket")
        .filter(|s| s.labels.iter().any(|(k, v)| k == "engine" && v == "mysql"))
        .count();
    ensure!(
        buckets == gatehouse::meter::BUCKETS_SECONDS.len() + 1,
        "{buckets} buckets"
    );
    drop(nodb);
    c.disconnect().await?;
    Ok(())
}
