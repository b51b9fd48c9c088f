//! Backend connections to MySQL / MariaDB servers: connect and authenticate
//! (the connection phase lives in [`auth`]), text-protocol control queries
//! (probes, `init_query`, replay of session variables), the
//! COM_RESET_CONNECTION that cleans a connection for the next client, a
//! cheap liveness check, and `KILL QUERY` cancels. The health probe (role,
//! connection limit, replication state) lives in `probe` and is re-exported
//! here.
//!
//! Backend connections use [`crate::caps::RELAY_CAPS`] (only those the server has
//! too), so `CLIENT_DEPRECATE_EOF` is never in effect: every result set ends
//! with a classic EOF packet.

pub mod auth;
pub mod position;
mod probe;
mod switch;

pub use probe::{CollationTable, ProbeResult, REPLICATION_STOPPED_LAG, probe, probe_with};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use gatehouse_proto_mysql::Packet;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::lenenc::Reader;
use gatehouse_proto_mysql::packets::{ERR_HEADER, EofPacket, ErrPacket, OK_HEADER, OkPacket, is_eof};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use zeroize::Zeroizing;

use super::io::{self, IoError};
use gatehouse_core::backend_tls::{BackendStream, BackendTls};
use gatehouse_core::cancel::CancelFlight;
use gatehouse_core::error::{Condition, ProxyError};

/// Largest logical reply packet accepted from a server: the protocol's
/// ceiling for `max_allowed_packet` ("The largest possible packet that can be
/// transmitted to or from a MySQL server or client is 1GB", MySQL reference
/// manual, "Packet Too Large"). Physical packets are at most 16 MiB each.
pub const REPLY_PACKET_LIMIT: usize = 1024 * 1024 * 1024;
/// How long a cancel may take (connect, log in, `KILL QUERY`).
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// ER_NO_SUCH_THREAD ("Unknown thread id"): the connection to cancel is gone.
pub const ER_NO_SUCH_THREAD: u16 = 1094;
/// ER_UNKNOWN_SYSTEM_VARIABLE: a probed variable does not exist on this server.
pub const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// Largest command buffer a connection keeps between commands.
const WBUF_KEEP: usize = 64 * 1024;

/// A statement prepared on one backend connection.
#[derive(Debug, Clone)]
pub struct BackendStmt {
    pub id: u32,
    pub params: u16,
    /// Whether this connection has been sent the parameter types.
    pub types_sent: bool,
    /// The server's reply to the prepare (framed, as the client got it):
    /// another client preparing the same text on this connection is
    /// answered with it (its own id written in) instead of a new prepare.
    pub reply: Option<bytes::Bytes>,
}

/// An authenticated backend connection.
pub struct MyConn {
    pub stream: BackendStream,
    /// Bytes read from the server but not yet consumed ([`io::read_packet`]).
    pub rbuf: BytesMut,
    /// The server's id for this connection (the target of `KILL QUERY`).
    pub connection_id: u32,
    /// Server status flags of the last OK/EOF seen.
    pub status: u16,
    pub server_version: String,
    /// The MariaDB extended capabilities the server offered (none for MySQL).
    pub server_ext_caps: u32,
    /// The collation id the connection was opened with.
    pub charset: u8,
    /// The capabilities both sides agreed on.
    pub caps: u32,
    /// `host:port`.
    pub addr: String,
    /// The database the connection was opened on or moved to by the
    /// proxy (a client's `USE` of another one discards the connection).
    pub database: Option<String>,
    pub cancel: MyCancelTarget,
    /// Reused for framing commands.
    pub wbuf: BytesMut,
    /// Tracked session variables set on this connection (by clients, replayed).
    pub vars: super::vars::Vars,
    /// Statements prepared on this connection, by query text.
    pub prepared: std::collections::HashMap<Arc<str>, BackendStmt>,
    /// What `LAST_INSERT_ID()` returns on this connection; `None` when a
    /// statement may have changed it (see [`crate::txn::carry`]).
    pub last_insert_id: Option<u64>,
    /// The server's default authentication plugin (from its greeting) and
    /// the nonce it holds for this connection: what a COM_CHANGE_USER
    /// answers first ([`MyConn::change_user`]).
    auth_plugin: Box<str>,
    nonce: [u8; gatehouse_proto_mysql::auth::NONCE_LEN],
}

impl fmt::Debug for MyConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MyConn")
            .field("addr", &self.addr)
            .field("connection_id", &self.connection_id)
            .field("status", &self.status)
            .field("server_version", &self.server_version)
            .finish_non_exhaustive()
    }
}

/// What a cancel needs: where the connection is, who owns it (`KILL QUERY`
/// of one's own connection needs no privilege) and its id.
#[derive(Clone)]
pub struct MyCancelTarget {
    // Shared: a target is cloned into the session's cancel slot at every lease.
    addr: Arc<str>,
    user: Arc<str>,
    password: Arc<Zeroizing<Vec<u8>>>,
    connection_id: u32,
    /// The connection's `KILL QUERY`s in flight (shared with it).
    flight: Arc<CancelFlight>,
    /// The cluster's TLS the connection was opened with (the `KILL`
    /// connection is opened with it too).
    tls: BackendTls,
    /// What the connection's TLS session agreed on, for the console.
    tls_in_use: Option<Arc<str>>,
}

impl gatehouse_core::cancel::CancelTarget for MyCancelTarget {
    fn flight(&self) -> &Arc<CancelFlight> {
        &self.flight
    }

    fn server(&self) -> (&str, u32) {
        (&self.addr, self.connection_id)
    }

    fn server_tls(&self) -> Option<&Arc<str>> {
        self.tls_in_use.as_ref()
    }
}

impl MyCancelTarget {
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }
}

impl fmt::Debug for MyCancelTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MyCancelTarget")
            .field("addr", &self.addr)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("connection_id", &self.connection_id)
            .finish()
    }
}

/// The outcome of a text-protocol query: every result set's rows as text
/// (`None` for NULL), the final status flags and the summed affected rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// The last result set's column names.
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
    pub status: u16,
    pub affected_rows: u64,
}

fn io_error(addr: &str, e: impl fmt::Display) -> ProxyError {
    ProxyError::new(Condition::BackendUnavailable, "could not reach the database server")
        .with_detail(format!("{addr}: {e}"))
}

fn malformed(addr: &str, e: impl fmt::Display) -> ProxyError {
    ProxyError::new(
        Condition::BackendUnavailable,
        "the database server sent a malformed reply",
    )
    .with_detail(format!("{addr}: {e}"))
}

/// A server error on one of the proxy's own queries.
fn query_error(addr: &str, e: &ErrPacket) -> ProxyError {
    ProxyError::new(
        Condition::BackendUnavailable,
        "a proxy query failed on the database server",
    )
    .with_detail(format!(
        "{addr}: ERROR {} ({}): {}",
        e.code,
        e.sqlstate_str(),
        e.message
    ))
}

/// Opens and authenticates a backend connection as `user`, on `database`
/// when given, asking for the session capabilities `session_caps`
/// ([`super::session_word`]): the base ones as far as the server has them,
/// the extended ones or the login fails; all within `timeout`.
pub async fn connect(
    addr: &str,
    user: &str,
    password: &[u8],
    database: Option<&str>,
    session_caps: u64,
    timeout: Duration,
    tls: &BackendTls,
) -> Result<MyConn, ProxyError> {
    let password = Arc::new(Zeroizing::new(password.to_vec()));
    match tokio::time::timeout(
        timeout,
        connect_inner(addr, user, password, database, session_caps, tls),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => Err(io_error(addr, format!("connect timed out after {timeout:?}"))),
    }
}

async fn connect_inner(
    addr: &str,
    user: &str,
    password: Arc<Zeroizing<Vec<u8>>>,
    database: Option<&str>,
    session_caps: u64,
    tls: &BackendTls,
) -> Result<MyConn, ProxyError> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| io_error(addr, e))?;
    let _ = tcp.set_nodelay(true);
    let mut rbuf = BytesMut::with_capacity(io::READ_BUFFER);
    let who = auth::Login {
        addr,
        tls,
        user,
        password: &password,
        database,
        session_caps: (session_caps & u64::from(u32::MAX)) as u32,
        session_ext_caps: (session_caps >> 32) as u32,
    };
    let (stream, done) = match auth::login(tcp, &mut rbuf, &who).await {
        // `prefer` after a failed handshake: once more, in plain text.
        Err(auth::LoginError::Tls(mode, e)) => match tls.plain_after_failed_handshake(addr, &e) {
            Some(plain) => {
                rbuf.clear();
                let tcp = TcpStream::connect(addr).await.map_err(|e| io_error(addr, e))?;
                let _ = tcp.set_nodelay(true);
                auth::login(tcp, &mut rbuf, &auth::Login { tls: &plain, ..who }).await
            }
            None => Err(auth::LoginError::Tls(mode, e)),
        },
        done => done,
    }
    .map_err(|e| e.into_proxy(addr, user, database))?;
    let connection_id = done.greeting.connection_id;
    let tls_in_use = stream.tls_summary();
    let auth_plugin = done.greeting.auth_plugin.as_str().into();
    Ok(MyConn {
        stream,
        rbuf,
        connection_id,
        status: done.status,
        server_version: done.greeting.real_version().to_owned(),
        server_ext_caps: done.greeting.mariadb_ext_caps,
        charset: auth::CONNECTION_CHARSET,
        caps: done.caps,
        addr: addr.to_owned(),
        database: database.filter(|d| !d.is_empty()).map(str::to_owned),
        wbuf: BytesMut::new(),
        vars: super::vars::Vars::new(),
        prepared: std::collections::HashMap::new(),
        last_insert_id: Some(0),
        auth_plugin,
        nonce: done.nonce,
        cancel: MyCancelTarget {
            addr: Arc::from(addr),
            user: Arc::from(user),
            password,
            connection_id,
            flight: Arc::default(),
            tls: tls.clone(),
            tls_in_use,
        },
    })
}

impl MyConn {
    /// Whether the server is MariaDB (its variable names differ a little).
    pub fn is_mariadb(&self) -> bool {
        self.server_version.contains("MariaDB")
    }

    /// After COM_RESET_CONNECTION: no variables set, no statements prepared,
    /// `LAST_INSERT_ID()` back to 0.
    pub fn forget_session_state(&mut self) {
        self.vars = super::vars::Vars::new();
        self.prepared.clear();
        self.last_insert_id = Some(0);
    }

    /// Records the tracked variables the connection now has. Statements
    /// prepared under another `sql_mode` are closed: the server parsed them
    /// under it (`||` as OR or as concatenation, quoting, ...), and a
    /// client's statement must run as parsed under its own.
    pub async fn take_vars(&mut self, vars: super::vars::Vars) {
        let mode_changed = self.vars.sql_mode() != vars.sql_mode();
        self.vars = vars;
        if mode_changed && !self.prepared.is_empty() {
            self.close_all_prepared().await;
        }
    }

    /// Reads the OK that answers `what`; an ERR becomes an error.
    async fn read_ok(&mut self, what: &str) -> Result<(), ProxyError> {
        let p = self.read_packet().await?;
        self.ok_or_error(&p.payload, what)
    }

    /// The OK that answers `what` (its status kept), or the server's ERR
    /// as an error.
    fn ok_or_error(&mut self, payload: &[u8], what: &str) -> Result<(), ProxyError> {
        match payload.first() {
            Some(&OK_HEADER) => {
                let ok = OkPacket::decode(payload, self.caps).map_err(|e| malformed(&self.addr, e))?;
                self.status = ok.status;
                Ok(())
            }
            Some(&ERR_HEADER) => {
                let e = self.server_error(payload)?;
                Err(query_error(&self.addr, &e))
            }
            _ => Err(malformed(&self.addr, format!("unexpected reply to {what}"))),
        }
    }

    /// Closes one prepared statement (COM_STMT_CLOSE has no reply).
    pub async fn close_prepared(&mut self, id: u32) {
        let mut cmd = [COM_STMT_CLOSE, 0, 0, 0, 0];
        cmd[1..].copy_from_slice(&id.to_le_bytes());
        let _ = self.send_command(&cmd).await;
    }

    /// Closes every prepared statement of this connection.
    pub async fn close_all_prepared(&mut self) {
        let ids: Vec<u32> = self.prepared.drain().map(|(_, s)| s.id).collect();
        for id in ids {
            self.close_prepared(id).await;
        }
    }

    /// Sends one command payload with sequence id 0.
    pub async fn send_command(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.wbuf.clear();
        io::put_packet(&mut self.wbuf, 0, payload);
        let sent = self.stream.write_all(&self.wbuf).await;
        if self.wbuf.capacity() > WBUF_KEEP {
            self.wbuf = BytesMut::new();
        }
        sent
    }

    /// Reads one logical reply packet (up to [`REPLY_PACKET_LIMIT`]).
    pub async fn read_packet(&mut self) -> Result<Packet, ProxyError> {
        io::read_packet(&mut self.stream, &mut self.rbuf, REPLY_PACKET_LIMIT)
            .await
            .map_err(|e| match e {
                IoError::Frame(f) => malformed(&self.addr, f),
                IoError::Closed => io_error(&self.addr, "server closed the connection"),
                e => io_error(&self.addr, e),
            })
    }

    /// Runs `sql` with COM_QUERY and collects every result set's rows; a
    /// server error becomes a [`ProxyError`] whose detail holds the code and
    /// message.
    pub async fn query(&mut self, sql: &str) -> Result<QueryResult, ProxyError> {
        let addr = self.addr.clone();
        self.query_raw(sql).await?.map_err(|e| query_error(&addr, &e))
    }

    /// Like [`Self::query`] but hands back the server's ERR packet, for
    /// callers that react to particular error codes.
    pub async fn query_raw(&mut self, sql: &str) -> Result<Result<QueryResult, ErrPacket>, ProxyError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(COM_QUERY);
        payload.extend_from_slice(sql.as_bytes());
        self.send_command(&payload).await.map_err(|e| io_error(&self.addr, e))?;
        self.read_result().await
    }

    /// Reads the complete text-protocol reply to a COM_QUERY already sent:
    /// OKs and result sets, several when `SERVER_MORE_RESULTS_EXISTS` is set,
    /// ending at the last OK/EOF or at an ERR.
    pub async fn read_result(&mut self) -> Result<Result<QueryResult, ErrPacket>, ProxyError> {
        let mut out = QueryResult::default();
        loop {
            let p = self.read_packet().await?;
            let Some(&header) = p.payload.first() else {
                return Err(malformed(&self.addr, "empty packet"));
            };
            if header == ERR_HEADER {
                if ErrPacket::is_progress_report(&p.payload) {
                    continue;
                }
                return self.server_error(&p.payload).map(Err);
            }
            if header == OK_HEADER {
                let ok = OkPacket::decode(&p.payload, self.caps).map_err(|e| malformed(&self.addr, e))?;
                out.affected_rows = out.affected_rows.saturating_add(ok.affected_rows);
                self.status = ok.status;
                out.status = ok.status;
            } else {
                let mut r = Reader::new(&p.payload, "column count");
                let columns = r.lenenc_int().map_err(|e| malformed(&self.addr, e))?;
                if columns == 0 || header == gatehouse_proto_mysql::packets::LOCAL_INFILE_HEADER {
                    return Err(malformed(&self.addr, format!("unexpected reply header 0x{header:02x}")));
                }
                if let Some(e) = self.read_result_set(columns, &mut out).await? {
                    return Ok(Err(e));
                }
            }
            if out.status & SERVER_MORE_RESULTS_EXISTS == 0 {
                return Ok(Ok(out));
            }
        }
    }

    /// Reads the column definitions, EOF, rows and final EOF of one result
    /// set with `columns` columns; `Some` when it ended with an ERR.
    async fn read_result_set(&mut self, columns: u64, out: &mut QueryResult) -> Result<Option<ErrPacket>, ProxyError> {
        // Column definitions (their names kept: catalog, schema, table
        // and original table come first), then their EOF.
        out.columns.clear();
        for i in 0..=columns {
            let p = self.read_packet().await?;
            if p.payload.first() == Some(&ERR_HEADER) {
                return self.server_error(&p.payload).map(Some);
            }
            if i < columns {
                let mut r = Reader::new(&p.payload, "column definition");
                let mut name = Ok(&[][..]);
                for _ in 0..5 {
                    name = r.lenenc_bytes();
                }
                out.columns.push(
                    name.map(|n| String::from_utf8_lossy(n).into_owned())
                        .unwrap_or_default(),
                );
            }
        }
        loop {
            let p = self.read_packet().await?;
            match p.payload.first() {
                Some(&ERR_HEADER) if ErrPacket::is_progress_report(&p.payload) => continue,
                Some(&ERR_HEADER) => return self.server_error(&p.payload).map(Some),
                _ if is_eof(&p.payload, false) => {
                    let eof = EofPacket::decode(&p.payload).map_err(|e| malformed(&self.addr, e))?;
                    self.status = eof.status;
                    out.status = eof.status;
                    return Ok(None);
                }
                _ => {}
            }
            let mut r = Reader::new(&p.payload, "text row");
            let mut row = Vec::new();
            for _ in 0..columns {
                let v = r.lenenc_bytes_or_null().map_err(|e| malformed(&self.addr, e))?;
                row.push(v.map(|b| String::from_utf8_lossy(b).into_owned()));
            }
            out.rows.push(row);
        }
    }

    fn server_error(&self, payload: &[u8]) -> Result<ErrPacket, ProxyError> {
        ErrPacket::decode(payload).map_err(|e| malformed(&self.addr, e))
    }

    /// COM_RESET_CONNECTION: ends any transaction, resets session variables,
    /// drops user variables, temporary tables, prepared statements and locks.
    ///
    /// The server keeps the current database through it but sets
    /// `character_set_database` / `collation_database` back to the
    /// server's, where a new connection on that database has the
    /// database's own: the database is selected again (COM_INIT_DB, in
    /// the same write), as a new connection would have it.
    pub async fn reset(&mut self) -> Result<(), ProxyError> {
        let database = self.database.take();
        self.frame_reset(database.as_deref());
        self.database = database;
        self.stream
            .write_all(&self.wbuf)
            .await
            .map_err(|e| io_error(&self.addr, e))?;
        self.read_ok("COM_RESET_CONNECTION").await?;
        if self.database.is_some() {
            self.read_ok("COM_INIT_DB").await?;
        }
        if !self.rbuf.is_empty() {
            return Err(malformed(&self.addr, "data after the reply to COM_RESET_CONNECTION"));
        }
        self.restore_login_session().await
    }

    /// Frames COM_RESET_CONNECTION, then COM_INIT_DB of `database` when
    /// given, into the write buffer: one write, two replies.
    pub(super) fn frame_reset(&mut self, database: Option<&str>) {
        self.wbuf.clear();
        io::put_packet(&mut self.wbuf, 0, &[COM_RESET_CONNECTION]);
        if let Some(db) = database {
            let mut init = Vec::with_capacity(db.len() + 1);
            init.push(COM_INIT_DB);
            init.extend_from_slice(db.as_bytes());
            io::put_packet(&mut self.wbuf, 0, &init);
        }
    }

    /// What the login's capabilities gave the session and a reset takes
    /// away: the server adds `IGNORE_SPACE` to the `sql_mode` of a
    /// connection opened with `CLIENT_IGNORE_SPACE`, and gives one opened
    /// with `CLIENT_INTERACTIVE` the global `interactive_timeout` as its
    /// `wait_timeout`, at login only: COM_RESET_CONNECTION and
    /// COM_CHANGE_USER leave the global values (checked against MariaDB
    /// 10.11), after which the connection must again be what a new one is.
    pub(super) async fn restore_login_session(&mut self) -> Result<(), ProxyError> {
        let mut sql = String::new();
        for (name, value) in super::vars::login_defaults(self.caps) {
            sql.push_str(if sql.is_empty() { "SET " } else { ", " });
            sql.push_str(&format!("SESSION {name} = {value}"));
        }
        if sql.is_empty() {
            return Ok(());
        }
        self.query(&sql).await.map(|_| ())
    }

    /// Without waiting: false when the server closed the socket or sent
    /// something unsolicited (a server going away sends an ERR first).
    pub fn is_usable(&mut self) -> bool {
        if !self.rbuf.is_empty() {
            return false;
        }
        self.stream.is_usable()
    }

    /// Sends COM_QUIT (best effort) and closes the socket, so the server
    /// logs no aborted connection.
    pub async fn close(mut self) {
        let _ = self.send_command(&[COM_QUIT]).await;
    }
}

/// Opens a new connection as the same user and runs `KILL QUERY` for the
/// target's connection. A target that no longer exists is not an error.
pub async fn cancel(target: MyCancelTarget) -> Result<(), ProxyError> {
    kill(target, "KILL QUERY").await
}

/// Like [`cancel`], but `KILL CONNECTION`: the server stops what the
/// connection runs, ends it and rolls its transaction back itself (what a
/// killed client session needs; a socket merely closed under a running
/// statement has been seen to leave its transaction "ROLLING BACK").
pub async fn terminate(target: MyCancelTarget) -> Result<(), ProxyError> {
    kill(target, "KILL CONNECTION").await
}

async fn kill(target: MyCancelTarget, statement: &str) -> Result<(), ProxyError> {
    let work = async {
        let tls = target.tls.for_companion_of(target.tls_in_use.is_some());
        let mut conn = connect_inner(&target.addr, &target.user, target.password.clone(), None, 0, &tls).await?;
        let r = conn.query_raw(&format!("{statement} {}", target.connection_id)).await?;
        conn.close().await;
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.code == ER_NO_SUCH_THREAD => Ok(()),
            Err(e) => Err(query_error(&target.addr, &e)),
        }
    };
    tokio::time::timeout(CANCEL_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(io_error(&target.addr, "cancel timed out")))
}
