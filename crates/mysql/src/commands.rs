//! Session-level commands of a MySQL session that the proxy answers or
//! rewrites itself: `USE` / COM_INIT_DB (only the tenant's own databases),
//! COM_CHANGE_USER (re-authenticated by the proxy's tenant auth),
//! COM_RESET_CONNECTION (the client's state cleared, the connection reset
//! before reuse) and COM_SET_OPTION.

use bytes::BytesMut;
use gatehouse_proto_mysql::auth::generate_nonce;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::errors;
use gatehouse_proto_mysql::handshake::{ChangeUser, HandshakeResponse41};
use gatehouse_proto_mysql::packets::{EofPacket, OK_HEADER, OkPacket};

use super::login::{self, Phase};
use super::txn::stmts::Statements;
use super::txn::{BACKEND_COLLATION, Fatal, Session};
use super::vars::Vars;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_settings::config::PoolMode;

impl Session {
    /// Moves later transactions to `db`'s pool when nothing holds the
    /// current connection; otherwise the session stays on it (pinned) and
    /// the connection is closed at the end instead of reused.
    pub(super) fn use_database(&mut self, db: &str, alone: bool) {
        self.inspect.set_database(db);
        let free = alone && self.lease.is_none() && self.pinned.is_none();
        if free {
            // A cluster removed by a reload: the next lease says so.
            if let Ok(pool) = self.core.pool_for_database(&self.endpoint, &self.pool, db) {
                self.pool = pool;
            }
        } else if self.pool.key().database != db {
            self.pin("database_changed");
            self.discard = true;
        }
    }

    pub(super) async fn init_db(&mut self, stream: &mut ClientStream, payload: &[u8]) -> Result<(), Fatal> {
        let db = String::from_utf8_lossy(&payload[1..]).into_owned();
        if !self.tenant.may_use(&db) {
            return self.deny_database(stream, &db).await;
        }
        self.use_database(&db, true);
        self.forward(stream, payload).await.map(|_| ())
    }

    pub(super) async fn deny_database(&mut self, stream: &mut ClientStream, db: &str) -> Result<(), Fatal> {
        let msg = format!("Access denied for user '{}' to database '{db}'", self.tenant.name);
        self.error(stream, 1, errors::ER_DBACCESS_DENIED_ERROR, &msg).await
    }

    /// COM_CHANGE_USER: the new user authenticates through the proxy's own
    /// tenant authentication (an auth switch with a fresh scramble), then
    /// the session starts over as that tenant. A failure ends the session,
    /// as the server does.
    pub(super) async fn change_user(
        &mut self,
        stream: &mut ClientStream,
        buf: &mut BytesMut,
        payload: &[u8],
    ) -> Result<(), Fatal> {
        let Ok(request) = ChangeUser::decode(payload, self.caps) else {
            return self
                .fatal(stream, 1, errors::ER_MALFORMED_PACKET, "Malformed communication packet")
                .await;
        };
        let core = self.core.clone();
        if !core.limits.login_allowed(self.peer, &request.username) {
            let e = ProxyError::new(Condition::NotAllowed, gatehouse_core::limits::TOO_MANY_FAILURES);
            return Err((1, e));
        }
        let database = Some(request.database.clone()).filter(|d| !d.is_empty());
        // No first answer is taken: the client is switched to a fresh scramble.
        let response = HandshakeResponse41 {
            capabilities: self.caps,
            username: request.username.clone(),
            database: database.clone(),
            auth_plugin: Some(String::new()),
            ..HandshakeResponse41::default()
        };
        let nonce = generate_nonce();
        let mut phase = Phase {
            tls: stream.is_tls(),
            stream: &mut *stream,
            buf: std::mem::take(buf),
            seq: 1,
        };
        let result = login::authenticate(&core, &self.endpoint, &mut phase, &response, &nonce).await;
        let seq = phase.seq;
        *buf = std::mem::take(&mut phase.buf);
        let tenant = match result {
            Ok(t) => t,
            Err(e) => {
                if e.condition == Condition::InvalidPassword {
                    core.limits.record_failure(self.peer, &request.username);
                }
                return Err((seq, e));
            }
        };
        if let Some(db) = &database
            && !tenant.may_use(db)
        {
            let msg = format!("Access denied for user '{}' to database '{db}'", tenant.name);
            return Err((seq, ProxyError::new(Condition::UnknownDatabase, msg)));
        }
        let admitted = core
            .admit(&self.endpoint, &tenant, database.as_deref().unwrap_or(""))
            .and_then(|mut a| {
                a.pool = super::pool_for_caps(&core, &self.endpoint, a.pool, self.session_caps)?;
                Ok(a)
            })
            .map_err(|e| (seq, e))?;
        self.reset_state().await;
        self._tenant_slot = admitted.slot;
        self.cancel.claim(&tenant.name);
        self.cap = admitted.cap;
        self.pool = admitted.pool;
        // Another tenant's session from here: its own rules, digest
        // attribution and log record (the old one's end line is written
        // as it is replaced, then the new login's).
        let settings = core.settings();
        let meter = core
            .meters
            .session(self.inspect.meter().endpoint().clone(), &tenant.name, &settings.stats);
        *self.inspect = gatehouse_core::inspect::Inspector::new(
            &settings,
            &tenant.name,
            database.as_deref().unwrap_or_default(),
            &self.endpoint.name,
            Some(self.peer),
            meter,
        );
        drop(settings);
        self.inspect.logged_in(stream.is_tls(), &self.cancel, self.pool.route());
        self.tenant = tenant;
        let collation = request.charset.and_then(|c| u8::try_from(c).ok());
        if let Some(c) = collation {
            let engine = &self.core.engine;
            self.default_vars = Vars::for_collation(c, BACKEND_COLLATION, |id| engine.collation_name(id));
            self.vars = self.default_vars.clone();
        }
        let mut ok = BytesMut::new();
        OkPacket {
            status: self.status,
            ..OkPacket::default()
        }
        .encode(&mut ok, self.caps, OK_HEADER);
        self.send(stream, seq, &ok).await
    }

    pub(super) async fn reset_connection(&mut self, stream: &mut ClientStream) -> Result<(), Fatal> {
        self.reset_state().await;
        self.local_ok(stream).await
    }

    /// Back to a fresh session (COM_RESET_CONNECTION, COM_CHANGE_USER): the
    /// connection goes back (reset if it held state), nothing is pinned,
    /// set or prepared.
    pub(super) async fn reset_state(&mut self) {
        self.finish().await;
        self.discard = false;
        self.pinned = None;
        self.inspect.unpinned();
        if self.endpoint.pool_mode == PoolMode::Session {
            self.pin("session_mode");
        }
        self.locked = false;
        self.cursor_open = false;
        self.long_data = false;
        self.carry = super::txn::carry::Carry::default();
        self.in_transaction = false;
        self.vars = self.default_vars.clone();
        self.stmts = Statements::default();
        self.status = SERVER_STATUS_AUTOCOMMIT;
    }

    pub(super) async fn set_option(&mut self, stream: &mut ClientStream, payload: &[u8]) -> Result<(), Fatal> {
        match payload.get(1..3).map(|b| u16::from_le_bytes([b[0], b[1]])) {
            Some(0) => self.caps |= CLIENT_MULTI_STATEMENTS,
            Some(1) => self.caps &= !CLIENT_MULTI_STATEMENTS,
            _ => {
                return self
                    .error(stream, 1, errors::ER_UNKNOWN_COM_ERROR, "Unknown command")
                    .await;
            }
        }
        let mut out = BytesMut::new();
        EofPacket {
            warnings: 0,
            status: self.status,
        }
        .encode(&mut out);
        self.send(stream, 1, &out).await
    }
}
