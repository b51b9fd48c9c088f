//! What a MySQL session carries from one statement to the next when its
//! statements run on different backend connections (transaction pooling),
//! so that results which depend on the previous statement answer as on a
//! direct connection (MySQL Reference Manual §14.15 "Information
//! Functions", §15.3.1 "START TRANSACTION, COMMIT, and ROLLBACK"):
//!
//! * `LAST_INSERT_ID()` (also `@@last_insert_id`, `@@identity`) *moves*:
//!   every connection's value is known to the proxy (0 when opened or
//!   reset). A reply whose OK carries an insert id, or a statement calling
//!   `LAST_INSERT_ID(expr)`, makes it unknown; it is read back (`SELECT
//!   LAST_INSERT_ID()`) before the connection goes back to the pool, since
//!   an OK's insert id may also be an explicitly inserted value, which
//!   `LAST_INSERT_ID()` does not return. A statement that reads it, or may
//!   change it (an insert, `LAST_INSERT_ID(expr)`, `CALL`), on a
//!   connection holding another value first sets the session's (`SET
//!   SESSION last_insert_id = n`), so an explicit insert leaves the
//!   session's value in place, as on a direct connection.
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

use super::txn::Session;
use crate::error::ProxyError;

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
    /// The command about to run reads or may change `LAST_INSERT_ID()`:
    /// its connection must hold the session's value first.
    pub touches_last_insert_id: bool,
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
            touches_last_insert_id: false,
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

impl Session {
    /// Before a command that reads or may change `LAST_INSERT_ID()` runs on
    /// the lease's connection: gives it the session's value if it holds
    /// another.
    pub(super) async fn bring_last_insert_id(&mut self) -> Result<(), ProxyError> {
        let want = self.carry.last_insert_id;
        if self.last_insert_id_differs()
            && let Some(lease) = self.lease.as_mut()
        {
            let conn = lease.conn();
            conn.query(&format!("SET SESSION last_insert_id = {want}")).await?;
            conn.last_insert_id = Some(want);
            self.carry.lease_changed();
        }
        Ok(())
    }

    /// Before the lease goes back: reads the connection's
    /// `LAST_INSERT_ID()` if a statement may have changed it. `false`: the
    /// connection failed (it is dropped).
    pub(super) async fn take_last_insert_id(&mut self) -> bool {
        let Some(lease) = self.lease.as_mut() else {
            return true;
        };
        let conn = lease.conn();
        if conn.last_insert_id.is_some() {
            return true;
        }
        let value = match conn.query("SELECT LAST_INSERT_ID()").await {
            Ok(r) => r
                .rows
                .first()
                .and_then(|row| row.first())
                .and_then(|v| v.as_deref())
                .and_then(|v| v.parse::<u64>().ok()),
            Err(e) => {
                tracing::warn!(error = %e, "backend connection lost reading LAST_INSERT_ID()");
                None
            }
        };
        match value {
            Some(v) => {
                conn.last_insert_id = Some(v);
                self.carry.last_insert_id = v;
                true
            }
            None => {
                self.drop_lease();
                false
            }
        }
    }
}
