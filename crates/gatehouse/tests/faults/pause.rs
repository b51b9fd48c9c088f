//! An operator's pause that begins while a session's lease is still being
//! taken, for both engines: the router found the cluster not paused and
//! the pool is opening a connection (held in the relay's black hole until
//! the pause is on). The statement must not run while the cluster is
//! paused: a switchover pauses, waits until no lease is out, and stops the
//! old writer, and a lease that was still opening when the drain counted
//! must not start a statement on it (the flaky 08006 once seen in
//! `failover`'s `pg::switchover_moves_writes_without_errors`). The
//! connection opened is given back unused and serves the statement after
//! the resume: one connection opened, none failed.

use std::future::Future;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use gatehouse::topology::ClusterState;
use gatehouse_testkit::faults::FaultRelay;
use mysql_async::prelude::Queryable;

use crate::cases::{pg_rows, with_proxy};
use crate::{BOUND, Ctx, Proxy};

/// How long the cluster stays paused: long enough for the opening
/// connection to be lent (the relay lets it through as the pause begins),
/// shorter than the case's `failover_hold` (2 s), after which a held lease
/// would fail.
const PAUSED_FOR: Duration = Duration::from_millis(1200);

pub fn lease_opening_as_a_pause_begins(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "lease_opening_as_a_pause_begins", |p| async move {
        let pg = p.pg("pgc").await?;
        pg.simple_query("SELECT 1").await?;
        // The simple protocol: one exchange, one lease (the extended
        // protocol's Parse/Describe would take a lease of its own first).
        let got = held_by_the_pause(&p, "pgc", &p.pg_relay, async {
            Ok(pg_rows(&pg.simple_query("SELECT 41 + 1").await?))
        })
        .await?;
        ensure!(got == [["42"]], "pgc: answered {got:?}");

        let mut my = p.my("myc").await?;
        my.query_drop("SELECT 1").await?;
        let got: Option<u32> = held_by_the_pause(&p, "myc", &p.my_relay, async {
            Ok(my.query_first("SELECT 41 + 1").await?)
        })
        .await?;
        ensure!(got == Some(42), "myc: answered {got:?}");
        my.disconnect().await?;
        Ok(p)
    })
}

/// Runs `statement` on a session of `cluster` whose pool has no idle
/// connection, pausing the cluster once the proxy has dialled `relay` for
/// a new one (the router's choice is made), and resuming it after
/// [`PAUSED_FOR`]: the statement must not end before the resume, and must
/// end well after it, on the one connection opened.
async fn held_by_the_pause<T>(
    p: &Proxy,
    cluster: &str,
    relay: &FaultRelay,
    statement: impl Future<Output = Result<T>>,
) -> Result<T> {
    let state = cluster_state(p, cluster)?;
    retire_idle(p, cluster, &relay.addr_string());
    let (opened, failed) = p.connects(cluster);
    relay.black_hole_new();
    let accepted = relay.accepted();
    // A place of the pool taken (none was idle) and the server dialled:
    // the lease is opening a connection (the health probes dial too, so
    // the relay's count alone does not say whose).
    let dialled = async {
        while relay.accepted() == accepted || p.leased_in(cluster) == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::pin!(statement);
    tokio::select! {
        r = &mut statement => {
            relay.heal();
            bail!("{cluster}: the statement ended before a connection was opened: {}", r.is_ok());
        }
        () = tokio::time::sleep(BOUND) => {
            relay.heal();
            bail!("{cluster}: the proxy never dialled the server");
        }
        () = dialled => {}
    }
    state.set_paused(true);
    relay.heal();
    let early = tokio::time::timeout(PAUSED_FOR, &mut statement).await;
    state.set_paused(false);
    ensure!(
        early.is_err(),
        "{cluster}: the statement ended while the cluster was paused (ok: {})",
        early.is_ok_and(|r| r.is_ok())
    );
    let got = tokio::time::timeout(BOUND, statement)
        .await
        .with_context(|| format!("{cluster}: still held after the resume"))?
        .with_context(|| format!("{cluster}: the statement after the resume"))?;
    let (opened_now, failed_now) = p.connects(cluster);
    ensure!(
        (opened_now - opened, failed_now - failed) == (1, 0),
        "{cluster}: {} connections opened and {} failed (not 1 and 0): the one lent as the pause began was not reused",
        opened_now - opened,
        failed_now - failed
    );
    Ok(got)
}

fn cluster_state(p: &Proxy, cluster: &str) -> Result<std::sync::Arc<ClusterState>> {
    p.pg.topology
        .cluster(cluster)
        .or_else(|| p.my.topology.cluster(cluster))
        .with_context(|| format!("no cluster {cluster}"))
}

/// Closes the idle pooled connections of `cluster` to `backend`, so the
/// next lease opens one.
fn retire_idle(p: &Proxy, cluster: &str, backend: &str) {
    p.pg.pools.retire_backend(cluster, backend);
    p.my.pools.retire_backend(cluster, backend);
}
