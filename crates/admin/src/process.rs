//! What the admin API and the console ask of the process that runs them,
//! which sits above this crate: the running endpoints' connected clients
//! ([`Listeners`]) and a configuration reload ([`Reload`]). The binary
//! implements both (its endpoints and its reloader); the types they answer
//! with are defined here, where the API shows them.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

/// An endpoint's connected clients, for the admin API and metrics.
pub struct EndpointLoad {
    pub name: String,
    pub connected: usize,
    pub max: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the configuration was not read from a file, so there is nothing to reload")]
    NoSource,
    #[error("reload refused, the running configuration is kept:\n{0}")]
    Invalid(String),
    #[error("reload failed: {0}")]
    Failed(String),
}

/// What a successful reload took: the tenant and secret counts, every
/// setting it changed (`applied`, each with what changed: `endpoint "rw":
/// TLS certificate reloaded (…)`, `proxy.login_timeout: 15s -> 2s (new
/// logins)`), and every one that needs a restart to take effect.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadOutcome {
    pub tenants: usize,
    pub secrets: usize,
    pub applied: Vec<String>,
    pub not_applied: Vec<String>,
}

/// The process's running endpoints.
pub trait Listeners: Send + Sync {
    /// Each endpoint's connected clients.
    fn load(&self) -> Vec<EndpointLoad>;
    /// The address `endpoint` listens on (port 0 in the settings: the
    /// one the system picked), while it runs.
    fn local_addr(&self, endpoint: &str) -> Option<SocketAddr>;
}

/// A reload's answer, as a future the API awaits.
pub type Reloading<'a> = Pin<Box<dyn Future<Output = Result<ReloadOutcome, ReloadError>> + Send + 'a>>;

/// The process's configuration reload (the one SIGHUP runs too).
pub trait Reload: Send + Sync {
    /// Reads the configuration again and applies it (one at a time).
    fn reload(&self) -> Reloading<'_>;
    /// Reloads so far: (applied, refused).
    fn counts(&self) -> (u64, u64);
}
