//! PostgreSQL cases beyond the writer's loss (which stays in `pg.rs` with
//! the rigs and helpers): a hung writer, a replica lost under reads, a
//! transaction lost with its writer (the aborted block until ROLLBACK). The
//! planned switchover is in `crate::switchover`, with MariaDB's.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::Ctx;
use crate::common::*;
use crate::pg::*;
use crate::replica::{ReplicaLoss, lose_a_replica};

pub(crate) fn hung_writer(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "pg-hung", 1, &[RW])?;
    let h = rig.handle();
    let port0 = rig.server_port("pg0")?;
    let addr0 = rig.server_addr("pg0")?;
    rig.wait_roles(ENGINE, "pg0", &["pg1"])?;
    let idle = h.block_on(idle_clients(rig.addr("rw"), 4))?;
    let loopers = spawn_loopers(&rig, "rw", "w", 4, insert_sql)?;
    let started = Instant::now();
    loopers.wait_each("a write on pg0", Duration::from_secs(10), started, |a| {
        a.port() == Some(port0)
    })?;

    rig.cluster.pause("pg0")?;
    let paused = Instant::now();
    // While pg0 hangs, the admin API answers at once, and the probes'
    // timeout marks pg0 down. Hung for at least 4 s, and until seen down
    // (at most 7 s).
    let mut slowest = Duration::ZERO;
    let mut seen_down = None;
    let outcome = (|| {
        loop {
            let took = rig.health()?;
            slowest = slowest.max(took);
            ensure!(
                took < Duration::from_secs(1),
                "/api/health took {took:?} while pg0 hung"
            );
            if seen_down.is_none() && !Backends(rig.backends(ENGINE)?).row(&addr0)?.up {
                seen_down = Some(paused.elapsed());
            }
            let hung = paused.elapsed();
            if (hung >= Duration::from_secs(4) && seen_down.is_some()) || hung >= Duration::from_secs(7) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    })();
    rig.cluster.resume("pg0")?;
    let resumed = Instant::now();
    outcome?;
    let down_after = seen_down.with_context(|| {
        format!(
            "pg0 was never marked down while hung for {:?} (probe timeout 1 s, 2 failures)",
            resumed - paused
        )
    })?;

    loopers.wait_each(
        "a write after pg0 resumed",
        FAILOVER_HOLD + Duration::from_secs(5),
        resumed,
        Attempt::ok,
    )?;
    let done = loopers.stop(&h)?;
    let t0 = rig.t0;
    let first = first_ok_after(&done, resumed).context("no write after the resume")?;
    eprintln!(
        "pg::hung_writer_holds_clients_until_it_resumes: pg0 hung {:.2}s, marked down after {:.2}s; \
         /api/health answered within {:.3}s; first write {:.3}s after the resume; errors seen by the writers: {:?}",
        (resumed - paused).as_secs_f64(),
        down_after.as_secs_f64(),
        slowest.as_secs_f64(),
        first.as_secs_f64(),
        all_errors(&done)
    );
    let limit = FAILOVER_HOLD + Duration::from_secs(5);
    for l in &done {
        for a in &l.attempts {
            let allowed = match &a.outcome {
                Outcome::Ok { .. } => true,
                Outcome::Failed { code, .. } => code.starts_with("08") || code == "53300" || code.starts_with("57"),
                Outcome::Closed(_) | Outcome::Hung => false,
            };
            ensure!(allowed, "{}: {}", l.name, a.show(t0));
            ensure!(a.took() <= limit, "{}: took over {limit:?}: {}", l.name, a.show(t0));
        }
    }
    // After the resume every client connection works again, the same ones.
    h.block_on(async {
        let clients = idle.iter().chain(done.iter().map(|l| &l.client));
        for (i, c) in clients.enumerate() {
            ensure!(!c.is_closed(), "client {i} lost its connection");
            tokio::time::timeout(ATTEMPT_LIMIT, c.simple_query("SELECT 1"))
                .await
                .with_context(|| format!("client {i}: SELECT 1 hung"))?
                .with_context(|| format!("client {i}: SELECT 1"))?;
        }
        anyhow::Ok(())
    })
}

pub(crate) fn replica_loss(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "pg-replica-loss", 2, &[RW, RO])?;
    rig.wait_roles(ENGINE, "pg0", &["pg1", "pg2"])?;
    let readers = spawn_loopers(&rig, "ro", "r", 6, read_sql)?;
    let loss = ReplicaLoss {
        case: "pg::reads_leave_a_lost_replica_and_come_back",
        writer: "pg0",
        kept: "pg1",
        lost: "pg2",
    };
    lose_a_replica(&mut rig, readers, &loss, |l, t0| check_loss(l, t0, false))
}

/// A client inside a transaction block when its writer dies: its next
/// statement gets 25P02 (the block is aborted, as the server's would be,
/// since it was rolled back with the server), never runs outside the block
/// it meant; ROLLBACK ends the block, and the same connection then writes
/// on the new writer. A COMMIT in the same state answers ROLLBACK.
pub(crate) fn lost_transaction(ctx: &Ctx) -> Result<()> {
    let mut rig = rig(ctx, "pg-lost-txn", 1, &[RW])?;
    let h = rig.handle();
    let port1 = rig.server_port("pg1")?;
    rig.wait_roles(ENGINE, "pg0", &["pg1"])?;
    let (a, b) = h.block_on(async { anyhow::Ok((connect(rig.addr("rw")).await?, connect(rig.addr("rw")).await?)) })?;
    h.block_on(async {
        for c in [&a, &b] {
            c.batch_execute("BEGIN").await?;
        }
        a.execute("INSERT INTO t (who) VALUES ('in-lost-block-a')", &[]).await?;
        b.execute("INSERT INTO t (who) VALUES ('in-lost-block-b')", &[]).await?;
        anyhow::Ok(())
    })?;
    rig.cluster.kill("pg0")?;
    rig.cluster.promote("pg1")?;
    let addr1 = rig.server_addr("pg1")?;
    rig.wait_backends(ENGINE, "pg1 elected", FAILOVER_HOLD, |bk| {
        bk.get(&addr1).is_some_and(|r| r.elected)
    })?;
    let mut problems = Problems::default();
    h.block_on(async {
        // Next statement of the block: refused as in an aborted block, over
        // the extended protocol and the simple one.
        let e = a.execute("INSERT INTO t (who) VALUES ('after-loss-a')", &[]).await;
        problems.require(
            e.as_ref().err().and_then(|e| e.code())
                == Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION),
            || format!("a statement in the lost block: {e:?}"),
        );
        let e = a.simple_query("SELECT 1").await;
        problems.require(
            e.as_ref().err().and_then(|e| e.code())
                == Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION),
            || format!("a simple query in the lost block: {e:?}"),
        );
        problems.check(a.batch_execute("ROLLBACK").await.context("ROLLBACK of the lost block"));
        problems.check(b.batch_execute("COMMIT").await.context("COMMIT of the lost block"));
        for (name, c) in [("a", &a), ("b", &b)] {
            let r = insert_on(c, &format!("{name}-after-rollback")).await;
            problems.check(r.and_then(|port| {
                ensure!(port == port1, "{name}: stored on {port}, not pg1 ({port1})");
                Ok(())
            }));
            problems.require(!c.is_closed(), || format!("{name}: connection closed"));
        }
    });
    let rows = rows_on(&rig.cluster, "pg1")?;
    for tag in ["after-loss-a", "in-lost-block-a", "in-lost-block-b"] {
        problems.require(!rows.contains_key(tag), || format!("{tag} is on pg1"));
    }
    problems.finish()
}
