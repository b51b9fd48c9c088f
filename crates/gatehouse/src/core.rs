//! The engine-agnostic state one proxy instance shares between its sessions:
//! the configuration snapshot, pools, topology and cancel registry for one
//! engine. Passed around as `Arc<Core<E>>`; nothing here is global.

use std::sync::Arc;

use tokio::sync::watch;

use crate::cancel::CancelRegistry;
use crate::config::Settings;
use crate::engine::Engine;
use crate::pool::Pools;
use crate::topology::Topology;

pub struct Core<E: Engine> {
    pub settings: Arc<Settings>,
    pub engine: Arc<E>,
    pub pools: Pools<E>,
    pub topology: Topology,
    pub cancels: Arc<CancelRegistry<E::CancelTarget>>,
    pub stats: crate::stats::Stats,
    /// Per-process seed for mock authentication of unknown users, so the
    /// same unknown name always sees the same salt.
    pub auth_mock_seed: [u8; 32],
    /// Becomes `true` when the proxy is shutting down.
    pub shutdown: watch::Receiver<bool>,
}

impl<E: Engine> Core<E> {
    pub fn new(settings: Arc<Settings>, engine: E, shutdown: watch::Receiver<bool>) -> Self {
        let topology = Topology::new(&settings);
        Self {
            pools: Pools::new(),
            topology,
            cancels: Arc::new(CancelRegistry::default()),
            stats: crate::stats::Stats::default(),
            engine: Arc::new(engine),
            settings,
            auth_mock_seed: rand::random(),
            shutdown,
        }
    }
}
