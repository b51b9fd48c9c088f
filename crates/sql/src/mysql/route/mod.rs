//! Read/write routing of one MySQL/MariaDB statement for a "split"
//! endpoint, which sends a transaction known to be read-only to a replica
//! and everything else to the writer ([`route`]). It returns the crate's
//! [`Route`] and [`WriteReason`].
//!
//! **Fail-safe rule:** a statement is [`Route::Read`] only when every check
//! below passes; anything the router does not understand is
//! [`Route::Write`] (with [`WriteReason::Unknown`] if nothing more specific
//! applies). Text the server would reject as a syntax error may land
//! anywhere: it has no effect.
//!
//! A query (`SELECT`, `WITH`, `VALUES`, `TABLE`, possibly parenthesized) is
//! a read when, outside strings, quoted identifiers and comments
//! (tokenized by [`super::lexer`] under the session's [`Dialect`];
//! executable comments `/*! */` are code):
//! * it has no locking read (MariaDB KB "SELECT ... FOR UPDATE", "LOCK IN
//!   SHARE MODE"; MySQL §15.2.13 `FOR UPDATE | FOR SHARE`, with any `OF`,
//!   `NOWAIT`, `SKIP LOCKED`, `WAIT n`);
//! * it has no `INTO` (MariaDB KB "SELECT INTO OUTFILE", "SELECT INTO
//!   DUMPFILE", "SELECT INTO" variables) and no `INSERT`/`UPDATE`/`DELETE`
//!   after a `WITH` clause;
//! * it reads no user variable: `@x` and `@x := ...` are
//!   [`WriteReason::SessionBound`], since user variables live in the
//!   session on the server that set them and a replica connection does not
//!   have them (an `@` the lexer takes for the one in `user@host` counts
//!   too). System variables (`@@x`, `@@session.x`, `@@global.x`) are reads,
//!   because the proxy replays tracked session settings on every backend
//!   connection, except the server-role and identity variables
//!   (`@@read_only`, `@@innodb_read_only`, `@@server_id`, ...:
//!   [`WriteReason::WriterOnly`]) and per-statement diagnostics
//!   (`@@warning_count`, `@@identity`, ...: session-bound);
//! * it uses no MariaDB sequence (KB "Sequence Overview": `NEXTVAL(s)`,
//!   `NEXT VALUE FOR s`, `SETVAL`, `LASTVAL(s)`, `PREVIOUS VALUE FOR s`,
//!   Oracle-mode `s.nextval`/`s.currval`) and no `SQL_CALC_FOUND_ROWS`;
//! * every function call (an identifier followed by `(`) is an allow-listed
//!   built-in or listed by the operator ([`route_with`]): `GET_LOCK` and
//!   the other locking functions (MariaDB KB "GET_LOCK") lock,
//!   `LAST_INSERT_ID()`, `ROW_COUNT()`, `FOUND_ROWS()` are session-bound,
//!   and stored functions may write;
//! * no `;` is followed by more SQL (callers split statements first).
//!
//! `SHOW` is a read, except the diagnostics and session counters of this
//! session (`SHOW WARNINGS`, `SHOW ERRORS`, `SHOW [SESSION] STATUS`,
//! `SHOW PROFILE[S]`), replication and binary-log status, `SHOW VARIABLES`
//! naming a server-role variable, and a `WHERE` clause that fails the
//! query checks. `DESCRIBE`/`DESC`/`EXPLAIN tbl` are reads; `EXPLAIN stmt`
//! and MariaDB `ANALYZE stmt` are routed by `stmt`. `BEGIN`/`START
//! TRANSACTION` give [`Route::Begin`].
//!
//! Effects reached indirectly (stored functions called from views,
//! triggers, generated columns) are invisible to a text classifier; a
//! replica running with `super_read_only` rejects such writes rather than
//! performing them (`read_only` alone does not stop privileged users).

mod functions;

use super::Dialect;
use super::cursor::Cursor;
use super::lexer::{Kind, Token};
use crate::route::{Route, WriteReason};
use functions::{WRITER_VARS, call_reason, is_keyword, sysvar_reason};

/// Longer than any key word we dispatch on.
const MAX_KEYWORD: usize = 12;

/// How many tokens a CTE column list may hold for us to recognise it.
const MAX_CTE_COLUMNS: usize = 256;

const UNKNOWN: Route = Route::Write(WriteReason::Unknown);

/// First key words of the statements `EXPLAIN`/`ANALYZE` may wrap.
const EXPLAINABLE: [&str; 8] = [
    "select", "with", "table", "values", "insert", "update", "delete", "replace",
];

/// Routes one MySQL/MariaDB statement (as returned by
/// [`super::split_statements`], or a `COM_STMT_PREPARE` text) lexed under
/// `dialect`. Every stored function is a write.
pub fn route(stmt: &str, dialect: Dialect) -> Route {
    route_with(stmt, dialect, &[])
}

/// Like [`route`], but calls of the functions in `read_only_functions`
/// (any case) are reads. A bare `name` matches only unqualified calls (also
/// quoted ones); `db.name` matches only calls qualified with that database.
/// Deny-listed built-ins stay writes.
pub fn route_with(stmt: &str, dialect: Dialect, read_only_functions: &[&str]) -> Route {
    route_in(
        stmt,
        Ctx {
            dialect,
            ro: read_only_functions,
        },
        0,
    )
}

#[derive(Debug, Clone, Copy)]
struct Ctx<'r> {
    dialect: Dialect,
    ro: &'r [&'r str],
}

fn route_in(stmt: &str, ctx: Ctx<'_>, depth: u8) -> Route {
    let mut cur = Cursor::new(stmt, ctx.dialect);
    let mut parens = false;
    while cur.eat_punct("(") {
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
        b"select" | b"with" | b"values" | b"table" => query(stmt, ctx),
        _ if parens => UNKNOWN,
        b"explain" | b"describe" | b"desc" if depth == 0 => explain(&mut cur, stmt, ctx),
        b"analyze" if depth == 0 => analyze(&mut cur, stmt, ctx),
        b"show" => show(&mut cur, stmt, ctx),
        b"begin" if cur.peek_word("not") => UNKNOWN,
        b"begin" => {
            cur.eat_word("work");
            begun(&mut cur, false)
        }
        b"start" if cur.eat_word("transaction") => start_transaction(&mut cur),
        kw => Route::Write(keyword_reason(kw)),
    }
}

/// The reason for a statement that is never a read, by its first key word.
fn keyword_reason(kw: &[u8]) -> WriteReason {
    match kw {
        b"insert" | b"update" | b"delete" | b"replace" | b"create" | b"alter" | b"drop" | b"truncate" | b"rename"
        | b"grant" | b"revoke" | b"load" | b"optimize" | b"repair" | b"analyze" | b"install" | b"uninstall"
        | b"import" | b"purge" | b"reset" | b"flush" | b"binlog" | b"cache" | b"change" => WriteReason::Modifies,
        b"lock" | b"unlock" | b"backup" => WriteReason::Locks,
        b"set" | b"use" | b"prepare" | b"execute" | b"deallocate" | b"handler" | b"declare" | b"open" | b"fetch"
        | b"close" => WriteReason::SessionState,
        b"commit" | b"rollback" | b"savepoint" | b"release" | b"xa" => WriteReason::TransactionControl,
        b"get" => WriteReason::SessionBound,
        _ => WriteReason::Unknown,
    }
}

/// The token scan of a query; see the module docs.
fn query(stmt: &str, ctx: Ctx<'_>) -> Route {
    let mut cur = Cursor::new(stmt, ctx.dialect);
    let (mut prev, mut prev2): (Option<Token>, Option<Token>) = (None, None);
    while let Some(tok) = cur.next() {
        let found = match tok.kind {
            Kind::Word => word(&cur, tok, prev, prev2, ctx.ro),
            Kind::QuotedIdent if cur.is_punct(cur.peek(), "(") => call(&cur, tok, prev, prev2, ctx.ro),
            Kind::UserVar => Some(WriteReason::SessionBound),
            Kind::SysVar => sysvar(cur.text(tok)),
            Kind::Punct if cur.is_punct(Some(tok), ";") => return end_after_semicolon(&mut cur),
            // `name@x`: the lexer's account-name `@`; the server may read `@x`.
            Kind::Punct if cur.is_punct(Some(tok), "@") => Some(WriteReason::SessionBound),
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
fn end_after_semicolon(cur: &mut Cursor<'_>) -> Route {
    while cur.eat_punct(";") {}
    match cur.at_end() {
        true => Route::Read,
        false => UNKNOWN,
    }
}

/// `@@name`, `@@session.name`, `` @@global.`name` ``, ...
fn sysvar(text: &str) -> Option<WriteReason> {
    let name = text.trim_start_matches('@');
    let name = name.rsplit('.').next().unwrap_or(name).trim_matches('`');
    sysvar_reason(name)
}

/// An unquoted word in a query: a call, a locking read, `INTO`, a
/// statement after `WITH`, or sequence syntax.
fn word(cur: &Cursor<'_>, tok: Token, prev: Option<Token>, prev2: Option<Token>, ro: &[&str]) -> Option<WriteReason> {
    let next = cur.peek();
    if cur.is_punct(next, "(") {
        return call(cur, tok, prev, prev2, ro);
    }
    let is = |kw: &str| cur.text(tok).eq_ignore_ascii_case(kw);
    let next_is = |kw: &str| cur.is_word(next, kw);
    if (is("for") && (next_is("update") || next_is("share"))) || (is("lock") && next_is("in")) {
        return Some(WriteReason::Locks);
    }
    if is("into") {
        return match next.is_some_and(|t| t.kind == Kind::UserVar) {
            true => Some(WriteReason::SessionBound),
            false => Some(WriteReason::Modifies),
        };
    }
    let after_dot = cur.is_punct(prev, ".");
    if (is("insert") || is("update") || is("delete") || is("replace")) && !after_dot {
        return Some(WriteReason::Modifies);
    }
    if (is("next") && next_is("value")) || (after_dot && is("nextval")) {
        return Some(WriteReason::SideEffectFunction);
    }
    let sequence_read = (is("previous") && next_is("value")) || (after_dot && is("currval"));
    (sequence_read || is("sql_calc_found_rows")).then_some(WriteReason::SessionBound)
}

/// An identifier `tok` (word or quoted) followed by `(`.
fn call(cur: &Cursor<'_>, tok: Token, prev: Option<Token>, prev2: Option<Token>, ro: &[&str]) -> Option<WriteReason> {
    let quoted = tok.kind == Kind::QuotedIdent;
    let name = ident(cur, tok);
    let qualified = cur.is_punct(prev, ".");
    if !qualified {
        if !quoted && is_keyword(name) {
            return None;
        }
        // `AS alias(cols)`, `CAST(x AS type(n))`, `(subquery) alias(cols)`.
        if cur.is_word(prev, "as") || cur.is_punct(prev, ")") || cte_name(cur, prev) {
            return None;
        }
    }
    let db = match prev2 {
        _ if !qualified => None,
        Some(t) if matches!(t.kind, Kind::Word | Kind::QuotedIdent) => Some(ident(cur, t)),
        _ => return Some(WriteReason::SideEffectFunction),
    };
    call_reason(db, name, quoted, ro)
}

/// The name in a word, or inside the quotes of a quoted identifier.
fn ident<'a>(cur: &Cursor<'a>, tok: Token) -> &'a str {
    let text = cur.text(tok);
    if tok.kind != Kind::QuotedIdent {
        return text;
    }
    let inner = text.get(1..).unwrap_or("");
    inner.strip_suffix(['`', '"']).unwrap_or(inner)
}

/// True if the identifier before the `(` at `cur` names a CTE with a column
/// list: `WITH [RECURSIVE] name (a, b) AS (`.
fn cte_name(cur: &Cursor<'_>, prev: Option<Token>) -> bool {
    if !(cur.is_word(prev, "with") || cur.is_word(prev, "recursive") || cur.is_punct(prev, ",")) {
        return false;
    }
    let mut ahead = cur.clone();
    ahead.eat_punct("(");
    for _ in 0..MAX_CTE_COLUMNS {
        if ahead.eat_punct(")") {
            return ahead.eat_word("as") && ahead.is_punct(ahead.peek(), "(");
        }
        match ahead.next() {
            Some(t) if matches!(t.kind, Kind::Word | Kind::QuotedIdent) || ahead.is_punct(Some(t), ",") => {}
            _ => return false,
        }
    }
    false
}

/// `{EXPLAIN | DESCRIBE | DESC} [EXTENDED | PARTITIONS | ANALYZE | FORMAT
/// = f]... {statement | tbl_name [col] | FOR CONNECTION id}`.
fn explain(cur: &mut Cursor<'_>, stmt: &str, ctx: Ctx<'_>) -> Route {
    loop {
        if cur.eat_word("extended") || cur.eat_word("partitions") || cur.eat_word("analyze") {
            continue;
        }
        if !skip_format(cur) {
            break;
        }
    }
    // `EXPLAIN ... INTO @var` (MySQL 8.1) and `EXPLAIN FOR CONNECTION id`,
    // whose id is a thread on the server this session talks to.
    if cur.peek_word("into") || cur.peek_word("for") {
        return Route::Write(WriteReason::SessionBound);
    }
    if let Some(route) = wrapped(cur, stmt, ctx) {
        return route;
    }
    if cur.at_end() {
        return UNKNOWN;
    }
    while let Some(tok) = cur.next() {
        if cur.is_punct(Some(tok), ";") {
            return end_after_semicolon(cur);
        }
    }
    Route::Read
}

/// MariaDB `ANALYZE [FORMAT=JSON] statement` runs the statement; any other
/// `ANALYZE` is `ANALYZE TABLE`, which updates statistics.
fn analyze(cur: &mut Cursor<'_>, stmt: &str, ctx: Ctx<'_>) -> Route {
    skip_format(cur);
    if cur.peek_word("table") {
        return Route::Write(WriteReason::Modifies);
    }
    wrapped(cur, stmt, ctx).unwrap_or(Route::Write(WriteReason::Modifies))
}

/// Skips `FORMAT [=] name`; true if there was one.
fn skip_format(cur: &mut Cursor<'_>) -> bool {
    if !cur.eat_word("format") {
        return false;
    }
    cur.eat_punct("=");
    cur.next();
    true
}

/// The route of the statement an `EXPLAIN`/`ANALYZE` wraps, if the next
/// token starts one.
fn wrapped(cur: &Cursor<'_>, stmt: &str, ctx: Ctx<'_>) -> Option<Route> {
    let inner = cur.peek()?;
    let starts = cur.is_punct(Some(inner), "(") || EXPLAINABLE.iter().any(|k| cur.is_word(Some(inner), k));
    if !starts {
        return None;
    }
    Some(match route_in(&stmt[inner.start..], ctx, 1) {
        Route::Begin { .. } => UNKNOWN,
        route => route,
    })
}

/// `SHOW ...`: see the module docs for the exceptions. A `WHERE` clause is
/// an expression and gets the query scan.
fn show(cur: &mut Cursor<'_>, stmt: &str, ctx: Ctx<'_>) -> Route {
    let global = cur.eat_word("global");
    if !global {
        let _ = cur.eat_word("session") || cur.eat_word("local");
    }
    let Some(first) = cur.next() else { return UNKNOWN };
    let is = |kw: &str| cur.is_word(Some(first), kw);
    let all_replicas = is("all") && (cur.peek_word("slaves") || cur.peek_word("replicas"));
    let writer = ["master", "binary", "slave", "replica", "replicas", "binlog", "relaylog"];
    if all_replicas || writer.iter().any(|k| is(k)) {
        return Route::Write(WriteReason::WriterOnly);
    }
    let session = ["count", "warnings", "errors", "profile", "profiles"];
    if session.iter().any(|k| is(k)) || (is("status") && !global) {
        return Route::Write(WriteReason::SessionBound);
    }
    let variables = is("variables");
    while let Some(tok) = cur.next() {
        if cur.is_punct(Some(tok), ";") {
            return end_after_semicolon(cur);
        }
        if cur.is_word(Some(tok), "where") {
            let found = query(&stmt[tok.end..], ctx);
            if found != Route::Read || !variables {
                return found;
            }
        }
        if variables && mentions_writer_var(cur.text(tok)) {
            return Route::Write(WriteReason::WriterOnly);
        }
    }
    Route::Read
}

/// True if `text` contains the name of a server-role variable, in any case.
fn mentions_writer_var(text: &str) -> bool {
    let hay = text.as_bytes();
    WRITER_VARS
        .iter()
        .any(|n| hay.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n.as_bytes())))
}

/// `START TRANSACTION [WITH CONSISTENT SNAPSHOT | READ ONLY | READ WRITE]
/// [, ...]` (after `TRANSACTION`; MySQL §15.3.1).
fn start_transaction(cur: &mut Cursor<'_>) -> Route {
    let (mut read_only, mut read_write) = (false, false);
    loop {
        if cur.eat_words(&["read", "only"]) {
            read_only = true;
        } else if cur.eat_words(&["read", "write"]) {
            read_write = true;
        } else if !cur.eat_words(&["with", "consistent", "snapshot"]) {
            break;
        }
        if !cur.eat_punct(",") {
            break;
        }
    }
    begun(cur, read_only && !read_write)
}

/// [`Route::Begin`] if nothing but `;` follows.
fn begun(cur: &mut Cursor<'_>, read_only: bool) -> Route {
    while cur.eat_punct(";") {}
    match cur.at_end() {
        true => Route::Begin { read_only },
        false => UNKNOWN,
    }
}
