//! [`MyEngine`]: the core's `Engine` for MySQL/MariaDB, the backend side
//! the pools, the monitor and the router drive (connect, reset, switch,
//! probes, replication positions, cancels), over [`crate::backend`], with
//! the engine's own state (the version clients are greeted with, cached
//! `caching_sha2_password` verifiers, the collation table). Its client
//! side, `Serve`, is [`crate::session`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::backend::{self, MyCancelTarget, MyConn};
use crate::caps::{SESSION_EXT_CAPS, startup_caps};
use crate::vars;
use gatehouse_core::backend_tls::BackendTls;
use gatehouse_core::engine::{Engine, Probe};
use gatehouse_core::error::ProxyError;
use gatehouse_settings::config::{Secret, Tenant};

/// Server version announced before any backend was seen.
pub const FALLBACK_SERVER_VERSION: &str = "5.5.5-10.11.0-MariaDB-Gatehouse";

/// The MySQL engine's own state: the backend's version (announced to
/// clients) and `caching_sha2_password` verifiers cached per tenant after a
/// full authentication.
pub struct MyEngine {
    server_version: Mutex<String>,
    /// Of [`SESSION_EXT_CAPS`], those the last backend connected offered:
    /// what clients are offered (none before a backend was seen).
    server_ext_caps: std::sync::atomic::AtomicU32,
    /// Tenant name → (the native hash the password matched, the verifier).
    /// An entry counts only while the tenant's configured hash is the same,
    /// so a password changed by a reload never passes the fast path.
    sha2_verifiers: Mutex<HashMap<String, CachedVerifier>>,
    /// Collation id → (character set, collation), from the first backend
    /// probed (`information_schema.COLLATIONS`): how a client's handshake
    /// collation is replayed with `SET NAMES`.
    collations: Mutex<Option<Arc<backend::CollationTable>>>,
    /// Monitor connections kept between health checks.
    probes: gatehouse_core::engine::monitor::MonitorConns<backend::MyConn>,
}

/// (the native hash the password matched, SHA256(SHA256(password))).
type CachedVerifier = ([u8; 20], [u8; 32]);

impl Default for MyEngine {
    fn default() -> Self {
        Self {
            server_version: Mutex::new(FALLBACK_SERVER_VERSION.into()),
            server_ext_caps: std::sync::atomic::AtomicU32::new(0),
            sha2_verifiers: Mutex::new(HashMap::new()),
            collations: Mutex::new(None),
            probes: Default::default(),
        }
    }
}

impl MyEngine {
    /// The version string clients are greeted with: the backend's.
    pub fn server_version(&self) -> String {
        self.server_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The MariaDB extended capabilities of [`SESSION_EXT_CAPS`] clients
    /// are offered: those the backends offer.
    pub fn offered_ext_caps(&self) -> u32 {
        self.server_ext_caps.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What a backend connection tells of its server: the version and
    /// the extended capabilities clients are offered.
    fn learn_server(&self, conn: &MyConn) {
        self.learn_version(&conn.server_version);
        self.server_ext_caps.store(
            conn.server_ext_caps & SESSION_EXT_CAPS,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    fn learn_version(&self, version: &str) {
        // MariaDB greets with a "5.5.5-" prefix for old MySQL clients.
        let announced = if version.contains("MariaDB") && !version.starts_with("5.5.5-") {
            format!("5.5.5-{version}")
        } else {
            version.to_owned()
        };
        let mut v = self.server_version.lock().unwrap_or_else(PoisonError::into_inner);
        if *v != announced {
            *v = announced;
        }
    }

    /// The character set and collation of collation `id`: the server's
    /// name for it, or a built-in name before any server was read.
    pub fn collation_name(&self, id: u8) -> Option<(String, String)> {
        let table = self.collations.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match table {
            Some(t) => t.get(&id).cloned(),
            None => vars::builtin_collation_name(id).map(|(c, n)| (c.to_owned(), n.to_owned())),
        }
    }

    /// SHA256(SHA256(password)) of `tenant`, cached after a full
    /// authentication against the tenant's current native hash.
    pub fn sha2_verifier(&self, tenant: &Tenant) -> Option<[u8; 32]> {
        let current = tenant.mysql_native?;
        self.sha2_verifiers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&tenant.name)
            .filter(|(hash, _)| *hash == current)
            .map(|(_, verifier)| *verifier)
    }

    /// Caches the verifier of a password that matched `tenant`'s native hash.
    pub fn remember_sha2_verifier(&self, tenant: &Tenant, verifier: [u8; 32]) {
        if let Some(hash) = tenant.mysql_native {
            self.sha2_verifiers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(tenant.name.clone(), (hash, verifier));
        }
    }
}

impl Engine for MyEngine {
    const NAME: &'static str = "mysql";
    const KIND: gatehouse_settings::config::EngineKind = gatehouse_settings::config::EngineKind::Mysql;
    type Conn = MyConn;
    type CancelTarget = MyCancelTarget;

    async fn connect(
        &self,
        backend: &str,
        secret: &Secret,
        database: &str,
        startup: &[(String, String)],
        timeout: Duration,
        tls: &BackendTls,
    ) -> Result<MyConn, ProxyError> {
        let db = (!database.is_empty()).then_some(database);
        let password = secret.password.expose().as_bytes();
        let caps = startup_caps(startup);
        let conn = backend::connect(backend, &secret.user, password, db, caps, timeout, tls).await?;
        self.learn_server(&conn);
        Ok(conn)
    }

    async fn initialize(&self, conn: &mut MyConn, sql: &str) -> Result<(), ProxyError> {
        conn.query(sql).await.map(|_| ())
    }

    async fn reset(&self, conn: &mut MyConn) -> Result<(), ProxyError> {
        conn.reset().await?;
        conn.forget_session_state();
        Ok(())
    }

    /// COM_CHANGE_USER moves a connection to any user and database; a
    /// connection of the same user only resets and changes its database.
    const SWITCHES: bool = true;

    async fn switch(
        &self,
        conn: &mut MyConn,
        secret: &Secret,
        database: &str,
        same_user: bool,
        timeout: Duration,
        tls: &BackendTls,
    ) -> Result<(), gatehouse_core::engine::SwitchError> {
        if same_user && !database.is_empty() {
            return conn.reset_to_database(database, timeout).await;
        }
        let db = (!database.is_empty()).then_some(database);
        let password = secret.password.expose().as_bytes();
        Ok(conn.change_user(&secret.user, password, db, timeout, tls).await?)
    }

    fn is_usable(&self, conn: &mut MyConn) -> bool {
        conn.is_usable()
    }

    async fn probe(
        &self,
        backend: &str,
        secret: &Secret,
        timeout: Duration,
        tls: &BackendTls,
    ) -> Result<Probe, ProxyError> {
        let need_collations = self.collations.lock().unwrap_or_else(PoisonError::into_inner).is_none();
        let password = secret.password.expose().as_bytes();
        let cached = self.probes.take(&secret.user, backend);
        let (result, conn) =
            backend::probe_with(backend, &secret.user, password, timeout, tls, need_collations, cached).await;
        if let Some(conn) = conn {
            // What clients are greeted with is known from the first probe,
            // before any client's connection.
            self.learn_server(&conn);
            self.probes.put(&secret.user, backend, conn);
        }
        let (probe, collations) = result?;
        if let Some(table) = collations {
            *self.collations.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(table));
        }
        Ok(probe)
    }

    async fn write_position(
        conn: &mut MyConn,
    ) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
        backend::position::write_position(conn).await
    }

    async fn replay_position(
        conn: &mut MyConn,
    ) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
        backend::position::replay_position(conn).await
    }

    fn cancel_flight(conn: &MyConn) -> &Arc<gatehouse_core::cancel::CancelFlight> {
        use gatehouse_core::cancel::CancelTarget;
        conn.cancel.flight()
    }

    fn server_id(conn: &MyConn) -> u32 {
        conn.connection_id
    }

    fn server_tls(conn: &MyConn) -> Option<Arc<str>> {
        gatehouse_core::cancel::CancelTarget::server_tls(&conn.cancel).cloned()
    }

    async fn cancel(&self, target: MyCancelTarget) -> Result<(), ProxyError> {
        backend::cancel(target).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_proto_mysql::auth::{caching_sha2, native_password};

    fn tenant(password: &str) -> Tenant {
        Tenant {
            name: "t".into(),
            databases: vec!["db".into()],
            max_client_connections: None,
            max_backend_connections: None,
            secret: Arc::new(Secret {
                name: "s".into(),
                user: "u".into(),
                password: String::from("backend-pw").into(),
            }),
            auth: None,
            mysql_native: Some(native_password::stored_hash(password.as_bytes())),
            mysql_ed25519: None,
            token: false,
            connection_rate: None,
        }
    }

    #[test]
    fn a_cached_verifier_lapses_when_the_password_changes() {
        let engine = MyEngine::default();
        let old = tenant("old-pw");
        assert_eq!(engine.sha2_verifier(&old), None);
        engine.remember_sha2_verifier(&old, caching_sha2::stored_hash(b"old-pw"));
        assert_eq!(engine.sha2_verifier(&old), Some(caching_sha2::stored_hash(b"old-pw")));
        // A reload gave the tenant a new password: the old verifier is gone.
        assert_eq!(engine.sha2_verifier(&tenant("new-pw")), None);
    }
}
