//! An operator's pause, or drain of the backend, that begins while a
//! session's lease is still being taken, for both engines: the router
//! found the cluster not paused and the backend not drained, and the pool
//! is opening a connection (held in the relay's black hole until the
//! operator's change is made). The statement must not run until the
//! change is undone: a switchover pauses, waits until no lease is out, and
//! stops the old writer, and an operator who drains a backend waits for
//! its leases to end before stopping it; a lease that was still opening
//! when they counted must not start a statement there (the flaky 08006
//! once seen in `failover`'s `pg::switchover_moves_writes_without_errors`).
//! After a pause, the connection opened is given back unused and serves
//! the statement after the resume (one connection opened, none failed);
//! after a drain it is closed, as the drain closes idle ones, and the
//! statement gets a new one once the backend is undrained (two opened).

use std::future::Future;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use gatehouse::topology::ClusterState;
use gatehouse_testkit::faults::FaultRelay;
use mysql_async::prelude::Queryable;

use crate::cases::{pg_rows, with_proxy};
use crate::{BOUND, Ctx, Proxy};

/// How long the operator's change lasts: long enough for the opening
/// connection to be lent (the relay lets it through as the change is
/// made), shorter than the case's `failover_hold` (2 s), after which a
/// held lease would fail.
const HELD_FOR: Duration = Duration::from_millis(1200);

/// What the operator does while the lease opens its connection.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// Pauses the cluster.
    Pause,
    /// Drains the cluster's only backend (the relay).
    Drain,
}

impl Change {
    /// Makes (`on`) or undoes the change on `cluster`, whose backend is `backend`.
    fn apply(self, state: &ClusterState, backend: &str, on: bool) -> Result<()> {
        match self {
            Change::Pause => state.set_paused(on),
            Change::Drain => state.set_draining(backend, on)?,
        }
        Ok(())
    }

    /// Connections the statement's pool opens in all: the one lent as
    /// the change was made is reused after a pause, closed after a drain.
    fn opened(self) -> u64 {
        match self {
            Change::Pause => 1,
            Change::Drain => 2,
        }
    }
}

pub fn lease_opening_as_a_pause_begins(ctx: &Ctx) -> Result<()> {
    lease_opening_as(ctx, "lease_opening_as_a_pause_begins", Change::Pause)
}

pub fn lease_opening_as_its_backend_is_drained(ctx: &Ctx) -> Result<()> {
    lease_opening_as(ctx, "lease_opening_as_its_backend_is_drained", Change::Drain)
}

fn lease_opening_as(ctx: &Ctx, name: &str, change: Change) -> Result<()> {
    with_proxy(ctx, name, |p| async move {
        let pg = p.pg("pgc").await?;
        pg.simple_query("SELECT 1").await?;
        // The simple protocol: one exchange, one lease (the extended
        // protocol's Parse/Describe would take a lease of its own first).
        let got = held_by(change, &p, "pgc", &p.pg_relay, async {
            Ok(pg_rows(&pg.simple_query("SELECT 41 + 1").await?))
        })
        .await?;
        ensure!(got == [["42"]], "pgc: answered {got:?}");

        let mut my = p.my("myc").await?;
        my.query_drop("SELECT 1").await?;
        let got: Option<u32> = held_by(change, &p, "myc", &p.my_relay, async {
            Ok(my.query_first("SELECT 41 + 1").await?)
        })
        .await?;
        ensure!(got == Some(42), "myc: answered {got:?}");
        my.disconnect().await?;
        Ok(p)
    })
}

/// Runs `statement` on a session of `cluster` whose pool has no idle
/// connection, making `change` once the proxy has dialled `relay` for a
/// new one (the router's choice is made), and undoing it after
/// [`HELD_FOR`]: the statement must not end before the change is undone,
/// and must end well after it, with the connections `change` opens.
async fn held_by<T>(
    change: Change,
    p: &Proxy,
    cluster: &str,
    relay: &FaultRelay,
    statement: impl Future<Output = Result<T>>,
) -> Result<T> {
    let state = cluster_state(p, cluster)?;
    let backend = relay.addr_string();
    retire_idle(p, cluster, &backend);
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
    change.apply(&state, &backend, true)?;
    relay.heal();
    let early = tokio::time::timeout(HELD_FOR, &mut statement).await;
    change.apply(&state, &backend, false)?;
    ensure!(
        early.is_err(),
        "{cluster}: the statement ended during the {change:?} (ok: {})",
        early.is_ok_and(|r| r.is_ok())
    );
    let got = tokio::time::timeout(BOUND, statement)
        .await
        .with_context(|| format!("{cluster}: still held after the {change:?} was undone"))?
        .with_context(|| format!("{cluster}: the statement after the {change:?} was undone"))?;
    let (opened_now, failed_now) = p.connects(cluster);
    ensure!(
        (opened_now - opened, failed_now - failed) == (change.opened(), 0),
        "{cluster}: {} connections opened and {} failed (not {} and 0)",
        opened_now - opened,
        failed_now - failed,
        change.opened()
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
