//! [`PgEngine`]: the core's `Engine` for PostgreSQL, the backend side the
//! pools, the monitor and the router drive (connect, reset, probes,
//! replication positions, cancels), over [`crate::backend`]. Its client
//! side, `Serve`, is [`crate::session`]'s.

use std::time::Duration;

use crate::backend::{self, PgCancelTarget, PgConn};
use crate::{greeting, tracked};
use gatehouse_core::backend_tls::BackendTls;
use gatehouse_core::engine::{Engine, Probe};
use gatehouse_core::error::ProxyError;
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
        // Opens and authenticates the connection, with `startup`'s
        // parameters in its startup packet after the user and database,
        // and reads its tracked parameters: all within `timeout`.
        let work = async {
            let mut conn = backend::connect_inner(backend, secret, database, startup, tls).await?;
            let values = tracked::read(&mut conn).await?;
            conn.initial = values.clone();
            conn.tracked = Some(values);
            Ok(conn)
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(backend::io_error(
                backend,
                format!("connect timed out after {timeout:?}"),
            )),
        }
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
