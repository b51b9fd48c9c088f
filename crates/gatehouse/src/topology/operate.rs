//! Operator commands on the topology, for the admin API: pause and resume
//! a cluster or an endpoint (new leases wait, as for a writer during a
//! failover, up to the cluster's `failover_hold`; leases out finish), drain
//! a backend (no new leases; leases out finish; its idle connections
//! close), and a switchover (pause, wait for the leases out, run the
//! cluster's `switchover_command`, wait for the new writer, resume).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{ClusterState, Role};
use crate::core::Core;
use crate::engine::Engine;

/// How long a switchover waits for the leases out to end.
pub const SWITCHOVER_DRAIN_LIMIT: Duration = Duration::from_secs(30);
/// How long a switchover waits for the probes to find the new writer.
pub const SWITCHOVER_ELECT_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum OperateError {
    #[error("no backend {0} in this cluster")]
    UnknownBackend(String),
    #[error("cluster \"{0}\" has no switchover_command")]
    NoCommand(String),
    #[error("leases still out after {0:?}: switchover abandoned, cluster resumed")]
    NotDrained(Duration),
    #[error("switchover command failed: {0}; cluster resumed")]
    Command(String),
    #[error("no new writer elected within {0:?}; cluster resumed")]
    NotElected(Duration),
}

impl ClusterState {
    /// Pauses (or resumes) new leases of the whole cluster.
    pub fn set_paused(&self, paused: bool) {
        // SeqCst, as the leases' counts and `holds`: see `router::still_routable`.
        self.paused.store(paused, Ordering::SeqCst);
        tracing::warn!(cluster = %self.name, paused, "cluster pause changed by an operator");
        self.changed();
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Pauses (or resumes) new leases of one endpoint of the cluster.
    pub fn set_endpoint_paused(&self, endpoint: &str, paused: bool) {
        let mut set = self
            .paused_endpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if paused {
            set.insert(endpoint.to_owned());
        } else {
            set.remove(endpoint);
        }
        self.any_endpoint_paused.store(!set.is_empty(), Ordering::SeqCst);
        drop(set);
        tracing::warn!(cluster = %self.name, endpoint, paused, "endpoint pause changed by an operator");
        self.changed();
    }

    /// Whether new leases of `endpoint` wait.
    pub(crate) fn holds(&self, endpoint: &str) -> bool {
        self.paused.load(Ordering::SeqCst)
            || (self.any_endpoint_paused.load(Ordering::SeqCst)
                && self
                    .paused_endpoints
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .contains(endpoint))
    }

    /// Drains (or undrains) backend `addr`: no new leases go to it.
    pub fn set_draining(&self, addr: &str, draining: bool) -> Result<(), OperateError> {
        let backends = self.backends();
        let b = backends
            .iter()
            .find(|b| b.addr == addr)
            .ok_or_else(|| OperateError::UnknownBackend(addr.to_owned()))?;
        // SeqCst, as the leases' counts: see `router::still_routable`.
        b.draining.store(draining, Ordering::SeqCst);
        tracing::warn!(cluster = %self.name, backend = addr, draining, "backend drain changed by an operator");
        self.changed();
        Ok(())
    }

    /// Leases out on all of the cluster's backends now.
    pub fn leases_out(&self) -> usize {
        self.backends().iter().map(|b| b.leases.load(Ordering::SeqCst)).sum()
    }
}

/// Drains `addr` in `cluster` (see [`ClusterState::set_draining`]) and
/// closes its idle pooled connections.
pub fn drain<E: Engine>(
    core: &Core<E>,
    cluster: &ClusterState,
    addr: &str,
    draining: bool,
) -> Result<(), OperateError> {
    cluster.set_draining(addr, draining)?;
    if draining {
        core.pools.retire_backend(&cluster.name, addr);
    }
    Ok(())
}

/// A planned switchover of `cluster` to `target`: pause new leases, wait
/// for those out to end, run the cluster's `switchover_command` (with
/// `{target}` replaced by the backend's address), probe until a writer other
/// than the old one is elected, and resume. Any failure resumes the
/// cluster. Returns the new writer.
pub async fn switchover<E: Engine>(
    core: &Core<E>,
    cluster: &Arc<ClusterState>,
    target: &str,
) -> Result<String, OperateError> {
    let command = cluster
        .settings()
        .switchover_command
        .clone()
        .ok_or_else(|| OperateError::NoCommand(cluster.name.clone()))?;
    if !cluster.backends().iter().any(|b| b.addr == target) {
        return Err(OperateError::UnknownBackend(target.to_owned()));
    }
    let old = cluster.writer().map(|w| w.addr.clone());
    cluster.set_paused(true);
    let result = switch(core, cluster, &command, target, old.as_deref()).await;
    cluster.set_paused(false);
    result
}

async fn switch<E: Engine>(
    core: &Core<E>,
    cluster: &Arc<ClusterState>,
    command: &str,
    target: &str,
    old: Option<&str>,
) -> Result<String, OperateError> {
    let drained = tokio::time::timeout(SWITCHOVER_DRAIN_LIMIT, async {
        while cluster.leases_out() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if drained.is_err() {
        return Err(OperateError::NotDrained(SWITCHOVER_DRAIN_LIMIT));
    }
    let line = command.replace("{target}", target);
    tracing::warn!(cluster = %cluster.name, command = %line, "switchover: running the promote command");
    let out = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&line)
        .output()
        .await
        .map_err(|e| OperateError::Command(e.to_string()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(OperateError::Command(format!("{}: {}", out.status, stderr.trim())));
    }
    let elected = tokio::time::timeout(SWITCHOVER_ELECT_LIMIT, async {
        loop {
            super::monitor::probe_once(core, cluster).await;
            if let Some(w) = cluster.writer()
                && Some(w.addr.as_str()) != old
                && w.health().role == Role::Writer
            {
                return w.addr.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let writer = elected.map_err(|_| OperateError::NotElected(SWITCHOVER_ELECT_LIMIT))?;
    tracing::warn!(cluster = %cluster.name, writer = %writer, "switchover done");
    Ok(writer)
}
