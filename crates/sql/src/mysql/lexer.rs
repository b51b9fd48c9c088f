//! MySQL/MariaDB tokenizer (MySQL Reference Manual §11 "Language Structure":
//! §11.1.1 string literals, §11.2 identifiers, §11.4 user-defined variables,
//! §11.7 comments; MariaDB KB "Comment Syntax" for `/*M! */`). It tells
//! words, quoted identifiers, strings, variables and punctuation apart and
//! skips whitespace and comments. Never fails: unterminated quotes and
//! comments run to the end of input. Token boundaries always fall on ASCII
//! bytes or the ends of input, so they are valid `str` slice indices.
//!
//! Executable comments `/*! .. */`, `/*!50700 .. */` and `/*M!100100 .. */`
//! are lexed as code whatever their version number (the server we talk to
//! may well run them; assuming it does is the conservative reading). A
//! plain `/* */` comment inside one is skipped; comments do not nest.

use super::Dialect;
pub(crate) use crate::lexer::is_space;
use crate::lexer::scan_quoted;

/// Token class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Unquoted identifier or key word.
    Word,
    /// `` `quoted identifier` `` (or `".."` under `ANSI_QUOTES`).
    QuotedIdent,
    /// `'..'` (or `".."` without `ANSI_QUOTES`) string literal.
    String,
    /// Numeric literal (also digit-led identifiers such as `1abc`).
    Number,
    /// User variable: `@name`, `@'name'`, `@"name"`, `` @`name` ``.
    UserVar,
    /// System variable: `@@name`, `@@session.name`, `@@global.name`, ...
    SysVar,
    /// Placeholder `?`.
    Param,
    /// Any other character; `:=` is one token.
    Punct,
}

/// One token: its class and byte span in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Kind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Iterator over the tokens of a source string.
#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    dialect: Dialect,
    /// Inside `/*! .. */`: the next `*/` closes it.
    in_exec: bool,
    prev: Option<Token>,
}

pub(crate) fn is_ident_cont(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Key words after which `@x` is a variable rather than the host part of a
/// `user@host` account name written without spaces (`... INTO@x`).
const NOT_ACCOUNT: [&str; 22] = [
    "and", "as", "by", "div", "do", "else", "elseif", "from", "having", "in", "into", "is", "like", "limit", "mod",
    "not", "or", "return", "select", "set", "then", "when",
];

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str, dialect: Dialect) -> Self {
        Lexer {
            src,
            pos: 0,
            dialect,
            in_exec: false,
            prev: None,
        }
    }

    pub(crate) fn src(&self) -> &'a str {
        self.src
    }

    fn skip_trivia(&mut self) {
        let b = self.src.as_bytes();
        loop {
            while self.pos < b.len() && is_space(b[self.pos]) {
                self.pos += 1;
            }
            let at = |k: usize| b.get(self.pos + k).copied();
            match (at(0), at(1)) {
                (Some(b'#'), _) => self.skip_line(),
                // `--` starts a comment only if followed by a space or control
                // character (or the end): `--x` is two minus signs.
                (Some(b'-'), Some(b'-')) if at(2).is_none_or(|c| c <= b' ') => self.skip_line(),
                (Some(b'/'), Some(b'*')) if at(2) == Some(b'!') => self.open_exec(3),
                (Some(b'/'), Some(b'*')) if at(2) == Some(b'M') && at(3) == Some(b'!') => self.open_exec(4),
                (Some(b'/'), Some(b'*')) => {
                    self.pos = match self.src[self.pos + 2..].find("*/") {
                        Some(i) => self.pos + 2 + i + 2,
                        None => b.len(),
                    };
                }
                (Some(b'*'), Some(b'/')) if self.in_exec => {
                    self.in_exec = false;
                    self.pos += 2;
                }
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        let b = self.src.as_bytes();
        while self.pos < b.len() && !matches!(b[self.pos], b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    /// Skips an executable-comment opener of `len` bytes and its version.
    fn open_exec(&mut self, len: usize) {
        self.pos += len;
        let b = self.src.as_bytes();
        while self.pos < b.len() && b[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        self.in_exec = true;
    }

    fn number(&mut self, start: usize) {
        let b = self.src.as_bytes();
        let mut i = start + 1;
        while let Some(&c) = b.get(i) {
            if is_ident_cont(c) || c == b'.' {
                i += 1;
            } else if matches!(c, b'+' | b'-')
                && matches!(b[i - 1], b'e' | b'E')
                && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                i += 2;
            } else {
                break;
            }
        }
        self.pos = i;
    }

    /// At an `@`: a user or system variable, or the `@` of `'user'@'host'`.
    fn at_sign(&mut self, start: usize) -> Kind {
        let b = self.src.as_bytes();
        if b.get(start + 1) == Some(&b'@') {
            let mut i = start + 2;
            loop {
                match b.get(i) {
                    Some(&c) if is_ident_cont(c) || c == b'.' => i += 1,
                    Some(b'`') => i = scan_quoted(b, i + 1, b'`', false),
                    _ => break,
                }
            }
            self.pos = i;
            return Kind::SysVar;
        }
        if self.follows_account_user(start) {
            self.pos = start + 1;
            return Kind::Punct;
        }
        let backslash = !self.dialect.no_backslash_escapes;
        self.pos = match b.get(start + 1) {
            Some(&q @ (b'\'' | b'"')) => scan_quoted(b, start + 2, q, backslash),
            Some(b'`') => scan_quoted(b, start + 2, b'`', false),
            Some(&c) if is_ident_cont(c) || c == b'.' => {
                let mut i = start + 1;
                while b.get(i).is_some_and(|&c| is_ident_cont(c) || c == b'.') {
                    i += 1;
                }
                i
            }
            _ => {
                self.pos = start + 1;
                return Kind::Punct;
            }
        };
        Kind::UserVar
    }

    /// True if the `@` at `at` directly follows a user name (`'u'@`, `` `u`@ ``,
    /// `u@`) and so separates the parts of an account name.
    fn follows_account_user(&self, at: usize) -> bool {
        let Some(prev) = self.prev.filter(|p| p.end == at) else {
            return false;
        };
        match prev.kind {
            Kind::String | Kind::QuotedIdent => true,
            Kind::Word => {
                let w = &self.src[prev.start..prev.end];
                !NOT_ACCOUNT.iter().any(|k| w.eq_ignore_ascii_case(k))
            }
            _ => false,
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.skip_trivia();
        let b = self.src.as_bytes();
        let start = self.pos;
        let c = *b.get(start)?;
        let backslash = !self.dialect.no_backslash_escapes;
        let kind = match c {
            b'\'' => {
                self.pos = scan_quoted(b, start + 1, b'\'', backslash);
                Kind::String
            }
            b'"' if self.dialect.ansi_quotes => {
                self.pos = scan_quoted(b, start + 1, b'"', false);
                Kind::QuotedIdent
            }
            b'"' => {
                self.pos = scan_quoted(b, start + 1, b'"', backslash);
                Kind::String
            }
            b'`' => {
                self.pos = scan_quoted(b, start + 1, b'`', false);
                Kind::QuotedIdent
            }
            b'@' => self.at_sign(start),
            b'?' => {
                self.pos = start + 1;
                Kind::Param
            }
            b'0'..=b'9' => {
                self.number(start);
                Kind::Number
            }
            b':' if b.get(start + 1) == Some(&b'=') => {
                self.pos = start + 2;
                Kind::Punct
            }
            c if is_ident_cont(c) => {
                let mut i = start + 1;
                while b.get(i).is_some_and(|&c| is_ident_cont(c)) {
                    i += 1;
                }
                self.pos = i;
                Kind::Word
            }
            _ => {
                self.pos = start + 1;
                Kind::Punct
            }
        };
        let tok = Token {
            kind,
            start,
            end: self.pos,
        };
        self.prev = Some(tok);
        Some(tok)
    }
}
