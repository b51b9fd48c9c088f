//! Query rules and digest statistics through a proxy of the test's own
//! (`own_config` plus `[digests]` and the rules below), over the text and
//! the binary protocol: a block by statement kind and by digest answers
//! 1142 and runs nothing; rules of another tenant, network, database or
//! endpoint do not apply; a rewrite changes what runs (and what is
//! prepared); a statement timeout kills the statement (`KILL QUERY`:
//! 1317); each rule counts its hits, and the digest store
//! has each statement's calls, errors and rows.

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "rules::block_rewrite_timeout_and_digests_both_protocols",
        rules_both_protocols,
    )]
}

/// The rules under test: both engines' (`tests/rules_common.toml`), then
/// one of another endpoint.
const RULES: &str = concat!(
    include_str!("../rules_common.toml"),
    r#"
[[rules]]
name = "other-endpoint"
endpoints = ["other"]
query_regex = "answer|probe"
block = "never: another endpoint's rule"
"#
);

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn rules_both_protocols(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let other =
            "[[endpoints]]\nname = \"other\"\nlisten = \"127.0.0.1:0\"\ncluster = \"my\"\nrole = \"read_write\"\n";
        let settings = crate::own_config(ctx, "", &format!("{other}{RULES}"))?;
        let app = gatehouse::App::bind(settings).await?;
        let rw = app.local_addr("rw").context("rw")?;
        let core = app.mysql_core();
        let rules = app.settings().rules.clone();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let result = async {
            let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
                .ip_or_hostname(rw.ip().to_string())
                .tcp_port(rw.port())
                .user(Some("alice"))
                .pass(Some("alice-pw"))
                .db_name(Some("app1"))
                .prefer_socket(false)
                .into();
            let mut c = mysql_async::Conn::new(opts).await?;

            // Block by kind, both protocols; the session goes on.
            let e = c
                .query_drop("DROP TABLE no_such_table")
                .await
                .err()
                .context("DROP ran")?;
            ensure!(server_code(&e) == Some(1142), "{e:?}");
            ensure!(e.to_string().contains("dropping tables is not allowed"), "{e}");
            let e = c
                .prep("DROP TABLE no_such_table")
                .await
                .err()
                .context("DROP prepared")?;
            ensure!(server_code(&e) == Some(1142), "{e:?}");

            // A rewrite, both protocols.
            let text: Option<String> = c.query_first("SELECT 'question'").await?;
            ensure!(text.as_deref() == Some("answer"), "text: {text:?}");
            let binary: Option<String> = c.exec_first("SELECT 'question'", ()).await?;
            ensure!(binary.as_deref() == Some("answer"), "binary: {binary:?}");

            // Block by digest, both protocols; another shape runs.
            let e = c.query_drop("SELECT 42 AS probe").await.err().context("probe ran")?;
            ensure!(server_code(&e) == Some(1142), "{e:?}");
            let e = c
                .exec_drop("SELECT ? AS probe", (7,))
                .await
                .err()
                .context("probe ran")?;
            ensure!(server_code(&e) == Some(1142), "{e:?}");
            let n: Option<i64> = c.exec_first("SELECT ? AS probes", (7,)).await?;
            ensure!(n == Some(7));

            // A statement timeout, both protocols: the statement is killed
            // (MariaDB answers 1317; MySQL's SLEEP() returns 1 instead).
            let interrupted = |r: Result<Option<i64>, mysql_async::Error>| match r {
                Ok(Some(1)) => true,
                Err(e) => server_code(&e) == Some(1317),
                Ok(_) => false,
            };
            let text = c.query_first::<i64, _>("SELECT SLEEP(5)").await;
            ensure!(interrupted(text), "text: SLEEP was not interrupted");
            let binary = c.exec_first::<i64, _, _>("SELECT SLEEP(?)", (5,)).await;
            ensure!(interrupted(binary), "binary: SLEEP was not interrupted");
            let n: Option<i64> = c.query_first("SELECT 1").await?;
            ensure!(n == Some(1), "the session goes on after its timeout");

            let hits: std::collections::HashMap<String, u64> =
                rules.counters().into_iter().map(|r| (r.name, r.hits)).collect();
            for (name, at_least) in [("no-drop", 2), ("question", 2), ("by-digest", 2), ("slow", 2)] {
                ensure!(hits.get(name).copied().unwrap_or(0) >= at_least, "{name}: {hits:?}");
            }
            for name in ["other-tenant", "other-network", "other-database", "other-endpoint"] {
                ensure!(hits.get(name) == Some(&0), "{name} applied: {hits:?}");
            }

            let store = core.digests.load_full().context("digest statistics are off")?;
            let rows = store.snapshot(None);
            let probes = rows
                .iter()
                .find(|r| r.text == "select ? as probes")
                .with_context(|| format!("{rows:#?}"))?;
            ensure!(
                probes.calls == 1 && probes.errors == 0 && probes.rows == 1,
                "{probes:?}"
            );
            ensure!(probes.tenants == ["alice"] && probes.endpoints == ["rw"], "{probes:?}");
            let sleeps = rows
                .iter()
                .find(|r| r.text == "select sleep(?)")
                .with_context(|| format!("{rows:#?}"))?;
            ensure!(sleeps.calls == 2, "{sleeps:?}");
            ensure!(
                !rows.iter().any(|r| r.text.contains("drop")),
                "a blocked statement ran: {rows:#?}"
            );
            c.disconnect().await?;
            Ok(())
        }
        .await;
        let _ = stop.send(());
        tokio::time::timeout(std::time::Duration::from_secs(15), proxy)
            .await
            .context("run() did not return")???;
        result
    })
}
