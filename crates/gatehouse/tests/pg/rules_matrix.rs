//! Each query-rule match field and each action the other rule test does
//! not show (`tests/rules_matrix.toml`), through a proxy of the test's
//! own, over the simple and the extended protocol: a rule matched by
//! tenant, database, endpoint, client address, statement kind, digest,
//! digest id or text blocks its statements (42501) and nothing else; a
//! route sends a statement to the writer from a read-only or a split
//! endpoint (whose reads go to a replica otherwise), to a
//! replica or a named backend from a read/write one, or to another
//! cluster, and the next statement comes back; a logging rule's hits are
//! kept for `GET /api/rules/log`.

use std::collections::HashMap;

use anyhow::{Context, Result, ensure};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::Ctx;
use crate::own::Own;
use crate::rules_matrix_cases::{ACTION_RULES, BLOCKED, DIGEST_ID_OF, MATCH_RULES, Names};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "rules::each_match_field_selects_its_statements_both_protocols",
            match_fields,
        ),
        (
            "rules::routes_to_writer_replica_backend_and_cluster_and_logs_both_protocols",
            actions,
        ),
    ]
}

#[derive(Debug, Clone, Copy)]
enum Proto {
    Simple,
    Extended,
}

const PROTOCOLS: [Proto; 2] = [Proto::Simple, Proto::Extended];

/// A proxy of the test's own: the test configuration, a split endpoint,
/// and the matrix rules.
async fn start(ctx: &Ctx) -> Result<Own> {
    let replica = ctx.cluster.pg_replicas().first().context("no replica")?.addr();
    let digest_id = format!("{:016x}", gatehouse_sql::digest(DIGEST_ID_OF).id);
    let rules = crate::rules_matrix_cases::rules(&Names {
        endpoint: "tx",
        read_only: "ro",
        split: "sp",
        replica: &replica,
        other_cluster: "life",
        digest_id: &digest_id,
    });
    let split = "[[endpoints]]\nname = \"sp\"\nlisten = \"127.0.0.1:0\"\ncluster = \"main\"\nrole = \"split\"\n";
    Own::start(crate::reload::settings(ctx, |t| format!("{t}\n{split}\n{rules}"))?).await
}

fn hits(own: &Own) -> HashMap<String, u64> {
    own.rules.counters().into_iter().map(|r| (r.name, r.hits)).collect()
}

/// The first column of the first row of `sql`, as text, over `proto`.
async fn first(c: &Client, proto: Proto, sql: &str) -> Result<String, tokio_postgres::Error> {
    match proto {
        Proto::Simple => Ok(c
            .simple_query(sql)
            .await?
            .into_iter()
            .find_map(|m| match m {
                SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or_default().to_string()),
                _ => None,
            })
            .unwrap_or_default()),
        Proto::Extended => {
            let rows = c.query(sql, &[]).await?;
            Ok(rows
                .first()
                .and_then(|r| r.try_get::<_, String>(0).ok())
                .unwrap_or_default())
        }
    }
}

async fn blocked(c: &Client, proto: Proto, sql: &str, message: &str) -> Result<()> {
    let e = first(c, proto, sql)
        .await
        .err()
        .with_context(|| format!("{proto:?}: {sql} ran"))?;
    ensure!(
        e.code().map(|c| c.code()) == Some("42501") && crate::db_message(&e) == message,
        "{proto:?}: {sql}: {e:?}"
    );
    Ok(())
}

fn match_fields(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = start(ctx).await?;
        let result = async {
            let c = own.client("tx").await?;
            let ro = own.client("ro").await?;
            // Statements each rule must leave alone: another kind, another
            // shape, another endpoint.
            let others = [
                (&c, "SELECT 'm_kind' AS k", "m_kind"),
                (&c, "SELECT 'x' || 5 AS m_digest", "x5"),
                (&c, "SELECT 'y' || 6 AS m_digest_id", "y6"),
                (&ro, "SELECT 'm_endpoint' AS e", "m_endpoint"),
            ];
            for proto in PROTOCOLS {
                for (sql, message) in BLOCKED {
                    blocked(&c, proto, sql, message).await?;
                }
                for (client, sql, want) in others {
                    let got = first(client, proto, sql)
                        .await
                        .with_context(|| format!("{proto:?}: {sql}"))?;
                    ensure!(got == want, "{proto:?}: {sql} gave {got}");
                }
                ensure!(first(&c, proto, "SELECT 'on'").await? == "on", "the session goes on");
            }
            let hits = hits(&own);
            for rule in MATCH_RULES {
                ensure!(hits.get(rule).copied().unwrap_or(0) >= 2, "{rule}: {hits:?}");
            }
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}

fn actions(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = start(ctx).await?;
        let result = async {
            let primary = ctx.cluster.pg_primary().context("no primary")?.port.to_string();
            let replica = ctx
                .cluster
                .pg_replicas()
                .first()
                .context("no replica")?
                .port
                .to_string();
            let c = own.client("tx").await?;
            let ro = own.client("ro").await?;
            let sp = own.client("sp").await?;
            let port = |marker: &str| format!("SELECT inet_server_port()::text AS {marker}");
            for proto in PROTOCOLS {
                let on = |what: &str, got: String, want: &str| -> Result<()> {
                    ensure!(got == want, "{proto:?}: {what} ran on port {got}, not {want}");
                    Ok(())
                };
                // A read/write endpoint: the writer, unless a rule says a
                // replica or names one; then the writer again.
                on("plain", first(&c, proto, &port("plain")).await?, &primary)?;
                on("a_replica", first(&c, proto, &port("a_replica")).await?, &replica)?;
                on("a_backend", first(&c, proto, &port("a_backend")).await?, &replica)?;
                on("plain after", first(&c, proto, &port("plain")).await?, &primary)?;
                // A read-only endpoint: a replica, unless a rule says the writer.
                on("ro plain", first(&ro, proto, &port("plain")).await?, &replica)?;
                on("ro a_writer", first(&ro, proto, &port("a_writer")).await?, &primary)?;
                on("ro plain after", first(&ro, proto, &port("plain")).await?, &replica)?;
                // A split endpoint: a read goes to a replica, unless a rule
                // says the writer.
                on("split read", first(&sp, proto, &port("plain")).await?, &replica)?;
                on("split a_writer", first(&sp, proto, &port("a_writer")).await?, &primary)?;
                on("split read after", first(&sp, proto, &port("plain")).await?, &replica)?;
                // Another cluster: its connections run its init_query
                // (work_mem 3MB); the next statement is back on the session's.
                let mem = |marker: &str| format!("SELECT current_setting('work_mem') AS {marker}");
                let there = first(&c, proto, &mem("a_cluster")).await?;
                ensure!(there == "3MB", "{proto:?}: the cluster route ran with work_mem {there}");
                let back = first(&c, proto, &mem("plain")).await?;
                ensure!(
                    back != "3MB",
                    "{proto:?}: the next statement stayed on the routed cluster"
                );
                // A logging rule: the statement runs, and its hit is kept.
                ensure!(first(&c, proto, "SELECT 'a_log' AS logged").await? == "a_log");
            }
            let hits = hits(&own);
            for rule in ACTION_RULES {
                ensure!(hits.get(rule).copied().unwrap_or(0) >= 2, "{rule}: {hits:?}");
            }
            let life = own.core.topology.cluster("life").context("no life cluster")?;
            let by_rule = life.routed_by_reason().into_iter().find(|(w, _)| *w == "rule_cluster");
            ensure!(by_rule.is_some_and(|(_, n)| n >= 2), "{:?}", life.routed_by_reason());
            let logged = own.rules.logged().recent();
            let hit = logged
                .iter()
                .find(|h| h.statement.contains("a_log"))
                .with_context(|| format!("{logged:?}"))?;
            ensure!(
                hit.tenant == "alice" && hit.endpoint == "tx" && hit.rules == ["a-log"] && !hit.blocked,
                "{hit:?}"
            );
            let api = gatehouse_testkit::http::request(
                own.admin.context("no admin API")?,
                "GET",
                "/api/rules/log",
                Some(&ctx.admin_token),
            )?;
            ensure!(api.status == 200 && api.body.contains("a_log"), "{}", api.body);
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}
