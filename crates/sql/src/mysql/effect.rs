//! The result types: what one MySQL/MariaDB statement does to session
//! state (MySQL Reference Manual §15.3 "Transactional and Locking
//! Statements", §15.7.6 "SET Statements", §15.5 "Prepared Statements").

/// Transaction-control statements (MySQL manual §15.3.1, §15.3.4). The
/// proxy takes transaction boundaries from `SERVER_STATUS_IN_TRANS`; these
/// are informational.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxCommand {
    /// `BEGIN [WORK]`, `START TRANSACTION [characteristic, ...]`.
    Begin {
        /// `READ ONLY` was given.
        read_only: bool,
        /// `WITH CONSISTENT SNAPSHOT` was given.
        consistent_snapshot: bool,
    },
    /// `COMMIT [WORK] [AND [NO] CHAIN] [[NO] RELEASE]`.
    Commit {
        /// `AND CHAIN`: a new transaction starts at once.
        chain: bool,
        /// `RELEASE`: the server closes the connection afterwards.
        release: bool,
    },
    /// `ROLLBACK [WORK] [AND [NO] CHAIN] [[NO] RELEASE]`.
    Rollback {
        /// `AND CHAIN`: a new transaction starts at once.
        chain: bool,
        /// `RELEASE`: the server closes the connection afterwards.
        release: bool,
    },
    /// `SAVEPOINT name`.
    Savepoint,
    /// `RELEASE SAVEPOINT name`.
    ReleaseSavepoint,
    /// `ROLLBACK [WORK] TO [SAVEPOINT] name`: not a transaction end.
    RollbackToSavepoint,
}

/// One tracked change to a session variable, replayable on another backend
/// connection. Names are lower-cased and canonical (`tx_isolation` →
/// `transaction_isolation`, `tx_read_only` → `transaction_read_only`);
/// values are the statement's source text, verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VarChange {
    /// `SET [SESSION] name = value`; replay as `SET SESSION name = value`.
    Set {
        /// Canonical variable name.
        name: String,
        /// Source text of the value, e.g. `'STRICT_TRANS_TABLES'`, `1`, `ON`.
        value: String,
    },
    /// `SET [SESSION] name = DEFAULT`: back to the global value.
    Reset {
        /// Canonical variable name.
        name: String,
    },
    /// `SET NAMES charset [COLLATE collation]` (or `SET NAMES DEFAULT`):
    /// sets `character_set_client`, `character_set_results` and
    /// `character_set_connection` (and `collation_connection`).
    Names {
        /// Source text of the charset (`utf8mb4`, `'utf8mb4'`, `DEFAULT`).
        charset: String,
        /// Source text of the collation, if given.
        collation: Option<String>,
    },
    /// `SET CHARACTER SET cs` / `SET CHARSET cs`: sets
    /// `character_set_client` and `character_set_results` to `cs` and
    /// `character_set_connection` to `character_set_database`.
    CharacterSet {
        /// Source text of the charset (`latin1`, `'utf8mb4'`, `DEFAULT`).
        charset: String,
    },
}

/// Why a session must stay on its backend connection. [`PinReason::code`]
/// gives a short stable label for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PinReason {
    /// A user variable `@name` appears anywhere (outside strings/comments).
    UserVariable,
    /// `CREATE TEMPORARY TABLE`, `DROP TEMPORARY TABLE`.
    TemporaryTable,
    /// `GET_LOCK(` (or the locking-service `service_get_*_locks(`).
    GetLock,
    /// Table or instance locks; reported through [`MyEffect::LockTables`].
    LockTables,
    /// `SQL_CALC_FOUND_ROWS`: the row count `FOUND_ROWS()` reads next is
    /// known only to the server.
    FoundRows,
    /// Text-protocol `PREPARE`, `EXECUTE`, `DEALLOCATE|DROP PREPARE`.
    Prepare,
    /// `HANDLER t OPEN|READ|CLOSE`.
    Handler,
    /// `SET ROLE ...`.
    SetRole,
    /// `SET` of a session variable that is not tracked (or `SET RESOURCE GROUP`).
    SetUntracked,
    /// `SET` of a tracked variable to an expression that cannot be replayed
    /// verbatim (system variables, subqueries, function calls, `?`).
    SetExpression,
    /// `XA START|BEGIN|END|PREPARE|COMMIT|ROLLBACK`.
    Xa,
    /// `CALL proc(...)`: a procedure may change any session state.
    Call,
    /// MariaDB `BEGIN NOT ATOMIC ... END` compound statement.
    CompoundStatement,
    /// A `SET`/`USE` form the classifier does not understand, or a
    /// `sql_mode` value it cannot read.
    Unrecognized,
}

impl PinReason {
    /// Every reason, for metrics registration.
    pub const ALL: [PinReason; 14] = [
        PinReason::UserVariable,
        PinReason::TemporaryTable,
        PinReason::GetLock,
        PinReason::LockTables,
        PinReason::FoundRows,
        PinReason::Prepare,
        PinReason::Handler,
        PinReason::SetRole,
        PinReason::SetUntracked,
        PinReason::SetExpression,
        PinReason::Xa,
        PinReason::Call,
        PinReason::CompoundStatement,
        PinReason::Unrecognized,
    ];

    /// Short stable label, e.g. `user_variable`.
    pub fn code(self) -> &'static str {
        match self {
            PinReason::UserVariable => "user_variable",
            PinReason::TemporaryTable => "temporary_table",
            PinReason::GetLock => "get_lock",
            PinReason::LockTables => "lock_tables",
            PinReason::FoundRows => "found_rows",
            PinReason::Prepare => "prepare",
            PinReason::Handler => "handler",
            PinReason::SetRole => "set_role",
            PinReason::SetUntracked => "set_untracked",
            PinReason::SetExpression => "set_expression",
            PinReason::Xa => "xa",
            PinReason::Call => "call",
            PinReason::CompoundStatement => "compound_statement",
            PinReason::Unrecognized => "unrecognized",
        }
    }
}

/// Informational facts about a plain statement: what it reads of, or does
/// to, the per-connection results of the statement before it (MySQL
/// Reference Manual §14.15 "Information Functions"), which the proxy moves
/// between backend connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Info {
    /// `INSERT` / `REPLACE`: may set the connection's `LAST_INSERT_ID()`.
    pub inserts: bool,
    /// Reads `LAST_INSERT_ID()`, `@@last_insert_id` or `@@identity`.
    pub reads_last_insert_id: bool,
    /// Calls `LAST_INSERT_ID(expr)`, which sets the value the next
    /// `LAST_INSERT_ID()` returns.
    pub sets_last_insert_id: bool,
    /// Calls `ROW_COUNT()`: the previous statement's affected rows.
    pub reads_row_count: bool,
    /// Calls `FOUND_ROWS()`: the previous `SELECT`'s row count.
    pub reads_found_rows: bool,
    /// Reads the previous statement's diagnostics: `SHOW WARNINGS|ERRORS`,
    /// `SHOW COUNT(*) WARNINGS|ERRORS`, `GET DIAGNOSTICS`,
    /// `@@warning_count`, `@@error_count`.
    pub reads_diagnostics: bool,
    /// Calls `CONNECTION_ID()`: a proxy answers its own id (the one its
    /// handshake gave the client, which `KILL` takes), not the backend's.
    pub reads_connection_id: bool,
}

impl Info {
    /// No facts: an ordinary read or write.
    pub const NONE: Info = Info {
        inserts: false,
        reads_last_insert_id: false,
        sets_last_insert_id: false,
        reads_row_count: false,
        reads_found_rows: false,
        reads_diagnostics: false,
        reads_connection_id: false,
    };

    /// Both statements' facts.
    pub fn or(self, o: Info) -> Info {
        Info {
            inserts: self.inserts || o.inserts,
            reads_last_insert_id: self.reads_last_insert_id || o.reads_last_insert_id,
            sets_last_insert_id: self.sets_last_insert_id || o.sets_last_insert_id,
            reads_row_count: self.reads_row_count || o.reads_row_count,
            reads_found_rows: self.reads_found_rows || o.reads_found_rows,
            reads_diagnostics: self.reads_diagnostics || o.reads_diagnostics,
            reads_connection_id: self.reads_connection_id || o.reads_connection_id,
        }
    }
}

/// What one statement does to session state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MyEffect {
    /// No effect on session state (reads, writes, DDL, SHOW, ...).
    Plain(Info),
    /// Transaction control (informational).
    Transaction(TxCommand),
    /// `SET TRANSACTION ...` without a scope: applies to the next
    /// transaction only (informational, no pin).
    NextTransaction,
    /// `USE db`: the database name, unquoted.
    Use(String),
    /// Tracked session-variable changes, in statement order (global parts
    /// of a mixed `SET` are left out: the statement itself applies them).
    Set(Vec<VarChange>),
    /// `SET GLOBAL|PERSIST|PERSIST_ONLY ...` / `SET @@global.x = ...` (every
    /// part global): no session effect.
    Global,
    /// `LOCK TABLE[S]`, `FLUSH TABLES ... WITH READ LOCK | FOR EXPORT`,
    /// `LOCK INSTANCE FOR BACKUP`, MariaDB `BACKUP STAGE`/`BACKUP LOCK`:
    /// pins until a successful [`MyEffect::UnlockTables`].
    LockTables,
    /// `UNLOCK TABLE[S]`, `UNLOCK INSTANCE`, `BACKUP STAGE END`, `BACKUP UNLOCK`.
    UnlockTables,
    /// `LOAD DATA|XML ... LOCAL INFILE`: the proxy refuses it.
    LoadDataLocal,
    /// State that cannot move to another backend connection.
    Pin(PinReason),
    /// `KILL [HARD|SOFT] [CONNECTION|QUERY] id`: the id is one the proxy
    /// gave (the handshake's connection id), so the proxy answers it.
    Kill(Kill),
    /// A `KILL` form the proxy cannot map to one of its own sessions
    /// (`KILL USER name`, `KILL QUERY ID query_id`, an expression): it
    /// would reach every session of a shared backend user, so it is refused.
    KillUnsupported,
    /// `SHOW [FULL] PROCESSLIST`: a proxy lists its own sessions (the ids
    /// `KILL` and `CONNECTION_ID()` use), not the backend's threads.
    ProcessList { full: bool },
}

/// What a `KILL` statement asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    /// `KILL QUERY`: stop the statement; otherwise the connection too.
    pub query_only: bool,
    pub id: u64,
}

impl MyEffect {
    /// A plain statement with no informational facts.
    pub const PLAIN: MyEffect = MyEffect::Plain(Info::NONE);

    /// The pin this effect causes, if any ([`MyEffect::LockTables`] gives
    /// [`PinReason::LockTables`]).
    pub fn pin_reason(&self) -> Option<PinReason> {
        match self {
            MyEffect::Pin(reason) => Some(*reason),
            MyEffect::LockTables => Some(PinReason::LockTables),
            _ => None,
        }
    }
}
