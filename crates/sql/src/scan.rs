//! The function scan applied to every statement: session-level advisory-lock
//! functions pin, and any `set_config` call not recognised as a plain
//! literal `SELECT set_config(...)` pins as unrecognized. A byte prefilter
//! keeps the common case to one pass with no tokenizing (and also tells the
//! classifier whether `SELECT ... INTO` is worth checking).

use crate::effect::PinReason;
use crate::lexer::{Kind, Lexer};

const LOCK_FUNCTIONS: [&str; 4] = [
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
];

/// How deep to look into string constants nested in `DO` bodies.
const MAX_STRING_DEPTH: u8 = 3;

/// What one cheap byte pass found (ASCII case-insensitively, anywhere).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Prefilter {
    /// `advisory_lock` or `set_config` occurs: run [`scan_functions`].
    pub(crate) functions: bool,
    /// `into` occurs: a `SELECT ... INTO` check is worthwhile.
    pub(crate) into: bool,
}

/// Whether `stmt` holds the substrings that make a token-level look
/// worthwhile, a word at a time ([`crate::words`]): both function names
/// hold an underscore, so only the words with one (and, when `wants_into`,
/// for the statements that can be `SELECT ... INTO`, those with an `i`)
/// are looked at closer.
pub(crate) fn prefilter(stmt: &str, wants_into: bool) -> Prefilter {
    use crate::words::{any_index, bytes_of, splat};
    let hay = stmt.as_bytes();
    // (Only `i` and `I` become `i` with the 0x20 bit set.)
    let into_bits = if wants_into { u64::MAX } else { 0 };
    let may_hit = |w: u64| bytes_of(w, b'_') | (bytes_of(w | splat(0x20), b'i') & into_bits);
    let mut hits = Prefilter::default();
    any_index(hay, may_hit, |i| {
        if hay[i] == b'_' {
            // "advisory_lock" has its underscore at 8, "set_config" at 3.
            hits.functions |= i
                .checked_sub(8)
                .is_some_and(|s| starts_with_ci(&hay[s..], b"advisory_lock"))
                || i.checked_sub(3)
                    .is_some_and(|s| starts_with_ci(&hay[s..], b"set_config"));
        } else if wants_into && hay[i] | 0x20 == b'i' {
            hits.into |= starts_with_ci(&hay[i..], b"into");
        }
        hits.functions && (hits.into || !wants_into)
    });
    hits
}

/// Scans `stmt` for pinning function names outside comments, string
/// constants and (non-call) quoted identifiers. With `into_strings` (for
/// `DO` blocks) string constants are scanned as code too.
pub(crate) fn scan_functions(stmt: &str, into_strings: bool) -> Option<PinReason> {
    scan_tokens(stmt, if into_strings { MAX_STRING_DEPTH } else { 0 })
}

/// Whether a `DO` statement's body (its string constants, read as
/// PL/pgSQL) runs `SET` or `RESET` as a statement of its own (the first
/// word after the body's start, `;`, `BEGIN`, `LOOP`, `THEN` or `ELSE`:
/// not `UPDATE ... SET` nor `ALTER ... SET`), or `EXECUTE`s a string, or
/// `format(` of one, that starts with either.
pub(crate) fn do_block_sets(stmt: &str) -> bool {
    Lexer::new(stmt).any(|tok| tok.kind == Kind::String && body_sets(string_body(&stmt[tok.start..tok.end])))
}

fn body_sets(body: &str) -> bool {
    const STATEMENT_START: [&str; 6] = [";", "begin", "loop", "then", "else", "declare"];
    let mut at_start = true;
    let mut after_execute = false;
    for tok in Lexer::new(body) {
        let text = &body[tok.start..tok.end];
        let setting = |w: &str| w.eq_ignore_ascii_case("set") || w.eq_ignore_ascii_case("reset");
        match tok.kind {
            Kind::Word if at_start && setting(text) => return true,
            Kind::String if after_execute => {
                let first = string_body(text).split_whitespace().next().unwrap_or("");
                if setting(first) {
                    return true;
                }
            }
            _ => {}
        }
        // `EXECUTE 'SET ...'`, `EXECUTE format('SET %I ...', ...)`.
        after_execute = match tok.kind {
            Kind::Word if text.eq_ignore_ascii_case("execute") => true,
            Kind::Word if after_execute && text.eq_ignore_ascii_case("format") => true,
            Kind::Punct if after_execute && text == "(" => true,
            _ => false,
        };
        at_start = match tok.kind {
            Kind::Word | Kind::Punct => STATEMENT_START.iter().any(|w| text.eq_ignore_ascii_case(w)),
            _ => false,
        };
    }
    false
}

fn starts_with_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.get(..needle.len()).is_some_and(|h| h.eq_ignore_ascii_case(needle))
}

fn scan_tokens(src: &str, string_depth: u8) -> Option<PinReason> {
    let mut lex = Lexer::new(src);
    let mut set_config = false;
    while let Some(tok) = lex.next() {
        let text = &src[tok.start..tok.end];
        let name = match tok.kind {
            Kind::Word => text,
            Kind::QuotedIdent => {
                let called = lex.clone().next().is_some_and(|t| &src[t.start..t.end] == "(");
                match called {
                    true => text.trim_matches('"'),
                    false => continue,
                }
            }
            Kind::String if string_depth > 0 => {
                match scan_tokens(string_body(text), string_depth - 1) {
                    Some(PinReason::AdvisoryLock) => return Some(PinReason::AdvisoryLock),
                    Some(_) => set_config = true,
                    None => {}
                }
                continue;
            }
            _ => continue,
        };
        if LOCK_FUNCTIONS.iter().any(|f| name.eq_ignore_ascii_case(f)) {
            return Some(PinReason::AdvisoryLock);
        }
        set_config |= name.eq_ignore_ascii_case("set_config");
    }
    set_config.then_some(PinReason::Unrecognized)
}

/// The text inside a string constant's quotes (approximate for unterminated
/// constants; escapes are left as written).
fn string_body(text: &str) -> &str {
    if let Some(rest) = text.strip_prefix('$') {
        let open = rest.find('$').map_or(text.len(), |i| i + 2);
        let inner = text.get(open..).unwrap_or("");
        return inner.strip_suffix(&text[..open]).unwrap_or(inner);
    }
    let inner = text.strip_prefix(['e', 'E']).unwrap_or(text);
    let inner = inner.strip_prefix('\'').unwrap_or(inner);
    inner.strip_suffix('\'').unwrap_or(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the prefilter must find: every byte position tried.
    fn naive(stmt: &str) -> (bool, bool) {
        let hay = stmt.as_bytes();
        let at = |i: usize, n: &[u8]| starts_with_ci(&hay[i..], n);
        let functions = (0..hay.len()).any(|i| at(i, b"advisory_lock") || at(i, b"set_config"));
        let into = (0..hay.len()).any(|i| at(i, b"into"));
        (functions, into)
    }

    proptest! {
        #[test]
        fn the_prefilter_finds_what_a_search_from_every_byte_finds(
            stmt in "([ _a-zA-Z(]|SET_CONFIG|set_config|Advisory_Lock|advisory_|_lock|INTO|into|ïnto){0,12}",
        ) {
            let hits = prefilter(&stmt, true);
            prop_assert_eq!((hits.functions, hits.into), naive(&stmt));
            prop_assert!(!prefilter(&stmt, false).into);
        }
    }

    #[test]
    fn the_prefilter_finds_names_at_the_very_start_and_end() {
        assert!(prefilter("advisory_lock", false).functions);
        assert!(prefilter("set_config", false).functions);
        assert!(prefilter("select pg_advisory_lock(1)", false).functions);
        assert!(!prefilter("select pg_advisory_unlock(1)", false).functions);
        assert!(!prefilter("dvisory_lock _config et_config", false).functions);
        assert!(prefilter("select 1 into", true).into);
    }
}
