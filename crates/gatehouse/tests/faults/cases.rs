//! The fault cases, each for both engines: a connection cut mid-result,
//! black-holed new connections, idle pooled connections reset by the
//! network, and refused connections. Each ends by checking that fresh
//! clients are served on every endpoint and that no lease leaked.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use mysql_async::prelude::Queryable;

use crate::{BOUND, Ctx, Proxy, my_code, sqlstate};

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
    ]
}

/// Runs `case` on a runtime of its own against a proxy of its own.
fn with_proxy<F, Fut>(ctx: &Ctx, name: &str, case: F) -> Result<()>
where
    F: FnOnce(Proxy) -> Fut,
    Fut: Future<Output = Result<Proxy>>,
{
    let rt = gatehouse_testkit::trials::runtime()?;
    rt.block_on(async {
        let proxy = Proxy::start(ctx, name).await?;
        let proxy = tokio::time::timeout(Duration::from_secs(120), case(proxy))
            .await
            .context("the case hung")??;
        proxy.still_serving().await?;
        proxy.no_lease_leaked().await?;
        proxy.stop().await
    })
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
        let (cut, others) = tokio::join!(victim.simple_query(PG_BIG), async {
            for i in 0..20 {
                other.simple_query(&format!("SELECT {i}")).await?;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other.simple_query("COMMIT").await
        });
        let err = match cut {
            Ok(rows) => bail!("the cut result came whole ({} messages)", rows.len()),
            Err(e) => e,
        };
        ensure!(
            p.pg_relay.cuts() == 1,
            "the relay cut {} connections",
            p.pg_relay.cuts()
        );
        let code = sqlstate(&err).map_err(|e| anyhow::anyhow!("no SQLSTATE on the cut result: {e}"))?;
        ensure!(code == "08006", "cut result got SQLSTATE {code}");
        others.context("the other session's transaction failed")?;
        // An ErrorResponse may end a reply mid-way (as the server's own
        // errors do), then ReadyForQuery: the victim's session goes on.
        victim
            .simple_query("SELECT 1")
            .await
            .context("the victim's next statement")?;
        other
            .simple_query("SELECT 'after'")
            .await
            .context("the other session after the cut")?;
        let again = p.pg("pgc").await?;
        again.simple_query("BEGIN; SELECT 2; COMMIT").await?;

        // MariaDB, the same.
        let mut other = p.my("myc").await?;
        other.query_drop("START TRANSACTION").await?;
        other.query_drop("SELECT 1").await?;
        let mut victim = p.my("myc").await?;
        p.my_relay.cut_after_server_bytes(CUT_AT);
        let (cut, others) = tokio::join!(victim.query::<(u64, String), _>(MY_BIG), async {
            for i in 0..20 {
                other.query_drop(format!("SELECT {i}")).await?;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other.query_drop("COMMIT").await
        });
        let err = match cut {
            Ok(rows) => bail!("the cut result came whole ({} rows)", rows.len()),
            Err(e) => e,
        };
        ensure!(
            p.my_relay.cuts() == 1,
            "the relay cut {} connections",
            p.my_relay.cuts()
        );
        // ER_SERVER_SHUTDOWN (1053, SQLSTATE 08S01): drivers take it for a lost server.
        let code = my_code(&err).map_err(|e| anyhow::anyhow!("no error packet on the cut result: {e}"))?;
        ensure!(code == 1053, "cut result got error {code}: {err}");
        others.context("the other session's transaction failed")?;
        let one: Option<u32> = other.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        // The proxy ends a MariaDB session whose reply was cut mid-way
        // (after the error packet): the victim's session is over.
        let next = tokio::time::timeout(BOUND, victim.query_drop("SELECT 1")).await;
        ensure!(
            matches!(next, Ok(Err(_))),
            "the victim's session went on after a cut reply"
        );
        drop((victim, other));
        Ok(p)
    })
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
