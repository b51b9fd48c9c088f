//! Splitting a multi-statement `COM_QUERY` (MySQL Reference Manual §6.1
//! `CLIENT_MULTI_STATEMENTS`, "Multiple Statement Execution Support") into
//! statements at `;` outside strings, identifiers and comments. The body of
//! a stored program (`CREATE PROCEDURE|FUNCTION|TRIGGER|EVENT ... BEGIN ...
//! END`, MySQL manual §15.6.1) and a MariaDB `BEGIN NOT ATOMIC ... END`
//! block are one statement to the server, so their inner `;` do not split.
//! `DELIMITER` is a `mysql` client command and never reaches the server.

use super::Dialect;
use super::lexer::{Kind, Lexer, is_space};

/// Splits SQL text into statements at top-level `;`. Each piece is a slice
/// of `sql` without the separator and without leading/trailing whitespace;
/// comments (and the closing `*/` of an executable comment) are kept.
/// Pieces holding no token (only whitespace and comments) are dropped.
pub fn split_statements(sql: &str, dialect: Dialect) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut has_token = false;
    let mut parens = 0usize;
    let mut body = Compound::default();
    for tok in Lexer::new(sql, dialect) {
        let text = &sql[tok.start..tok.end];
        match tok.kind {
            Kind::Punct if text == ";" => {
                body.punct();
                if body.depth == 0 {
                    push(&mut out, sql, start, tok.start, has_token);
                    start = tok.end;
                    has_token = false;
                    parens = 0;
                    body = Compound::default();
                    continue;
                }
            }
            Kind::Punct => {
                body.punct();
                match text {
                    "(" => parens += 1,
                    ")" => parens = parens.saturating_sub(1),
                    _ => {}
                }
            }
            Kind::Word => body.word(text, parens),
            _ => body.punct(),
        }
        has_token = true;
    }
    push(&mut out, sql, start, sql.len(), has_token);
    out
}

fn push<'a>(out: &mut Vec<&'a str>, sql: &'a str, start: usize, end: usize, has_token: bool) {
    if has_token {
        out.push(trim(&sql[start..end]));
    }
}

fn trim(s: &str) -> &str {
    let b = s.as_bytes();
    let lead = b.iter().take_while(|&&c| is_space(c)).count();
    let trail = b[lead..].iter().rev().take_while(|&&c| is_space(c)).count();
    &s[lead..s.len() - trail]
}

/// Object kinds whose definition carries a stored-program body.
pub(super) const PROGRAMS: [&str; 5] = ["procedure", "function", "trigger", "event", "package"];

/// The other object kinds that can follow `CREATE [OR REPLACE] [DEFINER =
/// ...]` (besides `TEMPORARY`): the first kind seen decides what follows.
pub(super) const OTHER_OBJECTS: [&str; 14] = [
    "table",
    "view",
    "index",
    "unique",
    "fulltext",
    "spatial",
    "database",
    "schema",
    "user",
    "role",
    "server",
    "tablespace",
    "sequence",
    "logfile",
];

/// `END` followed by one of these closes a block we do not count.
const UNCOUNTED_ENDS: [&str; 4] = ["if", "loop", "while", "repeat"];

/// Tracks `BEGIN ... END` / `CASE ... END [CASE]` nesting in a stored
/// program body, at parenthesis depth zero.
#[derive(Debug, Default)]
struct Compound {
    words: u32,
    create: bool,
    begin: bool,
    decided: bool,
    program: bool,
    pending_end: bool,
    depth: u32,
}

impl Compound {
    fn word(&mut self, w: &str, parens: usize) {
        let is = |kw: &str| w.eq_ignore_ascii_case(kw);
        let after_end = self.resolve_end(Some(w));
        let n = self.words;
        self.words = self.words.saturating_add(1);
        match n {
            0 => {
                self.create = is("create");
                self.begin = is("begin");
                return;
            }
            1 if self.begin => {
                self.begin &= is("not");
                return;
            }
            2 if self.begin => {
                // MariaDB `BEGIN NOT ATOMIC`: the statement is the block.
                self.program = is("atomic");
                self.depth = u32::from(self.program);
                return;
            }
            _ => {}
        }
        if self.create && !self.decided {
            if parens == 0 && (is("temporary") || PROGRAMS.iter().chain(&OTHER_OBJECTS).any(|k| is(k))) {
                self.decided = true;
                self.program = PROGRAMS.iter().any(|k| is(k));
            }
            return;
        }
        if !self.program || parens != 0 || after_end {
            return;
        }
        if is("begin") || is("case") {
            self.depth += 1;
        } else if is("end") && self.depth > 0 {
            self.pending_end = true;
        }
    }

    fn punct(&mut self) {
        self.resolve_end(None);
    }

    /// Applies a pending `END` given the word after it (if any); true if
    /// there was one (the word then names the block or a label).
    fn resolve_end(&mut self, next_word: Option<&str>) -> bool {
        if !std::mem::take(&mut self.pending_end) {
            return false;
        }
        let uncounted = next_word.is_some_and(|w| UNCOUNTED_ENDS.iter().any(|k| w.eq_ignore_ascii_case(k)));
        if !uncounted {
            self.depth = self.depth.saturating_sub(1);
        }
        true
    }
}
