//! The health monitor: one task per probed cluster runs a probe round every
//! `health_check_interval`, and at once when a session could not connect
//! (so a dead server is noticed in milliseconds, not intervals). A round
//! probes every backend concurrently, each bounded by
//! `health_check_timeout`, so one hung server neither delays the others
//! nor looks healthy because its kept monitor connection is still open.
//! After a round the writer is elected again, and the pools of a backend
//! that went down are emptied, so no connection to it is handed out. A
//! failing probe is logged at WARN with its cause: at once, and while the
//! same error goes on, every [`PROBE_FAILURE_LOG_EVERY`].
//!
//! The monitor reads its cluster's settings anew each round, so a reload
//! changes its interval, timeout, thresholds and credentials in place; it
//! stops once a reload removes or replaces its cluster.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Core;
use crate::engine::Engine;
use crate::topology::ClusterState;

/// The soonest a round follows another when sessions keep asking for one.
pub const MIN_ROUND_GAP: Duration = Duration::from_millis(50);
/// While a backend's probes keep failing with the same error, it is
/// logged again at most this often (a new error at once).
pub const PROBE_FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Probes every backend of `state` once (concurrently), records the
/// results and elects the writer.
pub async fn probe_once<E: Engine>(core: &Core<E>, state: &ClusterState) {
    let cluster = state.settings();
    let Some(secret) = &cluster.monitor else {
        return;
    };
    let timeout = cluster.health_check_timeout;
    let backends = state.backends();
    let probes = backends.iter().map(|b| {
        let engine = core.engine.clone();
        let addr = b.addr.clone();
        let secret = secret.clone();
        let tls = &cluster.backend_tls;
        async move {
            match tokio::time::timeout(timeout, engine.probe(&addr, &secret, timeout, tls)).await {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err(e.detail.clone().unwrap_or_else(|| e.message.clone())),
                Err(_) => Err(format!("no answer within {timeout:?}")),
            }
        }
    });
    let results = futures_util::future::join_all(probes).await;
    for (b, result) in backends.iter().zip(results) {
        if let Ok(p) = &result {
            core.pools.learn_server_max(&cluster.name, &b.addr, p.max_connections);
        }
        let before = b.health();
        let failed = result.as_ref().err().cloned();
        let log_failure = b.failure_to_log(failed.as_deref(), Instant::now(), PROBE_FAILURE_LOG_EVERY);
        if state.record(b, result) {
            let after = b.health();
            match failed {
                None => tracing::info!(cluster = %cluster.name, backend = %b.addr, role = ?after.role, "backend up"),
                Some(e) => tracing::warn!(cluster = %cluster.name, backend = %b.addr, error = %e, "backend down"),
            }
            if !after.up {
                let closed = core.pools.retire_backend(&cluster.name, &b.addr);
                tracing::info!(cluster = %cluster.name, backend = %b.addr, closed, "pooled connections to a down backend closed");
            }
        } else if let Some(e) = failed.filter(|_| log_failure) {
            // A backend down from the start (a wrong port, the monitor's
            // credentials refused) never flips: this says why.
            tracing::warn!(cluster = %cluster.name, backend = %b.addr, up = before.up, error = %e, "backend health probe failed");
        } else if before.role != b.health().role {
            tracing::warn!(cluster = %cluster.name, backend = %b.addr, from = ?before.role, to = ?b.health().role, "backend role changed");
        }
    }
    elect(core, state);
}

/// Elects the writer; a writer that was replaced has its pools emptied.
fn elect<E: Engine>(core: &Core<E>, state: &ClusterState) {
    let before = state.writer();
    if state.elect()
        && let Some(old) = before
        && state.writer().is_none_or(|w| !Arc::ptr_eq(&w, &old))
    {
        core.pools.retire_backend(&state.name, &old.addr);
    }
}

/// Probes `state` every health-check interval (or sooner when asked; at
/// once with `probe_first`) until shutdown, or until a reload removes or
/// replaces the cluster, or leaves it without `monitor_secret`.
pub async fn monitor<E: Engine>(core: Arc<Core<E>>, state: Arc<ClusterState>, probe_first: bool) {
    let mut shutdown = core.shutdown.clone();
    let mut wait = !probe_first;
    loop {
        let interval = state.settings().health_check_interval;
        if wait {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = state.probe_now.notified() => tokio::time::sleep(MIN_ROUND_GAP).await,
                _ = shutdown.changed() => return,
            }
        }
        wait = true;
        if !core.topology.is_current(&state) || state.settings().monitor.is_none() {
            tracing::debug!(cluster = %state.name, "monitor stopped: the cluster was reloaded without it");
            return;
        }
        probe_once(&core, &state).await;
        core.pools.sweep();
    }
}
