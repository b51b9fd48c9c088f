//! Read/write routing of one PostgreSQL statement for a "split" endpoint,
//! which sends a transaction known to be read-only to a replica and
//! everything else to the writer ([`route`]). The [`Route`] and
//! [`WriteReason`] types are shared with [`crate::mysql::route`].
//!
//! **Fail-safe rule:** a statement is [`Route::Read`] only when every check
//! below passes; anything the router does not understand is
//! [`Route::Write`] (with [`WriteReason::Unknown`] if nothing more specific
//! applies). Misrouting a read to the writer costs load; misrouting a write
//! to a replica is a bug, so every doubt goes to the writer. Text the server
//! would reject as a syntax error may land anywhere: it has no effect.
//!
//! A query (`SELECT`, `WITH`, `VALUES`, `TABLE`, possibly parenthesized) is
//! a read when, outside string constants, quoted identifiers and comments
//! (tokenized by [`crate::lexer`]):
//! * it has no locking clause (PostgreSQL docs, SELECT, "The Locking
//!   Clause": `FOR [NO KEY] UPDATE`, `FOR [KEY] SHARE`, with any `OF`,
//!   `NOWAIT` or `SKIP LOCKED`);
//! * it has no data-modifying statement (docs §7.8.4 "Data-Modifying
//!   Statements in WITH": `INSERT`/`UPDATE`/`DELETE`/`MERGE` in a CTE or as
//!   the main statement after `WITH`);
//! * it has no `INTO` (`SELECT ... INTO new_table` creates a table);
//! * every function call (an identifier followed by `(`) is an allow-listed
//!   built-in or listed by the operator ([`route_with`]); the lists and
//!   the deny-list reasons live in `route/functions.rs`;
//! * no `;` is followed by more SQL (callers split statements first).
//!
//! `SHOW` is a read, except `SHOW transaction_read_only`/`in_hot_standby`,
//! which describe the server's role and so go to the writer (as do
//! `pg_is_in_recovery()` and `current_setting('transaction_read_only')`):
//! drivers probing for a writable server (libpq `target_session_attrs`,
//! pgjdbc `targetServerType`) must see the writer. `EXPLAIN` is routed by
//! the statement it explains (with `ANALYZE` that statement runs).
//! `BEGIN`/`START TRANSACTION` give [`Route::Begin`].
//!
//! Effects reached indirectly (functions called from views, rules,
//! triggers, user-defined operators and casts, column defaults, row-level
//! security policies) are invisible to a text classifier; a hot standby
//! rejects such writes ("cannot execute ... in a read-only transaction")
//! rather than performing them. Session pinning (temporary tables,
//! prepared statements, cursors) is the caller's business: see
//! [`crate::classify()`].

pub(crate) mod functions;

use crate::cursor::Cursor;
use crate::lexer::{Kind, Token};
use functions::{Name, call_reason, is_keyword};

/// Where a statement may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// May run on a replica.
    Read,
    /// Must run on the writer (writes, locks, side effects, session-bound
    /// results, or unknown).
    Write(WriteReason),
    /// Starts a transaction block: read-only (`BEGIN READ ONLY`, `START
    /// TRANSACTION READ ONLY`) or not.
    Begin {
        /// `READ ONLY` is among the transaction modes (and `READ WRITE` is not).
        read_only: bool,
    },
}

/// Why a statement must run on the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteReason {
    /// Changes data, schema or files: DML, DDL, `SELECT ... INTO`,
    /// data-modifying CTEs, `COPY ... FROM`, MySQL `INTO OUTFILE`.
    Modifies,
    /// Takes locks: a locking clause (`FOR UPDATE`, `LOCK IN SHARE MODE`,
    /// ...), `LOCK`, advisory or named locks (`pg_advisory_lock`,
    /// `GET_LOCK`).
    Locks,
    /// Calls a function that has side effects, or one not known to be free
    /// of them (every user-defined function not listed as read-only).
    SideEffectFunction,
    /// The result belongs to this session: `currval`, `lastval`,
    /// `LAST_INSERT_ID()`, `FOUND_ROWS()`, user variables, `SHOW WARNINGS`.
    SessionBound,
    /// Only works on, or describes, the writer: xid assignment, WAL
    /// positions, `pg_is_in_recovery()`, `@@read_only`, replication status.
    WriterOnly,
    /// Changes or uses session state: `SET`, `PREPARE`/`EXECUTE`, cursors,
    /// `LISTEN`, `USE`.
    SessionState,
    /// Ends or marks a transaction: `COMMIT`, `ROLLBACK`, `SAVEPOINT`, XA.
    TransactionControl,
    /// Not understood (including empty text, `CALL`, `DO`, and a `;`
    /// followed by more SQL).
    Unknown,
}

impl WriteReason {
    /// Every reason, e.g. to pre-register metric labels.
    pub const ALL: [WriteReason; 8] = [
        WriteReason::Modifies,
        WriteReason::Locks,
        WriteReason::SideEffectFunction,
        WriteReason::SessionBound,
        WriteReason::WriterOnly,
        WriteReason::SessionState,
        WriteReason::TransactionControl,
        WriteReason::Unknown,
    ];

    /// Stable snake_case label for logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            WriteReason::Modifies => "modifies",
            WriteReason::Locks => "locks",
            WriteReason::SideEffectFunction => "side_effect_function",
            WriteReason::SessionBound => "session_bound",
            WriteReason::WriterOnly => "writer_only",
            WriteReason::SessionState => "session_state",
            WriteReason::TransactionControl => "transaction_control",
            WriteReason::Unknown => "unknown",
        }
    }
}

/// Longer than any key word we dispatch on.
const MAX_KEYWORD: usize = 12;

/// How many tokens a CTE column list may hold for us to recognise it.
const MAX_CTE_COLUMNS: usize = 256;

const UNKNOWN: Route = Route::Write(WriteReason::Unknown);

/// Routes one PostgreSQL statement (as returned by
/// [`crate::split_statements`]). Every user-defined function is a write.
pub fn route(stmt: &str) -> Route {
    route_with(stmt, &[])
}

/// Like [`route`], but calls of the functions in `read_only_functions` are
/// reads. Names are matched as PostgreSQL resolves them: an unquoted call
/// folds to lower case, so list names as stored (usually lower case). A
/// bare `name` matches only unqualified calls; `schema.name` matches only
/// calls qualified with that schema. Deny-listed built-ins stay writes.
pub fn route_with(stmt: &str, read_only_functions: &[&str]) -> Route {
    route_in(stmt, read_only_functions, 0)
}

fn route_in(stmt: &str, ro: &[&str], depth: u8) -> Route {
    let mut cur = Cursor::new(stmt);
    let mut parens = false;
    while cur.eat_punct(b'(') {
        parens = true;
    }
    let Some(first) = cur.next() else { return UNKNOWN };
    let text = cur.text(first).as_bytes();
    if first.kind != Kind::Word || text.len() > MAX_KEYWORD {
        return UNKNOWN;
    }
    let mut buf = [0u8; MAX_KEYWORD];
    let kw = &mut buf[..text.len()];
    kw.copy_from_slice(text);
    kw.make_ascii_lowercase();
    match &*kw {
        b"select" | b"with" | b"values" | b"table" => query(stmt, ro),
        _ if parens => UNKNOWN,
        b"explain" if depth == 0 => explain(&mut cur, stmt, ro),
        b"show" => show(&mut cur),
        b"begin" => begin(&mut cur),
        b"start" if cur.eat_word("transaction") => begin(&mut cur),
        b"prepare" if cur.peek_word("transaction") => Route::Write(WriteReason::TransactionControl),
        b"copy" => copy(&mut cur),
        kw => Route::Write(keyword_reason(kw)),
    }
}

/// The reason for a statement that is never a read, by its first key word.
fn keyword_reason(kw: &[u8]) -> WriteReason {
    match kw {
        b"insert" | b"update" | b"delete" | b"merge" | b"create" | b"alter" | b"drop" | b"truncate" | b"grant"
        | b"revoke" | b"comment" | b"vacuum" | b"analyze" | b"analyse" | b"cluster" | b"reindex" | b"refresh"
        | b"import" | b"reassign" | b"security" | b"notify" => WriteReason::Modifies,
        b"lock" => WriteReason::Locks,
        b"set" | b"reset" | b"discard" | b"prepare" | b"execute" | b"deallocate" | b"listen" | b"unlisten"
        | b"declare" | b"fetch" | b"move" | b"close" | b"load" => WriteReason::SessionState,
        b"commit" | b"end" | b"rollback" | b"abort" | b"savepoint" | b"release" => WriteReason::TransactionControl,
        _ => WriteReason::Unknown,
    }
}

/// The token scan of a query; see the module docs.
fn query(stmt: &str, ro: &[&str]) -> Route {
    let mut cur = Cursor::new(stmt);
    let (mut prev, mut prev2): (Option<Token>, Option<Token>) = (None, None);
    while let Some(tok) = cur.next() {
        let found = match tok.kind {
            Kind::Word => word(&cur, tok, prev, prev2, ro),
            Kind::QuotedIdent if cur.is_punct(cur.peek(), b'(') => call(&cur, tok, prev, prev2, ro),
            Kind::Punct if cur.is_punct(Some(tok), b';') => return end_after_semicolon(&cur),
            _ => None,
        };
        if let Some(reason) = found {
            return Route::Write(reason);
        }
        (prev2, prev) = (prev, Some(tok));
    }
    Route::Read
}

/// After a `;` that ends a read: [`Route::Read`] if only `;`s follow.
fn end_after_semicolon(cur: &Cursor<'_>) -> Route {
    let mut ahead = cur.clone();
    while ahead.eat_punct(b';') {}
    match ahead.at_end() {
        true => Route::Read,
        false => UNKNOWN,
    }
}

/// An unquoted word in a query: a call, a locking clause, `INTO`, or a
/// data-modifying statement.
fn word(cur: &Cursor<'_>, tok: Token, prev: Option<Token>, prev2: Option<Token>, ro: &[&str]) -> Option<WriteReason> {
    let next = cur.peek();
    if cur.is_punct(next, b'(') {
        return call(cur, tok, prev, prev2, ro);
    }
    let is = |kw: &str| cur.text(tok).eq_ignore_ascii_case(kw);
    if is("for") && ["update", "share", "no", "key"].iter().any(|k| cur.is_word(next, k)) {
        return Some(WriteReason::Locks);
    }
    if is("into") {
        return Some(WriteReason::Modifies);
    }
    let dml = is("insert") || is("update") || is("delete") || is("merge");
    (dml && !cur.is_punct(prev, b'.')).then_some(WriteReason::Modifies)
}

/// An identifier `tok` (word or quoted) followed by `(`.
fn call(cur: &Cursor<'_>, tok: Token, prev: Option<Token>, prev2: Option<Token>, ro: &[&str]) -> Option<WriteReason> {
    let Some(name) = name_of(cur, tok) else {
        return Some(WriteReason::Unknown);
    };
    let qualified = cur.is_punct(prev, b'.');
    if !qualified {
        if !name.quoted && is_keyword(name.text) {
            return None;
        }
        // `AS alias(cols)`, `CAST(x AS type(n))`, `x::type(n)`, `FROM f() alias(cols)`.
        let cast = cur.is_punct(prev, b':') && cur.is_punct(prev2, b':');
        if cur.is_word(prev, "as") || cast || cur.is_punct(prev, b')') || cte_name(cur, prev) {
            return None;
        }
    }
    if name.is("current_setting") && names_role_setting(cur) {
        return Some(WriteReason::WriterOnly);
    }
    let schema = match qualified {
        true => match prev2.and_then(|t| name_of(cur, t)) {
            Some(schema) => Some(schema),
            None => return Some(WriteReason::SideEffectFunction),
        },
        false => None,
    };
    call_reason(schema, name, ro)
}

/// The name in a word or quoted-identifier token.
fn name_of<'a>(cur: &Cursor<'a>, tok: Token) -> Option<Name<'a>> {
    let text = cur.text(tok);
    match tok.kind {
        Kind::Word => Some(Name { text, quoted: false }),
        Kind::QuotedIdent => {
            let inner = text.strip_prefix('"').unwrap_or(text);
            let inner = inner.strip_suffix('"').unwrap_or(inner);
            Some(Name {
                text: inner,
                quoted: true,
            })
        }
        _ => None,
    }
}

/// True if the identifier before the `(` at `cur` names a CTE with a column
/// list: `WITH [RECURSIVE] name (a, b) AS [[NOT] MATERIALIZED] (`.
fn cte_name(cur: &Cursor<'_>, prev: Option<Token>) -> bool {
    if !(cur.is_word(prev, "with") || cur.is_word(prev, "recursive") || cur.is_punct(prev, b',')) {
        return false;
    }
    let mut ahead = cur.clone();
    ahead.eat_punct(b'(');
    for _ in 0..MAX_CTE_COLUMNS {
        if ahead.eat_punct(b')') {
            if !ahead.eat_word("as") {
                return false;
            }
            ahead.eat_word("not");
            ahead.eat_word("materialized");
            return ahead.is_punct(ahead.peek(), b'(');
        }
        match ahead.next() {
            Some(t) if matches!(t.kind, Kind::Word | Kind::QuotedIdent) || ahead.is_punct(Some(t), b',') => {}
            _ => return false,
        }
    }
    false
}

/// `current_setting('transaction_read_only' | 'in_hot_standby' ...)`.
fn names_role_setting(cur: &Cursor<'_>) -> bool {
    let arg = cur.peek2().filter(|t| t.kind == Kind::String);
    arg.is_some_and(|t| is_role_setting(cur.text(t).trim_matches('\'')))
}

/// Settings whose value differs between the writer and a hot standby.
fn is_role_setting(name: &str) -> bool {
    name.eq_ignore_ascii_case("transaction_read_only") || name.eq_ignore_ascii_case("in_hot_standby")
}

/// `EXPLAIN [(options)] [ANALYZE] [VERBOSE] statement`: routed by the
/// statement (with `ANALYZE` it runs; without, the writer's plan is the
/// one the client asked about).
fn explain(cur: &mut Cursor<'_>, stmt: &str, ro: &[&str]) -> Route {
    if cur.eat_punct(b'(') {
        let mut depth = 1usize;
        while depth > 0 {
            let Some(tok) = cur.next() else { return UNKNOWN };
            if cur.is_punct(Some(tok), b'(') {
                depth += 1;
            } else if cur.is_punct(Some(tok), b')') {
                depth -= 1;
            }
        }
    }
    while cur.eat_word("analyze") || cur.eat_word("analyse") || cur.eat_word("verbose") {}
    let Some(inner) = cur.peek() else { return UNKNOWN };
    match route_in(&stmt[inner.start..], ro, 1) {
        Route::Begin { .. } => UNKNOWN,
        route => route,
    }
}

/// `SHOW name | ALL | TRANSACTION ISOLATION LEVEL | ...`.
fn show(cur: &mut Cursor<'_>) -> Route {
    let Some(first) = cur.next() else { return UNKNOWN };
    if name_of(cur, first).is_some_and(|n| n.is("transaction_read_only") || n.is("in_hot_standby")) {
        return Route::Write(WriteReason::WriterOnly);
    }
    while let Some(tok) = cur.next() {
        if cur.is_punct(Some(tok), b';') {
            return end_after_semicolon(cur);
        }
    }
    Route::Read
}

/// `BEGIN [WORK | TRANSACTION] [mode [, ...]]` and `START TRANSACTION
/// [mode [, ...]]` (after `TRANSACTION`), with modes `ISOLATION LEVEL ...`,
/// `READ WRITE | READ ONLY` and `[NOT] DEFERRABLE`.
fn begin(cur: &mut Cursor<'_>) -> Route {
    let _ = cur.eat_word("work") || cur.eat_word("transaction");
    let (mut read_only, mut read_write) = (false, false);
    loop {
        if cur.eat_words(&["isolation", "level"]) {
            let level = cur.eat_word("serializable")
                || cur.eat_words(&["repeatable", "read"])
                || cur.eat_words(&["read", "committed"])
                || cur.eat_words(&["read", "uncommitted"]);
            if !level {
                return UNKNOWN;
            }
        } else if cur.eat_words(&["read", "only"]) {
            read_only = true;
        } else if cur.eat_words(&["read", "write"]) {
            read_write = true;
        } else if !(cur.eat_words(&["not", "deferrable"]) || cur.eat_word("deferrable")) {
            break;
        }
        cur.eat_punct(b',');
    }
    while cur.eat_punct(b';') {}
    match cur.at_end() {
        true => Route::Begin {
            read_only: read_only && !read_write,
        },
        false => UNKNOWN,
    }
}

/// `COPY ... FROM` writes; `COPY ... TO` reads but uses the copy
/// sub-protocol, which we leave to the writer.
fn copy(cur: &mut Cursor<'_>) -> Route {
    let mut depth = 0usize;
    while let Some(tok) = cur.next() {
        if cur.is_punct(Some(tok), b'(') {
            depth += 1;
        } else if cur.is_punct(Some(tok), b')') {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && cur.is_word(Some(tok), "from") {
            return Route::Write(WriteReason::Modifies);
        }
    }
    UNKNOWN
}
