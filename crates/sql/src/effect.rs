//! The result types: what one statement does to session state.

/// Lifetime of a `SET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `SET` / `SET SESSION` / `set_config(.., false)`: lasts for the session.
    Session,
    /// `SET LOCAL` / `set_config(.., true)`: reverts at transaction end.
    Local,
}

/// Transaction-control commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxCommand {
    /// `BEGIN`, `START TRANSACTION`.
    Begin,
    /// `COMMIT`, `END`.
    Commit,
    /// `ROLLBACK`, `ABORT`.
    Rollback,
    /// `SAVEPOINT name`.
    Savepoint,
    /// `RELEASE [SAVEPOINT] name`.
    Release,
    /// `ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] name`.
    RollbackTo,
    /// `PREPARE TRANSACTION 'gid'`.
    PrepareTransaction,
    /// `COMMIT PREPARED 'gid'`.
    CommitPrepared,
    /// `ROLLBACK PREPARED 'gid'`.
    RollbackPrepared,
}

/// What `DISCARD` throws away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiscardKind {
    /// `DISCARD ALL`.
    All,
    /// `DISCARD PLANS`.
    Plans,
    /// `DISCARD SEQUENCES`.
    Sequences,
    /// `DISCARD TEMP` / `DISCARD TEMPORARY`.
    Temp,
}

/// Why a session must stay on its backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PinReason {
    /// `CREATE [GLOBAL|LOCAL] TEMP|TEMPORARY ...`, objects created in or
    /// referencing `pg_temp.`, `SELECT ... INTO TEMP ...`.
    TempTable,
    /// A session-level advisory lock function (`pg_advisory_lock`,
    /// `pg_advisory_lock_shared`, `pg_try_advisory_lock`,
    /// `pg_try_advisory_lock_shared`) appears in the statement.
    AdvisoryLock,
    /// `LISTEN channel`.
    Listen,
    /// `DECLARE name ... CURSOR WITH HOLD ...`.
    CursorWithHold,
    /// `SET [SESSION] ROLE ...` (or `SET role = ...`, `set_config('role', ..)`).
    SetRole,
    /// `SET [SESSION] SESSION AUTHORIZATION ...`.
    SetSessionAuthorization,
    /// `LOAD 'file'`.
    Load,
    /// A `DO` block whose body runs `SET` or `RESET` (a PL/pgSQL statement,
    /// or `EXECUTE` of a string that starts with one): a session-level
    /// setting the proxy cannot see the value of.
    SetInBlock,
    /// Unknown first keyword, malformed `SET`/`RESET`, a `set_config` call
    /// that is not a plain-literal `SELECT set_config(...)`, or a setting that
    /// changes how SQL text is lexed. The caller should pin conservatively.
    Unrecognized,
}

impl PinReason {
    /// Short stable label, e.g. for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            PinReason::TempTable => "temp_table",
            PinReason::AdvisoryLock => "advisory_lock",
            PinReason::Listen => "listen",
            PinReason::CursorWithHold => "cursor_with_hold",
            PinReason::SetRole => "set_role",
            PinReason::SetSessionAuthorization => "set_session_authorization",
            PinReason::Load => "load",
            PinReason::SetInBlock => "set_in_do_block",
            PinReason::Unrecognized => "unrecognized",
        }
    }
}

/// What one statement does to session state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// No effect on session state (plain DML/DDL/SELECT, SHOW, etc.).
    None,
    /// Transaction control.
    Transaction(TxCommand),
    /// A tracked setting. `name` is lower-cased (quoted identifiers keep their
    /// case but lose the quotes); `value` is the raw SQL of the value list,
    /// replayable as `SET name TO <value>` (for `set_config` it is re-quoted
    /// as a literal). `SET LOCAL x TO DEFAULT` is reported with value
    /// `DEFAULT` and [`Scope::Local`].
    Set {
        /// Parameter name.
        name: String,
        /// Raw SQL value list.
        value: String,
        /// Session or transaction lifetime.
        scope: Scope,
    },
    /// `RESET name`, or a session-level `SET name TO DEFAULT`.
    Reset {
        /// Parameter name, lower-cased.
        name: String,
    },
    /// `RESET ALL`.
    ResetAll,
    /// `DISCARD ...`.
    Discard(DiscardKind),
    /// SQL-level `PREPARE name [ (types) ] AS ...`.
    Prepare {
        /// Statement name.
        name: String,
    },
    /// `EXECUTE name [(args)]` (also `EXPLAIN ... EXECUTE name`).
    Execute {
        /// Statement name.
        name: String,
    },
    /// `DEALLOCATE [PREPARE] name | ALL`; `None` means `ALL`.
    Deallocate {
        /// Statement name, `None` for `ALL`.
        name: Option<String>,
    },
    /// `ALTER ROLE|USER|DATABASE ... SET|RESET ...`: what new sessions
    /// start with changed on the server. Pooled connections, whose sessions
    /// started before, do not see it; new connections do.
    Defaults,
    /// State that cannot move to another backend connection.
    Pin(PinReason),
}
