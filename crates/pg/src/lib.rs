//! The PostgreSQL engine: a client session from accept to close (login in
//! [`login`], the data path in [`relay`]), backend connections in
//! [`backend`], and the mapping of proxy errors to SQLSTATEs. It implements
//! the core's `Engine` and `Serve` (`gatehouse-core`).
//!
//! It builds on the core, the settings and the leaf libraries (the
//! PostgreSQL codec, SQL facts), and must never import the other engine
//! (`gatehouse-mysql`), the admin API or the binary.
#![forbid(unsafe_code)]

pub mod backend;
mod console;
pub mod greeting;
mod handover;
pub mod login;
mod parked;
pub mod pending;
pub mod relay;
pub mod session;
pub mod statements;
pub mod tracked;
pub mod txn;

use std::time::Duration;

use bytes::BytesMut;
use gatehouse_proto_pg::{messages, sqlstate};
use tokio::io::AsyncWriteExt;

use self::backend::{PgCancelTarget, PgConn};
use gatehouse_core::backend_tls::BackendTls;
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::engine::{Engine, Probe};
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::serve::ClientConn;
use gatehouse_settings::config::Secret;

/// The PostgreSQL engine. It keeps monitor connections between checks so
/// health checks do not pay a SCRAM login every interval, and the login
/// greetings of pooled sessions.
#[derive(Default)]
pub struct PgEngine {
    /// Login greetings of transaction-pooled sessions.
    pub greetings: greeting::Greetings,
    probes: gatehouse_core::engine::monitor::MonitorConns<PgConn>,
}

impl Engine for PgEngine {
    const NAME: &'static str = "postgres";
    const KIND: gatehouse_settings::config::EngineKind = gatehouse_settings::config::EngineKind::Postgres;
    type Conn = PgConn;
    type CancelTarget = PgCancelTarget;

    async fn connect(
        &self,
        backend: &str,
        secret: &Secret,
        database: &str,
        startup: &[(String, String)],
        timeout: Duration,
        tls: &BackendTls,
    ) -> Result<PgConn, ProxyError> {
        backend::connect(backend, secret, database, startup, timeout, tls).await
    }

    async fn initialize(&self, conn: &mut PgConn, sql: &str) -> Result<(), ProxyError> {
        conn.control_query(sql).await.map(|_| ())
    }

    async fn reset(&self, conn: &mut PgConn) -> Result<(), ProxyError> {
        backend::reset(conn).await
    }

    /// A PostgreSQL connection belongs to the database and role it started
    /// with: the pools close it and open another instead.
    const SWITCHES: bool = false;

    async fn switch(
        &self,
        _conn: &mut PgConn,
        _secret: &Secret,
        _database: &str,
        _same_user: bool,
        _timeout: Duration,
        _tls: &BackendTls,
    ) -> Result<(), gatehouse_core::engine::SwitchError> {
        Err(ProxyError::new(
            gatehouse_core::error::Condition::FeatureNotSupported,
            "a PostgreSQL backend connection cannot change its database or user",
        )
        .into())
    }

    fn is_usable(&self, conn: &mut PgConn) -> bool {
        backend::is_usable(conn)
    }

    async fn probe(
        &self,
        backend: &str,
        secret: &Secret,
        timeout: Duration,
        tls: &BackendTls,
    ) -> Result<Probe, ProxyError> {
        let cached = self.probes.take(&secret.user, backend);
        let (result, conn) = backend::probe(backend, secret, timeout, tls, cached).await;
        if let Some(conn) = conn {
            self.probes.put(&secret.user, backend, conn);
        }
        result
    }

    async fn write_position(
        conn: &mut PgConn,
    ) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
        backend::write_position(conn).await
    }

    async fn replay_position(
        conn: &mut PgConn,
    ) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
        backend::replay_position(conn).await
    }

    fn cancel_flight(conn: &PgConn) -> &std::sync::Arc<gatehouse_core::cancel::CancelFlight> {
        &conn.cancels
    }

    fn server_id(conn: &PgConn) -> u32 {
        conn.key.map_or(0, |(pid, _)| pid)
    }

    fn server_tls(conn: &PgConn) -> Option<std::sync::Arc<str>> {
        conn.tls_in_use.clone()
    }

    async fn cancel(&self, target: PgCancelTarget) -> Result<(), ProxyError> {
        backend::cancel(target).await
    }
}

impl gatehouse_core::serve::Serve for PgEngine {
    fn serve(core: std::sync::Arc<Core<Self>>, client: ClientConn) -> impl Future<Output = ()> + Send {
        // No async wrapper: its copy of the arguments would stay in every
        // session's task.
        session::serve(core, client)
    }
}

/// The SQLSTATE PostgreSQL clients expect for each condition.
pub fn sqlstate_of(condition: Condition) -> &'static str {
    match condition {
        Condition::ProtocolViolation | Condition::LoginTimeout => sqlstate::PROTOCOL_VIOLATION,
        Condition::FeatureNotSupported => sqlstate::FEATURE_NOT_SUPPORTED,
        Condition::InvalidPassword => sqlstate::INVALID_PASSWORD,
        Condition::NotAllowed => sqlstate::INVALID_AUTHORIZATION,
        Condition::UnknownDatabase => sqlstate::INVALID_CATALOG_NAME,
        Condition::TooManyConnections => sqlstate::TOO_MANY_CONNECTIONS,
        Condition::IdleTimeout => sqlstate::IDLE_SESSION_TIMEOUT,
        Condition::BackendUnavailable => sqlstate::CONNECTION_FAILURE,
        // What PgBouncer answers when no server connection came in time.
        Condition::NoBackendForRole => sqlstate::TOO_MANY_CONNECTIONS,
        // pg_terminate_backend's "terminating connection due to administrator command".
        Condition::Shutdown | Condition::Terminated => sqlstate::ADMIN_SHUTDOWN,
        Condition::Canceled => sqlstate::QUERY_CANCELED,
        Condition::Internal => sqlstate::INTERNAL_ERROR,
    }
}

/// Sends `error` as a FATAL ErrorResponse (best effort: the client may be gone).
pub async fn send_fatal(stream: &mut ClientStream, error: &ProxyError) {
    let mut out = BytesMut::new();
    messages::put_error(&mut out, "FATAL", sqlstate_of(error.condition), &error.message);
    let _ = stream.write_all(&out).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
}
