//! Moving `ROW_COUNT()`, `FOUND_ROWS()` and `LAST_INSERT_ID()` (with
//! `@@identity`, `@@last_insert_id`) to another backend connection: they
//! read what earlier statements left on the connection that ran them (MySQL
//! Reference Manual §14.15 "Information Functions"). When the statement
//! that reads them runs on another connection, the proxy, which saw the
//! earlier replies (an OK packet's affected rows, the rows of a result
//! set, the ids), writes the value into the text instead.
//! A call that is a whole select item with no alias keeps its column name
//! (MySQL names such a column by the expression's text).

use super::Dialect;
use super::lexer::{Kind, Lexer, Token};

/// The previous statement's results, as the proxy saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviousResults {
    /// What `ROW_COUNT()` returns: affected rows of an OK, -1 after a
    /// result set or an error (`None`: leave the calls alone).
    pub row_count: Option<i64>,
    /// What `FOUND_ROWS()` returns: rows of the last result set (`None`:
    /// leave the calls alone).
    pub found_rows: Option<u64>,
    /// What `LAST_INSERT_ID()`, `@@identity` and `@@last_insert_id` return
    /// (`None`: leave them alone).
    pub last_insert_id: Option<u64>,
    /// What `CONNECTION_ID()` returns: the client's id as the proxy gave
    /// it (`None`: leave the calls alone).
    pub connection_id: Option<u64>,
}

/// Whether `stmt` answers with its own text as the server parsed it
/// (`EXPLAIN EXTENDED`'s note, `ANALYZE FORMAT=JSON`), so a value written
/// into it would show: its values are set on the connection instead.
pub fn shows_its_text(stmt: &str, dialect: Dialect) -> bool {
    Lexer::new(stmt, dialect)
        .find(|t| t.kind == Kind::Word)
        .is_some_and(|t| {
            let w = &stmt[t.start..t.end];
            ["explain", "describe", "desc", "analyze"]
                .iter()
                .any(|k| w.eq_ignore_ascii_case(k))
        })
}

/// `stmt` with every `ROW_COUNT()`, `FOUND_ROWS()`, `LAST_INSERT_ID()` and
/// `CONNECTION_ID()` call replaced by its value in `prev`, where that value
/// is given; `None` if nothing was replaced. With a connection id given,
/// `IS_USED_LOCK(name)` answers it too when the lock is the backend
/// connection's own (`IS_USED_LOCK(x) = CONNECTION_ID()` stays true).
pub fn substitute_previous_results(stmt: &str, dialect: Dialect, prev: PreviousResults) -> Option<String> {
    let toks: Vec<Token> = Lexer::new(stmt, dialect).collect();
    let text = |t: &Token| &stmt[t.start..t.end];
    let mut out = String::with_capacity(stmt.len() + 32);
    let mut copied = 0;
    let mut i = 0;
    let mut changed = false;
    while i < toks.len() {
        let t = toks[i];
        let call = t.kind == Kind::Word
            && toks.get(i + 1).is_some_and(|n| text(n) == "(")
            && toks.get(i + 2).is_some_and(|n| text(n) == ")");
        let is = |n: &str| text(&t).eq_ignore_ascii_case(n);
        let sysvar = t.kind == Kind::SysVar && {
            let name = text(&t).trim_start_matches('@');
            let name = name.rsplit('.').next().unwrap_or(name).trim_matches('`');
            name.eq_ignore_ascii_case("identity") || name.eq_ignore_ascii_case("last_insert_id")
        };
        let (value, width) = match (call, sysvar) {
            (true, _) if is("row_count") => (prev.row_count.map(|v| v.to_string()), 3),
            (true, _) if is("found_rows") => (prev.found_rows.map(|v| v.to_string()), 3),
            (true, _) if is("last_insert_id") => (prev.last_insert_id.map(|v| v.to_string()), 3),
            (true, _) if is("connection_id") => (prev.connection_id.map(|v| v.to_string()), 3),
            (_, true) => (prev.last_insert_id.map(|v| v.to_string()), 1),
            _ if is("is_used_lock") && t.kind == Kind::Word => {
                match (prev.connection_id, closing_paren(&toks, i + 1, text)) {
                    (Some(id), Some(close)) => {
                        let args = &stmt[toks[i + 1].end..toks[close].start];
                        let used = format!("IS_USED_LOCK({args})");
                        (
                            Some(format!("IF({used} = CONNECTION_ID(), {id}, {used})")),
                            close - i + 1,
                        )
                    }
                    _ => (None, 1),
                }
            }
            _ => (None, 1),
        };
        let Some(value) = value else {
            i += 1;
            continue;
        };
        let end = toks[i + width - 1].end;
        out.push_str(&stmt[copied..t.start]);
        let before = i.checked_sub(1).map(|j| text(&toks[j]));
        let after = toks.get(i + width).map(text);
        let item_start = before.is_some_and(|b| b == "," || b.eq_ignore_ascii_case("select"));
        let item_end = after.is_none_or(|a| {
            a == ","
                || a == ";"
                || ["from", "into", "union", "limit"]
                    .iter()
                    .any(|k| a.eq_ignore_ascii_case(k))
        });
        if item_start && item_end {
            let name = stmt[t.start..end].replace('`', "``");
            out.push_str(&format!("{value} AS `{name}`"));
        } else {
            out.push_str(&format!("({value})"));
        }
        copied = end;
        changed = true;
        i += width;
    }
    if !changed {
        return None;
    }
    out.push_str(&stmt[copied..]);
    Some(out)
}

/// The index of the `)` closing the `(` at `open`, if `open` is one.
fn closing_paren<'a>(toks: &[Token], open: usize, text: impl Fn(&Token) -> &'a str) -> Option<usize> {
    if toks.get(open).is_none_or(|t| text(t) != "(") {
        return None;
    }
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match text(t) {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREV: PreviousResults = PreviousResults {
        row_count: Some(3),
        found_rows: Some(7),
        last_insert_id: Some(42),
        connection_id: Some(9),
    };

    fn sub(s: &str) -> Option<String> {
        substitute_previous_results(s, Dialect::DEFAULT, PREV)
    }

    #[test]
    fn select_items_keep_their_column_names() {
        assert_eq!(sub("SELECT ROW_COUNT()").as_deref(), Some("SELECT 3 AS `ROW_COUNT()`"));
        assert_eq!(
            sub("select found_rows(), row_count ( )").as_deref(),
            Some("select 7 AS `found_rows()`, 3 AS `row_count ( )`")
        );
        assert_eq!(
            sub("SELECT ROW_COUNT() FROM dual").as_deref(),
            Some("SELECT 3 AS `ROW_COUNT()` FROM dual")
        );
    }

    #[test]
    fn calls_inside_expressions_become_literals() {
        assert_eq!(sub("SELECT ROW_COUNT() + 1").as_deref(), Some("SELECT (3) + 1"));
        assert_eq!(sub("SELECT ROW_COUNT() AS n").as_deref(), Some("SELECT (3) AS n"));
        assert_eq!(
            sub("INSERT INTO log VALUES (ROW_COUNT())").as_deref(),
            Some("INSERT INTO log VALUES ((3))")
        );
    }

    #[test]
    fn strings_comments_and_other_names_are_left_alone() {
        assert_eq!(sub("SELECT 'ROW_COUNT()' /* FOUND_ROWS() */"), None);
        assert_eq!(sub("SELECT row_count FROM t"), None);
        assert_eq!(sub("SELECT my_row_count()"), None);
    }

    #[test]
    fn last_insert_id_and_its_variables() {
        assert_eq!(
            sub("SELECT LAST_INSERT_ID(), @@identity, @@session.last_insert_id").as_deref(),
            Some("SELECT 42 AS `LAST_INSERT_ID()`, 42 AS `@@identity`, 42 AS `@@session.last_insert_id`")
        );
        assert_eq!(
            sub("INSERT INTO child (parent) VALUES (LAST_INSERT_ID())").as_deref(),
            Some("INSERT INTO child (parent) VALUES ((42))")
        );
        assert_eq!(sub("SELECT LAST_INSERT_ID(5)"), None);
        assert_eq!(sub("SELECT @@identity_x"), None);
    }

    #[test]
    fn connection_id_is_the_proxy_given_id() {
        assert_eq!(
            sub("SELECT CONNECTION_ID()").as_deref(),
            Some("SELECT 9 AS `CONNECTION_ID()`")
        );
        assert_eq!(sub("KILL QUERY connection_id ( )").as_deref(), Some("KILL QUERY (9)"));
        assert_eq!(sub("SELECT 'CONNECTION_ID()'"), None);
        assert_eq!(
            sub("SELECT IS_USED_LOCK(CONCAT('a', 'b')) = CONNECTION_ID()").as_deref(),
            Some(
                "SELECT (IF(IS_USED_LOCK(CONCAT('a', 'b')) = CONNECTION_ID(), 9, IS_USED_LOCK(CONCAT('a', 'b')))) = (9)"
            )
        );
    }

    #[test]
    fn negative_row_count() {
        let p = PreviousResults {
            row_count: Some(-1),
            found_rows: None,
            last_insert_id: None,
            connection_id: None,
        };
        assert_eq!(
            substitute_previous_results("SELECT ROW_COUNT(), FOUND_ROWS()", Dialect::DEFAULT, p).as_deref(),
            Some("SELECT -1 AS `ROW_COUNT()`, FOUND_ROWS()")
        );
    }
}
