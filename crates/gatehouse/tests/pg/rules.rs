//! Query rules and digest statistics through a proxy of the test's own
//! (the test configuration plus `[digests]` and the rules below), over the
//! simple and the extended protocol: a block by statement kind and by
//! digest answers 42501 and runs nothing; rules of another tenant, network,
//! database or endpoint do not apply; a rewrite changes what runs; a route
//! sends a statement of a read/write endpoint to a replica; a statement
//! timeout cancels (57014); a session-mode endpoint is inspected too; each
//! rule counts its hits, and the digest store (and `GET /api/digests`) has
//! each statement's calls, errors and rows.

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "rules::block_rewrite_route_timeout_and_digests_both_protocols",
        rules_both_protocols,
    )]
}

/// The rules under test: both engines' (`tests/rules_common.toml`), then
/// a route to a replica.
pub const RULES: &str = concat!(
    include_str!("../rules_common.toml"),
    r#"
[[rules]]
name = "to-replica"
query_regex = "in_recovery"
route = "replica"
"#
);

fn code(e: &tokio_postgres::Error) -> Option<&str> {
    e.code().map(|c| c.code())
}

fn rules_both_protocols(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = crate::own::Own::start(crate::reload::settings(ctx, |t| format!("{t}\n{RULES}"))?).await?;
        let (core, rules) = (own.core.clone(), own.rules.clone());
        let result = async {
            let admin = own.admin.context("no admin API")?;
            let c = own.client("tx").await?;

            // Block by kind, both protocols; the session goes on.
            let e = c
                .batch_execute("DROP TABLE no_such_table")
                .await
                .err()
                .context("DROP ran")?;
            ensure!(code(&e) == Some("42501"), "{e:?}");
            ensure!(
                crate::db_message(&e).contains("dropping tables is not allowed"),
                "{e:?}"
            );
            let e = c
                .prepare("DROP TABLE no_such_table")
                .await
                .err()
                .context("DROP prepared")?;
            ensure!(code(&e) == Some("42501"), "{e:?}");

            // A rewrite, both protocols.
            let simple = crate::txn::text(&c, "SELECT 'question'").await?;
            ensure!(simple == ["answer"], "simple: {simple:?}");
            let extended: String = c.query_one("SELECT 'question'", &[]).await?.get(0);
            ensure!(extended == "answer", "extended: {extended}");

            // Block by digest (whatever the literal), both protocols; a
            // statement of another shape runs.
            let e = c.batch_execute("SELECT 42 AS probe").await.err().context("probe ran")?;
            ensure!(code(&e) == Some("42501"), "{e:?}");
            let e = c.query_one("SELECT 7 AS probe", &[]).await.err().context("probe ran")?;
            ensure!(code(&e) == Some("42501"), "{e:?}");
            let n: i32 = c.query_one("SELECT 7 AS probes", &[]).await?.get(0);
            ensure!(n == 7);

            // A route to a replica from a read/write endpoint.
            let on_replica: bool = c.query_one("SELECT pg_is_in_recovery()", &[]).await?.get(0);
            ensure!(on_replica, "the routed statement ran on the writer");
            let on_writer: bool = c.query_one("SELECT NOT pg_is_in_recovery() AS w", &[]).await?.get(0);
            ensure!(!on_writer, "also routed: the rule matches the text");
            let writer: bool = c.query_one("SELECT 1 = 1", &[]).await?.get(0);
            ensure!(writer);

            // A statement timeout, both protocols.
            let e = c.batch_execute("SELECT pg_sleep(5)").await.err().context("slept")?;
            ensure!(e.code() == Some(&SqlState::QUERY_CANCELED), "{e:?}");
            let e = c.query_one("SELECT pg_sleep(5)", &[]).await.err().context("slept")?;
            ensure!(e.code() == Some(&SqlState::QUERY_CANCELED), "{e:?}");
            let n: i32 = c.query_one("SELECT 1", &[]).await?.get(0);
            ensure!(n == 1, "the session goes on after its timeout");

            // A session-mode endpoint: served by the transaction path,
            // pinned, and inspected the same way.
            let s = own.client("solo").await?;
            let e = s
                .batch_execute("DROP TABLE no_such_table")
                .await
                .err()
                .context("DROP ran in session mode")?;
            ensure!(code(&e) == Some("42501"), "{e:?}");
            let pid: i32 = s.query_one("SELECT pg_backend_pid() AS probes_pid", &[]).await?.get(0);
            let again: i32 = s.query_one("SELECT pg_backend_pid() AS probes_pid", &[]).await?.get(0);
            ensure!(pid == again, "a session-mode client changed backend connections");

            // Hits.
            let hits: std::collections::HashMap<String, u64> =
                rules.counters().into_iter().map(|r| (r.name, r.hits)).collect();
            for (name, at_least) in [
                ("no-drop", 3),
                ("question", 2),
                ("by-digest", 2),
                ("to-replica", 2),
                ("slow", 2),
            ] {
                ensure!(hits.get(name).copied().unwrap_or(0) >= at_least, "{name}: {hits:?}");
            }
            for name in ["other-tenant", "other-network", "other-database"] {
                ensure!(hits.get(name) == Some(&0), "{name} applied: {hits:?}");
            }

            // Digests: what ran, with its errors and rows.
            let store = core.digests.load_full().context("digest statistics are off")?;
            let rows = store.snapshot(None);
            let sleep = rows
                .iter()
                .find(|r| r.text == "select pg_sleep(?)")
                .with_context(|| format!("{rows:#?}"))?;
            ensure!(sleep.calls == 2 && sleep.errors == 2, "{sleep:?}");
            ensure!(sleep.tenants == ["alice"] && sleep.endpoints == ["tx"], "{sleep:?}");
            let probes = rows
                .iter()
                .find(|r| r.text == "select ? as probes")
                .with_context(|| format!("{rows:#?}"))?;
            ensure!(
                probes.calls == 1 && probes.errors == 0 && probes.rows == 1,
                "{probes:?}"
            );
            ensure!(
                !rows.iter().any(|r| r.text.contains("drop")),
                "a blocked statement ran: {rows:#?}"
            );
            let pids = rows
                .iter()
                .find(|r| r.text == "select pg_backend_pid() as probes_pid")
                .with_context(|| format!("{rows:#?}"))?;
            ensure!(pids.calls == 2 && pids.endpoints == ["solo"], "{pids:?}");
            let api = gatehouse_testkit::http::request(admin, "GET", "/api/digests?limit=100", Some(&ctx.admin_token))?;
            ensure!(
                api.status == 200 && api.body.contains("select pg_sleep(?)"),
                "{}",
                api.body
            );
            let metrics = gatehouse_testkit::http::request(admin, "GET", "/metrics", Some(&ctx.admin_token))?;
            ensure!(
                metrics.body.contains("gatehouse_rule_hits_total{rule=\"no-drop\"}"),
                "{}",
                metrics.body
            );
            let reset = gatehouse_testkit::http::request(admin, "POST", "/api/digests/reset", Some(&ctx.admin_token))?;
            ensure!(reset.status == 200 && store.is_empty(), "{}", reset.body);
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}
