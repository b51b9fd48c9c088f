//! Each query-rule match field and each action the other rule test does
//! not show (`tests/rules_matrix.toml`), through a proxy of the test's
//! own over the primary and its replica, over the text and the binary
//! protocol: a rule matched by tenant, database, endpoint, client address,
//! statement kind, digest, digest id or text blocks its statements (1142)
//! and nothing else, on a session-mode endpoint too; a route sends a
//! statement to the writer from a read-only or a split endpoint (whose
//! reads go to a replica otherwise), to a replica or a named backend from
//! a read/write one, or to another cluster, and the next statement comes back; a
//! logging rule's hits are kept for the admin API.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;
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
    Text,
    Binary,
}

const PROTOCOLS: [Proto; 2] = [Proto::Text, Proto::Binary];

/// A proxy of the test's own: `own_config`, a replicated cluster with a
/// read/write ("rep"), a read-only ("rep_ro") and a session-mode
/// ("rep_sess") endpoint, another
/// cluster whose connections set `div_precision_increment` to 9, and the
/// matrix rules.
struct Own {
    rep: SocketAddr,
    rep_ro: SocketAddr,
    rep_sess: SocketAddr,
    rep_split: SocketAddr,
    core: Arc<gatehouse::core::Core<gatehouse::engine::mysql::MyEngine>>,
    rules: Arc<gatehouse::rules::Rules>,
    stop: tokio::sync::oneshot::Sender<()>,
    proxy: tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
}

impl Own {
    async fn start(ctx: &Ctx) -> Result<Self> {
        let primary = ctx.cluster.mysql_primary().context("no primary")?.addr();
        let replica = ctx.cluster.mysql_replicas().first().context("no replica")?.addr();
        let digest_id = format!(
            "{:016x}",
            gatehouse_sql::mysql::digest(DIGEST_ID_OF, gatehouse_sql::mysql::Dialect::DEFAULT).id
        );
        let rules = crate::rules_matrix_cases::rules(&Names {
            endpoint: "rep",
            read_only: "rep_ro",
            split: "rep_split",
            replica: &replica,
            other_cluster: "myother",
            digest_id: &digest_id,
        });
        let more = format!(
            r#"
[[clusters]]
name = "myrep"
engine = "mysql"
backends = ["{primary}", "{replica}"]
monitor_secret = "superuser"
health_check_interval = "1s"

[[endpoints]]
name = "rep"
listen = "127.0.0.1:0"
cluster = "myrep"
role = "read_write"

[[endpoints]]
name = "rep_ro"
listen = "127.0.0.1:0"
cluster = "myrep"
role = "read_only"

[[endpoints]]
name = "rep_split"
listen = "127.0.0.1:0"
cluster = "myrep"
role = "split"

[[endpoints]]
name = "rep_sess"
listen = "127.0.0.1:0"
cluster = "myrep"
role = "read_write"
pool_mode = "session"

[[clusters]]
name = "myother"
engine = "mysql"
backends = ["{primary}"]
monitor_secret = "superuser"
pool = {{ init_query = "SET SESSION div_precision_increment = 9" }}
{rules}
"#
        );
        let settings = crate::own_config(ctx, "", &more)?;
        let app = gatehouse::App::bind(settings).await?;
        let rep = app.local_addr("rep").context("no rep endpoint")?;
        let rep_ro = app.local_addr("rep_ro").context("no rep_ro endpoint")?;
        let rep_sess = app.local_addr("rep_sess").context("no rep_sess endpoint")?;
        let rep_split = app.local_addr("rep_split").context("no rep_split endpoint")?;
        let core = app.mysql_core();
        let rules = app.settings().rules.clone();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        Ok(Self {
            rep,
            rep_ro,
            rep_sess,
            rep_split,
            core,
            rules,
            stop,
            proxy,
        })
    }

    async fn client(&self, at: SocketAddr) -> Result<mysql_async::Conn> {
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(at.ip().to_string())
            .tcp_port(at.port())
            .user(Some("alice"))
            .pass(Some("alice-pw"))
            .db_name(Some("app1"))
            .prefer_socket(false)
            .into();
        Ok(mysql_async::Conn::new(opts).await?)
    }

    fn hits(&self) -> HashMap<String, u64> {
        self.rules.counters().into_iter().map(|r| (r.name, r.hits)).collect()
    }

    async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        tokio::time::timeout(std::time::Duration::from_secs(15), self.proxy)
            .await
            .context("run() did not return")???;
        Ok(())
    }
}

/// The first column of the first row of `sql`, over `proto`.
async fn first<T: FromValue + Send + 'static>(
    c: &mut mysql_async::Conn,
    proto: Proto,
    sql: &str,
) -> Result<Option<T>, mysql_async::Error> {
    match proto {
        Proto::Text => c.query_first(sql).await,
        Proto::Binary => c.exec_first(sql, ()).await,
    }
}

async fn blocked(c: &mut mysql_async::Conn, proto: Proto, sql: &str, message: &str) -> Result<()> {
    let e = first::<String>(c, proto, sql)
        .await
        .err()
        .with_context(|| format!("{proto:?}: {sql} ran"))?;
    ensure!(
        matches!(&e, mysql_async::Error::Server(s) if s.code == 1142 && s.message == message),
        "{proto:?}: {sql}: {e:?}"
    );
    Ok(())
}

fn match_fields(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(ctx).await?;
        let result = async {
            let mut c = own.client(own.rep).await?;
            let mut ro = own.client(own.rep_ro).await?;
            let mut sess = own.client(own.rep_sess).await?;
            for proto in PROTOCOLS {
                for (sql, message) in BLOCKED {
                    blocked(&mut c, proto, sql, message).await?;
                }
                // Statements each rule must leave alone: another kind,
                // another shape, another endpoint.
                for (sql, want) in [
                    ("SELECT 'm_kind' AS k", "m_kind"),
                    ("SELECT CONCAT('x', 5) AS m_digest", "x5"),
                    ("SELECT CONCAT('y', 6) AS m_digest_id", "y6"),
                ] {
                    let got = first::<String>(&mut c, proto, sql)
                        .await
                        .with_context(|| format!("{proto:?}: {sql}"))?;
                    ensure!(got.as_deref() == Some(want), "{proto:?}: {sql} gave {got:?}");
                }
                let got = first::<String>(&mut ro, proto, "SELECT 'm_endpoint' AS e").await?;
                ensure!(
                    got.as_deref() == Some("m_endpoint"),
                    "{proto:?}: another endpoint: {got:?}"
                );
                let on = first::<String>(&mut c, proto, "SELECT 'on'").await?;
                ensure!(on.as_deref() == Some("on"), "the session goes on");
                // A session-mode endpoint is inspected the same way.
                blocked(&mut sess, proto, "SELECT 1 AS m_tenant", "matched by tenant").await?;
            }
            let hits = own.hits();
            for rule in MATCH_RULES {
                ensure!(hits.get(rule).copied().unwrap_or(0) >= 2, "{rule}: {hits:?}");
            }
            c.disconnect().await?;
            ro.disconnect().await?;
            sess.disconnect().await?;
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}

fn actions(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = Own::start(ctx).await?;
        let result = async {
            let primary = i64::from(ctx.cluster.mysql_primary().context("no primary")?.port);
            let replica = i64::from(ctx.cluster.mysql_replicas().first().context("no replica")?.port);
            let mut c = own.client(own.rep).await?;
            let mut ro = own.client(own.rep_ro).await?;
            let mut sp = own.client(own.rep_split).await?;
            let port = |marker: &str| format!("SELECT @@port AS {marker}");
            for proto in PROTOCOLS {
                let on = |what: &str, got: Option<i64>, want: i64| -> Result<()> {
                    ensure!(got == Some(want), "{proto:?}: {what} ran on port {got:?}, not {want}");
                    Ok(())
                };
                // A read/write endpoint: the writer, unless a rule says a
                // replica or names one; then the writer again.
                on("plain", first(&mut c, proto, &port("plain")).await?, primary)?;
                on("a_replica", first(&mut c, proto, &port("a_replica")).await?, replica)?;
                on("a_backend", first(&mut c, proto, &port("a_backend")).await?, replica)?;
                on("plain after", first(&mut c, proto, &port("plain")).await?, primary)?;
                // A read-only endpoint: a replica, unless a rule says the writer.
                on("ro plain", first(&mut ro, proto, &port("plain")).await?, replica)?;
                on("ro a_writer", first(&mut ro, proto, &port("a_writer")).await?, primary)?;
                on("ro plain after", first(&mut ro, proto, &port("plain")).await?, replica)?;
                // A split endpoint: a read goes to a replica, unless a rule
                // says the writer.
                on("split read", first(&mut sp, proto, &port("plain")).await?, replica)?;
                on(
                    "split a_writer",
                    first(&mut sp, proto, &port("a_writer")).await?,
                    primary,
                )?;
                on(
                    "split read after",
                    first(&mut sp, proto, &port("plain")).await?,
                    replica,
                )?;
                // Another cluster: its connections run its init_query; the
                // next statement is back on the session's own.
                let prec = |marker: &str| format!("SELECT @@div_precision_increment AS {marker}");
                let there: Option<i64> = first(&mut c, proto, &prec("a_cluster")).await?;
                ensure!(there == Some(9), "{proto:?}: the cluster route ran with {there:?}");
                let back: Option<i64> = first(&mut c, proto, &prec("plain")).await?;
                ensure!(
                    back != Some(9),
                    "{proto:?}: the next statement stayed on the routed cluster"
                );
                // A logging rule: the statement runs, and its hit is kept.
                let logged = first::<String>(&mut c, proto, "SELECT 'a_log' AS logged").await?;
                ensure!(logged.as_deref() == Some("a_log"), "{logged:?}");
            }
            let hits = own.hits();
            for rule in ACTION_RULES {
                ensure!(hits.get(rule).copied().unwrap_or(0) >= 2, "{rule}: {hits:?}");
            }
            let other = own.core.topology.cluster("myother").context("no myother cluster")?;
            let by_rule = other.routed_by_reason().into_iter().find(|(w, _)| *w == "rule_cluster");
            ensure!(by_rule.is_some_and(|(_, n)| n >= 2), "{:?}", other.routed_by_reason());
            let logged = own.rules.logged().recent();
            let hit = logged
                .iter()
                .find(|h| h.statement.contains("a_log"))
                .with_context(|| format!("{logged:?}"))?;
            ensure!(
                hit.tenant == "alice" && hit.endpoint == "rep" && hit.rules == ["a-log"] && !hit.blocked,
                "{hit:?}"
            );
            c.disconnect().await?;
            ro.disconnect().await?;
            sp.disconnect().await?;
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}
