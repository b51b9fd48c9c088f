//! The replica-loss case both engines run, written once over the loopers
//! of either driver: a replica killed under reads on a read-only endpoint
//! and restarted, and what the readers must have seen.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::common::{Finished, Loopers, Problems, Rig, all_errors};

/// The servers of a replica-loss case, by name: the writer, the replica
/// kept up, and the replica killed and restarted.
pub struct ReplicaLoss<'a> {
    pub case: &'a str,
    pub writer: &'a str,
    pub kept: &'a str,
    pub lost: &'a str,
}

/// Kills `loss.lost` under `readers` (looping on a read-only endpoint),
/// restarts it 3 s later, and checks: each reader passes `check` (at most
/// the error of its read in flight, its connection kept), no read went to
/// the writer, reads stayed on the kept replica while the other was down,
/// and every reader read on the restarted replica within 5 s.
pub fn lose_a_replica<C: Send + 'static>(
    rig: &mut Rig,
    readers: Loopers<C>,
    loss: &ReplicaLoss,
    check: impl Fn(&Finished<C>, Instant) -> Result<()>,
) -> Result<()> {
    let h = rig.handle();
    let (writer, kept, lost) = (
        rig.server_port(loss.writer)?,
        rig.server_port(loss.kept)?,
        rig.server_port(loss.lost)?,
    );
    let started = Instant::now();
    for (name, port) in [(loss.kept, kept), (loss.lost, lost)] {
        readers.wait_each(&format!("a read on {name}"), Duration::from_secs(10), started, |a| {
            a.port() == Some(port)
        })?;
    }

    rig.cluster.kill(loss.lost)?;
    let killed = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let restarting = Instant::now();
    rig.cluster.restart(loss.lost)?;
    let restarted = Instant::now();
    readers.wait_each(
        &format!("a read on {} after its restart", loss.lost),
        Duration::from_secs(10),
        restarted,
        |a| a.port() == Some(lost),
    )?;
    std::thread::sleep(Duration::from_secs(1));
    let done = readers.stop(&h)?;

    let t0 = rig.t0;
    eprintln!(
        "{}: errors seen by the {} readers: {:?}",
        loss.case,
        done.len(),
        all_errors(&done)
    );
    let mut problems = Problems::default();
    let mut back = Duration::ZERO;
    for l in &done {
        problems.check(check(l, t0));
        let on_writer = l.attempts.iter().find(|a| a.ok() && a.port() == Some(writer));
        if let Some(a) = on_writer {
            problems.add(format!(
                "{}: read on the writer while a replica was up: {}",
                l.name,
                a.show(t0)
            ));
        }
        let astray = l
            .attempts
            .iter()
            .find(|a| a.ok() && a.start > killed && a.end < restarting && a.port() != Some(kept));
        if let Some(a) = astray {
            problems.add(format!(
                "{}: read not on {} while {} was down: {}",
                l.name,
                loss.kept,
                loss.lost,
                a.show(t0)
            ));
        }
        match l
            .attempts
            .iter()
            .find(|a| a.start > restarted && a.port() == Some(lost))
        {
            Some(a) => back = back.max(a.end - restarted),
            None => problems.add(format!("{}: no read on {} after its restart", l.name, loss.lost)),
        }
    }
    eprintln!(
        "{}: every reader read on {} again within {:.3}s of its restart",
        loss.case,
        loss.lost,
        back.as_secs_f64()
    );
    problems.require(back <= Duration::from_secs(5), || {
        format!("a reader came back to {} only {back:?} after its restart", loss.lost)
    });
    problems.finish()
}
