//! The label sets of `/metrics`: names of engines, endpoints, pools,
//! backends, clusters, tenants and reasons; never a credential.

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EngineLabels {
    pub engine: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EndpointLabels {
    pub endpoint: String,
}

/// An endpoint of an engine.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EngineEndpointLabels {
    pub engine: String,
    pub endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LoginLabels {
    pub engine: String,
    pub endpoint: String,
    pub tls: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LoginFailureLabels {
    pub engine: String,
    pub endpoint: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PoolLabels {
    pub engine: String,
    pub cluster: String,
    pub backend: String,
    pub user: String,
    pub database: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BackendLabels {
    pub engine: String,
    pub cluster: String,
    pub backend: String,
    pub role: String,
}

/// A backend, without its role (which changes with failovers: counters
/// of backend connections must not move to another series).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ServerLabels {
    pub engine: String,
    pub cluster: String,
    pub backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ServerStateLabels {
    pub engine: String,
    pub cluster: String,
    pub backend: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ServerPhaseLabels {
    pub engine: String,
    pub cluster: String,
    pub backend: String,
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ClusterLabels {
    pub engine: String,
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RoutedLabels {
    pub engine: String,
    pub cluster: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PinLabels {
    pub engine: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ErrorLabels {
    pub engine: String,
    pub kind: String,
    pub condition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RuleLabels {
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DigestLabels {
    pub engine: String,
    pub digest: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TenantLabels {
    pub tenant: String,
}
