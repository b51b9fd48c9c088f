//! The `Engine` trait: what differs between PostgreSQL and MySQL on the
//! backend side (connect, reset, role probes, cancels), which pools,
//! routing and topology drive. The client side, `Serve`, sits above them
//! ([`crate::serve`]). Pools, routing, topology,
//! tenants and listeners stay engine-agnostic; the engines themselves are
//! crates of their own above this one.

pub mod idle;
pub mod monitor;
pub mod position;
pub mod stream;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::backend_tls::BackendTls;
use crate::config::Secret;
use crate::error::ProxyError;

/// What a health probe learned about a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Accepts writes (PostgreSQL: not in recovery; MySQL: not read-only).
    pub writable: bool,
    /// The server's own connection limit.
    pub max_connections: Option<u32>,
    /// How far a replica's applied changes are behind (PostgreSQL: zero
    /// when it has replayed all it received, else the age of the last
    /// replayed transaction; MariaDB: `Seconds_Behind_Master`).
    pub lag: Option<Duration>,
    /// Replication position as the server prints it (PostgreSQL: the
    /// replayed or current WAL LSN; MariaDB: a replica's `Gtid_IO_Pos`).
    pub position: Option<String>,
    /// What a replica has replayed, parsed (read-your-writes compares it;
    /// MariaDB: `@@gtid_slave_pos`).
    pub replayed: Option<position::Position>,
}

/// Why a connection could not be moved to another backend user or
/// database ([`Engine::switch`]).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct SwitchError {
    pub error: ProxyError,
    /// The server refused only the new database, and the connection is
    /// still logged in as before, its session reset: it may go back to the
    /// pool it came from. Otherwise it is closed.
    pub intact: bool,
}

impl From<ProxyError> for SwitchError {
    /// An error that leaves the connection unusable.
    fn from(error: ProxyError) -> Self {
        Self { error, intact: false }
    }
}

/// A database protocol plugged into the core.
pub trait Engine: Send + Sync + Sized + 'static {
    /// The engine's name in metrics and the admin API.
    const NAME: &'static str;
    /// The clusters (`engine = ...`) this engine serves.
    const KIND: crate::config::EngineKind;
    /// An authenticated backend connection, ready for a client's work.
    type Conn: Send + 'static;
    /// What a cancel needs to reach the backend running a client's query.
    type CancelTarget: crate::cancel::CancelTarget;

    /// Connects and authenticates to `backend` (`host:port`) as `secret` on
    /// `database`, with the pool's `startup` parameters (see
    /// [`crate::pool::PoolKey::startup`]), over TLS as the cluster's `tls`
    /// asks.
    fn connect(
        &self,
        backend: &str,
        secret: &Secret,
        database: &str,
        startup: &[(String, String)],
        timeout: Duration,
        tls: &BackendTls,
    ) -> impl Future<Output = Result<Self::Conn, ProxyError>> + Send;

    /// Runs the cluster's `init_query` on a new connection.
    fn initialize(&self, conn: &mut Self::Conn, sql: &str) -> impl Future<Output = Result<(), ProxyError>> + Send;

    /// Makes a connection safe for the next client; an error means discard it.
    fn reset(&self, conn: &mut Self::Conn) -> impl Future<Output = Result<(), ProxyError>> + Send;

    /// Whether an open backend connection can move to another backend user
    /// or database ([`Engine::switch`]). The pools then hand an idle
    /// connection of one tenant to another instead of closing it and
    /// opening a new one. PostgreSQL cannot (a connection belongs to one
    /// database); MySQL can (COM_CHANGE_USER).
    const SWITCHES: bool;

    /// Moves `conn` to log in as `secret` on `database`, as a new
    /// connection would be, within `timeout`: the session the server gives
    /// it is fresh (nothing of the previous tenant's state is left).
    /// `same_user`: the connection is logged in as `secret`'s user already
    /// (only its database changes), which the engine may do more cheaply.
    /// An error means discard the connection, unless it says the
    /// connection is intact. Engines without [`Engine::SWITCHES`] answer
    /// with an error and change nothing.
    fn switch(
        &self,
        conn: &mut Self::Conn,
        secret: &Secret,
        database: &str,
        same_user: bool,
        timeout: Duration,
        tls: &BackendTls,
    ) -> impl Future<Output = Result<(), SwitchError>> + Send;

    /// The cancels sent to `conn` and not yet delivered (the same flight
    /// its cancel targets carry): the pool lends it to nobody before then.
    fn cancel_flight(conn: &Self::Conn) -> &Arc<crate::cancel::CancelFlight>;

    /// The connection's own id on its server (PostgreSQL's backend pid,
    /// MySQL's thread id), for the console's `SHOW SERVERS`.
    fn server_id(conn: &Self::Conn) -> u32;

    /// What the connection's TLS session agreed on (version and cipher
    /// suite), for `SHOW SERVERS`; `None` in plain text.
    fn server_tls(conn: &Self::Conn) -> Option<Arc<str>>;

    /// Cheap check, without I/O waits, that an idle connection is still open.
    fn is_usable(&self, conn: &mut Self::Conn) -> bool;

    /// Asks `backend` its role and limits (over TLS as `tls` asks).
    fn probe(
        &self,
        backend: &str,
        secret: &Secret,
        timeout: Duration,
        tls: &BackendTls,
    ) -> impl Future<Output = Result<Probe, ProxyError>> + Send;

    /// The writer's replication position now, read on `conn` right after
    /// a transaction committed there (read-your-writes on split
    /// endpoints); `None` when the server has none to give.
    fn write_position(
        conn: &mut Self::Conn,
    ) -> impl Future<Output = Result<Option<position::Position>, ProxyError>> + Send;

    /// How far a replica has replayed, read on `conn` (a connection lent
    /// from its pool); `None` when the server has no position to give.
    fn replay_position(
        conn: &mut Self::Conn,
    ) -> impl Future<Output = Result<Option<position::Position>, ProxyError>> + Send;

    /// Sends a cancel for whatever `target` is running now.
    fn cancel(&self, target: Self::CancelTarget) -> impl Future<Output = Result<(), ProxyError>> + Send;
}
