//! The admin HTTP API against the running test proxy: the bearer token is
//! required (but for the liveness and readiness probes); `/metrics` and `/api/*` report pools, backends, pinned
//! sessions and errors as they happen; `POST /api/reload` takes an edited
//! tenant directory without a restart and refuses a broken file, keeping
//! the running configuration.

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::http::{Response, request};
use tokio_postgres::error::SqlState;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("admin::token_required", token_required),
        ("admin::metrics_follow_pins_errors_and_pools", metrics_follow),
        ("admin::reload_applies_and_refuses_broken_file", reload_over_http),
        ("admin::paused_endpoint_holds_transactions_until_resumed", pause_resume),
        ("admin::drained_replica_takes_no_reads", drain_replica),
        (
            "admin::health_and_ready_need_no_token_and_ready_names_the_endpoint_without_a_backend",
            health_and_ready,
        ),
    ]
}

/// `/api/health` and `/api/ready` answer without the token (probes carry
/// none). On a proxy of the case's own with one more cluster whose only
/// backend refuses connections, readiness is 503 and names that endpoint
/// (`no usable backend`) while the others are ready with the backend they
/// would get; the down backend's probe error is in `/api/backends`.
fn health_and_ready(ctx: &Ctx) -> Result<()> {
    let health = request(ctx.admin, "GET", "/api/health", None)?;
    ensure!(
        health.status == 200 && health.body == "ok\n",
        "{} {}",
        health.status,
        health.body
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let settings = crate::reload::settings(ctx, |t| {
        t + &format!(
            r#"
[[clusters]]
name = "gone"
engine = "postgres"
backends = ["{closed}"]
monitor_secret = "superuser"
health_check_interval = "200ms"

[[endpoints]]
name = "gone_rw"
listen = "127.0.0.1:0"
cluster = "gone"
role = "read_write"
"#
        )
    })?;
    ctx.rt.block_on(async {
        let own = crate::own::Own::start(settings).await?;
        let result = async {
            let admin = own.admin.context("no admin listener")?;
            let ready = request(admin, "GET", "/api/ready", None)?;
            ensure!(
                ready.status == 503,
                "ready with a dead cluster: {} {}",
                ready.status,
                ready.body
            );
            let v: serde_json::Value = serde_json::from_str(&ready.body)?;
            ensure!(v["ready"] == false, "{v}");
            let endpoints = v["endpoints"].as_array().context("endpoints")?;
            let find = |name: &str| endpoints.iter().find(|e| e["endpoint"] == name).cloned();
            let gone = find("gone_rw").context("gone_rw not listed")?;
            ensure!(
                gone["ready"] == false && gone["why"] == "no usable backend" && gone["backend"].is_null(),
                "{gone}"
            );
            let ops = find("ops_rw").context("ops_rw not listed")?;
            ensure!(
                ops["ready"] == true && ops["backend"].is_string() && ops["why"] == "writer",
                "{ops}"
            );
            let backends = request(admin, "GET", "/api/backends", Some(&ctx.admin_token))?;
            let v: serde_json::Value = serde_json::from_str(&backends.body)?;
            let down = v
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| e["backends"].as_array().cloned().unwrap_or_default())
                .find(|b| b["cluster"] == "gone")
                .context("the gone cluster's backend is not listed")?;
            ensure!(
                down["up"] == false && down["last_error"].as_str().is_some_and(|e| !e.is_empty()),
                "{down}"
            );
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}

fn get(ctx: &Ctx, path: &str) -> Result<Response> {
    request(ctx.admin, "GET", path, Some(&ctx.admin_token))
}

fn post(ctx: &Ctx, path: &str) -> Result<Response> {
    let r = request(ctx.admin, "POST", path, Some(&ctx.admin_token))?;
    ensure!(r.status == 200, "POST {path}: {} {}", r.status, r.body);
    Ok(r)
}

/// The port of the server answering `c` now.
async fn port(c: &tokio_postgres::Client) -> Result<i32> {
    Ok(c.query_one("SELECT inet_server_port()", &[]).await?.get(0))
}

/// An endpoint paused by the operator: a transaction started on a
/// connected client waits (the client is not refused, and nothing runs),
/// and runs as soon as the endpoint is resumed; the other endpoint of the
/// same cluster is not held.
fn pause_resume(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = ctx.client("ops_rw", "alice", "alice-pw", "app1").await?;
        let other = ctx.client("ops_ro", "alice", "alice-pw", "app1").await?;
        post(ctx, "/api/endpoints/ops_rw/pause")?;
        let held = tokio::spawn(async move { c.query_one("SELECT 7", &[]).await.map(|r| r.get::<_, i32>(0)) });
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        let waiting = !held.is_finished();
        let read: i32 = other.query_one("SELECT 8", &[]).await?.get(0);
        let clusters = get(ctx, "/api/clusters")?.body;
        post(ctx, "/api/endpoints/ops_rw/resume")?;
        ensure!(waiting, "a transaction ran on a paused endpoint");
        ensure!(read == 8, "the other endpoint was held too");
        ensure!(clusters.contains("\"waiting\":1"), "{clusters}");
        let got = tokio::time::timeout(std::time::Duration::from_secs(2), held)
            .await
            .context("still held after resume")???;
        ensure!(got == 7);
        Ok(())
    })
}

/// A replica drained by the operator takes no new reads (they go to the
/// writer, the cluster's only other backend); undrained, it takes them again.
fn drain_replica(ctx: &Ctx) -> Result<()> {
    let primary = ctx.cluster.pg_primary().context("no primary")?.port;
    let replica = ctx.cluster.pg_replicas().first().context("no replica")?.port;
    let addr = format!("127.0.0.1:{replica}");
    ctx.rt.block_on(async {
        let c = ctx.client("ops_ro", "alice", "alice-pw", "app1").await?;
        ensure!(port(&c).await? == i32::from(replica), "reads before: not the replica");
        post(ctx, &format!("/api/clusters/ops/backends/{addr}/drain"))?;
        let mut drained = Vec::new();
        for _ in 0..5 {
            drained.push(port(&c).await?);
        }
        post(ctx, &format!("/api/clusters/ops/backends/{addr}/undrain"))?;
        ensure!(drained.iter().all(|p| *p == i32::from(primary)), "{drained:?}");
        ensure!(port(&c).await? == i32::from(replica), "reads after: not the replica");
        Ok(())
    })
}

/// The value of the sample `name{labels…}` whose labels include every one of
/// `labels` (`key="value"` strings), or `None`.
pub fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let (labelset, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once("} ")?,
            None => ("", rest.strip_prefix(' ')?),
        };
        labels
            .iter()
            .all(|l| labelset.split(',').any(|p| p == *l))
            .then(|| value.trim().parse().ok())?
    })
}

fn token_required(ctx: &Ctx) -> Result<()> {
    for path in ["/metrics", "/api/pools", "/api/stats"] {
        let none = request(ctx.admin, "GET", path, None)?;
        ensure!(none.status == 401, "{path} without a token: {}", none.status);
        let wrong = request(ctx.admin, "GET", path, Some("not-the-token"))?;
        ensure!(wrong.status == 401, "{path} with a wrong token: {}", wrong.status);
        ensure!(!wrong.body.contains(&ctx.admin_token), "the refusal shows the token");
        let right = get(ctx, path)?;
        ensure!(right.status == 200, "{path}: {} {}", right.status, right.body);
    }
    let reload = request(ctx.admin, "POST", "/api/reload", None)?;
    ensure!(reload.status == 401, "reload without a token: {}", reload.status);
    Ok(())
}

fn metrics_follow(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let before = get(ctx, "/metrics")?.body;
        let pins_before = sample(&before, "gatehouse_pinned_sessions_total", &["reason=\"temp_table\""]).unwrap_or(0.0);
        let failures_before = sample(
            &before,
            "gatehouse_client_errors_total",
            &["kind=\"auth\"", "condition=\"invalid_password\""],
        )
        .unwrap_or(0.0);
        // A pinned session, held open while the metrics are read.
        let pinned = ctx.client("tx10", "alice", "alice-pw", "app1").await?;
        pinned.batch_execute("CREATE TEMP TABLE admin_pin (x int)").await?;
        // A refused login.
        let e = ctx
            .try_client("tx10", "alice", "wrong-pw", "app1")
            .await
            .err()
            .context("a wrong password logged in")?;
        ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
        let after = get(ctx, "/metrics")?.body;
        let pins = sample(&after, "gatehouse_pinned_sessions_total", &["reason=\"temp_table\""]).unwrap_or(0.0);
        ensure!(pins > pins_before, "temp_table pins {pins_before} → {pins}");
        let failures = sample(
            &after,
            "gatehouse_client_errors_total",
            &["kind=\"auth\"", "condition=\"invalid_password\""],
        )
        .unwrap_or(0.0);
        ensure!(
            failures > failures_before,
            "auth failures {failures_before} → {failures}"
        );
        // The pinned session holds a leased connection of the txpool10 pool.
        let leased = sample(
            &after,
            "gatehouse_pool_connections",
            &[
                "cluster=\"txpool10\"",
                "user=\"app_owner\"",
                "database=\"app1\"",
                "state=\"leased\"",
            ],
        )
        .context("no txpool10 pool in the metrics")?;
        ensure!(leased >= 1.0, "leased {leased}");
        let connected = sample(&after, "gatehouse_client_connections", &["endpoint=\"tx10\""]).unwrap_or(0.0);
        ensure!(connected >= 1.0, "tx10 clients {connected}");
        let tenants = sample(&after, "gatehouse_tenants", &[]).unwrap_or(0.0);
        ensure!(tenants > 10_000.0, "tenants {tenants}");
        let per_engine = after.lines().filter(|l| l.starts_with("gatehouse_tenants")).count();
        ensure!(per_engine == 1, "gatehouse_tenants has {per_engine} series, not one");
        let up = sample(&after, "gatehouse_backend_up", &["cluster=\"main\"", "role=\"writer\""]);
        ensure!(up == Some(1.0), "writer up: {up:?}");
        // The JSON views agree.
        let pools: serde_json::Value = serde_json::from_str(&get(ctx, "/api/pools")?.body)?;
        let found = pools[0]["pools"]
            .as_array()
            .context("pools is not a list")?
            .iter()
            .any(|p| p["cluster"] == "txpool10" && p["database"] == "app1" && p["leased"].as_u64() >= Some(1));
        ensure!(found, "{pools}");
        let stats: serde_json::Value = serde_json::from_str(&get(ctx, "/api/stats")?.body)?;
        ensure!(
            stats["engines"][0]["pinned_sessions"]["temp_table"].as_u64() >= Some(1),
            "{stats}"
        );
        let backends: serde_json::Value = serde_json::from_str(&get(ctx, "/api/backends")?.body)?;
        ensure!(
            backends[0]["backends"].as_array().is_some_and(|b| b.len() >= 2),
            "{backends}"
        );
        drop(pinned);
        Ok(())
    })
}

fn reload_over_http(ctx: &Ctx) -> Result<()> {
    let _file = crate::reload::lock_config();
    let path = ctx.dir.join("gatehouse.toml");
    let original = std::fs::read_to_string(&path)?;
    let result = ctx.rt.block_on(async {
        // A new tenant in the directory, taken by POST /api/reload.
        crate::reload::write_directory(&ctx.dir, &["dora", "hank"])?;
        let e = ctx.try_client("rw", "hank", "hank-pw", "app1").await.err();
        ensure!(e.is_some(), "hank logged in before the reload");
        let r = request(ctx.admin, "POST", "/api/reload", Some(&ctx.admin_token))?;
        ensure!(r.status == 200, "reload: {} {}", r.status, r.body);
        let outcome: serde_json::Value = serde_json::from_str(&r.body)?;
        ensure!(outcome["tenants"].as_u64() > Some(10_000), "{outcome}");
        let c = ctx.client("rw", "hank", "hank-pw", "app1").await?;
        let one: i32 = c.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1);
        // A broken file is refused with the line of the problem; nothing changes.
        std::fs::write(&path, original.replace("[[endpoints]]", "[[endpoints]]\nbogus_key = 1"))?;
        let r = request(ctx.admin, "POST", "/api/reload", Some(&ctx.admin_token))?;
        ensure!(r.status == 422, "broken reload: {} {}", r.status, r.body);
        ensure!(r.body.contains("bogus_key"), "{}", r.body);
        let c = ctx.client("rw", "hank", "hank-pw", "app1").await?;
        let two: i32 = c.query_one("SELECT 2", &[]).await?.get(0);
        ensure!(two == 2);
        let metrics = get(ctx, "/metrics")?.body;
        ensure!(
            sample(&metrics, "gatehouse_reloads_total", &["result=\"refused\""]) >= Some(1.0),
            "no refused reload counted"
        );
        Ok(())
    });
    // Put the configuration and directory back for the other tests.
    std::fs::write(&path, &original)?;
    crate::reload::write_directory(&ctx.dir, &["dora"])?;
    let r = request(ctx.admin, "POST", "/api/reload", Some(&ctx.admin_token))?;
    ensure!(r.status == 200, "restoring reload: {} {}", r.status, r.body);
    result
}
