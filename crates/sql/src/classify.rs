//! Statement classification: dispatch on the first key word, then the
//! function scan. Allocation-free unless the effect itself carries a name.

use crate::cursor::Cursor;
use crate::declare::declares_with_hold;
use crate::effect::{Effect, PinReason};
use crate::lexer::Kind;
use crate::prepared::{classify_deallocate, classify_execute, classify_prepare};
use crate::reset::{classify_discard, classify_reset};
use crate::scan::{Prefilter, do_block_sets, prefilter, scan_functions};
use crate::set::classify_set;
use crate::set_config::simple_set_config;
use crate::split::split_statements;
use crate::temp::{create_is_temp, select_into_is_temp};
use crate::transaction::classify_tx;

/// Longer than any key word we dispatch on (`checkpoint`, `deallocate`).
const MAX_KEYWORD: usize = 12;

/// Classifies one statement (as returned by [`split_statements`]), e.g. the
/// text of a Parse message.
pub fn classify(stmt: &str) -> Effect {
    classify_inner(stmt, true)
}

/// Splits `sql` (a simple-Query string) and classifies every statement.
pub fn classify_all(sql: &str) -> Vec<Effect> {
    split_statements(sql).into_iter().map(classify).collect()
}

fn classify_inner(stmt: &str, allow_explain: bool) -> Effect {
    let mut cur = Cursor::new(stmt);
    let mut parens = 0usize;
    while cur.eat_punct(b'(') {
        parens += 1;
    }
    let Some(first) = cur.next() else {
        return match parens {
            0 => Effect::None,
            _ => Effect::Pin(PinReason::Unrecognized),
        };
    };
    let mut buf = [0u8; MAX_KEYWORD];
    let text = cur.text(first).as_bytes();
    if first.kind != Kind::Word || text.len() > MAX_KEYWORD {
        return Effect::Pin(PinReason::Unrecognized);
    }
    let kw = &mut buf[..text.len()];
    kw.copy_from_slice(text);
    kw.make_ascii_lowercase();
    let kw: &[u8] = kw;

    let hits = prefilter(stmt, matches!(kw, b"select" | b"with" | b"values"));
    let simple = match kw {
        b"select" if hits.functions => simple_set_config(cur.clone(), parens),
        _ => None,
    };
    if let Some(effect) = simple {
        return effect;
    }
    let effect = by_keyword(kw, &mut cur, stmt, hits, allow_explain);
    if matches!(effect, Effect::Pin(_)) || !hits.functions {
        return effect;
    }
    match scan_functions(stmt, kw == b"do") {
        Some(reason) => Effect::Pin(reason),
        None => effect,
    }
}

fn by_keyword(kw: &[u8], cur: &mut Cursor<'_>, stmt: &str, hits: Prefilter, allow_explain: bool) -> Effect {
    if let Some(effect) = classify_tx(kw, cur) {
        return effect;
    }
    match kw {
        b"select" | b"with" | b"values" if hits.into && select_into_is_temp(cur) => Effect::Pin(PinReason::TempTable),
        b"create" if create_is_temp(cur) => Effect::Pin(PinReason::TempTable),
        b"declare" if declares_with_hold(cur) => Effect::Pin(PinReason::CursorWithHold),
        b"set" => classify_set(cur),
        b"reset" => classify_reset(cur),
        b"discard" => classify_discard(cur),
        b"prepare" => classify_prepare(cur),
        b"execute" => classify_execute(cur),
        b"deallocate" => classify_deallocate(cur),
        b"listen" => Effect::Pin(PinReason::Listen),
        b"load" => Effect::Pin(PinReason::Load),
        b"do" if do_block_sets(stmt) => Effect::Pin(PinReason::SetInBlock),
        b"explain" if allow_explain => explain(cur, stmt),
        b"alter" if alters_session_defaults(cur) => Effect::Defaults,
        b"select" | b"insert" | b"update" | b"delete" | b"merge" | b"with" | b"values" | b"table" | b"copy"
        | b"show" | b"explain" | b"analyze" | b"analyse" | b"vacuum" | b"create" | b"alter" | b"drop" | b"truncate"
        | b"grant" | b"revoke" | b"comment" | b"lock" | b"do" | b"call" | b"notify" | b"unlisten" | b"fetch"
        | b"move" | b"close" | b"checkpoint" | b"reindex" | b"cluster" | b"refresh" | b"security" | b"import"
        | b"reassign" | b"declare" => Effect::None,
        _ => Effect::Pin(PinReason::Unrecognized),
    }
}

/// `ALTER {ROLE | USER | DATABASE} ... {SET | RESET} ...` (also `IN
/// DATABASE`, `ALL`): the per-role and per-database defaults a new session
/// starts with (PostgreSQL "ALTER ROLE", "ALTER DATABASE"). `cur` is just
/// after `ALTER`. `ALTER DATABASE ... SET TABLESPACE` counts too, harmlessly.
fn alters_session_defaults(cur: &mut Cursor<'_>) -> bool {
    if !(cur.eat_word("role") || cur.eat_word("user") || cur.eat_word("database")) {
        return false;
    }
    while let Some(tok) = cur.next() {
        if cur.is_word(Some(tok), "set") || cur.is_word(Some(tok), "reset") {
            return true;
        }
    }
    false
}

/// `EXPLAIN [ (options) | ANALYZE | VERBOSE ...] statement`: with ANALYZE the
/// inner statement runs, so its pins (and the prepared statement an
/// `EXECUTE` needs) carry over; other inner effects do not.
fn explain(cur: &mut Cursor<'_>, stmt: &str) -> Effect {
    if cur.eat_punct(b'(') {
        let mut depth = 1usize;
        while depth > 0 {
            let Some(tok) = cur.next() else { return Effect::None };
            if cur.is_punct(Some(tok), b'(') {
                depth += 1;
            } else if cur.is_punct(Some(tok), b')') {
                depth -= 1;
            }
        }
    }
    while cur.eat_word("analyze") || cur.eat_word("analyse") || cur.eat_word("verbose") {}
    let Some(inner) = cur.peek() else { return Effect::None };
    match classify_inner(&stmt[inner.start..], false) {
        effect @ (Effect::Pin(_) | Effect::Execute { .. }) => effect,
        _ => Effect::None,
    }
}
