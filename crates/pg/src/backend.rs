//! Backend connections to PostgreSQL servers: connect and authenticate
//! (driving the sans-I/O [`BackendStartup`]), the reset that makes a
//! connection safe for the next client, role probes, and cancel requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use gatehouse_proto_pg::backend_startup::{BackendAuthError, BackendStartup, Progress};
use gatehouse_proto_pg::frame::{Step, next_frame};
use gatehouse_proto_pg::messages::ErrorFields;
use gatehouse_proto_pg::{messages, sqlstate, startup};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use gatehouse_core::backend_tls::stream::host_of;
use gatehouse_core::backend_tls::{BackendStream, BackendTls, Connect, Negotiation};
use gatehouse_core::cancel::CancelFlight;
use gatehouse_core::engine::Probe;
use gatehouse_core::error::{Condition, ProxyError};
use gatehouse_settings::config::Secret;

/// Control-path messages (startup, reset, probes) are held whole up to this
/// size; nothing the proxy reads on these paths comes near it.
const CONTROL_MESSAGE_LIMIT: usize = 1024 * 1024;

/// Data rows of a control query: columns as raw text, `None` for NULL.
pub(crate) type Rows = Vec<Vec<Option<Vec<u8>>>>;

/// Values of the tracked parameters (`tracked::TRACKED`), in
/// that order; shared, since most sessions and connections hold the same
/// (default) values.
pub type TrackedValues = Arc<Vec<String>>;

/// An authenticated PostgreSQL backend connection.
pub struct PgConn {
    pub(crate) stream: BackendStream,
    /// The TLS settings it was opened with (a monitor connection kept
    /// across a reload that changed them is opened anew).
    pub(crate) tls: BackendTls,
    /// What its TLS session agreed on (`None` in plain text).
    pub(crate) tls_in_use: Option<Arc<str>>,
    /// Bytes read from the server but not yet consumed.
    pub(crate) buf: BytesMut,
    /// The server's current reported parameters (ParameterStatus).
    pub(crate) params: Vec<(String, String)>,
    /// The server's (pid, secret) for cancel requests.
    pub(crate) key: Option<(u32, u32)>,
    /// `host:port` this connection goes to.
    pub(crate) addr: Arc<str>,
    /// Transaction status from the last ReadyForQuery.
    pub(crate) status: u8,
    /// Tracked session parameters as last read or set; `None` when unknown.
    pub(crate) tracked: Option<TrackedValues>,
    /// Tracked parameters as the server set them up for this connection:
    /// what a new client starts from.
    pub(crate) initial: TrackedValues,
    /// Proxy-named statements prepared here, with when each was last used.
    pub(crate) prepared: HashMap<Arc<str>, u64>,
    /// Which session's unnamed statement (session id, generation) is here.
    pub(crate) unnamed_owner: Option<(u64, u64)>,
    /// Use counter for `prepared`'s LRU.
    pub(crate) tick: u64,
    /// Cancels sent to this connection and not yet delivered.
    pub(crate) cancels: Arc<CancelFlight>,
}

/// How long a forwarded cancel may take to be delivered.
const CANCEL_LIMIT: Duration = Duration::from_secs(5);

/// What a cancel needs: the server address and its key for the connection.
#[derive(Debug, Clone)]
pub struct PgCancelTarget {
    pub addr: Arc<str>,
    pub pid: u32,
    pub secret: u32,
    /// The connection's cancels in flight (shared with it).
    pub flight: Arc<CancelFlight>,
    /// A cancel goes over TLS as the connection did.
    pub tls: BackendTls,
    /// The connection's TLS session, for the console.
    pub tls_in_use: Option<Arc<str>>,
}

impl PartialEq for PgCancelTarget {
    fn eq(&self, o: &Self) -> bool {
        self.addr == o.addr && self.pid == o.pid && self.secret == o.secret
    }
}

impl Eq for PgCancelTarget {}

impl gatehouse_core::cancel::CancelTarget for PgCancelTarget {
    fn flight(&self) -> &Arc<CancelFlight> {
        &self.flight
    }

    fn server(&self) -> (&str, u32) {
        (&self.addr, self.pid)
    }

    fn server_tls(&self) -> Option<&Arc<str>> {
        self.tls_in_use.as_ref()
    }
}

pub(crate) fn io_error(addr: &str, e: impl std::fmt::Display) -> ProxyError {
    ProxyError::new(Condition::BackendUnavailable, "could not reach the database server")
        .with_detail(format!("{addr}: {e}"))
}

impl PgConn {
    pub(crate) fn set_param(&mut self, name: String, value: String) {
        match self.params.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.params.push((name, value)),
        }
    }

    pub(crate) fn cancel_target(&self) -> Option<PgCancelTarget> {
        self.key.map(|(pid, secret)| PgCancelTarget {
            addr: self.addr.clone(),
            pid,
            secret,
            flight: self.cancels.clone(),
            tls: self.tls.clone(),
            tls_in_use: self.tls_in_use.clone(),
        })
    }

    /// Reads one whole message from the server (control paths only).
    pub(crate) async fn read_message(&mut self) -> Result<BytesMut, ProxyError> {
        loop {
            match next_frame(&self.buf, CONTROL_MESSAGE_LIMIT, CONTROL_MESSAGE_LIMIT) {
                Ok(Step::Whole { len, .. }) => return Ok(self.buf.split_to(len)),
                Ok(Step::NeedMore) => {}
                Ok(Step::Stream { .. }) | Err(_) => {
                    return Err(io_error(&self.addr, "oversized or malformed message on a control path"));
                }
            }
            self.buf.reserve(8192);
            let n = self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| io_error(&self.addr, e))?;
            if n == 0 {
                return Err(io_error(&self.addr, "server closed the connection"));
            }
        }
    }

    /// Runs one simple query on a control path and returns its data rows, or
    /// the server's error; ParameterStatus changes are recorded.
    pub(crate) async fn simple_query(&mut self, sql: &str) -> Result<Result<Rows, ErrorFields>, ProxyError> {
        let mut out = BytesMut::new();
        messages::put_query(&mut out, sql);
        self.stream.write_all(&out).await.map_err(|e| io_error(&self.addr, e))?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            let msg = self.read_message().await?;
            match msg[0] {
                b'D' => rows.push(messages::parse_data_row(&msg).map_err(|e| io_error(&self.addr, e))?),
                b'S' => {
                    let (n, v) = messages::parse_parameter_status(&msg).map_err(|e| io_error(&self.addr, e))?;
                    self.set_param(n, v);
                }
                b'E' => error = Some(messages::parse_error(&msg).map_err(|e| io_error(&self.addr, e))?),
                b'Z' => {
                    self.status = messages::parse_ready(&msg).map_err(|e| io_error(&self.addr, e))?;
                    break;
                }
                _ => {}
            }
        }
        Ok(match error {
            None => Ok(rows),
            Some(f) => Err(f),
        })
    }

    /// [`Self::simple_query`] where a server error is a failure of the proxy's own work.
    pub(crate) async fn control_query(&mut self, sql: &str) -> Result<Rows, ProxyError> {
        self.simple_query(sql).await?.map_err(|f| {
            ProxyError::new(
                Condition::BackendUnavailable,
                "a proxy query failed on the database server",
            )
            .with_detail(format!("{}: {sql}: {} {}", self.addr, f.code, f.message))
        })
    }
}

/// A connection to `addr`, in TLS as `tls` asks: an SSLRequest first,
/// then the handshake when the server answers `S`; on `N`, plain for
/// `prefer` and refused from `require` up; a failed handshake under
/// `prefer` opens the connection again in plain text. With direct negotiation the
/// handshake starts at once (a server before 17 takes it for a malformed
/// startup packet and closes the connection).
async fn open_stream(addr: &str, tls: &BackendTls) -> Result<BackendStream, ProxyError> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| io_error(addr, e))?;
    let _ = tcp.set_nodelay(true);
    let mut tcp = tcp;
    if !tls.mode.asks() {
        return Ok(BackendStream::Plain(tcp));
    }
    if tls.negotiation == Negotiation::Direct {
        return tls
            .handshake(tcp, host_of(addr))
            .await
            .map_err(|e| tls.failure(addr, e));
    }
    tcp.write_all(&startup::ssl_request())
        .await
        .map_err(|e| io_error(addr, e))?;
    // One byte and no more: anything the server sent past it before the
    // handshake would be plaintext taken as if under TLS (CVE-2021-23222).
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await.map_err(|e| io_error(addr, e))?;
    match answer[0] {
        startup::SSL_ACCEPTED => match tls.handshake(tcp, host_of(addr)).await {
            Ok(stream) => Ok(stream),
            Err(e) => match tls.plain_after_failed_handshake(addr, &e) {
                Some(plain) => Box::pin(open_stream(addr, &plain)).await,
                None => Err(tls.failure(addr, e)),
            },
        },
        startup::SSL_REFUSED if !tls.mode.requires() => Ok(BackendStream::Plain(tcp)),
        startup::SSL_REFUSED => Err(tls.failure(addr, "the server does not accept TLS connections")),
        other => Err(io_error(addr, format!("unexpected answer 0x{other:02x} to SSLRequest"))),
    }
}

pub(crate) async fn connect_inner(
    addr: &str,
    secret: &Secret,
    database: &str,
    startup: &[(String, String)],
    tls: &BackendTls,
) -> Result<PgConn, ProxyError> {
    let stream = open_stream(addr, tls).await?;
    let mut conn = PgConn {
        tls_in_use: stream.tls_summary(),
        stream,
        tls: tls.clone(),
        buf: BytesMut::with_capacity(16 * 1024),
        params: Vec::new(),
        key: None,
        addr: Arc::from(addr),
        status: b'I',
        tracked: None,
        initial: Arc::default(),
        prepared: HashMap::new(),
        unnamed_owner: None,
        tick: 0,
        cancels: Arc::default(),
    };
    let identity = [("user", secret.user.as_str()), ("database", database)];
    let hello = startup::startup_message(
        identity
            .into_iter()
            .chain(startup.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    );
    conn.stream.write_all(&hello).await.map_err(|e| io_error(addr, e))?;
    let mut auth = BackendStartup::new(&secret.user, Some(secret.password.expose()));
    let mut out = BytesMut::new();
    loop {
        let msg = conn.read_message().await?;
        let progress = auth
            .handle(&msg, &mut out)
            .map_err(|e| startup_error(addr, database, e))?;
        if !out.is_empty() {
            conn.stream.write_all(&out).await.map_err(|e| io_error(addr, e))?;
            out.clear();
        }
        if let Progress::Ready(status) = progress {
            conn.status = status;
            conn.params = auth.parameters().to_vec();
            conn.key = auth.key();
            return Ok(conn);
        }
    }
}

fn startup_error(addr: &str, database: &str, e: BackendAuthError) -> ProxyError {
    let detail = format!("{addr}: {e}");
    match &e {
        BackendAuthError::Server(f) if f.code == sqlstate::INVALID_CATALOG_NAME => ProxyError::new(
            Condition::UnknownDatabase,
            format!("database \"{database}\" does not exist"),
        ),
        BackendAuthError::Server(f) if f.code == sqlstate::TOO_MANY_CONNECTIONS => ProxyError::new(
            Condition::TooManyConnections,
            "the database server has no connection slots left",
        ),
        _ => ProxyError::new(
            Condition::BackendUnavailable,
            "could not connect to the database server",
        ),
    }
    .with_detail(detail)
}

/// Makes a connection clean for the next client: ends any transaction and
/// runs `DISCARD ALL` (session settings, prepared statements, temporary
/// tables, advisory locks, LISTENs), recording the reset parameters.
pub async fn reset(conn: &mut PgConn) -> Result<(), ProxyError> {
    if conn.status != b'I' {
        conn.control_query("ROLLBACK").await?;
    }
    conn.control_query("DISCARD ALL").await?;
    conn.tracked = None;
    conn.prepared.clear();
    conn.unnamed_owner = None;
    if conn.status != b'I' || !conn.buf.is_empty() {
        return Err(io_error(&conn.addr, "connection not idle after reset"));
    }
    Ok(())
}

/// True when an idle connection has neither been closed nor sent anything
/// unexpected (a server that is shutting down sends a FATAL error first).
pub fn is_usable(conn: &mut PgConn) -> bool {
    conn.stream.is_usable()
}

/// Asks the server its role over `cached` (the monitor connection kept from
/// the last probe) or a new connection with the monitor credentials; gives
/// the connection back for next time when it is still good.
/// The health probe: role, connection limit, replication position and,
/// on a replica, its lag (zero when it has replayed everything it received:
/// the age of the last replayed transaction only means something while
/// WAL waits to be replayed, not when the primary is merely quiet).
const PROBE_SQL: &str = "SELECT pg_is_in_recovery(), current_setting('max_connections'), \
     (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text, \
     CASE WHEN NOT pg_is_in_recovery() THEN NULL \
          WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0 \
          ELSE COALESCE(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END";

pub async fn probe(
    addr: &str,
    secret: &Secret,
    timeout: Duration,
    tls: &BackendTls,
    cached: Option<PgConn>,
) -> (Result<Probe, ProxyError>, Option<PgConn>) {
    let work = async {
        let mut conn = match cached.map(|mut c| (c.tls == *tls && is_usable(&mut c), c)) {
            Some((true, c)) => c,
            _ => connect_inner(addr, secret, "postgres", &[], tls).await?,
        };
        let rows = conn.control_query(PROBE_SQL).await?;
        let row = rows.first().ok_or_else(|| io_error(addr, "probe returned no row"))?;
        let in_recovery = matches!(row.first(), Some(Some(v)) if v.as_slice() == b"t");
        let max_connections = row
            .get(1)
            .and_then(|v| v.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse().ok());
        let text = |i: usize| {
            row.get(i)
                .and_then(|v| v.as_deref())
                .and_then(|v| std::str::from_utf8(v).ok())
                .map(str::to_owned)
        };
        let lag = text(3)
            .and_then(|v| v.parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s.max(0.0)).ok());
        Ok((
            Probe {
                writable: !in_recovery,
                max_connections,
                lag,
                replayed: text(2)
                    .filter(|_| in_recovery)
                    .and_then(|t| gatehouse_core::engine::position::Position::parse_lsn(&t)),
                position: text(2),
            },
            conn,
        ))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok((probe, conn))) => (Ok(probe), Some(conn)),
        Ok(Err(e)) => (Err(e), None),
        Err(_) => (Err(io_error(addr, "probe timed out")), None),
    }
}

/// The writer's WAL insert position: read on the connection a transaction
/// just committed on, it is at or past that commit's record.
const WRITE_POSITION_SQL: &str = "SELECT pg_current_wal_insert_lsn()::text";

/// [`gatehouse_core::engine::Engine::write_position`]: the WAL insert LSN.
pub async fn write_position(
    conn: &mut PgConn,
) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
    lsn_of(conn, WRITE_POSITION_SQL).await
}

/// How far a standby has replayed (NULL on a primary).
const REPLAY_POSITION_SQL: &str = "SELECT pg_last_wal_replay_lsn()::text";

/// [`gatehouse_core::engine::Engine::replay_position`]: the replayed LSN.
pub async fn replay_position(
    conn: &mut PgConn,
) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
    lsn_of(conn, REPLAY_POSITION_SQL).await
}

/// The LSN `sql` answers with in its one column (`None` for NULL).
async fn lsn_of(
    conn: &mut PgConn,
    sql: &str,
) -> Result<Option<gatehouse_core::engine::position::Position>, ProxyError> {
    let rows = conn.control_query(sql).await?;
    Ok(rows
        .first()
        .and_then(|r| r.first())
        .and_then(|v| v.as_deref())
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(gatehouse_core::engine::position::Position::parse_lsn))
}

/// Sends a CancelRequest for `target` and waits for the server to close.
pub async fn cancel(target: PgCancelTarget) -> Result<(), ProxyError> {
    let work = async {
        let tls = target.tls.for_companion_of(target.tls_in_use.is_some());
        let mut s = open_stream(&target.addr, &tls).await?;
        s.write_all(&startup::cancel_request(target.pid, target.secret))
            .await
            .map_err(|e| io_error(&target.addr, e))?;
        let mut sink = BytesMut::new();
        while s.read_buf(&mut sink).await.map_err(|e| io_error(&target.addr, e))? > 0 {
            sink.advance(sink.len());
        }
        Ok(())
    };
    tokio::time::timeout(CANCEL_LIMIT, work)
        .await
        .unwrap_or_else(|_| Err(io_error(&target.addr, "cancel timed out")))
}
