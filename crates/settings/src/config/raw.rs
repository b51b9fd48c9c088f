//! The configuration file as written: serde types mirroring the TOML, with
//! spans kept on the values that other sections refer to, so validation can
//! point at the line of each problem. Unknown keys are rejected here.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub proxy: RawProxy,
    #[serde(default)]
    pub clusters: Vec<RawCluster>,
    #[serde(default)]
    pub endpoints: Vec<RawEndpoint>,
    #[serde(default)]
    pub tenants: Vec<RawTenant>,
    #[serde(default)]
    pub secrets: Vec<RawSecret>,
    pub secrets_store: Option<Spanned<RawSecretsStore>>,
    pub tokens: Option<Spanned<RawTokens>>,
    pub admin: Option<Spanned<RawAdmin>>,
    pub digests: Option<Spanned<RawDigests>>,
    pub console: Option<Spanned<RawConsole>>,
    pub stats: Option<Spanned<RawStats>>,
    #[serde(default)]
    pub rules: Vec<RawRule>,
}

/// `[console]`: the SQL admin console, a virtual database on every endpoint.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConsole {
    pub database: Option<Spanned<String>>,
    #[serde(default)]
    pub admin_users: Vec<Spanned<String>>,
    #[serde(default)]
    pub monitor_users: Vec<Spanned<String>>,
}

/// `[admin]`: the admin HTTP listener (metrics, pools, reload).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: Spanned<String>,
    /// A file holding the bearer token every admin request must present.
    pub token_file: Option<Spanned<String>>,
}

/// `[secrets_store]`: an encrypted secrets file (`gatehouse secrets ...`)
/// whose entries join the `[[secrets]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecretsStore {
    pub file: String,
    pub key_file: Option<String>,
    pub key_env: Option<String>,
}

/// `[tokens]`: how signed tokens presented as passwords are verified.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTokens {
    pub issuer: String,
    pub jwks_file: Option<String>,
    pub hs256_secret_file: Option<String>,
    #[serde(default, with = "humantime_serde::option")]
    pub leeway: Option<Duration>,
    pub cache_capacity: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawProxy {
    #[serde(default, with = "humantime_serde::option")]
    pub login_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde::option")]
    pub client_message_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde::option")]
    pub shutdown_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde::option")]
    pub park_idle_after: Option<Duration>,
    pub max_message_bytes: Option<Spanned<u64>>,
    pub log_filter: Option<Spanned<String>>,
    pub log_format: Option<Spanned<String>>,
    pub worker_threads: Option<Spanned<usize>>,
    /// A JSON-lines file of more tenants (one object a line).
    pub tenant_directory: Option<Spanned<String>>,
    pub auth_failures_per_minute_per_address: Option<Spanned<u32>>,
    pub auth_failures_per_minute_per_user: Option<Spanned<u32>>,
    /// The Unix socket a successor process takes the listeners over on.
    pub upgrade_socket: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub name: Spanned<String>,
    pub engine: Spanned<String>,
    pub backends: Spanned<Vec<Spanned<String>>>,
    pub monitor_secret: Option<Spanned<String>>,
    #[serde(default, with = "humantime_serde::option")]
    pub health_check_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde::option")]
    pub health_check_timeout: Option<Duration>,
    pub health_check_failures: Option<Spanned<u32>>,
    pub health_check_successes: Option<Spanned<u32>>,
    #[serde(default, with = "humantime_serde::option")]
    pub failover_hold: Option<Duration>,
    pub switchover_command: Option<String>,
    /// Read-only balancing weights by backend address (default 1).
    pub weights: Option<Spanned<std::collections::BTreeMap<String, u32>>>,
    #[serde(default, with = "humantime_serde::option")]
    pub connect_timeout: Option<Duration>,
    pub backend_tls: Option<Spanned<String>>,
    pub backend_tls_ca: Option<Spanned<String>>,
    pub backend_tls_cert: Option<Spanned<String>>,
    pub backend_tls_key: Option<Spanned<String>>,
    pub backend_tls_server_name: Option<Spanned<String>>,
    pub backend_tls_negotiation: Option<Spanned<String>>,
    #[serde(default)]
    pub pool: RawPool,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    pub size: Option<Spanned<u32>>,
    #[serde(default, with = "humantime_serde::option")]
    pub borrow_timeout: Option<Duration>,
    pub max_connections_percent: Option<Spanned<u32>>,
    pub max_idle_percent: Option<Spanned<u32>>,
    pub init_query: Option<String>,
    #[serde(default, with = "humantime_serde::option")]
    pub server_lifetime: Option<Duration>,
    #[serde(default, with = "humantime_serde::option")]
    pub server_idle_timeout: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpoint {
    pub name: Spanned<String>,
    pub listen: Spanned<String>,
    pub cluster: Spanned<String>,
    pub role: Spanned<String>,
    pub pool_mode: Option<Spanned<String>>,
    #[serde(default, with = "humantime_serde::option")]
    pub max_replica_lag: Option<Duration>,
    pub reader_fallback: Option<Spanned<String>>,
    pub read_your_writes: Option<Spanned<bool>>,
    pub writer_reads: Option<Spanned<bool>>,
    #[serde(default)]
    pub read_only_functions: Option<Spanned<Vec<String>>>,
    pub max_client_connections: Option<u32>,
    #[serde(default, with = "humantime_serde::option")]
    pub idle_client_timeout: Option<Duration>,
    #[serde(default)]
    pub pinning_filter: Vec<String>,
    pub require_tls: Option<Spanned<bool>>,
    pub tls: Option<Spanned<RawTls>>,
    pub client_auth: Option<Spanned<String>>,
    pub allow_plaintext_tokens: Option<bool>,
    /// MySQL endpoints: the plugin named in the greeting.
    pub mysql_default_auth: Option<Spanned<String>>,
    /// MySQL endpoints: PEM file of the RSA key for `caching_sha2_password`
    /// full authentication without TLS.
    pub mysql_rsa_key: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    pub cert: String,
    pub key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    pub name: Spanned<String>,
    pub databases: Spanned<Vec<String>>,
    pub secret: Spanned<String>,
    pub max_client_connections: Option<u32>,
    pub scram_verifier: Option<Spanned<String>>,
    pub md5_hash: Option<Spanned<String>>,
    /// MySQL's stored form, `*` + 40 hex digits of SHA1(SHA1(password)).
    pub mysql_native_password: Option<Spanned<String>>,
    /// MariaDB's stored ed25519 public key (base64, as in `mysql.global_priv`).
    pub mysql_ed25519: Option<Spanned<String>>,
    pub token: Option<bool>,
    pub max_backend_connections: Option<Spanned<u32>>,
    /// New connections a second (the average).
    pub connection_rate: Option<Spanned<u32>>,
    /// New connections at once (defaults to `connection_rate`).
    pub connection_burst: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecret {
    pub name: Spanned<String>,
    pub user: String,
    pub password: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
}

/// `[digests]`: per-digest statistics.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDigests {
    pub enabled: Option<bool>,
    /// The top-K store's capacity.
    pub max_digests: Option<Spanned<u64>>,
}

/// `[stats]`: the latency histograms and per-tenant series of `/metrics`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStats {
    pub histograms: Option<bool>,
    pub tenant_series: Option<Spanned<u64>>,
}

/// `[[rules]]`, read with the rules they describe.
pub use crate::rules::raw::{RawRewrite, RawRoute, RawRule};
