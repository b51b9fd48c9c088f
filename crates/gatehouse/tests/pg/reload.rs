//! Reloads without a restart: a tenant directory of 10,000 tenants read with
//! the configuration and swapped on reload (tenants removed can no longer
//! log in, new ones can), and a backend password rotated while 50 clients
//! of that tenant run queries in a loop: zero client errors, and afterwards
//! no backend connection opened with the old password is left.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use tokio_postgres::error::SqlState;

use crate::Ctx;

/// Tenants in the directory besides the named ones.
const DIRECTORY_TENANTS: usize = 10_000;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("reload::tenant_directory_of_10000_swaps_on_reload", directory),
        ("reload::password_rotation_under_load_no_errors", rotation),
        ("reload::a_backend_added_takes_reads_at_once", backend_added),
    ]
}

/// Writes `tenants.jsonl`: 10,000 token tenants (`t00000`…) on app1, and
/// each of `named` with the password "<name>-pw".
pub fn write_directory(dir: &Path, named: &[&str]) -> Result<()> {
    let mut text = String::from("# written by the reload tests\n");
    for i in 0..DIRECTORY_TENANTS {
        text.push_str(&format!(
            "{{\"name\":\"t{i:05}\",\"databases\":[\"app1\"],\"secret\":\"owner\",\"token\":true}}\n"
        ));
    }
    for name in named {
        let v = ScramVerifier::from_password(&format!("{name}-pw"), &random_salt(), 4096);
        text.push_str(&format!(
            "{{\"name\":\"{name}\",\"databases\":[\"app1\"],\"secret\":\"owner\",\"scram_verifier\":\"{v}\"}}\n"
        ));
    }
    std::fs::write(dir.join("tenants.jsonl"), text)?;
    Ok(())
}

/// Serializes edits of the configuration file between tests.
static CONFIG_FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn lock_config() -> std::sync::MutexGuard<'static, ()> {
    CONFIG_FILE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Settings from the test configuration file as it stands, passed through
/// `edit` first; read and parsed (with the tenant directory it names) under
/// [`lock_config`]: a test that edits them (a broken file, a rotated
/// password, another directory) puts them back before it lets go, so a
/// proxy of a test's own gets the fixture's configuration.
pub fn settings(ctx: &Ctx, edit: impl Fn(String) -> String) -> Result<gatehouse::config::Settings> {
    let _file = lock_config();
    let text = edit(std::fs::read_to_string(ctx.dir.join("gatehouse.toml"))?);
    gatehouse::config::parse(&text, &ctx.dir).map_err(|p| anyhow::anyhow!("{p}"))
}

/// Edits the test configuration file as an operator would, and reloads.
fn reload(ctx: &Ctx, edit: impl Fn(String) -> String) -> Result<()> {
    let _file = lock_config();
    reload_locked(ctx, edit).map(|_| ())
}

/// [`reload`] for a caller that holds [`lock_config`]; what the reload
/// changed.
fn reload_locked(ctx: &Ctx, edit: impl Fn(String) -> String) -> Result<gatehouse::core::ReloadReport> {
    let path = ctx.dir.join("gatehouse.toml");
    let text = edit(std::fs::read_to_string(&path)?);
    std::fs::write(&path, &text)?;
    let settings = gatehouse::config::parse(&text, &ctx.dir).map_err(|p| anyhow::anyhow!("{p}"))?;
    Ok(ctx.core.reload(&Arc::new(settings)))
}

/// The port of the server answering `c` now.
async fn server_port(c: &tokio_postgres::Client) -> Result<i32> {
    Ok(c.query_one("SELECT inet_server_port()", &[]).await?.get(0))
}

/// A read-only endpoint over a cluster that lists only the primary: reads
/// go to the writer (no replica). The replica is added to the cluster by a
/// reload: the reload's answer says so, and the same client connection's
/// reads reach the replica within a probe interval, with no reconnect.
/// Removed again, it gets no more reads.
fn backend_added(ctx: &Ctx) -> Result<()> {
    let _file = lock_config();
    let primary = ctx.cluster.pg_primary().context("no primary")?;
    let replica = ctx.cluster.pg_replicas().first().cloned().context("no replica")?;
    let replica_addr = format!("\"{}:{}\"", replica.host, replica.port);
    ctx.rt.block_on(async {
        let c = ctx.client("grow_ro", "alice", "alice-pw", "app1").await?;
        ensure!(
            server_port(&c).await? == i32::from(primary.port),
            "reads before: not the writer"
        );
        let grow = |t: String| t.replace("] # grow-backends", &format!(", {replica_addr}] # grow-backends"));
        let added = reload_locked(ctx, grow);
        let result = async {
            let report = added?;
            ensure!(
                report.applied.iter().any(|a| a.contains("grow") && a.contains("added")),
                "{report:?}"
            );
            let started = Instant::now();
            loop {
                if server_port(&c).await? == i32::from(replica.port) {
                    break;
                }
                ensure!(
                    started.elapsed() < Duration::from_secs(5),
                    "the added replica took no reads"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            eprintln!(
                "    the added replica took its first read {} ms after the reload",
                started.elapsed().as_millis()
            );
            Ok(())
        }
        .await;
        let shrink = |t: String| t.replace(&format!(", {replica_addr}] # grow-backends"), "] # grow-backends");
        let removed = reload_locked(ctx, shrink)?;
        result?;
        ensure!(
            removed
                .applied
                .iter()
                .any(|a| a.contains("grow") && a.contains("removed")),
            "{removed:?}"
        );
        for _ in 0..5 {
            ensure!(
                server_port(&c).await? == i32::from(primary.port),
                "a removed replica still took reads"
            );
        }
        Ok(())
    })
}

fn directory(ctx: &Ctx) -> Result<()> {
    // No other reload may run while this test swaps the directory.
    let _file = lock_config();
    ctx.rt.block_on(async {
        ensure!(
            ctx.core.tenants.len() > DIRECTORY_TENANTS,
            "{} tenants",
            ctx.core.tenants.len()
        );
        ensure!(ctx.core.tenants.get("t04242").is_some_and(|t| t.token));
        let c = ctx.client("rw", "dora", "dora-pw", "app1").await?;
        let one: i32 = c.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1);
        // A new directory: dora is gone, dana is there. The file the proxy
        // was started with is put back at the end for other tests.
        write_directory(&ctx.dir, &["dana"])?;
        let swapped = reload_locked(ctx, |t| t);
        write_directory(&ctx.dir, &["dora"])?;
        swapped?;
        let result = async {
            let e = ctx
                .try_client("rw", "dora", "dora-pw", "app1")
                .await
                .err()
                .context("a removed tenant logged in")?;
            ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
            let c = ctx.client("rw", "dana", "dana-pw", "app1").await?;
            let one: i32 = c.query_one("SELECT 1", &[]).await?.get(0);
            ensure!(one == 1);
            // The session dora opened before the reload goes on.
            let still: i32 = ctx
                .client("rw", "dana", "dana-pw", "app1")
                .await?
                .query_one("SELECT 2", &[])
                .await?
                .get(0);
            ensure!(still == 2);
            Ok(())
        }
        .await;
        let c_still: Result<i32> = async { Ok(c.query_one("SELECT 3", &[]).await?.get(0)) }.await;
        reload_locked(ctx, |t| t)?;
        result?;
        ensure!(c_still? == 3, "a session from before the reload was cut");
        ensure!(ctx.core.tenants.get("dora").is_some());
        Ok(())
    })
}

fn rotation(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let errors = Arc::new(AtomicUsize::new(0));
        let queries = Arc::new(AtomicUsize::new(0));
        let stop_at = Instant::now() + Duration::from_secs(4);
        let mut tasks = Vec::new();
        for _ in 0..50 {
            let c = ctx.client("tx10", "rosa", "rosa-pw", "app1").await?;
            let (errors, queries) = (errors.clone(), queries.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < stop_at {
                    match c.query_one("SELECT current_user::text", &[]).await {
                        Ok(row) if row.get::<_, String>(0) == "rot_owner" => {
                            queries.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) | Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let primary = ctx.cluster.pg_primary().context("no primary")?.name.clone();
        ctx.cluster
            .pg_sql(&primary, "postgres", "ALTER ROLE rot_owner PASSWORD 'rot-pw-2'")?;
        let rotated_at: String = ctx
            .cluster
            .pg_sql(&primary, "postgres", "SELECT now()")?
            .trim()
            .to_owned();
        reload(ctx, |t| t.replace("password = \"rot-pw-1\"", "password = \"rot-pw-2\""))?;
        for t in tasks {
            t.await?;
        }
        let (errors, queries) = (errors.load(Ordering::Relaxed), queries.load(Ordering::Relaxed));
        ensure!(errors == 0, "{errors} client errors in {queries} queries");
        ensure!(queries > 500, "only {queries} queries ran");
        // Every connection opened with the old password has been replaced:
        // closed as it came back. A closed connection's server process
        // leaves pg_stat_activity when it has exited, a moment later.
        let from_before = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'rot_owner' AND backend_start < '{rotated_at}'"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let old = ctx.cluster.pg_sql(&primary, "postgres", &from_before)?;
            if old.trim() == "0" {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "{} connections from before the rotation",
                old.trim()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // New connections authenticate with the new password.
        ctx.cluster.pg_sql(
            &primary,
            "postgres",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'rot_owner'",
        )?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let c = ctx.client("tx10", "rosa", "rosa-pw", "app1").await?;
        let who: String = c.query_one("SELECT current_user::text", &[]).await?.get(0);
        ensure!(who == "rot_owner");
        Ok(())
    })
}
