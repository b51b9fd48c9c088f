//! `/metrics` after known traffic, read with a strict OpenMetrics reader
//! (`tests/openmetrics.rs`), on a proxy of each case's own (so no other
//! case's traffic moves its counters): transactions and statements counted
//! exactly, in transaction and session pooling, the histograms' counts
//! equal to the statements and leases they timed, logins that succeeded
//! (plain and TLS) and failed (by reason), backend connections opened and
//! failed, bytes and the busiest tenants; with `[stats]` off, only the
//! counters move; and every metric the Grafana dashboard
//! (`docs/grafana/gatehouse.json`) queries is in a real scrape.

use std::collections::BTreeSet;

use anyhow::{Context, Result, anyhow, ensure};
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::openmetrics::{self, Exposition, settled};
use crate::own::Own;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("metrics::the_strict_reader_refuses_what_openmetrics_refuses", |_| {
            openmetrics::refuses_what_the_format_refuses().map_err(|e| anyhow!(e))
        }),
        (
            "metrics::transactions_and_queries_are_counted_and_histograms_agree",
            counted,
        ),
        (
            "metrics::with_histograms_and_tenant_series_off_only_the_counters_move",
            switched_off,
        ),
        (
            "metrics::every_metric_the_grafana_dashboard_queries_is_exported",
            dashboard,
        ),
    ]
}

/// Transactions of `M` statements (BEGIN, `M - 2` extended-protocol
/// SELECTs, COMMIT), and autocommit statements.
const N: usize = 5;
const M: usize = 4;
const K: usize = 3;

/// A tenant whose database does not exist on the server: its pool cannot
/// open a connection.
const NODB: (&str, &str) = ("nadia", "nadia-pw");

fn own_settings(ctx: &Ctx, stats: &str) -> Result<gatehouse::config::Settings> {
    crate::reload::settings(ctx, |t| {
        format!(
            "{t}\n[[tenants]]\nname = \"{}\"\ndatabases = [\"no_such_db\"]\nsecret = \"owner\"\nscram_verifier = \"{}\"\n{stats}",
            NODB.0,
            ScramVerifier::from_password(NODB.1, &random_salt(), 4096)
        )
    })
}

/// A plain connection string to `endpoint` of `own`.
fn conninfo(own: &Own, endpoint: &str, user: &str, password: &str, db: &str) -> Result<String> {
    let a = own.addr(endpoint)?;
    Ok(format!(
        "host={} port={} user={user} password={password} dbname={db} sslmode=disable",
        a.ip(),
        a.port()
    ))
}

async fn connect(info: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, conn) = tokio_postgres::connect(info, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// `N` transactions of `M` statements and `K` autocommit statements.
async fn traffic(c: &tokio_postgres::Client) -> Result<()> {
    for i in 0..N {
        c.batch_execute("BEGIN").await?;
        for j in 0..M - 2 {
            let v = i32::try_from(i * M + j)?;
            let row = c.query_one("SELECT $1::int", &[&v]).await?;
            ensure!(row.get::<_, i32>(0) == v);
        }
        c.batch_execute("COMMIT").await?;
    }
    for _ in 0..K {
        c.simple_query("SELECT 1").await?;
    }
    Ok(())
}

fn counted(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(own_settings(ctx, "")?).await?;
        let result = counted_on(ctx, &own).await;
        own.stop().await?;
        result
    })
}

async fn counted_on(ctx: &Ctx, own: &Own) -> Result<()> {
    let admin = own.admin.context("no admin listener")?;
    let token = Some(ctx.admin_token.as_str());
    let before = openmetrics::scrape(admin, token)?;
    let rw = [("engine", "postgres"), ("endpoint", "rw")];
    // Transaction pooling, plain.
    let c = own.client("rw").await?;
    traffic(&c).await?;
    // One TLS login and statement.
    let tls = {
        let a = own.addr("rw")?;
        let info = format!(
            "host=localhost hostaddr={} port={} user=alice password=alice-pw dbname=app1 sslmode=require",
            a.ip(),
            a.port()
        );
        let (client, conn) = tokio_postgres::connect(&info, crate::tokens::tls_connector(ctx)?).await?;
        tokio::spawn(conn);
        client
    };
    tls.simple_query("SELECT 1").await?;
    // Session pooling (the byte relay): two statements.
    let solo = connect(&conninfo(own, "solo", "alice", "alice-pw", "app1")?).await?;
    solo.simple_query("SELECT 1").await?;
    solo.simple_query("SELECT 2").await?;
    // Failed logins: a wrong password, a database not the tenant's.
    let e = connect(&conninfo(own, "rw", "alice", "wrong", "app1")?)
        .await
        .err()
        .context("a wrong password logged in")?;
    ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
    let e = connect(&conninfo(own, "rw", "alice", "alice-pw", "app2")?)
        .await
        .err()
        .context("alice reached app2")?;
    ensure!(
        e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
        "{e:?}"
    );
    // A login whose database is missing on the server: the pool fails
    // to open a connection for its greeting.
    let e = connect(&conninfo(own, "ro", NODB.0, NODB.1, "no_such_db")?).await;
    ensure!(e.is_err(), "a login to a missing database was greeted");

    let statements = (N * M + K) as f64;
    let transactions = (N + K) as f64;
    let after = settled(admin, token, |e| {
        e.grew(&before, "gatehouse_transactions_total", &rw) >= transactions + 1.0
            && e.grew(&before, "gatehouse_query_seconds_count", &rw) >= statements + 1.0
            && e.grew(&before, "gatehouse_transactions_total", &[("endpoint", "solo")]) >= 2.0
    })
    .await?;
    let grew = |name: &str, labels: &[(&str, &str)]| after.grew(&before, name, labels);
    // Transaction pooling: N + K transactions, N * M + K statements from
    // the plain client, one of each from the TLS one; every statement
    // timed through the proxy and on the backend, every lease's wait.
    ensure!(
        grew("gatehouse_transactions_total", &rw) == transactions + 1.0,
        "transactions {}",
        grew("gatehouse_transactions_total", &rw)
    );
    ensure!(
        grew("gatehouse_queries_total", &rw) == statements + 1.0,
        "queries {}",
        grew("gatehouse_queries_total", &rw)
    );
    for h in ["gatehouse_query_seconds", "gatehouse_database_response_seconds"] {
        let count = grew(&format!("{h}_count"), &rw);
        ensure!(count == statements + 1.0, "{h}_count grew by {count}");
        ensure!(grew(&format!("{h}_sum"), &rw) > 0.0, "{h}_sum did not grow");
    }
    let leases = grew("gatehouse_lease_wait_seconds_count", &rw);
    ensure!(leases == transactions + 1.0, "lease waits {leases}");
    // Session pooling counts through its relay (no histograms there).
    let solo_labels = [("engine", "postgres"), ("endpoint", "solo")];
    ensure!(grew("gatehouse_transactions_total", &solo_labels) == 2.0);
    ensure!(grew("gatehouse_queries_total", &solo_labels) == 2.0);
    // Logins: two plain and one TLS on rw (the failed ones not among them).
    let ok = "gatehouse_client_connections_setup_succeeded_total";
    ensure!(grew(ok, &[("endpoint", "rw"), ("tls", "false")]) == 1.0, "plain logins");
    ensure!(grew(ok, &[("endpoint", "rw"), ("tls", "true")]) == 1.0, "TLS logins");
    ensure!(
        grew(ok, &[("endpoint", "solo"), ("tls", "false")]) == 1.0,
        "solo logins"
    );
    let failed = "gatehouse_client_connections_setup_failed_total";
    ensure!(grew(failed, &[("endpoint", "rw"), ("reason", "invalid_password")]) == 1.0);
    ensure!(grew(failed, &[("endpoint", "rw"), ("reason", "not_allowed")]) == 1.0);
    ensure!(grew(failed, &[("endpoint", "rw")]) == 2.0, "other failed logins on rw");
    // Bytes both ways.
    for b in [
        "gatehouse_client_bytes_received_total",
        "gatehouse_client_bytes_sent_total",
    ] {
        ensure!(grew(b, &rw) > 0.0, "{b} did not grow");
    }
    // Tenants: alice's transactions and statements, everywhere.
    let alice = [("tenant", "alice")];
    ensure!(grew("gatehouse_tenant_transactions_total", &alice) == transactions + 3.0);
    ensure!(grew("gatehouse_tenant_queries_total", &alice) == statements + 3.0);
    // Backend connections: the pools opened some on main's writer, and
    // failed once for the missing database (on the replica ro routes to).
    let main = [("engine", "postgres"), ("cluster", "main")];
    ensure!(grew("gatehouse_database_connections_setup_succeeded_total", &main) >= 1.0);
    ensure!(
        grew("gatehouse_database_connections_setup_failed_total", &main) == 1.0,
        "backend connections failed {}",
        grew("gatehouse_database_connections_setup_failed_total", &main)
    );
    ensure!(after.total("gatehouse_database_connections", &main) >= 1.0);
    // 90 % (the default) of the test cluster's max_connections, 400.
    let cap = after
        .named("gatehouse_database_connections_max_allowed")
        .find(|s| s.labels.iter().any(|(k, v)| k == "cluster" && v == "main"));
    ensure!(cap.map(|s| s.value) == Some(360.0), "max allowed {cap:?}");
    // Every histogram's buckets are whole, ascending and end at +Inf (the
    // reader checked); here, each bucket series has every bound.
    let bounds = after
        .named("gatehouse_query_seconds_bucket")
        .filter(|s| s.labels.iter().any(|(k, v)| k == "endpoint" && v == "rw"))
        .count();
    ensure!(
        bounds == gatehouse::meter::BUCKETS_SECONDS.len() + 1,
        "{bounds} buckets"
    );
    drop((c, tls, solo));
    Ok(())
}

fn switched_off(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(own_settings(ctx, "[stats]\nhistograms = false\ntenant_series = 0\n")?).await?;
        let result = async {
            let admin = own.admin.context("no admin listener")?;
            let token = Some(ctx.admin_token.as_str());
            let before = openmetrics::scrape(admin, token)?;
            let c = own.client("rw").await?;
            traffic(&c).await?;
            let rw = [("endpoint", "rw")];
            let after = settled(admin, token, |e| {
                e.grew(&before, "gatehouse_transactions_total", &rw) >= (N + K) as f64
            })
            .await?;
            let grew = |name: &str| after.grew(&before, name, &rw);
            ensure!(grew("gatehouse_transactions_total") == (N + K) as f64);
            ensure!(grew("gatehouse_queries_total") == (N * M + K) as f64);
            for h in [
                "gatehouse_query_seconds_count",
                "gatehouse_database_response_seconds_count",
                "gatehouse_lease_wait_seconds_count",
            ] {
                ensure!(grew(h) == 0.0, "{h} grew by {} with histograms off", grew(h));
            }
            ensure!(
                after.named("gatehouse_tenant_transactions_total").next().is_none(),
                "tenant series with tenant_series = 0"
            );
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}

/// The metric names in `docs/grafana/gatehouse.json`'s queries: every
/// `expr` of its panels and every query of its variables.
fn dashboard_metrics() -> Result<BTreeSet<String>> {
    let text = include_str!("../../../../docs/grafana/gatehouse.json");
    let json: serde_json::Value = serde_json::from_str(text)?;
    let mut queries = Vec::new();
    collect_queries(&json, &mut queries);
    ensure!(queries.len() >= 12, "only {} queries in the dashboard", queries.len());
    let name = regex::Regex::new(r"gatehouse_[a-zA-Z0-9_:]*")?;
    Ok(queries
        .iter()
        .flat_map(|q| name.find_iter(q).map(|m| m.as_str().to_owned()))
        .collect())
}

fn collect_queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "query" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => collect_queries(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_queries(v, out)),
        _ => {}
    }
}

fn dashboard(ctx: &Ctx) -> Result<()> {
    let wanted = dashboard_metrics()?;
    ctx.rt.block_on(async {
        let own = Own::start(own_settings(ctx, "")?).await?;
        let result = async {
            let admin = own.admin.context("no admin listener")?;
            let token = Some(ctx.admin_token.as_str());
            // Some of everything: traffic, and a failed login.
            let c = own.client("rw").await?;
            traffic(&c).await?;
            let e = connect(&conninfo(&own, "rw", "alice", "wrong", "app1")?).await;
            ensure!(e.is_err(), "a wrong password logged in");
            let scraped: Exposition = settled(admin, token, |e| {
                e.total("gatehouse_tenant_transactions_total", &[]) >= (N + K) as f64
                    && e.total("gatehouse_client_connections_setup_failed_total", &[]) >= 1.0
            })
            .await?;
            let exported = scraped.sample_names();
            let missing: Vec<&String> = wanted.iter().filter(|n| !exported.contains(n.as_str())).collect();
            ensure!(
                missing.is_empty(),
                "the dashboard queries metrics /metrics does not export: {missing:?}"
            );
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}
