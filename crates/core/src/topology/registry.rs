//! The clusters of one engine, by name: read by every lease (lock-free),
//! changed only by a reload, which adds, replaces and removes whole
//! clusters ([`Topology::insert`], [`Topology::remove`]). A session finds
//! its cluster by name at each lease, so it follows a cluster replaced
//! under it; a monitor stops once its cluster is no longer the one listed
//! ([`Topology::is_current`]).

use crate::fasthash::FastMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;

use super::ClusterState;
use crate::config::{EngineKind, Settings};

pub struct Topology {
    /// Configured names: [`FastMap`]'s hash (no client chooses them).
    clusters: ArcSwap<FastMap<String, Arc<ClusterState>>>,
    /// Moved after every change of `clusters`: a session's
    /// [`ClusterCache`] is good while it has not moved.
    generation: AtomicU64,
}

/// A session's cluster as last looked up ([`Topology::cluster_cached`]):
/// one atomic load per lease instead of a map lookup under `ArcSwap`,
/// until a reload changes the clusters.
#[derive(Default)]
pub struct ClusterCache {
    generation: u64,
    state: Option<Arc<ClusterState>>,
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
            generation: AtomicU64::new(0),
        }
    }

    /// [`Self::cluster`] through a session's `cache`: looked up again only
    /// after a change of the clusters (or for another name).
    pub fn cluster_cached(&self, name: &str, cache: &mut ClusterCache) -> Option<Arc<ClusterState>> {
        // Read before the map: a change published after this load moves
        // the generation again, and the next lease looks again.
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(state) = &cache.state
            && cache.generation == generation
            && state.name == name
        {
            return Some(state.clone());
        }
        let state = self.cluster(name);
        cache.generation = generation;
        cache.state.clone_from(&state);
        state
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
        self.generation.fetch_add(1, Ordering::Release);
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
        self.generation.fetch_add(1, Ordering::Release);
        removed
    }
}
