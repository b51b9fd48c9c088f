//! Tenants at scale: with the 10,000-tenant directory loaded, 2,000
//! concurrent clients across 1,000 tenants authenticate with tokens over TLS
//! and each runs a query while all are connected: zero errors. Prints the
//! backend connections, pools and verifications it took.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};
use tokio::sync::Semaphore;

use crate::Ctx;

const CLIENTS: usize = 2_000;
const TENANTS: usize = 1_000;
/// Connection attempts in flight at once (the rest wait their turn; every
/// login must finish within the test proxy's 2 s login timeout, on two
/// cores shared with the other test cases).
const CONNECTING: usize = 50;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![("scale::2000_token_clients_across_1000_tenants", many_tenants)]
}

/// Raises this process's open-file limit to the hard limit (with prlimit(1),
/// no unsafe code) when the soft one is too low for the clients and their
/// proxy-side sockets.
fn enough_files(needed: u64) -> Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .context("no open-files limit")?;
    let mut numbers = line.split_whitespace().filter_map(|w| w.parse::<u64>().ok());
    let (soft, hard) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(u64::MAX));
    if soft >= needed {
        return Ok(());
    }
    ensure!(
        hard >= needed,
        "open-file limit {hard} is below the {needed} this test needs"
    );
    let status = std::process::Command::new("prlimit")
        .args([
            "--pid",
            &std::process::id().to_string(),
            &format!("--nofile={hard}:{hard}"),
        ])
        .status()?;
    ensure!(status.success(), "prlimit failed");
    Ok(())
}

fn many_tenants(ctx: &Ctx) -> Result<()> {
    enough_files((CLIENTS * 2 + 500) as u64)?;
    let key = IssuingKey::hs256(b"gatehouse-test-shared-secret-0123456789", None)?;
    let verifier = ctx.core.settings().tokens.clone().context("no verifier")?;
    let verified_before = verifier.verifications();
    let now = unix_seconds(std::time::SystemTime::now());
    let tokens: Vec<String> = (0..TENANTS)
        .map(|i| {
            issue(
                &key,
                &IssueRequest {
                    issuer: "gatehouse-test".into(),
                    audience: "tok".into(),
                    tenant: format!("t{:05}", i * 7 % 10_000),
                    database: "app1".into(),
                    ttl: Duration::from_secs(600),
                    now,
                },
            )
        })
        .collect::<Result<_, _>>()?;
    let tokens = Arc::new(tokens);
    let rss_before = rss_kib();
    ctx.rt.block_on(async {
        let started = Instant::now();
        let gate = Arc::new(Semaphore::new(CONNECTING));
        let mut connecting = Vec::new();
        for n in 0..CLIENTS {
            let (gate, tokens) = (gate.clone(), tokens.clone());
            let tenant = n % TENANTS;
            let user = format!("t{:05}", tenant * 7 % 10_000);
            connecting.push(async move {
                let _turn = gate.acquire().await?;
                crate::tokens::connect_tls(ctx, "tok", &user, &tokens[tenant], "app1")
                    .await?
                    .map_err(anyhow::Error::from)
            });
        }
        let clients: Vec<Result<tokio_postgres::Client>> = futures_util::future::join_all(connecting).await;
        let connected = started.elapsed();
        let mut errors = Vec::new();
        let mut open = Vec::new();
        for c in clients {
            match c {
                Ok(c) => open.push(c),
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        ensure!(
            errors.is_empty(),
            "{} of {CLIENTS} failed to connect, first: {}",
            errors.len(),
            errors[0]
        );
        // All connected at once: each runs its query.
        let queries = open.iter().map(|c| c.query_one("SELECT current_database()::text", &[]));
        let results = futures_util::future::join_all(queries).await;
        let failed = results
            .iter()
            .filter(|r| !r.as_ref().is_ok_and(|row| row.get::<_, String>(0) == "app1"))
            .count();
        ensure!(failed == 0, "{failed} of {CLIENTS} queries failed");
        let pools = ctx.core.pools.all();
        let backends: usize = pools.iter().map(|p| p.open_count()).sum();
        let primary = ctx.cluster.pg_primary().context("no primary")?;
        let writer = format!("{}:{}", primary.host, primary.port);
        let tenant_pools = pools
            .iter()
            .filter(|p| {
                let k = p.key();
                k.cluster == "main" && k.backend == writer && k.user == "app_owner" && k.database == "app1"
            })
            .count();
        let rss_after = rss_kib();
        eprintln!(
            "scale: {CLIENTS} clients of {TENANTS} tenants ({} configured) connected in {connected:?} with 0 errors; \
             {backends} backend connections in {} pools ({tenant_pools} for the tenants' (user, database)); \
             {} token verifications, {} cache hits; test process RSS {} MiB, +{} MiB for the {CLIENTS} sessions \
             (proxy and its clients share the process; bench/pg-transaction.sh measures the proxy alone)",
            ctx.core.tenants.len(),
            pools.len(),
            verifier.verifications() - verified_before,
            verifier.cache_hits(),
            rss_after / 1024,
            rss_after.saturating_sub(rss_before) / 1024,
        );
        // (Verifications are counted by the proxy as a whole, so other test
        // cases add to them: printed, not asserted; the cache has its own test.)
        ensure!(
            tenant_pools == 1,
            "tenants sharing credentials got {tenant_pools} pools"
        );
        drop(open);
        Ok(())
    })
}

/// This process's resident set size, in KiB (0 if /proc cannot tell).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}
