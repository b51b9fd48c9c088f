//! Differential test of transaction pooling: many concurrent clients each run
//! a randomized but deterministic (seeded by client index) sequence of
//! operations, once directly against the primary and once through the "tx"
//! endpoint (a pool of two backend connections). Every client must see
//! exactly the same results both times: rows, SHOW values, SQLSTATEs.
//!
//! Proxy bugs this case found (fixed since; it guards against their return):
//! - a tracked parameter SET through the extended protocol with its Parse
//!   synced apart from its Execute (tokio-postgres `execute("SET ..")`) is
//!   never read back: the client loses it when it moves to the other
//!   backend connection, and the backend keeps it for the next client;
//! - when a Parse fails (aborted transaction, syntax error, unknown table),
//!   the Close the proxy queued behind it to evict an old statement is
//!   skipped by the server but forgotten by the proxy, so preparing that
//!   statement again on that connection fails with 42P05.
//!
//! Layout: this file holds the case and its driver (connect, run every client
//! directly and through the proxy, clean up, compare); `workload.rs` the
//! operation model and its generator, `session.rs` the client runner that
//! executes a sequence on one connection, `results.rs` the rendering of
//! results into comparable strings and the comparison of the two runs.

mod results;
mod session;
mod workload;

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_postgres::Client;

use self::session::Session;
use self::workload::{Op, generate};
use crate::Ctx;

const DB: &str = "app2";
const CLIENTS: usize = 200;
/// Clients that connect at the same time (keeps logins within login_timeout).
const CONNECT_BATCH: usize = 25;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![("differential::direct_vs_transaction_pooling", direct_vs_proxy)]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Direct,
    Proxy,
}

impl Run {
    fn name(self) -> &'static str {
        match self {
            Run::Direct => "direct",
            Run::Proxy => "proxy",
        }
    }
}

fn table(run: Run, idx: usize) -> String {
    format!("diff_{}_{idx}", run.name())
}

/// Both runs use MD5 authentication: a SCRAM handshake costs the unoptimized
/// client ~0.2 s of CPU, which for 2 x 200 connections would dominate the
/// run (and starve the proxy's login timeout). Through the proxy "bob" (an
/// MD5 tenant) reaches app2 as app_owner; directly, md5_owner (MD5 in
/// pg_hba) does. Nothing compared depends on the role.
async fn connect(ctx: &Ctx, run: Run) -> Result<Client> {
    match run {
        Run::Proxy => ctx.client("tx", "bob", "bob-pw", DB).await,
        Run::Direct => {
            let p = ctx.cluster.pg_primary().context("no primary")?;
            let conninfo = format!(
                "host={} port={} user=md5_owner password=md5-pw dbname={DB} sslmode=disable",
                p.host, p.port
            );
            let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            Ok(client)
        }
    }
}

/// Runs every client's operations concurrently; returns each client's results.
async fn run_all(ctx: &Ctx, run: Run, ops: &Arc<Vec<Vec<Op>>>) -> Result<Vec<Vec<String>>> {
    let mut clients = Vec::with_capacity(CLIENTS);
    for start in (0..CLIENTS).step_by(CONNECT_BATCH) {
        let batch = (start..(start + CONNECT_BATCH).min(CLIENTS)).map(|_| connect(ctx, run));
        let connected = futures_util::future::try_join_all(batch)
            .await
            .with_context(|| format!("{}: connecting", run.name()))?;
        clients.extend(connected);
    }
    let mut tasks = Vec::with_capacity(CLIENTS);
    for (idx, c) in clients.into_iter().enumerate() {
        let ops = ops.clone();
        tasks.push(tokio::spawn(async move {
            let tbl = table(run, idx);
            let s = Session::new(c, tbl.clone()).await?;
            let mut out = Vec::with_capacity(ops[idx].len());
            for op in &ops[idx] {
                out.push(s.run(op).await);
            }
            s.c.batch_execute(&format!("DROP TABLE public.{tbl}")).await?;
            anyhow::Ok(out)
        }));
    }
    let mut results = Vec::with_capacity(CLIENTS);
    for (idx, t) in tasks.into_iter().enumerate() {
        results.push(t.await?.with_context(|| format!("{}: client {idx}", run.name()))?);
    }
    Ok(results)
}

fn direct_vs_proxy(ctx: &Ctx) -> Result<()> {
    let ops: Arc<Vec<Vec<Op>>> = Arc::new((0..CLIENTS).map(generate).collect());
    let outcome = ctx.rt.block_on(async {
        let direct = run_all(ctx, Run::Direct, &ops).await?;
        let proxy = run_all(ctx, Run::Proxy, &ops).await?;
        anyhow::Ok((direct, proxy))
    });
    // Whatever happened, no table stays behind.
    let names: Vec<String> = [Run::Direct, Run::Proxy]
        .into_iter()
        .flat_map(|run| (0..CLIENTS).map(move |i| format!("public.{}", table(run, i))))
        .collect();
    let p = ctx.cluster.pg_primary().context("no primary")?.name.clone();
    ctx.cluster
        .pg_sql(&p, DB, &format!("DROP TABLE IF EXISTS {}", names.join(", ")))?;
    let (direct, proxy) = outcome?;
    results::compare(&ops, &direct, &proxy)
}
