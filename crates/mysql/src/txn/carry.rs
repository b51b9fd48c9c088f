//! What a MySQL session carries from one statement to the next when its
//! statements run on different backend connections (transaction pooling),
//! so that results which depend on the previous statement answer as on a
//! direct connection (MySQL Reference Manual §14.15 "Information
//! Functions", §15.3.1 "START TRANSACTION, COMMIT, and ROLLBACK"):
//!
//! * `LAST_INSERT_ID()` (also `@@last_insert_id`, `@@identity`) *moves*.
//!   Idle pooled connections hold 0 (or a value the proxy knows). On a
//!   lease, a value other than the one the connection started with can
//!   only come from an id the session's statements generated (ids are
//!   never 0), so the session's value is the connection's if it changed,
//!   else the session's own from before; an OK packet's insert id cannot
//!   say this alone, since it is also sent for an explicitly inserted id,
//!   which `LAST_INSERT_ID()` does not return. A lease whose statements may
//!   have changed it is read and zeroed in one statement (`SELECT
//!   LAST_INSERT_ID(), LAST_INSERT_ID(0)`) before it goes back. A
//!   statement that reads it on a connection that does not hold the
//!   session's value gets the value written in (a single text statement)
//!   or set first (`SET SESSION last_insert_id = n`: prepared statements,
//!   multi-statement queries, `LAST_INSERT_ID(expr)`, `CALL`).
//! * `ROW_COUNT()` and `FOUND_ROWS()` *move by value*: the proxy keeps the
//!   previous statement's affected rows (-1 after a result set or an
//!   error) and its result set's row count, and writes them into a
//!   statement that reads them on a connection other than the one that
//!   ran the previous statement. `SQL_CALC_FOUND_ROWS` pins (only the
//!   server knows that count); a prepared statement that calls either
//!   pins when prepared (its text is fixed).
//! * Warnings cannot move: after a statement with warnings the lease is
//!   held until the next command, the only one that can read them
//!   (`SHOW WARNINGS`).
//! * Transactions with autocommit off: the server flags a transaction
//!   only once a table is touched, but the client's transaction starts
//!   with its first statement; the lease is held from it until `COMMIT`,
//!   `ROLLBACK`, an implicit commit or `SET autocommit = 1`
//!   ([`gatehouse_sql::mysql::tx_boundary`]). `SET TRANSACTION ...` applies
//!   to the next transaction only: the lease that ran it is held until
//!   that transaction has started.

use gatehouse_proto_mysql::consts::{COM_QUERY, COM_STMT_EXECUTE, SERVER_STATUS_AUTOCOMMIT};
use gatehouse_proto_mysql::response::Done;
use gatehouse_sql::mysql::{Info, PreviousResults, TxBoundary};

use super::Session;
use gatehouse_core::error::{Condition, ProxyError};

/// The per-session state described in the module docs.
#[derive(Debug, Clone, Copy)]
pub struct Carry {
    /// The session's `LAST_INSERT_ID()` (while its lease's connection does
    /// not hold a newer, unknown one).
    pub last_insert_id: u64,
    /// What `ROW_COUNT()` returns to the client: its previous statement's
    /// affected rows (-1 after a result set, an error, or on a new session).
    pub row_count: i64,
    /// What `FOUND_ROWS()` returns to the client: its last result set's rows.
    pub found_rows: u64,
    /// The lease's connection ran the client's previous statement, and
    /// nothing of the proxy's since: `ROW_COUNT()` reads it there.
    pub row_count_here: bool,
    /// The lease's connection ran the client's last statement with a
    /// result set, and nothing of the proxy's since.
    pub found_rows_here: bool,
    /// Autocommit is off and the client's transaction is open.
    pub autocommit_txn: bool,
    /// A `SET TRANSACTION` waits for the transaction it applies to.
    pub next_txn: bool,
    /// The previous statement left warnings.
    pub warnings: bool,
    /// The lease's connection's `LAST_INSERT_ID()` when the lease began.
    pub lid_base: u64,
    /// The lease's connection's `LAST_INSERT_ID()` is the session's.
    pub lid_on_conn: bool,
}

impl Default for Carry {
    fn default() -> Self {
        Carry {
            last_insert_id: 0,
            row_count: -1,
            found_rows: 0,
            row_count_here: false,
            found_rows_here: false,
            autocommit_txn: false,
            next_txn: false,
            warnings: false,
            lid_base: 0,
            lid_on_conn: false,
        }
    }
}

/// What a command's statements do to the transaction and to the carried
/// state, computed before it runs and applied to what the server replied.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan {
    /// The facts of all its statements.
    pub info: Info,
    /// Whether an autocommit-off transaction is open after it (`None`: as before).
    pub open_after: Option<bool>,
    /// A `SET TRANSACTION` is still waiting after it (`None`: as before).
    pub next_txn_after: Option<bool>,
    /// It calls a procedure (which may change `LAST_INSERT_ID()`).
    pub call: bool,
}

impl Plan {
    /// Adds one statement (in order).
    pub fn push(&mut self, info: Info, boundary: TxBoundary, next_transaction: bool) {
        self.info = self.info.or(info);
        match boundary {
            TxBoundary::Ends => self.open_after = Some(false),
            TxBoundary::Within => {
                self.open_after = Some(true);
                self.next_txn_after = Some(false);
            }
            TxBoundary::Neutral => {}
        }
        if next_transaction {
            self.next_txn_after = Some(true);
        }
    }
}

impl Carry {
    /// Whether the lease must be kept after the command that just ran.
    pub fn holds(&self) -> bool {
        self.autocommit_txn || self.next_txn || self.warnings
    }

    /// The values a statement reading `ROW_COUNT()`/`FOUND_ROWS()` must get
    /// written in: those its connection (`leased`: the session's lease,
    /// with nothing to run before the statement) does not hold.
    pub fn substitutions(&self, leased: bool) -> PreviousResults {
        PreviousResults {
            row_count: (!(leased && self.row_count_here)).then_some(self.row_count),
            found_rows: (!(leased && self.found_rows_here)).then_some(self.found_rows),
            last_insert_id: None,
            connection_id: None,
        }
    }

    /// The lease changed, or the proxy ran a statement of its own on it.
    pub fn lease_changed(&mut self) {
        self.row_count_here = false;
        self.found_rows_here = false;
    }

    /// After the reply to `cmd`, planned as `plan`.
    pub fn after_reply(&mut self, cmd: u8, plan: &Plan, done: &Done) {
        if matches!(cmd, COM_QUERY | COM_STMT_EXECUTE) {
            self.row_count = match (done.error, done.last_rows, done.ok) {
                (None, None, Some(ok)) => i64::try_from(ok.affected_rows).unwrap_or(i64::MAX),
                _ => -1,
            };
            self.row_count_here = true;
            if let Some(rows) = done.last_rows {
                self.found_rows = rows;
                self.found_rows_here = true;
            }
            // Warnings of an OK only: a lease kept for the warnings of a
            // result set would be held by a client that then idles (reads
            // with warnings are common), starving the pool.
            self.warnings = done.ok.is_some_and(|ok| ok.warnings > 0);
        }
        let autocommit = done.status.map(|s| s & SERVER_STATUS_AUTOCOMMIT != 0);
        match autocommit {
            Some(true) => self.autocommit_txn = false,
            Some(false) => self.autocommit_txn = plan.open_after.unwrap_or(self.autocommit_txn),
            None => {}
        }
        if let Some(n) = plan.next_txn_after {
            self.next_txn = n;
        }
    }
}

/// What a command needs of `LAST_INSERT_ID()` before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LidNeed {
    Nothing,
    /// One text statement reads it: the value can be written in.
    ReadText,
    /// The connection must hold the session's value (a prepared or
    /// multi-statement read, `LAST_INSERT_ID(expr)`, `CALL`).
    OnConnection,
}

impl LidNeed {
    /// For a command whose statements have `info` (and call a procedure).
    pub fn of(info: &Info, call: bool, single_text: bool) -> LidNeed {
        if info.sets_last_insert_id || call || (info.reads_last_insert_id && !single_text) {
            LidNeed::OnConnection
        } else if info.reads_last_insert_id {
            LidNeed::ReadText
        } else {
            LidNeed::Nothing
        }
    }
}

impl Session {
    /// A new lease: where its connection's `LAST_INSERT_ID()` starts.
    pub(crate) fn lid_lease_started(&mut self, conn_value: Option<u64>) {
        let base = conn_value.unwrap_or(0);
        self.carry.lid_base = base;
        self.carry.lid_on_conn = conn_value == Some(self.carry.last_insert_id);
    }

    /// The session's value given the connection's `v`.
    fn lid_truth(&self, v: u64) -> u64 {
        if self.carry.lid_on_conn || v != self.carry.lid_base {
            v
        } else {
            self.carry.last_insert_id
        }
    }

    /// Reads the lease's connection's `LAST_INSERT_ID()` (and zeroes it).
    async fn read_lid(&mut self, zero: bool) -> Result<u64, ProxyError> {
        let Some(lease) = self.lease.as_mut() else {
            return Ok(self.carry.last_insert_id);
        };
        let conn = lease.conn();
        let sql = match zero {
            true => "SELECT LAST_INSERT_ID(), LAST_INSERT_ID(0)",
            false => "SELECT LAST_INSERT_ID()",
        };
        let r = conn.query(sql).await?;
        let v = r
            .rows
            .first()
            .and_then(|row| row.first())
            .and_then(|v| v.as_deref())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| ProxyError::new(Condition::BackendUnavailable, "could not read LAST_INSERT_ID()"))?;
        conn.last_insert_id = Some(if zero { 0 } else { v });
        self.carry.lease_changed();
        Ok(v)
    }

    /// Before a command with `need`: the value to write into a text
    /// statement, if it must be; or the session's value set on the
    /// connection.
    pub(crate) async fn prepare_lid(&mut self, need: LidNeed) -> Result<Option<u64>, ProxyError> {
        if need == LidNeed::Nothing || self.carry.lid_on_conn {
            return Ok(None);
        }
        let Some(known) = self.lease.as_mut().map(|l| l.conn().last_insert_id) else {
            return Ok(None);
        };
        let v = match known {
            Some(v) => v,
            None => self.read_lid(false).await?,
        };
        let truth = self.lid_truth(v);
        if truth == v {
            self.carry.lid_on_conn = true;
            return Ok(None);
        }
        if need == LidNeed::ReadText {
            return Ok(Some(truth));
        }
        if let Some(lease) = self.lease.as_mut() {
            let conn = lease.conn();
            conn.query(&format!("SET SESSION last_insert_id = {truth}")).await?;
            conn.last_insert_id = Some(truth);
            self.carry.lid_on_conn = true;
            self.carry.lease_changed();
        }
        Ok(None)
    }

    /// Before the lease goes back: the session's `LAST_INSERT_ID()` is
    /// taken from the connection if its statements may have changed it,
    /// and the connection is zeroed. `false`: the connection failed (it is
    /// dropped).
    pub(crate) async fn take_last_insert_id(&mut self) -> bool {
        let Some(known) = self.lease.as_mut().map(|l| l.conn().last_insert_id) else {
            return true;
        };
        if known == Some(0) {
            // Unchanged by the session (ids are never 0), or zeroed.
            if self.carry.lid_on_conn {
                self.carry.last_insert_id = 0;
            }
            return true;
        }
        match self.read_lid(true).await {
            Ok(v) => {
                self.carry.last_insert_id = self.lid_truth(v);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "backend connection lost reading LAST_INSERT_ID()");
                self.drop_lease();
                false
            }
        }
    }
}
