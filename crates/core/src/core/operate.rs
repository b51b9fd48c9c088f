//! Operator commands that act through a proxy's core, for the admin API:
//! drain a backend (no new leases, leases out finish, its idle pooled
//! connections close) and a switchover (pause, wait for the leases out,
//! run the cluster's `switchover_command`, wait for the new writer,
//! resume). The topology's own switches they flip (pause, drain) are
//! [`crate::topology::operate`]'s.

use std::sync::Arc;
use std::time::Duration;

use super::Core;
use crate::engine::Engine;
use crate::topology::operate::{OperateError, SWITCHOVER_DRAIN_LIMIT, SWITCHOVER_ELECT_LIMIT};
use crate::topology::{ClusterState, Role};

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
