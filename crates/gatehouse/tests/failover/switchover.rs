//! A planned switchover through the admin API, for both engines, while 4
//! clients write in a loop: new transactions wait while the cluster is
//! paused, the old writer is stopped and the replica promoted (by the
//! cluster's `switchover_command`, which hands the step to the case), and
//! writes go on on the new writer, with no client error at all.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};

use crate::Ctx;
use crate::common::{Attempt, Problems, Rig, all_errors, wait_until};

/// The `switchover_command` of the cases' clusters: it writes the target
/// to `switch.request` in the case's directory and waits for
/// `switch.done`, so the case stops the old writer and promotes the new
/// one as an operator's script would.
pub(crate) fn command(dir: &Path) -> String {
    format!(
        "echo {{target}} > {d}/switch.part && mv {d}/switch.part {d}/switch.request && \
         until [ -e {d}/switch.done ]; do sleep 0.05; done",
        d = dir.display()
    )
}

/// Asks the admin API to switch cluster main over to server `new`; when
/// the command hands the step over, stops server `old` and promotes
/// `new`. Returns once the API answered, naming `new`'s address.
fn switch_over(rig: &mut Rig, old: &str, new: &str) -> Result<Instant> {
    let target = rig.server_addr(new)?;
    let dir = rig.dir().to_path_buf();
    let asked = rig.post_async(&format!("/api/clusters/main/switchover/{target}"));
    let request = dir.join("switch.request");
    wait_until("the switchover command to run", Duration::from_secs(20), || {
        Ok(if request.exists() {
            Ok(())
        } else {
            Err("no request yet".to_string())
        })
    })?;
    let asked_for = std::fs::read_to_string(&request)?;
    ensure!(
        asked_for.trim() == target,
        "switchover target {asked_for:?}, not {target}"
    );
    rig.cluster.stop(old)?;
    rig.cluster.promote(new)?;
    std::fs::write(dir.join("switch.done"), "")?;
    let answer = asked
        .join()
        .map_err(|_| anyhow::anyhow!("the switchover request panicked"))??;
    ensure!(answer.status == 200, "switchover: {} {}", answer.status, answer.body);
    ensure!(answer.body.contains(&target), "switchover answer: {}", answer.body);
    Ok(Instant::now())
}

pub(crate) fn pg(ctx: &Ctx) -> Result<()> {
    use crate::pg::{ENGINE, RW, insert_sql, rig, spawn_loopers};
    let mut rig = rig(ctx, "pg-switchover", 1, &[RW])?;
    let h = rig.handle();
    let (port0, port1) = (rig.server_port("pg0")?, rig.server_port("pg1")?);
    rig.wait_roles(ENGINE, "pg0", &["pg1"])?;
    let loopers = spawn_loopers(&rig, "rw", "w", 4, insert_sql)?;
    let started = Instant::now();
    loopers.wait_each("a write on pg0", Duration::from_secs(10), started, |a| {
        a.port() == Some(port0)
    })?;
    let switched = switch_over(&mut rig, "pg0", "pg1")?;
    loopers.wait_each("a write after the switchover", Duration::from_secs(10), switched, |a| {
        a.port() == Some(port1)
    })?;
    let done = loopers.stop(&h)?;
    let mut problems = Problems::default();
    for l in &done {
        problems.require(l.errors().is_empty(), || {
            format!("{}: {}", l.name, l.show_errors(rig.t0))
        });
    }
    eprintln!(
        "pg::switchover_moves_writes_without_errors: errors seen by the writers: {:?}",
        all_errors(&done)
    );
    problems.finish()
}

/// MariaDB's writes answer no port: where they landed is read on the new
/// writer afterwards (each row holds the `@@port` of the server that
/// stored it).
pub(crate) fn mysql(ctx: &Ctx) -> Result<()> {
    use crate::mysql::{ENGINE, rig, rows_on, spawn_loopers};
    let mut rig = rig(ctx, "my-switchover")?;
    let h = rig.handle();
    let port1 = rig.server_port("my1")?;
    rig.wait_roles(ENGINE, "my0", &["my1"])?;
    let loopers = spawn_loopers(&rig, 4)?;
    let started = Instant::now();
    loopers.wait_each("a write", Duration::from_secs(10), started, Attempt::ok)?;
    let switched = switch_over(&mut rig, "my0", "my1")?;
    loopers.wait_each(
        "a write after the switchover",
        Duration::from_secs(10),
        switched,
        Attempt::ok,
    )?;
    let done = loopers.stop(&h)?;
    let rows = rows_on(&rig.cluster, "my1")?;
    let mut problems = Problems::default();
    for l in &done {
        problems.require(l.errors().is_empty(), || {
            format!("{}: {}", l.name, l.show_errors(rig.t0))
        });
        for a in l.attempts.iter().filter(|a| a.ok() && a.start >= switched) {
            let port = rows.get(&a.tag);
            problems.require(port == Some(&port1), || {
                format!(
                    "{} (after the switchover): stored on {port:?}, not my1 ({port1})",
                    a.tag
                )
            });
        }
    }
    eprintln!(
        "mysql::switchover_moves_writes_without_errors: errors seen by the writers: {:?}",
        all_errors(&done)
    );
    problems.finish()
}
