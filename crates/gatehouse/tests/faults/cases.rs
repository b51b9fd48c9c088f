//! The fault cases, each for both engines: a connection cut mid-result
//! and mid-COPY (MariaDB: mid binary-protocol result), black-holed new
//! connections, idle pooled connections reset by the network, refused
//! connections, a reset during a new connection's authentication, and (in
//! `slow`) latency with jitter and a bandwidth limit, (in `upstream`) a
//! cut inside MariaDB's password exchange and a bandwidth limit towards
//! the servers. Each ends by checking that fresh clients are served on
//! every endpoint, that no lease leaked, and that the process's file
//! descriptors and live heap bytes are back near their baseline.

use std::cell::Cell;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use mysql_async::prelude::Queryable;
use tokio_postgres::SimpleQueryMessage;

use crate::{BOUND, Ctx, Proxy, live_heap, my_code, open_fds, slow, sqlstate, upstream};

pub fn cases() -> Vec<(&'static str, gatehouse_testkit::trials::Case<Ctx>)> {
    vec![
        (
            "a_backend_reset_mid_result_ends_only_that_clients_transaction_with_the_engines_error",
            reset_mid_result,
        ),
        ("a_black_holed_backend_times_out_the_lease_not_the_proxy", black_holed),
        (
            "idle_pooled_connections_reset_by_the_network_are_replaced_transparently",
            idle_reset,
        ),
        ("a_refused_backend_is_reported_and_recovers", refused),
        (
            "a_cut_mid_copy_or_binary_result_ends_only_that_clients_statement_with_the_engines_error",
            cut_mid_copy,
        ),
        (
            "a_reset_during_backend_authentication_is_retried_or_reported_within_the_timeouts",
            reset_during_auth,
        ),
        (
            "latency_and_jitter_keep_results_correct_and_in_order_and_pools_reuse_connections",
            slow::latency_and_jitter,
        ),
        (
            "a_bandwidth_limit_delivers_a_large_result_whole_and_correct",
            slow::bandwidth_limit,
        ),
        (
            "a_cut_inside_the_mariadb_password_exchange_is_retried_or_reported_within_the_timeouts",
            upstream::cut_inside_password_exchange,
        ),
        (
            "a_bandwidth_limit_towards_the_server_delivers_a_large_statement_whole_and_correct",
            upstream::bandwidth_limit_to_server,
        ),
        (
            "a_lease_being_opened_as_a_pause_begins_waits_for_the_resume",
            crate::pause::lease_opening_as_a_pause_begins,
        ),
        (
            "a_lease_being_opened_as_its_backend_is_drained_runs_nothing_there_until_undrained",
            crate::pause::lease_opening_as_its_backend_is_drained,
        ),
    ]
}

/// Cases run one at a time, so that a case's file descriptors are its own.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
/// File descriptors a case may leave open beyond its baseline (the
/// runtime's and the logger's lazily made ones).
const FD_SLACK: usize = 4;

/// Runs `case` on a runtime of its own against a proxy of its own.
pub fn with_proxy<F, Fut>(ctx: &Ctx, name: &str, case: F) -> Result<()>
where
    F: FnOnce(Proxy) -> Fut,
    Fut: Future<Output = Result<Proxy>>,
{
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    warm_up(ctx)?;
    let baseline = open_fds()?;
    let heap = live_heap();
    let rt = gatehouse_testkit::trials::runtime()?;
    rt.block_on(async {
        let proxy = Proxy::start(ctx, name).await?;
        let proxy = tokio::time::timeout(Duration::from_secs(120), case(proxy))
            .await
            .context("the case hung")??;
        proxy.still_serving().await?;
        proxy.no_lease_leaked().await?;
        proxy.stop().await
    })?;
    drop(rt);
    // Sockets closed by the runtime's last tasks may take a moment.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let now = open_fds()?;
        tracing::debug!(name, baseline, now, "file descriptors");
        if now <= baseline + FD_SLACK {
            break;
        }
        if Instant::now() > until {
            bail!("{now} file descriptors open after the case, {baseline} before");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    heap_returns(name, heap)
}

/// Live heap bytes a case may leave beyond its baseline: what a code path
/// allocates lazily the first time it runs in the process and keeps (up
/// to about 13 KiB seen, in the first case after the warm-up; the other
/// cases end within a few hundred bytes of their baseline), with room to
/// spare. It stays below what one leaked PostgreSQL session holds (its
/// relay's two 32 KiB buffers) and what a pool's worth (8) of leaked
/// MariaDB backend connections hold (an 8 KiB read buffer each); a leaked
/// large result or statement (the cases move MiBs) shows at once.
const HEAP_SLACK: usize = 48 * 1024;

/// Waits (within [`BOUND`]) until the live heap is back within
/// [`HEAP_SLACK`] of `before`, and prints both.
fn heap_returns(name: &str, before: usize) -> Result<()> {
    let until = Instant::now() + BOUND;
    loop {
        let after = live_heap();
        let change = if after >= before {
            format!("+{}", after - before)
        } else {
            format!("-{}", before - after)
        };
        if after <= before + HEAP_SLACK {
            println!("{name}: live heap {before} bytes before, {after} after ({change})");
            return Ok(());
        }
        if Instant::now() > until {
            bail!("live heap {after} bytes after the case, {before} before ({change})");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

thread_local! {
    /// Whether a proxy has run on this thread of the harness's.
    static WARMED: Cell<bool> = const { Cell::new(false) };
}

/// Runs a proxy before the first case of each of the harness's threads
/// (one per `--test-threads`), to serve a session of each kind and stop:
/// the process's first proxy allocates once-only things that stay (the
/// TLS crypto provider, the logger's callsites, the clients' statics), and
/// a harness thread's first case about 48 KiB more that stay with the
/// thread (seen with two threads, gone with `--test-threads=1`); neither
/// is a case's.
fn warm_up(ctx: &Ctx) -> Result<()> {
    if WARMED.replace(true) {
        return Ok(());
    }
    let rt = gatehouse_testkit::trials::runtime()?;
    rt.block_on(async {
        let proxy = Proxy::start(ctx, "warm_up").await?;
        proxy.still_serving().await?;
        proxy.no_lease_leaked().await?;
        proxy.stop().await
    })
    .context("warming up")
}

/// About 20 MB of rows.
const PG_BIG: &str = "SELECT g, repeat('x', 100) FROM generate_series(1, 200000) g";
const MY_BIG: &str = "SELECT seq, REPEAT('x', 100) FROM seq_1_to_200000";
/// Where the relay cuts the big result: well inside it, far above what
/// the other session's small statements carry.
const CUT_AT: u64 = 256 * 1024;

fn reset_mid_result(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "reset_mid_result", |p| async move {
        // PostgreSQL: the other session holds a backend connection of its own.
        let other = p.pg("pgc").await?;
        other.simple_query("BEGIN").await?;
        other.simple_query("SELECT 1").await?;
        let victim = p.pg("pgc").await?;
        p.pg_relay.cut_after_server_bytes(CUT_AT);
        let (cut, others) = tokio::join!(victim.simple_query(PG_BIG), pg_other_transaction(&other));
        let err = match cut {
            Ok(rows) => bail!("the cut result came whole ({} messages)", rows.len()),
            Err(e) => e,
        };
        pg_cut_checked(&p, &err, others, &victim, &other).await?;
        let again = p.pg("pgc").await?;
        again.simple_query("BEGIN; SELECT 2; COMMIT").await?;

        // MariaDB, the same.
        let mut other = p.my("myc").await?;
        other.query_drop("START TRANSACTION").await?;
        other.query_drop("SELECT 1").await?;
        let mut victim = p.my("myc").await?;
        p.my_relay.cut_after_server_bytes(CUT_AT);
        let (cut, others) = tokio::join!(victim.query::<(u64, String), _>(MY_BIG), other_transaction(&mut other));
        my_cut_checked(&p, cut, others, &mut victim, &mut other).await?;
        drop((victim, other));
        Ok(p)
    })
}

/// The other PostgreSQL session's work while the victim's reply is cut:
/// its open transaction goes on and commits.
async fn pg_other_transaction(
    other: &tokio_postgres::Client,
) -> Result<Vec<SimpleQueryMessage>, tokio_postgres::Error> {
    for i in 0..20 {
        other.simple_query(&format!("SELECT {i}")).await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    other.simple_query("COMMIT").await
}

/// After a PostgreSQL reply was cut once mid-way: the victim got 08006,
/// the other session's transaction committed, and both sessions go on (an
/// ErrorResponse may end a reply mid-way, as the server's own errors do,
/// then ReadyForQuery).
async fn pg_cut_checked(
    p: &Proxy,
    err: &tokio_postgres::Error,
    others: Result<Vec<SimpleQueryMessage>, tokio_postgres::Error>,
    victim: &tokio_postgres::Client,
    other: &tokio_postgres::Client,
) -> Result<()> {
    ensure!(
        p.pg_relay.cuts() == 1,
        "the relay cut {} connections",
        p.pg_relay.cuts()
    );
    let code = sqlstate(err).map_err(|e| anyhow::anyhow!("no SQLSTATE on the cut reply: {e}"))?;
    ensure!(code == "08006", "cut reply got SQLSTATE {code}");
    others.context("the other session's transaction failed")?;
    victim
        .simple_query("SELECT 1")
        .await
        .context("the victim's next statement")?;
    other
        .simple_query("SELECT 'after'")
        .await
        .context("the other session after the cut")?;
    Ok(())
}

/// The other MariaDB session's work while the victim's result is cut: its
/// open transaction goes on and commits.
async fn other_transaction(other: &mut mysql_async::Conn) -> Result<(), mysql_async::Error> {
    for i in 0..20 {
        other.query_drop(format!("SELECT {i}")).await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    other.query_drop("COMMIT").await
}

/// After a MariaDB result was cut once mid-way: the victim got
/// ER_SERVER_SHUTDOWN (1053, SQLSTATE 08S01, which drivers take for a lost
/// server), the other session's transaction committed and it goes on, and
/// the proxy ended the victim's session (after the error packet).
async fn my_cut_checked(
    p: &Proxy,
    cut: Result<Vec<(u64, String)>, mysql_async::Error>,
    others: Result<(), mysql_async::Error>,
    victim: &mut mysql_async::Conn,
    other: &mut mysql_async::Conn,
) -> Result<()> {
    let err = match cut {
        Ok(rows) => bail!("the cut result came whole ({} rows)", rows.len()),
        Err(e) => e,
    };
    ensure!(
        p.my_relay.cuts() == 1,
        "the relay cut {} connections",
        p.my_relay.cuts()
    );
    let code = my_code(&err).map_err(|e| anyhow::anyhow!("no error packet on the cut result: {e}"))?;
    ensure!(code == 1053, "cut result got error {code}: {err}");
    others.context("the other session's transaction failed")?;
    let one: Option<u32> = other.query_first("SELECT 1").await?;
    ensure!(one == Some(1));
    let next = tokio::time::timeout(BOUND, victim.query_drop("SELECT 1")).await;
    ensure!(
        matches!(next, Ok(Err(_))),
        "the victim's session went on after a cut reply"
    );
    Ok(())
}

fn black_holed(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "black_holed", |p| async move {
        // Warm the login greetings, then drop every pooled connection.
        p.pg("pgc").await?.simple_query("SELECT 1").await?;
        let mut my = p.my("myc").await?;
        my.query_drop("SELECT 1").await?;
        p.pg_relay.reset_all().await;
        p.my_relay.reset_all().await;
        p.pg_relay.black_hole_new();
        p.my_relay.black_hole_new();

        let started = Instant::now();
        let pg_err = async {
            p.pg("pgc")
                .await?
                .simple_query("SELECT 1")
                .await
                .map_err(anyhow::Error::from)
        };
        let pg_err = match tokio::time::timeout(BOUND, pg_err).await.context("PostgreSQL hung")? {
            Ok(_) => bail!("a PostgreSQL statement ran through a black hole"),
            Err(e) => e,
        };
        let pg_took = started.elapsed();
        let code = pg_err
            .downcast_ref::<tokio_postgres::Error>()
            .map(sqlstate)
            .context("not a tokio-postgres error")?
            .map_err(|e| anyhow::anyhow!("no SQLSTATE: {e}"))?;
        ensure!(code == "08006", "black hole gave SQLSTATE {code}");
        ensure!(
            pg_took >= Duration::from_millis(900),
            "failed before the timeout: {pg_took:?}"
        );

        let started = Instant::now();
        let my_err = match tokio::time::timeout(BOUND, my.query_drop("SELECT 2"))
            .await
            .context("MariaDB hung")?
        {
            Ok(()) => bail!("a MariaDB statement ran through a black hole"),
            Err(e) => e,
        };
        let my_took = started.elapsed();
        let code = my_code(&my_err).map_err(|e| anyhow::anyhow!("no error packet: {e}"))?;
        ensure!(code == 1053, "black hole gave error {code}: {my_err}");
        ensure!(
            my_took >= Duration::from_millis(900),
            "failed before the timeout: {my_took:?}"
        );

        // Meanwhile the direct clusters serve.
        p.pg("pgd").await?.simple_query("SELECT 1").await?;
        let mut direct = p.my("myd").await?;
        direct.query_drop("SELECT 1").await?;
        direct.disconnect().await?;

        p.pg_relay.heal();
        p.my_relay.heal();
        p.pg("pgc").await?.simple_query("SELECT 3").await?;
        // The MariaDB session that saw the timeout goes on.
        my.query_drop("SELECT 3")
            .await
            .context("the session after the black hole")?;
        drop(my);
        Ok(p)
    })
}

fn idle_reset(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "idle_reset", |p| async move {
        // Three sessions at once, so three connections go back idle.
        let pg: Vec<tokio_postgres::Client> = vec![p.pg("pgc").await?, p.pg("pgc").await?, p.pg("pgc").await?];
        let mut my = vec![p.my("myc").await?, p.my("myc").await?, p.my("myc").await?];
        for c in &pg {
            c.simple_query("BEGIN").await?;
        }
        for c in &mut my {
            c.query_drop("START TRANSACTION").await?;
        }
        for c in &pg {
            c.simple_query("COMMIT").await?;
        }
        for c in &mut my {
            c.query_drop("COMMIT").await?;
        }
        p.no_lease_leaked().await?;
        let (pg_reset, my_reset) = (p.pg_relay.reset_all().await, p.my_relay.reset_all().await);
        ensure!(
            pg_reset >= 3 && my_reset >= 3,
            "reset {pg_reset} + {my_reset} connections"
        );
        // Every session's next transactions succeed: dead idle connections
        // are found at borrow time and replaced.
        for round in 0..3 {
            for c in &pg {
                c.simple_query(&format!("BEGIN; SELECT {round}; COMMIT"))
                    .await
                    .with_context(|| format!("PostgreSQL round {round}"))?;
            }
            for c in &mut my {
                c.query_drop(format!("SELECT {round}"))
                    .await
                    .with_context(|| format!("MariaDB round {round}"))?;
            }
        }
        ensure!(
            p.pg_relay.accepted() >= 4 && p.my_relay.accepted() >= 4,
            "no new connections opened"
        );
        drop((pg, my));
        Ok(p)
    })
}

fn refused(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "refused", |p| async move {
        let pg = p.pg("pgc").await?;
        pg.simple_query("SELECT 1").await?;
        let mut my = p.my("myc").await?;
        my.query_drop("SELECT 1").await?;
        p.pg_relay.reset_all().await;
        p.my_relay.reset_all().await;
        p.pg_relay.refuse_new();
        p.my_relay.refuse_new();

        let err = tokio::time::timeout(BOUND, pg.simple_query("SELECT 2"))
            .await
            .context("PostgreSQL hung")?
            .err()
            .context("a statement ran on a refused backend")?;
        let code = sqlstate(&err).map_err(|e| anyhow::anyhow!("no SQLSTATE: {e}"))?;
        ensure!(code == "08006", "refused backend gave SQLSTATE {code}");
        let err = tokio::time::timeout(BOUND, my.query_drop("SELECT 2"))
            .await
            .context("MariaDB hung")?
            .err()
            .context("a statement ran on a refused backend")?;
        let code = my_code(&err).map_err(|e| anyhow::anyhow!("no error packet: {e}"))?;
        ensure!(code == 1053, "refused backend gave error {code}: {err}");
        ensure!(p.pg_relay.refused() >= 1 && p.my_relay.refused() >= 1);

        p.pg_relay.heal();
        p.my_relay.heal();
        // The sessions that saw the refusal go on.
        pg.simple_query("SELECT 3")
            .await
            .context("the PostgreSQL session after")?;
        my.query_drop("SELECT 3").await.context("the MariaDB session after")?;
        drop((pg, my));
        Ok(p)
    })
}

/// COPY out of about 20 MB.
const PG_BIG_COPY: &str = "COPY (SELECT g, repeat('x', 100) FROM generate_series(1, 200000) g) TO STDOUT";
/// About 20 MB of rows through a prepared statement (binary protocol).
const MY_BIG_PREPARED: &str = "SELECT seq, REPEAT('x', ?) FROM seq_1_to_200000";

fn cut_mid_copy(ctx: &Ctx) -> Result<()> {
    use futures_util::StreamExt;
    with_proxy(ctx, "cut_mid_copy", |p| async move {
        // PostgreSQL: a COPY TO STDOUT cut mid-way.
        let other = p.pg("pgc").await?;
        other.simple_query("BEGIN").await?;
        other.simple_query("SELECT 1").await?;
        let victim = p.pg("pgc").await?;
        p.pg_relay.cut_after_server_bytes(CUT_AT);
        let copy = async {
            let stream = victim.copy_out(PG_BIG_COPY).await?;
            let mut stream = std::pin::pin!(stream);
            let mut got = 0usize;
            while let Some(chunk) = stream.next().await {
                got += chunk?.len();
            }
            Ok::<usize, tokio_postgres::Error>(got)
        };
        let (cut, others) = tokio::join!(copy, pg_other_transaction(&other));
        let err = match cut {
            Ok(bytes) => bail!("the cut COPY came whole ({bytes} bytes)"),
            Err(e) => e,
        };
        pg_cut_checked(&p, &err, others, &victim, &other).await?;

        // MariaDB has no COPY: a large prepared-statement result (binary
        // protocol) cut mid-way.
        let mut other = p.my("myc").await?;
        other.query_drop("START TRANSACTION").await?;
        other.query_drop("SELECT 1").await?;
        let mut victim = p.my("myc").await?;
        let stmt = victim.prep(MY_BIG_PREPARED).await?;
        p.my_relay.cut_after_server_bytes(CUT_AT);
        let (cut, others) = tokio::join!(
            victim.exec::<(u64, String), _, _>(&stmt, (100u32,)),
            other_transaction(&mut other)
        );
        // As for a text result: the proxy ends the session after the error.
        my_cut_checked(&p, cut, others, &mut victim, &mut other).await?;
        drop((victim, other));
        Ok(p)
    })
}

/// Where the relay cuts a new PostgreSQL connection: inside the SCRAM
/// exchange (AuthenticationSASL is 24 bytes, SASLContinue follows).
const PG_AUTH_CUT: u64 = 30;
/// Where it cuts a new MariaDB connection: inside the server's greeting
/// (its handshake packet, the first step of authentication).
const MY_AUTH_CUT: u64 = 20;
/// The relayed clusters' connect timeout and failover hold, and slack.
pub const CONNECT_AND_HOLD: Duration = Duration::from_secs(1 + 2 + 2);

/// Runs `statement`, whose session needs a new backend connection of
/// `cluster` that `relay` (armed by the caller) cuts once during its
/// login, and checks what every such cut must give: exactly one cut, an
/// answer within [`CONNECT_AND_HOLD`] (a success, on another new
/// connection, or an error `expected_error` takes), and the cut open
/// counted as failed by the pool. Returns the answer and its time.
pub async fn login_cut_checked<T, E: std::fmt::Display>(
    p: &Proxy,
    relay: &gatehouse_testkit::faults::FaultRelay,
    engine: &str,
    cluster: &str,
    statement: impl std::future::Future<Output = std::result::Result<T, E>>,
    expected_error: impl FnOnce(&E) -> Result<()>,
) -> Result<(std::result::Result<T, E>, Duration)> {
    let before = p.connects(cluster);
    let started = Instant::now();
    let result = tokio::time::timeout(BOUND, statement)
        .await
        .with_context(|| format!("{engine} hung"))?;
    let took = started.elapsed();
    ensure!(relay.cuts() == 1, "the relay cut {} connections", relay.cuts());
    ensure!(took < CONNECT_AND_HOLD, "{engine} took {took:?}");
    if let Err(e) = &result {
        expected_error(e)?;
    }
    let after = p.connects(cluster);
    ensure!(
        after.1 > before.1,
        "the cut connection was not counted as failed: {before:?} -> {after:?}"
    );
    ensure!(
        result.is_err() || after.0 > before.0,
        "{engine} succeeded without a new connection: {before:?} -> {after:?}"
    );
    Ok((result, took))
}

fn reset_during_auth(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "reset_during_auth", |p| async move {
        let pg = p.pg("pgc").await?;
        pg.simple_query("SELECT 1").await?;
        let mut my = p.my("myc").await?;
        my.query_drop("SELECT 1").await?;
        // The pooled connections die: the next transaction needs a new one.
        p.pg_relay.reset_all().await;
        p.my_relay.reset_all().await;
        p.pg_relay.cut_next_connection_after_server_bytes(PG_AUTH_CUT);
        p.my_relay.cut_next_connection_after_server_bytes(MY_AUTH_CUT);
        let (pg_result, pg_took) = login_cut_checked(
            &p,
            &p.pg_relay,
            "PostgreSQL",
            "pgc",
            pg.simple_query("BEGIN; SELECT 2; COMMIT"),
            |e| {
                let code = sqlstate(e).map_err(|e| anyhow::anyhow!("no SQLSTATE: {e}"))?;
                ensure!(code.starts_with("08"), "reset during auth gave SQLSTATE {code}");
                Ok(())
            },
        )
        .await?;
        let (my_result, my_took) =
            login_cut_checked(&p, &p.my_relay, "MariaDB", "myc", my.query_drop("SELECT 2"), |e| {
                let code = my_code(e).map_err(|e| anyhow::anyhow!("no error packet: {e}"))?;
                ensure!(code == 1053, "reset during auth gave error {code}: {e}");
                Ok(())
            })
            .await?;
        tracing::info!(?pg_result, ?my_result, ?pg_took, ?my_took, "after a reset during auth");

        // The sessions go on (the cut is one-shot).
        p.no_lease_leaked().await?;
        pg.simple_query("SELECT 3")
            .await
            .context("the PostgreSQL session after")?;
        my.query_drop("SELECT 3").await.context("the MariaDB session after")?;
        drop((pg, my));
        Ok(p)
    })
}

/// The values of the rows of a simple query's reply, as text.
pub fn pg_rows(messages: &[SimpleQueryMessage]) -> Vec<Vec<String>> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_owned()).collect()),
            _ => None,
        })
        .collect()
}
