//! The whole-statement scan applied after key-word dispatch: user variables
//! (MySQL Reference Manual §11.4), `GET_LOCK` (§14.14 "Locking Functions"),
//! `SQL_CALC_FOUND_ROWS`/`FOUND_ROWS()`, `LAST_INSERT_ID()`/`ROW_COUNT()`
//! and `CONNECTION_ID()` (§14.15 "Information Functions"). A cheap byte prefilter keeps the
//! common statement to one pass with no tokenizing.

use super::Dialect;
use super::effect::{Info, PinReason};
use super::lexer::{Kind, Lexer};

/// Substrings (lower case) that make a token-level scan worthwhile, besides `@`.
const NEEDLES: [&[u8]; 7] = [
    b"connection_id",
    b"is_used_lock",
    b"get_lock",
    b"service_get",
    b"found_rows",
    b"last_insert_id",
    b"row_count",
];

/// Whether `stmt` contains `@` or, ASCII case-insensitively, one of the
/// function names the scan looks for, a word at a time
/// ([`crate::words`]): every name holds an underscore, so only the words
/// with one or an `@` are looked at closer.
pub(crate) fn needs_scan(stmt: &str) -> bool {
    use crate::words::{any_index, bytes_of};
    let hay = stmt.as_bytes();
    let may_hit = |w: u64| bytes_of(w, b'_') | bytes_of(w, b'@');
    any_index(hay, may_hit, |i| match hay[i] {
        b'@' => true,
        b'_' => NEEDLES.iter().any(|n| {
            let first = n.iter().position(|&c| c == b'_').unwrap_or(0);
            i.checked_sub(first)
                .and_then(|s| hay.get(s..s + n.len()))
                .is_some_and(|h| h.eq_ignore_ascii_case(n))
        }),
        _ => false,
    })
}

/// What the token scan found.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scan {
    pub(crate) pin: Option<PinReason>,
    pub(crate) info: Info,
}

/// Scans the tokens of `stmt` (strings, comments and quoted identifiers are
/// not code; executable comments are). Stops at the first pin.
pub(crate) fn scan(stmt: &str, dialect: Dialect) -> Scan {
    let mut lex = Lexer::new(stmt, dialect);
    let mut out = Scan::default();
    while let Some(tok) = lex.next() {
        let text = &stmt[tok.start..tok.end];
        match tok.kind {
            Kind::UserVar => return pinned(PinReason::UserVariable),
            Kind::SysVar => {
                let name = text.trim_start_matches('@');
                let name = name.rsplit('.').next().unwrap_or(name).trim_matches('`');
                let is = |n: &str| name.eq_ignore_ascii_case(n);
                out.info.reads_last_insert_id |= is("last_insert_id") || is("identity");
                out.info.reads_diagnostics |= is("warning_count") || is("error_count");
            }
            Kind::Word => {
                let is = |n: &str| text.eq_ignore_ascii_case(n);
                if is("sql_calc_found_rows") {
                    return pinned(PinReason::FoundRows);
                }
                let mut after = lex.clone();
                let called = after.next().is_some_and(|t| &stmt[t.start..t.end] == "(");
                if !called {
                    continue;
                }
                if is("get_lock") || is("service_get_read_locks") || is("service_get_write_locks") {
                    return pinned(PinReason::GetLock);
                }
                if is("last_insert_id") {
                    match after.next().is_some_and(|t| &stmt[t.start..t.end] == ")") {
                        true => out.info.reads_last_insert_id = true,
                        false => out.info.sets_last_insert_id = true,
                    }
                }
                out.info.reads_found_rows |= is("found_rows");
                out.info.reads_row_count |= is("row_count");
                out.info.reads_connection_id |= is("connection_id") || is("is_used_lock");
            }
            _ => {}
        }
    }
    let info = &mut out.info;
    let reads = info.reads_last_insert_id
        || info.sets_last_insert_id
        || info.reads_found_rows
        || info.reads_row_count
        || info.reads_connection_id;
    if reads && defines_stored_code(stmt, dialect) {
        // The calls run when the view is read or the routine runs, on
        // whatever connection that is: nothing to read or write in now.
        info.reads_last_insert_id = false;
        info.sets_last_insert_id = false;
        info.reads_found_rows = false;
        info.reads_row_count = false;
        info.reads_connection_id = false;
    }
    out
}

/// Whether `stmt` creates or alters a view or stored code (`CREATE [OR
/// REPLACE] [DEFINER = ...] [ALGORITHM = ...] [SQL SECURITY ...] VIEW`,
/// `PROCEDURE`, `FUNCTION`, `TRIGGER`, `EVENT`, `PACKAGE`; `ALTER VIEW`,
/// `ALTER EVENT`), whose body is stored, not run (MySQL Reference Manual
/// §15.1 "Data Definition Statements").
fn defines_stored_code(stmt: &str, dialect: Dialect) -> bool {
    /// Words read before giving up: the options between `CREATE` and the
    /// object's kind are a few.
    const HEAD_WORDS: usize = 16;
    let mut words = Lexer::new(stmt, dialect)
        .filter(|t| t.kind == Kind::Word)
        .map(|t| &stmt[t.start..t.end])
        .take(HEAD_WORDS);
    if !words
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("create") || w.eq_ignore_ascii_case("alter"))
    {
        return false;
    }
    for w in words {
        let is = |n: &str| w.eq_ignore_ascii_case(n);
        if is("view") || is("procedure") || is("function") || is("trigger") || is("event") || is("package") {
            return true;
        }
        if is("table") || is("index") || is("as") || is("select") || is("database") || is("schema") || is("user") {
            return false;
        }
    }
    false
}

fn pinned(reason: PinReason) -> Scan {
    Scan {
        pin: Some(reason),
        info: Info::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What `needs_scan` must find: every byte position tried.
    fn naive(stmt: &str) -> bool {
        let hay = stmt.as_bytes();
        hay.contains(&b'@')
            || (0..hay.len()).any(|i| {
                NEEDLES
                    .iter()
                    .any(|n| hay.get(i..i + n.len()).is_some_and(|h| h.eq_ignore_ascii_case(n)))
            })
    }

    proptest! {
        #[test]
        fn needs_scan_finds_what_a_search_from_every_byte_finds(
            stmt in "([ _a-z(]|CONNECTION_ID|is_used_lock|Get_Lock|service_get|FOUND_ROWS|last_insert_id|row_count|_id|@){0,10}",
        ) {
            prop_assert_eq!(needs_scan(&stmt), naive(&stmt));
        }
    }

    #[test]
    fn needs_scan_finds_each_name_at_the_start_and_a_variable() {
        for n in NEEDLES {
            let name = std::str::from_utf8(n).unwrap_or_default().to_ascii_uppercase();
            assert!(needs_scan(&name), "{name}");
            assert!(!needs_scan(&name[1..]), "{name} less its first letter");
        }
        assert!(needs_scan("select @a"));
        assert!(!needs_scan("select 1 from t_1"));
    }
}
