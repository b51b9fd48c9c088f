//! Operator switches on the topology, for the admin API: pause and
//! resume a cluster or an endpoint (new leases wait, as for a writer
//! during a failover, up to the cluster's `failover_hold`; leases out
//! finish) and mark a backend draining (no new leases). The commands that
//! also act on the pools or the monitor, a drain and a switchover, are
//! [`crate::core::operate`]'s; their errors and limits are here.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::ClusterState;

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
    pub fn holds(&self, endpoint: &str) -> bool {
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
