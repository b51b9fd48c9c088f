//! Statement classification: dispatch on the first key word, then the
//! whole-statement scan (user variables, locking and information
//! functions). Statement forms follow the MySQL Reference Manual §15 "SQL
//! Statements" and the MariaDB KB "SQL Statements". Allocation-free unless
//! the effect itself carries a name or value.

use super::Dialect;
use super::admin::{backup, flush, load, show};
use super::cursor::Cursor;
use super::effect::{Info, MyEffect, PinReason};
use super::lexer::Kind;
use super::scan::{needs_scan, scan};
use super::set::classify_set;
use super::split::{OTHER_OBJECTS, PROGRAMS, split_statements};
use super::tx::classify_tx;

/// Longer than any key word we dispatch on (`deallocate`).
const MAX_KEYWORD: usize = 12;

/// How many `SET STATEMENT ... FOR` levels we follow.
const MAX_NESTING: u8 = 4;

/// What the classifier needs besides the statement text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub(crate) dialect: Dialect,
    pub(crate) extra_tracked: &'a [&'a str],
    pub(crate) nesting: u8,
}

/// Classifies one statement (as returned by [`split_statements`], or the
/// text of a `COM_STMT_PREPARE`).
pub fn classify(stmt: &str, dialect: Dialect) -> MyEffect {
    classify_with(stmt, dialect, &[])
}

/// Like [`classify`], but session variables named in `extra_tracked` (any
/// case) are tracked like the built-in list: a plain `SET` of one is
/// reported as a [`super::VarChange`] for replay instead of pinning with
/// [`PinReason::SetUntracked`].
pub fn classify_with(stmt: &str, dialect: Dialect, extra_tracked: &[&str]) -> MyEffect {
    classify_in(
        stmt,
        Ctx {
            dialect,
            extra_tracked,
            nesting: 0,
        },
    )
}

/// Splits `sql` (a multi-statement `COM_QUERY`) and classifies every statement.
pub fn classify_all(sql: &str, dialect: Dialect) -> Vec<MyEffect> {
    split_statements(sql, dialect)
        .into_iter()
        .map(|s| classify(s, dialect))
        .collect()
}

pub(crate) fn classify_in(stmt: &str, ctx: Ctx<'_>) -> MyEffect {
    if ctx.nesting > MAX_NESTING {
        return MyEffect::Pin(PinReason::Unrecognized);
    }
    let ctx = Ctx {
        nesting: ctx.nesting + 1,
        ..ctx
    };
    let mut cur = Cursor::new(stmt, ctx.dialect);
    while cur.eat_punct("(") {}
    let mut buf = [0u8; MAX_KEYWORD];
    let kw: &[u8] = match cur.next() {
        Some(first) if first.kind == Kind::Word && first.end - first.start <= MAX_KEYWORD => {
            let text = cur.text(first).as_bytes();
            let kw = &mut buf[..text.len()];
            kw.copy_from_slice(text);
            kw.make_ascii_lowercase();
            kw
        }
        _ => b"",
    };
    let (effect, scan_after) = by_keyword(kw, &mut cur, ctx);
    if !scan_after || matches!(effect, MyEffect::Pin(_) | MyEffect::LoadDataLocal) || !needs_scan(stmt) {
        return effect;
    }
    let found = scan(stmt, ctx.dialect);
    match (found.pin, effect) {
        (Some(reason), _) => MyEffect::Pin(reason),
        (None, MyEffect::Plain(info)) => MyEffect::Plain(info.or(found.info)),
        (None, effect) => effect,
    }
}

/// The effect by first key word, and whether the whole-statement scan
/// applies (not to stored-program definitions, whose bodies do not run).
fn by_keyword(kw: &[u8], cur: &mut Cursor<'_>, ctx: Ctx<'_>) -> (MyEffect, bool) {
    if let Some(effect) = classify_tx(kw, cur) {
        return (effect, true);
    }
    let effect = match kw {
        b"set" => classify_set(cur, ctx),
        b"use" => use_db(cur),
        b"insert" | b"replace" => MyEffect::Plain(Info {
            inserts: true,
            ..Info::NONE
        }),
        b"create" => return create(cur),
        b"drop" if cur.peek_word("temporary") => MyEffect::Pin(PinReason::TemporaryTable),
        b"drop" if cur.peek_word("prepare") => MyEffect::Pin(PinReason::Prepare),
        b"prepare" | b"execute" | b"deallocate" => MyEffect::Pin(PinReason::Prepare),
        b"handler" => MyEffect::Pin(PinReason::Handler),
        b"call" => MyEffect::Pin(PinReason::Call),
        b"lock" if cur.peek_word("tables") || cur.peek_word("table") => MyEffect::LockTables,
        b"lock" if cur.eat_words(&["instance", "for", "backup"]) => MyEffect::LockTables,
        b"unlock" => MyEffect::UnlockTables,
        b"flush" => flush(cur),
        b"backup" => backup(cur),
        b"load" => load(cur),
        b"show" => show(cur),
        b"get" if cur.eat_word("diagnostics") || cur.eat_words(&["current", "diagnostics"]) => diagnostics(),
        b"get" if cur.eat_words(&["stacked", "diagnostics"]) => diagnostics(),
        b"kill" => kill(cur),
        _ => MyEffect::PLAIN,
    };
    (effect, true)
}

/// `KILL [HARD | SOFT] [CONNECTION | QUERY] thread_id` (MariaDB KB "KILL");
/// any other form is [`MyEffect::KillUnsupported`].
fn kill(cur: &mut Cursor<'_>) -> MyEffect {
    let _ = cur.eat_word("hard") || cur.eat_word("soft");
    let query_only = cur.eat_word("query");
    if !query_only {
        cur.eat_word("connection");
    }
    let id = match cur.next() {
        Some(t) if t.kind == Kind::Number => cur.text(t).parse::<u64>().ok(),
        _ => None,
    };
    while cur.eat_punct(";") {}
    match id {
        Some(id) if cur.peek().is_none() => MyEffect::Kill(super::effect::Kill { query_only, id }),
        _ => MyEffect::KillUnsupported,
    }
}

fn diagnostics() -> MyEffect {
    MyEffect::Plain(Info {
        reads_diagnostics: true,
        ..Info::NONE
    })
}

/// `USE db`: a word or quoted identifier, alone.
fn use_db(cur: &mut Cursor<'_>) -> MyEffect {
    let name = match cur.next() {
        Some(t) if t.kind == Kind::Word => cur.text(t).to_owned(),
        Some(t) if t.kind == Kind::QuotedIdent => {
            let text = cur.text(t);
            let q = &text[..1];
            match text.get(1..).and_then(|s| s.strip_suffix(q)) {
                Some(inner) if !inner.is_empty() => inner.replace(&format!("{q}{q}"), q),
                _ => return MyEffect::Pin(PinReason::Unrecognized),
            }
        }
        _ => return MyEffect::Pin(PinReason::Unrecognized),
    };
    match cur.at_end() {
        true => MyEffect::Use(name),
        false => MyEffect::Pin(PinReason::Unrecognized),
    }
}

/// `CREATE [OR REPLACE] [DEFINER = ...] [...] kind ...`: the first object
/// kind decides. Temporary tables pin; stored-program definitions are
/// plain and not scanned (their bodies run later, in whoever calls them).
fn create(cur: &mut Cursor<'_>) -> (MyEffect, bool) {
    for _ in 0..32 {
        let Some(tok) = cur.next() else { break };
        if tok.kind != Kind::Word {
            continue;
        }
        let w = cur.text(tok);
        if w.eq_ignore_ascii_case("temporary") {
            return (MyEffect::Pin(PinReason::TemporaryTable), true);
        }
        if PROGRAMS.iter().any(|k| w.eq_ignore_ascii_case(k)) {
            return (MyEffect::PLAIN, false);
        }
        if OTHER_OBJECTS.iter().any(|k| w.eq_ignore_ascii_case(k)) {
            break;
        }
    }
    (MyEffect::PLAIN, true)
}
