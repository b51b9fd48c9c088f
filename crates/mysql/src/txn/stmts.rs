//! Binary-protocol prepared statements across multiplexed connections. The
//! client sees proxy-owned statement ids; each backend connection keeps
//! the statements it has prepared, keyed by query text (so clients running
//! the same query share one), and a client's statement is prepared lazily
//! on whichever connection serves its execute. Ids are rewritten both
//! ways; parameter types sent once by the client (new-params-bound) are
//! remembered and sent again to a connection that has not seen them.

use std::sync::Arc;

use gatehouse_proto_mysql::command::{rewrite_stmt_id, stmt_id_at};
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::errors::{self, MyError};
use gatehouse_proto_mysql::frame;
use gatehouse_proto_mysql::packets::is_err;
use gatehouse_proto_mysql::prepare::StmtPrepareOk;
use gatehouse_proto_mysql::response::{ResponseKind, ResponseTracker, Step};
use gatehouse_proto_mysql::stmt_execute::{new_params_bound, param_types, with_param_types};

use gatehouse_sql::mysql::{self as my_sql, Dialect, Info, MyEffect, PinReason, TxBoundary};

use super::carry::{LidNeed, Plan};
use super::{Fatal, Session};
use crate::backend::{BackendStmt, MyConn};
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};
use tokio::io::AsyncWriteExt;

/// Statements one backend connection keeps prepared; past this, the
/// connection closes all of them and starts over (a client that prepares
/// unboundedly many distinct queries must not exhaust the server's
/// `max_prepared_stmt_count`).
pub const MAX_PREPARED_PER_CONNECTION: usize = 256;

/// ER_STMT_HAS_NO_OPEN_CURSOR (1421, HY000).
const ER_STMT_HAS_NO_OPEN_CURSOR: MyError = MyError {
    code: 1421,
    sqlstate: "HY000",
    name: "ER_STMT_HAS_NO_OPEN_CURSOR",
};

/// A statement as one client prepared it.
struct ClientStmt {
    sql: Arc<str>,
    params: u16,
    /// Parameter types from the client's last execute that sent them.
    types: Option<Vec<u8>>,
    /// What each execute does, from the statement's text.
    facts: Facts,
}

/// What executing a prepared statement does to session state, classified
/// once when it is prepared.
#[derive(Debug, Clone, Copy)]
struct Facts {
    info: Info,
    boundary: TxBoundary,
    /// Why executing it pins the session, if it does.
    pin: Option<&'static str>,
}

impl Facts {
    fn of(sql: &str, dialect: Dialect) -> Facts {
        let effect = my_sql::classify(sql, dialect);
        let info = match &effect {
            MyEffect::Plain(info) => *info,
            _ => Info::NONE,
        };
        let pin = match &effect {
            MyEffect::Set(_) => Some(PinReason::SetExpression.code()),
            MyEffect::Use(_) | MyEffect::Kill(_) | MyEffect::KillUnsupported | MyEffect::ProcessList { .. } => {
                Some(PinReason::Unrecognized.code())
            }
            e => e.pin_reason().map(PinReason::code),
        };
        Facts {
            info,
            boundary: my_sql::tx_boundary(sql, &effect, dialect),
            pin,
        }
    }
}

/// A client's statements by the ids the proxy gave it.
#[derive(Default)]
pub struct Statements {
    /// Ids the proxy handed out: [`gatehouse_core::fasthash::FastMap`]'s hash.
    by_id: gatehouse_core::fasthash::FastMap<u32, ClientStmt>,
    next_id: u32,
}

impl Statements {
    /// The text client statement `id` was prepared from.
    pub fn text(&self, id: u32) -> Option<Arc<str>> {
        self.by_id.get(&id).map(|st| st.sql.clone())
    }
}

/// What an execute needs of a statement on its connection.
#[derive(Debug, Clone, Copy)]
struct OnConn {
    id: u32,
    types_sent: bool,
}

impl OnConn {
    fn of(b: &BackendStmt) -> Self {
        OnConn {
            id: b.id,
            types_sent: b.types_sent,
        }
    }
}

async fn remember(conn: &mut MyConn, sql: Arc<str>, stmt: BackendStmt) {
    if conn.prepared.len() >= MAX_PREPARED_PER_CONNECTION {
        conn.close_all_prepared().await;
    }
    if let Some(old) = conn.prepared.insert(sql, stmt) {
        conn.close_prepared(old.id).await;
    }
}

pub async fn command(s: &mut Session, stream: &mut ClientStream, payload: &[u8]) -> Result<(), Fatal> {
    if payload[0] == COM_STMT_PREPARE {
        return prepare(s, stream, payload).await;
    }
    let Some(id) = stmt_id_at(payload) else {
        return s
            .error(stream, 1, errors::ER_MALFORMED_PACKET, "Malformed communication packet")
            .await;
    };
    let Some(stmt) = s.stmts.by_id.get(&id) else {
        if payload[0] == COM_STMT_CLOSE || payload[0] == COM_STMT_SEND_LONG_DATA {
            // No reply is ever sent to these.
            return Ok(());
        }
        let msg = format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute");
        return s.error(stream, 1, errors::ER_UNKNOWN_STMT_HANDLER, &msg).await;
    };
    let (sql, params, facts) = (stmt.sql.clone(), stmt.params, stmt.facts);
    match payload[0] {
        COM_STMT_CLOSE => {
            s.stmts.by_id.remove(&id);
            Ok(())
        }
        COM_STMT_RESET => {
            s.long_data = false;
            s.cursor_open = false;
            let on_conn = s.lease.as_mut().and_then(|l| l.conn().prepared.get(&sql).map(|b| b.id));
            match on_conn {
                Some(id) => forward_with_id(s, stream, payload, id).await,
                None => s.local_ok(stream).await,
            }
        }
        COM_STMT_FETCH => {
            let on_conn = s.lease.as_mut().and_then(|l| l.conn().prepared.get(&sql).map(|b| b.id));
            match on_conn {
                Some(id) if s.cursor_open => forward_with_id(s, stream, payload, id).await,
                _ => {
                    let msg = format!("The statement ({id}) has no open cursor");
                    s.error(stream, 1, ER_STMT_HAS_NO_OPEN_CURSOR, &msg).await
                }
            }
        }
        COM_STMT_SEND_LONG_DATA => {
            let Some(b) = prepared(s, stream, &sql, false).await? else {
                return Ok(());
            };
            let mut p = payload.to_vec();
            let _ = rewrite_stmt_id(&mut p, b.id);
            s.long_data = true;
            if let Some(lease) = s.lease.as_mut()
                && lease.conn().send_command(&p).await.is_err()
            {
                s.drop_lease();
            }
            Ok(())
        }
        _ => execute(s, stream, payload, id, sql, params, facts).await,
    }
}

async fn prepare(s: &mut Session, stream: &mut ClientStream, payload: &[u8]) -> Result<(), Fatal> {
    s.ruled = None;
    let mut sql: Arc<str> = String::from_utf8_lossy(&payload[1..]).into();
    // Query rules: a block refuses the statement, a rewrite prepares the
    // rewritten text (route and timeout apply to each execute).
    let verdict = s.rules(&sql);
    if let Some(message) = verdict.as_ref().and_then(|v| v.block.as_deref()) {
        return s.error(stream, 1, errors::ER_TABLEACCESS_DENIED_ERROR, message).await;
    }
    let rewritten_payload;
    let payload = match verdict.and_then(|v| v.rewritten) {
        Some(text) => {
            rewritten_payload = [&[COM_STMT_PREPARE][..], text.as_bytes()].concat();
            sql = Arc::from(text);
            &rewritten_payload[..]
        }
        None => payload,
    };
    let facts = Facts::of(&sql, s.dialect());
    s.stmts.next_id = s.stmts.next_id.wrapping_add(1).max(1);
    let client_id = s.stmts.next_id;
    // Already prepared on the connection serving the client: answered from
    // the server's earlier reply, without a round trip.
    let known = match s.conn().await {
        Ok(conn) => conn.prepared.get(&sql).cloned(),
        Err(e) if e.condition == Condition::Canceled => {
            let err = crate::errors::my_error(&e);
            return s.error(stream, 1, err, &e.message).await;
        }
        // forward_as borrows again and tells the client why it cannot.
        Err(_) => None,
    };
    if let Some(BackendStmt {
        params,
        reply: Some(reply),
        ..
    }) = known
    {
        let mut out = bytes::BytesMut::from(&reply[..]);
        let _ = gatehouse_proto_mysql::prepare::rewrite_prepare_ok_id(&mut out[frame::HEADER_LEN..], client_id);
        stream.write_all(&out).await.map_err(|e| {
            (
                0,
                ProxyError::new(Condition::ProtocolViolation, "client write failed").with_detail(e.to_string()),
            )
        })?;
        s.stmts.by_id.insert(
            client_id,
            ClientStmt {
                sql,
                params,
                types: None,
                facts,
            },
        );
        return Ok(());
    }
    let mut reply = bytes::BytesMut::new();
    let Some(done) = s.forward_as(stream, payload, Some(client_id), Some(&mut reply)).await? else {
        return Ok(());
    };
    if let Some(ok) = done.prepare_ok {
        s.stmts.by_id.insert(
            client_id,
            ClientStmt {
                sql: sql.clone(),
                params: ok.num_params,
                types: None,
                facts,
            },
        );
        if let Some(lease) = s.lease.as_mut() {
            let stmt = BackendStmt {
                id: ok.stmt_id,
                params: ok.num_params,
                types_sent: false,
                reply: Some(reply.freeze()),
            };
            remember(lease.conn(), sql, stmt).await;
        }
    }
    Ok(())
}

async fn execute(
    s: &mut Session,
    stream: &mut ClientStream,
    payload: &[u8],
    id: u32,
    sql: Arc<str>,
    params: u16,
    facts: Facts,
) -> Result<(), Fatal> {
    let verdict = s.rules(&sql);
    if let Some(message) = verdict.as_ref().and_then(|v| v.block.as_deref()) {
        return s.error(stream, 1, errors::ER_TABLEACCESS_DENIED_ERROR, message).await;
    }
    let timeout = verdict.as_ref().and_then(|v| v.statement_timeout);
    s.ruled = verdict.as_ref().and_then(|v| v.route.clone());
    if let Some(reason) = facts.pin {
        s.pin(reason);
    }
    // LAST_INSERT_ID() read or set: the connection must hold the session's.
    if facts.info.reads_last_insert_id || facts.info.sets_last_insert_id {
        if let Err(e) = s.conn().await {
            let err = crate::errors::my_error(&e);
            return s.error(stream, 1, err, &e.message).await;
        }
        if let Err(e) = s.prepare_lid(LidNeed::OnConnection).await {
            return Err(s.lost(e));
        }
    }
    // ROW_COUNT() / FOUND_ROWS() read on another connection than the one
    // that ran the previous statement: a variant of the statement with the
    // values written in runs instead (prepared on that connection by its
    // own text).
    let sql = match facts.info.reads_row_count || facts.info.reads_found_rows || facts.info.reads_connection_id {
        true => {
            let mut values = s.carry.substitutions(s.lease.is_some());
            values.connection_id = facts.info.reads_connection_id.then_some(u64::from(s.cancel.id));
            my_sql::substitute_previous_results(&sql, s.dialect(), values).map_or(sql, Arc::from)
        }
        false => sql,
    };
    let Some(b) = prepared(s, stream, &sql, true).await? else {
        return Ok(());
    };
    let mut p = payload.to_vec();
    let _ = rewrite_stmt_id(&mut p, b.id);
    let mut types_sent = b.types_sent;
    if params > 0 {
        match new_params_bound(&p, params) {
            Ok(true) => {
                if let Ok(Some(t)) = param_types(&p, params)
                    && let Some(stmt) = s.stmts.by_id.get_mut(&id)
                {
                    stmt.types = Some(t.to_vec());
                }
                types_sent = true;
            }
            Ok(false) if !b.types_sent => {
                // This connection has not seen the types the client sent
                // on another one: send them along.
                if let Some(t) = s.stmts.by_id.get(&id).and_then(|c| c.types.as_deref())
                    && let Ok(with) = with_param_types(&p, params, t)
                {
                    p = with.to_vec();
                    types_sent = true;
                }
            }
            _ => {}
        }
    }
    if types_sent != b.types_sent
        && let Some(lease) = s.lease.as_mut()
        && let Some(entry) = lease.conn().prepared.get_mut(&sql)
    {
        entry.types_sent = types_sent;
    }
    s.long_data = false;
    let mut plan = Plan::default();
    plan.push(facts.info, facts.boundary, false);
    s.plan = plan;
    let forwarded = s.forward_followed(stream, &p, &sql, timeout).await?;
    if facts.pin == Some(PinReason::SetExpression.code()) {
        s.reparse_prepared().await;
    }
    if let Some(done) = forwarded {
        s.cursor_open = done.cursor_opened;
    }
    Ok(())
}

async fn forward_with_id(s: &mut Session, stream: &mut ClientStream, payload: &[u8], id: u32) -> Result<(), Fatal> {
    let mut p = payload.to_vec();
    let _ = rewrite_stmt_id(&mut p, id);
    if let Some(done) = s.forward(stream, &p).await?
        && let Some(status) = done.status
        && status & SERVER_STATUS_LAST_ROW_SENT != 0
    {
        s.cursor_open = false;
    }
    Ok(())
}

/// The statement for `sql` on the session's connection (borrowing one if
/// needed), prepared there now if it is not yet. `Ok(None)`: the client
/// was sent the error (only when `reply` is set; otherwise it is dropped,
/// as for commands without replies).
async fn prepared(
    s: &mut Session,
    stream: &mut ClientStream,
    sql: &Arc<str>,
    reply: bool,
) -> Result<Option<OnConn>, Fatal> {
    let conn = match s.conn().await {
        Ok(c) => c,
        Err(e) => {
            if reply {
                let err = crate::errors::my_error(&e);
                s.error(stream, 1, err, &e.message).await?;
            }
            return Ok(None);
        }
    };
    if let Some(b) = conn.prepared.get(sql) {
        return Ok(Some(OnConn::of(b)));
    }
    let mut cmd = Vec::with_capacity(sql.len() + 1);
    cmd.push(COM_STMT_PREPARE);
    cmd.extend_from_slice(sql.as_bytes());
    let outcome = prepare_quietly(conn, &cmd).await;
    match outcome {
        Ok(Ok(ok)) => {
            let stmt = BackendStmt {
                id: ok.stmt_id,
                params: ok.num_params,
                types_sent: false,
                reply: None,
            };
            remember(conn, sql.clone(), stmt).await;
            Ok(conn.prepared.get(sql).map(OnConn::of))
        }
        Ok(Err(err_packet)) => {
            if reply {
                let seq = 1;
                crate::io::write_packet(stream, seq, &err_packet).await.map_err(|e| {
                    (
                        0,
                        gatehouse_core::error::ProxyError::new(
                            gatehouse_core::error::Condition::ProtocolViolation,
                            "client write failed",
                        )
                        .with_detail(e.to_string()),
                    )
                })?;
            }
            Ok(None)
        }
        Err(detail) => {
            tracing::warn!(tenant = %s.tenant.name, cause = %detail, "backend connection lost under a lease (preparing)");
            s.drop_lease();
            let e = gatehouse_core::error::ProxyError::new(
                gatehouse_core::error::Condition::BackendUnavailable,
                "Lost connection to the database server",
            )
            .with_detail(detail);
            Err((1, e))
        }
    }
}

/// Prepares on `conn` without relaying: the backend id, or the server's
/// ERR payload; `Err` when the connection failed.
async fn prepare_quietly(conn: &mut MyConn, cmd: &[u8]) -> Result<Result<StmtPrepareOk, Vec<u8>>, String> {
    conn.send_command(cmd).await.map_err(|e| e.to_string())?;
    let mut tracker = ResponseTracker::new(ResponseKind::StmtPrepare, false);
    let mut error = None;
    loop {
        let p = conn.read_packet().await.map_err(|e| e.to_string())?;
        if error.is_none() && is_err(&p.payload) {
            error = Some(p.payload.to_vec());
        }
        match tracker.feed(&p.payload).map_err(|e| e.to_string())? {
            Step::Done(d) => {
                return Ok(match (d.prepare_ok, error) {
                    (Some(ok), _) => Ok(ok),
                    (None, Some(e)) => Err(e),
                    (None, None) => {
                        Err(crate::errors::err_payload(errors::ER_UNKNOWN_ERROR, "prepare failed").to_vec())
                    }
                });
            }
            Step::More => {}
            Step::LocalInfile | Step::AuthContinue => return Err("unexpected reply to a prepare".into()),
        }
    }
}
