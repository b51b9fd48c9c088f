//! The clusters of one engine, by name: read by every lease (lock-free),
//! changed only by a reload, which adds, replaces and removes whole
//! clusters ([`Topology::insert`], [`Topology::remove`]). A session finds
//! its cluster by name at each lease, so it follows a cluster replaced
//! under it; a monitor stops once its cluster is no longer the one listed
//! ([`Topology::is_current`]).

use crate::fasthash::FastMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::ClusterState;
use crate::config::{EngineKind, Settings};

pub struct Topology {
    /// Configured names: [`FastMap`]'s hash (no client chooses them).
    clusters: ArcSwap<FastMap<String, Arc<ClusterState>>>,
}

impl Topology {
    /// The clusters of `engine` in `settings`, none probed yet.
    pub fn new(settings: &Settings, engine: EngineKind) -> Self {
        let clusters = settings
            .clusters
            .iter()
            .filter(|c| c.engine == engine)
            .map(|c| (c.name.clone(), Arc::new(ClusterState::new(c))))
            .collect();
        Self {
            clusters: ArcSwap::from_pointee(clusters),
        }
    }

    pub fn cluster(&self, name: &str) -> Option<Arc<ClusterState>> {
        self.clusters.load().get(name).cloned()
    }

    /// Every cluster now, in no particular order.
    pub fn all(&self) -> Vec<Arc<ClusterState>> {
        self.clusters.load().values().cloned().collect()
    }

    /// Whether `state` is still the cluster listed under its name.
    pub fn is_current(&self, state: &Arc<ClusterState>) -> bool {
        self.clusters
            .load()
            .get(&state.name)
            .is_some_and(|s| Arc::ptr_eq(s, state))
    }

    /// Lists `state` under its name; returns the cluster it replaces.
    pub fn insert(&self, state: Arc<ClusterState>) -> Option<Arc<ClusterState>> {
        let mut replaced = None;
        self.clusters.rcu(|map| {
            let mut map = FastMap::clone(map);
            replaced = map.insert(state.name.clone(), state.clone());
            map
        });
        replaced
    }

    /// Removes the cluster `name`; returns it.
    pub fn remove(&self, name: &str) -> Option<Arc<ClusterState>> {
        let mut removed = None;
        self.clusters.rcu(|map| {
            let mut map = FastMap::clone(map);
            removed = map.remove(name);
            map
        });
        removed
    }
}
