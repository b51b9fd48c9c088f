//! The MySQL command loop with transaction pooling: a client holds a
//! backend connection only while its transaction is open (the server's
//! SERVER_STATUS_IN_TRANS, or with autocommit off from the first statement
//! to its end), while it holds state that cannot move (pinned, with a
//! recorded reason; LOCK TABLES until UNLOCK; an open cursor; long data
//! sent for an execute), or until the next command after a statement with
//! warnings. `LAST_INSERT_ID()`, `ROW_COUNT()` and `FOUND_ROWS()` move
//! with the client ([`carry`]). Tracked variables are
//! replayed on whichever connection serves the client; prepared statements
//! get proxy-owned ids and are prepared lazily on each backend connection
//! (see [`stmts`]). This file holds the session and the
//! query path; the reply relay is [`super::relay`], the command loop [`super::cmdloop`], the session-level
//! commands [`super::commands`] and `KILL` [`super::kill`], borrowing and
//! giving back the lease [`super::lease`].

pub mod carry;
mod lost;
pub mod stmts;

use std::sync::Arc;

use bytes::BytesMut;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::errors::{self, MyError};
use gatehouse_proto_mysql::packets::{OK_HEADER, OkPacket};
use gatehouse_proto_mysql::response::{Done, ResponseKind};
use gatehouse_sql::mysql::{self as my_sql, Dialect, Info, MyEffect, TxBoundary, VarChange};

use self::carry::{Carry, LidNeed, Plan};
use self::lost::{LOST_MESSAGE, LOST_TRANSACTION_MESSAGE};
use self::stmts::Statements;
use super::MyEngine;
use super::backend::MyCancelTarget;
use super::errors::err_payload;
use super::io::write_packet;
use super::relay::{Relay, relay};
use super::vars::Vars;
use std::net::IpAddr;

use tokio::sync::OwnedSemaphorePermit;

use gatehouse_core::cancel::CancelKey;
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_core::pool::{Lease, Pool, TenantCap};
use gatehouse_settings::config::{EndpointSettings, PoolMode, Tenant};

/// Collation backend connections are opened with (utf8mb4_general_ci).
pub(super) const BACKEND_COLLATION: u8 = 45;

/// What the connection phase hands over.
pub struct Start {
    pub endpoint: Arc<EndpointSettings>,
    pub tenant: Arc<Tenant>,
    pub database: Option<String>,
    pub caps: u32,
    /// The capabilities the session's backend connections are opened with
    /// ([`super::session_word`]).
    pub session_caps: u64,
    pub collation: u8,
    /// The session's cancel key; its slot names the backend query running now.
    pub cancel: CancelKey<MyCancelTarget>,
    /// What admission gave the session: its client-connection slot (held
    /// for the session), backend cap and first pool (gatehouse_core::router).
    pub admitted: gatehouse_core::router::Admitted<MyEngine>,
    /// The client's address (failed-login limits on COM_CHANGE_USER).
    pub peer: IpAddr,
    /// Held for the session's life: its admission slot, and the guard
    /// shutdown waits on.
    pub guards: (Option<OwnedSemaphorePermit>, gatehouse_core::drain::DrainGuard),
}

/// A client session after login: everything it keeps but its socket (and
/// what it parks with, see [`super::parked`]).
pub struct Session {
    pub core: Arc<Core<MyEngine>>,
    /// The configuration as its commands read it (taken again after a
    /// reload).
    pub(super) view: gatehouse_core::core::SettingsView,
    /// The endpoint's cluster as its last lease found it.
    pub(super) clusters: gatehouse_core::topology::ClusterCache,
    pub(super) endpoint: Arc<EndpointSettings>,
    pub(super) cancel: CancelKey<MyCancelTarget>,
    pub(super) _tenant_slot: Option<OwnedSemaphorePermit>,
    pub(super) _guards: (Option<OwnedSemaphorePermit>, gatehouse_core::drain::DrainGuard),
    pub(super) peer: IpAddr,
    pub tenant: Arc<Tenant>,
    pub(super) caps: u32,
    /// The capabilities its backend connections are opened with
    /// ([`super::session_word`]).
    pub(super) session_caps: u64,
    /// The pool used last: with the endpoint, what the router routes from.
    pub(super) pool: Arc<Pool<MyEngine>>,
    pub(super) cap: Option<TenantCap>,
    pub lease: Option<Lease<MyEngine>>,
    /// Why the session keeps its lease for good, if it does.
    pub(super) pinned: Option<&'static str>,
    /// The lease's connection no longer fits its pool (another database):
    /// closed instead of returned.
    pub(super) discard: bool,
    pub(super) locked: bool,
    pub cursor_open: bool,
    pub long_data: bool,
    /// What moves from one statement to the next across connections.
    pub(super) carry: Carry,
    /// The running command's plan, applied to its reply.
    pub(super) plan: Plan,
    pub(super) in_transaction: bool,
    /// The transaction the client is in died with its server (`lost.rs`).
    pub(super) lost_block: bool,
    pub(super) status: u16,
    pub(super) vars: Vars,
    pub(super) default_vars: Vars,
    pub stmts: Statements,
    /// Split endpoints: where the lease is routed and read-your-writes.
    pub(super) split: Option<Box<gatehouse_core::split::SplitState>>,
    /// Split endpoints: the running command's decision (`split.rs`).
    pub(super) decision: gatehouse_core::split::Decision,
    /// Query rules and digest statistics ([`gatehouse_core::inspect`]).
    pub(super) inspect: Box<gatehouse_core::inspect::Inspector>,
    /// The lease a query rule routes the running command to, if any.
    pub(super) ruled: Option<gatehouse_core::topology::RouteTo>,
    /// How long the last lease took to get, for digest statistics.
    pub(super) lease_wait: std::time::Duration,
    /// The reason the running statement pinned the session, if it did.
    pub(super) just_pinned: Option<&'static str>,
    /// When the running command was read, with `[stats] histograms` on.
    pub(super) received: Option<std::time::Instant>,
}

/// Ends the session: (sequence id for the ERR packet, the error).
pub type Fatal = (u8, ProxyError);

/// What became of a session's run ([`Session::run`]).
pub enum Served {
    /// Over; what the session held is given back.
    Ended,
    /// Idle long enough to park: no lease, nothing buffered; the idle
    /// timeout has this much left.
    Park(Option<std::time::Duration>),
}

/// The session of a client after login, in a box of its own (it moves to
/// the parking lot and back whole). `meter`: the endpoint's counters its
/// connection counts into.
pub fn start(
    core: Arc<Core<MyEngine>>,
    start: Start,
    meter: Arc<gatehouse_core::meter::EndpointMeter>,
) -> Box<Session> {
    let gatehouse_core::router::Admitted { slot, cap, pool } = start.admitted;
    let vars = Vars::for_collation(start.collation, BACKEND_COLLATION, |id| core.engine.collation_name(id));
    let settings = core.settings();
    let inspect = Box::new(gatehouse_core::inspect::Inspector::new(
        &settings,
        &start.tenant.name,
        start.database.as_deref().unwrap_or_default(),
        &start.endpoint.name,
        Some(start.peer),
        core.meters.session(meter, &start.tenant.name, &settings.stats),
    ));
    drop(settings);
    let mut s = Box::new(Session {
        view: core.settings_view(),
        clusters: gatehouse_core::topology::ClusterCache::default(),
        inspect,
        ruled: None,
        lease_wait: std::time::Duration::ZERO,
        just_pinned: None,
        received: None,
        cap,
        core,
        endpoint: start.endpoint,
        cancel: start.cancel,
        _tenant_slot: slot,
        _guards: start.guards,
        peer: start.peer,
        tenant: start.tenant,
        caps: start.caps,
        session_caps: start.session_caps,
        pool,
        lease: None,
        pinned: None,
        discard: false,
        locked: false,
        cursor_open: false,
        long_data: false,
        carry: Carry::default(),
        plan: Plan::default(),
        in_transaction: false,
        lost_block: false,
        status: SERVER_STATUS_AUTOCOMMIT,
        default_vars: vars.clone(),
        vars,
        stmts: Statements::default(),
        split: None,
        decision: gatehouse_core::split::Decision::Write { wrote: true },
    });
    if s.endpoint.role == gatehouse_settings::config::EndpointRole::Split {
        s.split = Some(Box::default());
    }
    if s.endpoint.pool_mode == PoolMode::Session {
        s.pin("session_mode");
        // The endpoint's doing, not a statement's (digest statistics).
        s.just_pinned = None;
    }
    s
}

impl Session {
    /// Serves the client until it leaves (what the session holds is then
    /// given back) or until the session should park (it holds nothing).
    pub async fn run(&mut self, stream: &mut ClientStream, buf: &mut BytesMut) -> Result<Served, Fatal> {
        let result = self.serve(stream, buf).await;
        if !matches!(result, Ok(Served::Park(_))) {
            // Boxed: the reset's future would otherwise sit in every idle task.
            Box::pin(self.finish()).await;
        }
        result
    }

    pub(super) fn pin(&mut self, reason: &'static str) {
        if self.pinned.is_none() {
            self.pinned = Some(reason);
            self.just_pinned = Some(reason);
            self.core.stats.record_pin(reason);
            self.inspect.pinned(reason);
            tracing::info!(tenant = %self.tenant.name, reason, "session pinned to its backend connection");
        }
    }

    pub(super) fn dialect(&self) -> Dialect {
        self.vars.sql_mode().map_or(Dialect::DEFAULT, Dialect::from_sql_mode)
    }

    /// Sends a command to the backend (borrowing if needed) and relays the
    /// reply. `Ok(None)`: the client was sent an error instead.
    pub async fn forward(&mut self, stream: &mut ClientStream, payload: &[u8]) -> Result<Option<Done>, Fatal> {
        self.forward_as(stream, payload, None, None).await
    }

    /// [`Session::forward`], rewriting a PREPARE_OK's statement id to
    /// `client_id`, and keeping a copy of the reply in `capture`.
    pub async fn forward_as(
        &mut self,
        stream: &mut ClientStream,
        payload: &[u8],
        client_id: Option<u32>,
        capture: Option<&mut BytesMut>,
    ) -> Result<Option<Done>, Fatal> {
        let kind = ResponseKind::for_command(payload[0]);
        if let Err(e) = self.conn().await {
            self.core.stats.record_error(&e);
            let err = super::errors::my_error(&e);
            self.error(stream, 1, err, &e.message).await?;
            return Ok(None);
        }
        // A client statement (not a PREPARE, a field list, ...): counted,
        // and timed from here when histograms are on.
        let statement = matches!(payload[0], COM_QUERY | COM_STMT_EXECUTE);
        let sent = if statement {
            self.inspect.meter_mut().statement();
            self.inspect.meter().clock()
        } else {
            None
        };
        let local_files = self.caps & CLIENT_LOCAL_FILES != 0;
        let Some(lease) = self.lease.as_mut() else {
            return Err((0, ProxyError::new(Condition::Internal, "no backend connection")));
        };
        let conn = lease.conn();
        let done = match conn.send_command(payload).await {
            Ok(()) => relay(conn, stream, kind, client_id, capture, local_files).await,
            Err(e) => Err(Relay::Backend(e.to_string(), None)),
        };
        let plan = std::mem::take(&mut self.plan);
        match done {
            Ok(d) => {
                if let Some(status) = d.status {
                    self.status = status;
                    self.in_transaction = status & SERVER_STATUS_IN_TRANS != 0;
                }
                if statement {
                    self.statement_answered(sent);
                }
                if (d.insert_id_seen || plan.info.sets_last_insert_id || plan.call)
                    && let Some(lease) = self.lease.as_mut()
                {
                    lease.conn().last_insert_id = None;
                }
                self.carry.after_reply(payload[0], &plan, &d);
                Ok(Some(d))
            }
            Err(Relay::Client(e)) => {
                // The client is gone: a connection mid-reply cannot be reused.
                self.drop_lease();
                Err((
                    0,
                    ProxyError::new(Condition::ProtocolViolation, "client write failed").with_detail(e),
                ))
            }
            Err(Relay::Backend(detail, replied)) => {
                tracing::warn!(
                    tenant = %self.tenant.name,
                    backend = %self.pool.key().backend,
                    in_transaction = self.in_transaction,
                    cause = %detail,
                    "backend connection lost under a lease"
                );
                let alone = self.pinned.is_none() && !self.locked && !self.cursor_open && !self.long_data;
                let in_transaction = std::mem::take(&mut self.in_transaction);
                self.drop_lease();
                let e = ProxyError::new(Condition::BackendUnavailable, self::lost::LOST_MESSAGE).with_detail(detail);
                if let Some(seq) = replied {
                    // Mid-reply: the error ends the reply the client reads,
                    // then the session (its protocol state is lost).
                    return Err((seq, e));
                }
                if !alone {
                    // The client's session state died with the server: the
                    // session ends, as on a direct connection.
                    return Err((1, e));
                }
                // Only the statement in flight fails; the next one is
                // routed afresh (to the new writer after a failover). A
                // transaction it was in is lost (see `lost.rs`).
                self.core.stats.record_error(&e);
                self.lost_block = in_transaction;
                self.status &= !SERVER_STATUS_IN_TRANS;
                let message = if in_transaction {
                    LOST_TRANSACTION_MESSAGE
                } else {
                    LOST_MESSAGE
                };
                self.error(stream, 1, errors::ER_SERVER_SHUTDOWN, message).await?;
                Ok(None)
            }
        }
    }

    pub(super) async fn query(&mut self, stream: &mut ClientStream, payload: &[u8]) -> Result<(), Fatal> {
        let Ok(sql) = std::str::from_utf8(&payload[1..]) else {
            self.pin("unrecognized");
            return self.forward(stream, payload).await.map(|_| ());
        };
        let dialect = self.dialect();
        let verdict = self.rules(sql);
        if let Some(message) = verdict.as_ref().and_then(|v| v.block.as_deref()) {
            return self
                .error(stream, 1, errors::ER_TABLEACCESS_DENIED_ERROR, message)
                .await;
        }
        let rewritten_payload;
        let (sql, payload) = match verdict.as_ref().and_then(|v| v.rewritten.as_deref()) {
            Some(text) => {
                rewritten_payload = [&[COM_QUERY][..], text.as_bytes()].concat();
                (text, &rewritten_payload[..])
            }
            None => (sql, payload),
        };
        let timeout = verdict.as_ref().and_then(|v| v.statement_timeout);
        self.ruled = verdict.as_ref().and_then(|v| v.route.clone());
        // Most queries are one statement: split (and allocate) only when
        // there may be several.
        let split;
        let one = [sql];
        let statements: &[&str] = if sql.contains(';') {
            split = my_sql::split_statements(sql, dialect);
            &split
        } else {
            &one
        };
        if statements.len() > 1 && self.caps & CLIENT_MULTI_STATEMENTS == 0 {
            let msg = "You have an error in your SQL syntax: multiple statements need CLIENT_MULTI_STATEMENTS";
            return self.error(stream, 1, ER_PARSE_ERROR, msg).await;
        }
        self.decide_query(statements, dialect);
        let mut changes = Vec::new();
        let mut switch_to = None;
        let mut sets_global = false;
        let mut unlocks = false;
        // The endpoint's `pinning_filter`: variables tracked (replayed) too
        // (usually none: no copy of the endpoint then).
        let endpoint = (!self.endpoint.pinning_filter.is_empty()).then(|| self.endpoint.clone());
        let tracked: Vec<&str> = endpoint
            .iter()
            .flat_map(|e| e.pinning_filter.iter().map(String::as_str))
            .collect();
        let mut plan = Plan::default();
        let mut first = Info::NONE;
        // A procedure may insert or read LAST_INSERT_ID().
        let mut call = false;
        // A SET whose values the proxy does not see (it pins).
        let mut untracked_set = false;
        // Transaction boundaries matter only with autocommit off (or about
        // to be): the classifier's key-word look-up is skipped otherwise.
        let mut boundaries = self.status & SERVER_STATUS_AUTOCOMMIT == 0;
        for (i, stmt) in statements.iter().enumerate() {
            let effect = my_sql::classify_with(stmt, dialect, &tracked);
            let info = match &effect {
                MyEffect::Plain(info) => *info,
                _ => Info::NONE,
            };
            if i == 0 {
                first = info;
            }
            let sets_autocommit = matches!(&effect, MyEffect::Set(c) if c.iter().any(changes_autocommit));
            boundaries |= sets_autocommit;
            let boundary = match boundaries {
                // Switching autocommit commits; with it off, no transaction
                // is open until the next statement.
                true if sets_autocommit => TxBoundary::Ends,
                true => my_sql::tx_boundary(stmt, &effect, dialect),
                false => TxBoundary::Within,
            };
            plan.push(info, boundary, effect == MyEffect::NextTransaction);
            call |= effect == MyEffect::Pin(my_sql::PinReason::Call);
            untracked_set |= effect == MyEffect::Pin(my_sql::PinReason::SetExpression);
            match effect {
                MyEffect::Kill(kill) if statements.len() == 1 => return self.kill(stream, kill).await,
                MyEffect::ProcessList { full } if statements.len() == 1 => return self.processlist(stream, full).await,
                MyEffect::ProcessList { .. } => {
                    let msg = "SHOW PROCESSLIST must be a statement of its own through the proxy";
                    return self.error(stream, 1, errors::ER_NOT_SUPPORTED_YET, msg).await;
                }
                MyEffect::Kill(_) | MyEffect::KillUnsupported => {
                    let msg = "only a single KILL [CONNECTION | QUERY] <connection id> is supported through the proxy";
                    return self.error(stream, 1, errors::ER_NOT_SUPPORTED_YET, msg).await;
                }
                // The server asks the client for the file and the proxy
                // passes the exchange on (super::relay). A client that did
                // not offer CLIENT_LOCAL_FILES gets the server's own answer
                // to it (backend connections all offer it).
                MyEffect::LoadDataLocal if self.caps & CLIENT_LOCAL_FILES == 0 => {
                    let msg = "The used command is not allowed with this MariaDB version";
                    return self.error(stream, 1, errors::ER_NOT_ALLOWED_COMMAND, msg).await;
                }
                MyEffect::LoadDataLocal => {}
                MyEffect::Use(db) => {
                    if !self.tenant.may_use(&db) {
                        return self.deny_database(stream, &db).await;
                    }
                    switch_to = Some(db);
                }
                MyEffect::Set(c) => changes.extend(c),
                MyEffect::Pin(reason) => self.pin(reason.code()),
                MyEffect::LockTables => {
                    if !self.locked {
                        self.core.stats.record_pin("lock_tables");
                    }
                    self.locked = true;
                }
                MyEffect::UnlockTables => unlocks = true,
                MyEffect::Global => sets_global = true,
                _ => {}
            }
        }
        if let Some(db) = &switch_to {
            self.use_database(db, statements.len() == 1);
        }
        plan.call = call;
        // LAST_INSERT_ID() read or set: the connection is taken now, to see
        // what it holds.
        // A statement that shows its text (EXPLAIN) gets the value set on the
        // connection, not written in.
        let single_text = statements.len() == 1 && !my_sql::shows_its_text(statements[0], dialect);
        let lid_need = LidNeed::of(&plan.info, call, single_text);
        let mut lid_value = None;
        if lid_need != LidNeed::Nothing {
            if let Err(e) = self.conn().await {
                self.core.stats.record_error(&e);
                let err = super::errors::my_error(&e);
                return self.error(stream, 1, err, &e.message).await;
            }
            lid_value = match self.prepare_lid(lid_need).await {
                Ok(v) => v,
                Err(e) => return Err(self.lost(e)),
            };
        }
        // ROW_COUNT() / FOUND_ROWS() in the first statement read the
        // previous one's results, LAST_INSERT_ID() the session's: written
        // in when the connection does not hold them.
        let rewritten =
            (first.reads_row_count || first.reads_found_rows || first.reads_connection_id || lid_value.is_some())
                .then(|| {
                    let mut values = self.carry.substitutions(self.lease.is_some());
                    values.last_insert_id = lid_value;
                    // CONNECTION_ID() is the id the handshake gave the client,
                    // which KILL and SHOW PROCESSLIST use (see super::kill).
                    values.connection_id = first.reads_connection_id.then_some(u64::from(self.cancel.id));
                    let stmt = statements[0];
                    let at = stmt.as_ptr() as usize - sql.as_ptr() as usize;
                    my_sql::substitute_previous_results(stmt, dialect, values).map(|s| {
                        let mut p = Vec::with_capacity(sql.len() + 64);
                        p.push(COM_QUERY);
                        p.extend_from_slice(&sql.as_bytes()[..at]);
                        p.extend_from_slice(s.as_bytes());
                        p.extend_from_slice(&sql.as_bytes()[at + stmt.len()..]);
                        p
                    })
                })
                .flatten();
        let payload = rewritten.as_deref().unwrap_or(payload);
        self.plan = plan;
        let forwarded = self.forward_followed(stream, payload, sql, timeout).await?;
        if untracked_set {
            self.reparse_prepared().await;
        }
        let Some(done) = forwarded else {
            return Ok(());
        };
        if done.error.is_none() {
            for c in &changes {
                self.vars.apply(c);
            }
            if let Some(lease) = self.lease.as_mut() {
                lease.conn().take_vars(self.vars.clone()).await;
            }
            if unlocks {
                self.locked = false;
            }
            if sets_global {
                // New sessions start from the server's global values: the
                // pooled connections, opened before, start new sessions
                // with the old ones. They are closed (the lent ones when
                // they come back), so the next sessions open new ones, as
                // new direct connections would.
                let key = self.pool.key();
                let closed = self.core.pools.retire_backend(&key.cluster, &key.backend);
                tracing::info!(backend = %key.backend, closed, "SET GLOBAL: the backend's pooled connections are replaced");
            }
        } else if statements.len() > 1 && !changes.is_empty() {
            // Some of the SETs may have run: the connection's state is unknown.
            self.pin("unrecognized");
        }
        Ok(())
    }

    /// An OK packet answered by the proxy itself.
    pub async fn local_ok(&mut self, stream: &mut ClientStream) -> Result<(), Fatal> {
        let mut out = BytesMut::new();
        OkPacket {
            status: self.status,
            ..OkPacket::default()
        }
        .encode(&mut out, self.caps, OK_HEADER);
        self.send(stream, 1, &out).await
    }

    pub(super) async fn send(&mut self, stream: &mut ClientStream, seq: u8, payload: &[u8]) -> Result<(), Fatal> {
        write_packet(stream, seq, payload).await.map(|_| ()).map_err(|e| {
            (
                0,
                ProxyError::new(Condition::ProtocolViolation, "client write failed").with_detail(e.to_string()),
            )
        })
    }

    /// An error that leaves the session open.
    pub async fn error(
        &mut self,
        stream: &mut ClientStream,
        seq: u8,
        err: MyError,
        message: &str,
    ) -> Result<(), Fatal> {
        self.send(stream, seq, &err_payload(err, message)).await
    }

    /// An error that ends the session.
    pub(super) async fn fatal(
        &mut self,
        stream: &mut ClientStream,
        seq: u8,
        err: MyError,
        message: &str,
    ) -> Result<(), Fatal> {
        let e = ProxyError::new(Condition::ProtocolViolation, message);
        self.core.stats.record_error(&e);
        tracing::info!(tenant = %self.tenant.name, error = message, "client session ended with an error");
        let _ = self.send(stream, seq, &err_payload(err, message)).await;
        Ok(())
    }
}

/// Whether a tracked change switches `autocommit`.
fn changes_autocommit(c: &VarChange) -> bool {
    matches!(c, VarChange::Set { name, .. } | VarChange::Reset { name } if name == "autocommit")
}

/// ER_PARSE_ERROR (1064, 42000): what the server answers a multi-statement
/// query from a client without CLIENT_MULTI_STATEMENTS.
const ER_PARSE_ERROR: MyError = MyError {
    code: 1064,
    sqlstate: "42000",
    name: "ER_PARSE_ERROR",
};
