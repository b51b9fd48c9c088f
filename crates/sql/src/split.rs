//! Splitting a simple-Query string into statements at top-level semicolons,
//! the way psql does: semicolons inside quotes, comments, parentheses or a
//! `CREATE FUNCTION|PROCEDURE ... BEGIN ATOMIC ... END` body do not split.

use crate::lexer::{Kind, Lexer};

/// Splits SQL text into statements at top-level semicolons, respecting
/// quotes (`'..'`, `E'..'` with backslash escapes, `".."`, `$tag$..$tag$`)
/// and comments. Returns non-empty statement slices of `sql`, starting at
/// their first non-blank character (a leading comment is kept) and ending
/// at their last token; pieces holding only comments are dropped.
pub fn split_statements(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut last_end: Option<usize> = None;
    let mut parens = 0usize;
    let mut body = AtomicBody::default();
    for tok in Lexer::new(sql) {
        match (tok.kind, sql.as_bytes()[tok.start]) {
            (Kind::Punct, b';') if parens == 0 && body.depth == 0 => {
                push(&mut out, sql, start, last_end.take());
                start = tok.end;
                body = AtomicBody::default();
                continue;
            }
            (Kind::Punct, b'(') => parens += 1,
            (Kind::Punct, b')') => parens = parens.saturating_sub(1),
            (Kind::Word, _) => body.word(&sql[tok.start..tok.end], parens),
            _ => {}
        }
        last_end = Some(tok.end);
    }
    push(&mut out, sql, start, last_end);
    out
}

fn push<'a>(out: &mut Vec<&'a str>, sql: &'a str, start: usize, end: Option<usize>) {
    if let Some(end) = end {
        out.push(sql[start..end].trim_ascii_start());
    }
}

/// Tracks `BEGIN ATOMIC ... END` nesting inside a statement that starts
/// `CREATE [OR REPLACE] FUNCTION|PROCEDURE` (psql's heuristic, tightened to
/// require `ATOMIC` so a routine named `begin` cannot hide what follows).
#[derive(Debug, Default)]
struct AtomicBody {
    words: u32,
    create: bool,
    routine: bool,
    prev_begin: bool,
    depth: u32,
}

impl AtomicBody {
    fn word(&mut self, w: &str, parens: usize) {
        let is = |kw: &str| w.eq_ignore_ascii_case(kw);
        let is_routine = is("function") || is("procedure");
        match self.words {
            0 => self.create = is("create"),
            1 if is_routine => self.routine = self.create,
            1 => self.create &= is("or"),
            2 if !self.routine => self.create &= is("replace"),
            3 if !self.routine => self.routine = self.create && is_routine,
            _ => {}
        }
        self.words = self.words.saturating_add(1);
        if !self.routine || parens != 0 {
            return;
        }
        if (self.prev_begin && is("atomic")) || (self.depth > 0 && is("case")) {
            self.depth += 1;
        } else if self.depth > 0 && is("end") {
            self.depth -= 1;
        }
        self.prev_begin = is("begin");
    }
}
