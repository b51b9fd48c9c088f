//! Detection of temporary objects (PostgreSQL docs: CREATE TABLE, CREATE
//! VIEW, CREATE SEQUENCE, CREATE TABLE AS, SELECT INTO): they live in the
//! backend's `pg_temp` schema and cannot follow the client elsewhere.

use crate::cursor::Cursor;
use crate::lexer::{Kind, Token};

/// `CREATE [OR REPLACE] [GLOBAL|LOCAL] {TEMP|TEMPORARY} ...`, or a `CREATE`
/// naming `pg_temp.` anywhere (a temp object, or a view that PostgreSQL makes
/// temporary because it references one). `cur` is just after `CREATE`.
pub(crate) fn create_is_temp(cur: &mut Cursor<'_>) -> bool {
    cur.eat_words(&["or", "replace"]);
    let _ = cur.eat_word("global") || cur.eat_word("local");
    if cur.peek_word("temp") || cur.peek_word("temporary") {
        return true;
    }
    mentions_pg_temp(cur)
}

/// `SELECT ... INTO [TEMP|TEMPORARY] [TABLE] name`, or `INTO pg_temp.name`,
/// in a `SELECT`/`WITH`/`VALUES`-led statement (`INSERT INTO`/`MERGE INTO`
/// excluded).
pub(crate) fn select_into_is_temp(cur: &mut Cursor<'_>) -> bool {
    let mut prev: Option<Token> = None;
    while let Some(tok) = cur.next() {
        let is_into = cur.is_word(Some(tok), "into") && !cur.is_word(prev, "insert") && !cur.is_word(prev, "merge");
        prev = Some(tok);
        if !is_into {
            continue;
        }
        if cur.peek_word("temp") || cur.peek_word("temporary") {
            let after = cur.peek2();
            if cur.is_word(after, "table") || after.is_some_and(|t| is_table_name(cur, t)) {
                return true;
            }
        }
        if is_pg_temp(cur, cur.peek()) && cur.is_punct(cur.peek2(), b'.') {
            return true;
        }
    }
    false
}

/// True if `tok` can be the table name after `INTO TEMP` rather than the
/// clause following an `INTO temp` (a table called "temp").
fn is_table_name(cur: &Cursor<'_>, tok: Token) -> bool {
    const CLAUSES: [&str; 13] = [
        "from",
        "where",
        "group",
        "having",
        "window",
        "order",
        "limit",
        "offset",
        "fetch",
        "for",
        "union",
        "intersect",
        "except",
    ];
    match tok.kind {
        Kind::QuotedIdent => true,
        Kind::Word => !CLAUSES.iter().any(|c| cur.is_word(Some(tok), c)),
        _ => false,
    }
}

fn mentions_pg_temp(cur: &mut Cursor<'_>) -> bool {
    while let Some(tok) = cur.next() {
        if is_pg_temp(cur, Some(tok)) && cur.is_punct(cur.peek(), b'.') {
            return true;
        }
    }
    false
}

/// `pg_temp`, `pg_temp_<n>` or `"pg_temp"`.
fn is_pg_temp(cur: &Cursor<'_>, tok: Option<Token>) -> bool {
    let Some(tok) = tok else { return false };
    let text = cur.text(tok);
    match tok.kind {
        Kind::Word => text.get(..7).is_some_and(|p| {
            p.eq_ignore_ascii_case("pg_temp") && text[7..].trim_start_matches('_').bytes().all(|b| b.is_ascii_digit())
        }),
        Kind::QuotedIdent => text.starts_with("\"pg_temp"),
        _ => false,
    }
}
