//! The statement kind query rules match on (`kinds`): the first key word
//! of a statement, found without allocating and without the full lexer, in
//! each dialect's comment syntax. The PostgreSQL one is
//! [`statement_kind`] here, the MySQL one [`crate::mysql::statement_kind`].
//!
//! Leading whitespace, `(` and comments are skipped. The word is returned
//! as written (`SELECT`, `select`); rules compare it case-insensitively. A
//! statement with no leading word (empty, only comments, `;`, `$1`, an
//! unterminated comment) has no kind. `WITH ... SELECT` (and `WITH ...
//! DELETE`) has kind `with`: the kind is the first word, not the
//! statement's effect.
//!
//! Comments differ by dialect, and a rule that blocks a kind must see the
//! word the server runs:
//! * PostgreSQL (docs §4.1.6 "Comments"): `-- ...` to the end of the line,
//!   and `/* */`, which nest; `#` is an operator, not a comment.
//! * MySQL/MariaDB (MySQL Reference Manual §11.7 "Comments"): `-- `, `#`
//!   to the end of the line, and `/* */`, which do not nest (the first
//!   `*/` ends a comment); executable comments (`/*! ... */`,
//!   `/*!50700 ... */`, MariaDB's `/*M! ... */`) are SQL the server runs:
//!   their content is read, so `/*!50000 DELETE */ FROM t` has kind
//!   `DELETE`.

use std::ops::Range;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Postgres,
    Mysql,
}

/// The first key word of a PostgreSQL statement (see the module docs).
pub fn statement_kind(text: &str) -> Option<&str> {
    text.get(statement_kind_at(text)?)
}

/// Where [`statement_kind`] is in `text`.
pub fn statement_kind_at(text: &str) -> Option<Range<usize>> {
    kind_range(text, Syntax::Postgres)
}

pub(crate) fn kind_range(text: &str, syntax: Syntax) -> Option<Range<usize>> {
    let b = text.as_bytes();
    let at = |i: usize| b.get(i).copied();
    let mut i = 0;
    // Inside a MySQL executable comment, whose `*/` is skipped.
    let mut executable = false;
    loop {
        match at(i)? {
            c if c.is_ascii_whitespace() || c == 0x0b || c == b'(' => i += 1,
            b'-' if at(i + 1) == Some(b'-') => i = line_end(b, i)?,
            b'#' if syntax != Syntax::Postgres => i = line_end(b, i)?,
            b'*' if executable && at(i + 1) == Some(b'/') => {
                executable = false;
                i += 2;
            }
            b'/' if at(i + 1) == Some(b'*') => {
                if syntax == Syntax::Mysql && !executable {
                    let marker = match (at(i + 2), at(i + 3)) {
                        (Some(b'!'), _) => 3,
                        (Some(b'M' | b'm'), Some(b'!')) => 4,
                        _ => 0,
                    };
                    if marker > 0 {
                        executable = true;
                        i += marker;
                        while at(i).is_some_and(|c| c.is_ascii_digit()) {
                            i += 1;
                        }
                        continue;
                    }
                }
                i = comment_end(b, i, syntax != Syntax::Mysql)?;
            }
            c if c.is_ascii_alphabetic() => {
                let start = i;
                while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
                    i += 1;
                }
                return Some(start..i);
            }
            _ => return None,
        }
    }
}

/// Past the `\n` ending the line comment at `i`; `None` at the end of text.
fn line_end(b: &[u8], i: usize) -> Option<usize> {
    let rest = b.get(i..)?;
    rest.iter().position(|&c| c == b'\n').map(|p| i + p + 1)
}

/// Past the `*/` closing the block comment opening at `i`; `None` when it
/// is not closed.
fn comment_end(b: &[u8], i: usize, nested: bool) -> Option<usize> {
    let mut depth = 1usize;
    let mut j = i + 2;
    while depth > 0 {
        match (b.get(j)?, b.get(j + 1)) {
            (b'*', Some(b'/')) => {
                depth -= 1;
                j += 2;
            }
            (b'/', Some(b'*')) if nested => {
                depth += 1;
                j += 2;
            }
            _ => j += 1,
        }
    }
    Some(j)
}
