//! The validated configuration the proxy runs on: an immutable snapshot with
//! references resolved (endpoint → cluster, tenant → secret), durations and
//! addresses parsed, credentials loaded. Shared as `Arc<Settings>`.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_proto_pg::auth::scram::ScramVerifier;

pub use crate::kind::EngineKind;

/// How log lines are written (`log_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `time LEVEL target: message field=value …`, values with spaces quoted.
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message`
    /// and every field.
    Json,
}

/// What an endpoint reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointRole {
    /// The writer.
    ReadWrite,
    /// The readers, spread; the writer when no reader is available.
    ReadOnly,
    /// Each transaction routed by what it does: one known to be read-only
    /// to a replica, everything else to the writer (`gatehouse::split`).
    Split,
}

/// How long a client keeps its backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderFallback {
    /// The writer serves reads while no replica can (the default).
    Writer,
    /// Reads wait for a replica (up to the cluster's `failover_hold`), then fail.
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// For the whole client session; reset with `DISCARD ALL` when it ends.
    Session,
    /// From the first message of a transaction to the ReadyForQuery that
    /// ends it (the default); sessions that create immovable state are pinned.
    Transaction,
    /// For one statement: transaction blocks are refused.
    Statement,
}

#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// Time a client has to finish TLS, startup and authentication.
    pub login_timeout: Duration,
    /// Time a client may leave a message half sent.
    pub client_message_timeout: Duration,
    /// Time given to sessions to finish on shutdown.
    pub shutdown_timeout: Duration,
    /// Idleness after which a client session (plain TCP, outside any
    /// transaction) parks: its task and socket registration are given up
    /// until the client speaks (`gatehouse::park`). `None`: never.
    pub park_idle_after: Option<Duration>,
    /// Largest client message accepted, in bytes.
    pub max_message_bytes: usize,
    /// Default `tracing` filter, overridden by `RUST_LOG`; a reload applies
    /// a new one.
    pub log_filter: String,
    /// Text or JSON lines (a restart applies a change).
    pub log_format: LogFormat,
    /// Runtime worker threads: 1 (the default) is a single event loop, the
    /// cheapest per transaction where the proxy shares cores with the
    /// database and its clients; 0 means one per CPU.
    pub worker_threads: usize,
    /// The JSON-lines file of more tenants, as written (its tenants are
    /// in [`Settings::tenants`]).
    pub tenant_directory: Option<String>,
    /// Failed logins one source address (an IPv6 /64) may make a minute,
    /// also the burst; over it, logins from there are refused untried.
    pub auth_failures_per_minute_per_address: NonZeroU32,
    /// Failed logins one user name (as sent, known or not) may see a minute,
    /// also the burst.
    pub auth_failures_per_minute_per_user: NonZeroU32,
    /// Where the running proxy offers its listening sockets to a successor
    /// (`gatehouse upgrade`, `gatehouse::upgrade`); `None`: no hand-over.
    pub upgrade_socket: Option<std::path::PathBuf>,
}

#[derive(Debug)]
pub struct ClusterSettings {
    pub name: String,
    pub engine: EngineKind,
    /// `host:port` of each backend, in configuration order.
    pub backends: Vec<String>,
    /// Credentials for health checks and role discovery.
    pub monitor: Option<Arc<Secret>>,
    pub health_check_interval: Duration,
    /// A probe slower than this failed: a hung server (SIGSTOP, a stalled
    /// disk) is noticed although its sockets stay open.
    pub health_check_timeout: Duration,
    /// Consecutive failed probes before a backend is marked down.
    pub health_check_failures: u32,
    /// Consecutive good probes before a down backend is marked up again.
    pub health_check_successes: u32,
    /// How long a transaction (or a login) waits for a writer, or for any
    /// backend its endpoint may use, before it gets an error.
    pub failover_hold: Duration,
    /// The command a switchover runs (through `sh -c`) to promote
    /// `{target}` (replaced by the backend's address).
    pub switchover_command: Option<String>,
    /// Read-only balancing weight of each backend (absent: 1): a backend
    /// of weight 2 takes twice the leases of one of weight 1.
    pub weights: std::collections::BTreeMap<String, u32>,
    pub connect_timeout: Duration,
    /// TLS toward the backends (`backend_tls` and its files).
    pub backend_tls: crate::backend_tls::BackendTls,
    /// Backend connections per (backend, backend user, database).
    pub pool_size: u32,
    /// How long a client waits for a backend connection before an error.
    pub borrow_timeout: Duration,
    /// Share of each backend's own `max_connections` the proxy may use.
    pub max_connections_percent: u32,
    /// Share of each backend's `max_connections` that may sit idle.
    pub max_idle_percent: u32,
    /// Run on every new backend connection.
    pub init_query: Option<String>,
    /// Backend connections older than this are closed instead of reused.
    pub server_lifetime: Option<Duration>,
    /// Idle backend connections are closed after this long.
    pub server_idle_timeout: Option<Duration>,
}

#[derive(Debug)]
pub struct EndpointSettings {
    pub name: String,
    pub listen: SocketAddr,
    pub cluster: Arc<ClusterSettings>,
    pub role: EndpointRole,
    /// Read-only and split endpoints: replicas further behind than this are skipped.
    pub max_replica_lag: Option<Duration>,
    /// Read-only endpoints: what serves reads when no replica can.
    pub reader_fallback: ReaderFallback,
    /// Read-only and split endpoints: the writer is also a reader, taking
    /// a read when it is the least busy (as ProxySQL's
    /// `writer_is_also_reader`); off by default.
    pub writer_reads: bool,
    /// Split endpoints: after a client's write commits, its reads go only
    /// to a replica that has replayed it (on by default).
    pub read_your_writes: bool,
    /// Split endpoints: user-defined functions the operator lists as free
    /// of side effects (every other one routes its statement to the writer).
    pub read_only_functions: Vec<String>,
    pub pool_mode: PoolMode,
    pub max_client_connections: u32,
    /// Clients idle (outside a transaction) longer than this are disconnected.
    pub idle_client_timeout: Option<Duration>,
    /// Parameters whose SET does not pin a session (their value then stays
    /// on whichever backend connection it was set on).
    pub pinning_filter: Vec<String>,
    pub require_tls: bool,
    /// Client TLS; a reload compares it by content ([`crate::tls::ServerTls`]).
    pub tls: Option<crate::tls::ServerTls>,
    pub client_auth: ClientAuth,
    /// Tokens over plain TCP (local testing only): off by default.
    pub allow_plaintext_tokens: bool,
    /// MySQL endpoints: the authentication plugin the greeting names.
    pub mysql_default_auth: MysqlDefaultAuth,
    /// MySQL endpoints: the RSA key for `caching_sha2_password` full
    /// authentication over plain TCP (without it, such clients are switched
    /// to `mysql_native_password`).
    pub mysql_rsa_key: Option<Arc<gatehouse_proto_mysql::auth::rsa_exchange::ServerKey>>,
}

/// The plugin a MySQL endpoint's greeting proposes; clients answer in it
/// and are switched when the tenant needs another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MysqlDefaultAuth {
    /// `mysql_native_password`: MariaDB's default, and what old clients know.
    Native,
    /// `caching_sha2_password`: MySQL 8's default.
    CachingSha2,
    /// MariaDB's `client_ed25519` (every client is switched to it with a
    /// 32-byte nonce; tenants need `mysql_ed25519`).
    Ed25519,
}

/// How an endpoint asks clients to authenticate. The method is the
/// endpoint's, the same for every user name, so the exchange never tells
/// whether a tenant exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// SCRAM-SHA-256 (or md5 for tenants stored with an md5 hash).
    Scram,
    /// A password sent as such (over TLS): a signed token for tenants that
    /// accept tokens, or the tenant's password checked against its verifier.
    Password,
}

/// How a tenant proves who it is with a password.
#[derive(Debug, Clone)]
pub enum TenantAuth {
    Scram(ScramVerifier),
    /// `md5` + hex(md5(password ‖ user)), PostgreSQL's stored md5 form.
    Md5(String),
}

#[derive(Debug)]
pub struct Tenant {
    pub name: String,
    pub databases: Vec<String>,
    /// Most client connections this tenant may have open at once.
    pub max_client_connections: Option<u32>,
    /// Most backend connections this tenant's sessions may hold at once
    /// (across its pools); more wait up to the borrow timeout.
    pub max_backend_connections: Option<u32>,
    pub secret: Arc<Secret>,
    /// The password verifier, if the tenant has a password.
    pub auth: Option<TenantAuth>,
    /// SHA1(SHA1(password)), for MySQL clients using `mysql_native_password`.
    pub mysql_native: Option<[u8; 20]>,
    /// The Ed25519 public key, for MariaDB clients using `client_ed25519`.
    pub mysql_ed25519: Option<[u8; 32]>,
    /// Whether the tenant may present a signed token as its password.
    pub token: bool,
    /// How fast the tenant may open connections; `None`: unlimited.
    pub connection_rate: Option<ConnectionRate>,
}

/// New connections a tenant may open: `per_second` on average, up to
/// `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionRate {
    pub per_second: NonZeroU32,
    pub burst: NonZeroU32,
}

impl Tenant {
    pub fn may_use(&self, database: &str) -> bool {
        self.databases.iter().any(|d| d == database)
    }
}

/// Backend credentials. `Debug` never shows the password, which is wiped
/// from memory when the secret is dropped.
pub struct Secret {
    pub name: String,
    pub user: String,
    pub password: gatehouse_secrets::SecretValue,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

#[derive(Debug)]
pub struct Settings {
    pub proxy: ProxySettings,
    pub clusters: Vec<Arc<ClusterSettings>>,
    pub endpoints: Vec<Arc<EndpointSettings>>,
    pub tenants: HashMap<String, Arc<Tenant>>,
    pub secrets: HashMap<String, Arc<Secret>>,
    /// Verifies tokens presented as passwords; `None` without `[tokens]`.
    pub tokens: Option<Arc<TokenSettings>>,
    /// The admin HTTP listener; `None` without `[admin]`.
    pub admin: Option<AdminSettings>,
    /// `[[rules]]`, compiled, in order (empty without any).
    pub rules: Arc<crate::rules::Rules>,
    /// `[digests]`: per-digest statistics.
    pub digests: DigestSettings,
    /// `[console]`: who may use the SQL admin console, and its database name.
    pub console: ConsoleSettings,
    /// `[stats]`: latency histograms and per-tenant series in `/metrics`.
    pub stats: StatsSettings,
    /// The file these settings were read from, which a reload reads again;
    /// `None` for settings parsed from text.
    pub source: Option<std::path::PathBuf>,
}

/// `[digests]`: whether per-digest statistics are kept, and for how many
/// digests at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestSettings {
    /// Off by default.
    pub enabled: bool,
    /// The top-K store's capacity.
    pub max_digests: usize,
}

/// `[console]`: the SQL admin console, reached as database
/// [`Self::database`] on any endpoint by the tenants listed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    pub database: String,
    /// Tenants that may run every console command.
    pub admin_users: Vec<String>,
    /// Tenants that may run `SHOW` commands only.
    pub monitor_users: Vec<String>,
}

impl ConsoleSettings {
    /// What `tenant` may do on the console, if anything.
    pub fn role_of(&self, tenant: &str) -> Option<crate::console::Role> {
        if self.admin_users.iter().any(|u| u == tenant) {
            Some(crate::console::Role::Admin)
        } else if self.monitor_users.iter().any(|u| u == tenant) {
            Some(crate::console::Role::Monitor)
        } else {
            None
        }
    }
}

/// `[stats]`: what `/metrics` records beyond its counters
/// (`gatehouse::meter`); a reload applies to sessions that log in after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsSettings {
    /// Latency histograms (lease wait, statement, backend response).
    pub histograms: bool,
    /// Tenants with series of their own (the most transactions; the rest
    /// are summed as `tenant="other"`); 0: no per-tenant counting.
    pub tenant_series: usize,
}

/// `[admin]`: where the admin HTTP API listens and the token it requires.
pub struct AdminSettings {
    pub listen: SocketAddr,
    /// Bearer token required on every request; `None`: no token (bind it
    /// to a loopback address then).
    pub token: Option<zeroize::Zeroizing<String>>,
}

impl fmt::Debug for AdminSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminSettings")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// `[tokens]`: the verifier (what it derefs to), and a digest of what it
/// was built from (issuer, leeway, cache capacity, the key files' content),
/// so a reload can tell new keys from the same ones.
pub struct TokenSettings {
    pub verifier: gatehouse_token::Verifier,
    pub identity: [u8; 32],
}

impl std::ops::Deref for TokenSettings {
    type Target = gatehouse_token::Verifier;

    fn deref(&self) -> &Self::Target {
        &self.verifier
    }
}

impl fmt::Debug for TokenSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSettings").finish_non_exhaustive()
    }
}
