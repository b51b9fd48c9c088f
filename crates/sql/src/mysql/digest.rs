//! Query digests for MySQL/MariaDB: the MySQL front end of
//! [`mod@crate::digest`], which owns the [`Digest`] type, the canonical form
//! (spacing, `IN (...)` and `VALUES (..), ...` folding, the
//! [`MAX_DIGEST_TEXT`](crate::MAX_DIGEST_TEXT) cap, the FNV-1a 64 id) and
//! documents it. This module maps the tokens of the MySQL lexer onto it,
//! under the session's [`Dialect`] (`ANSI_QUOTES`, `NO_BACKSLASH_ESCAPES`).
//!
//! Literals become `?` (MariaDB KB "String Literals", "Numeric Literals";
//! MySQL Reference Manual §11.1 "Literal Values"):
//! * strings `'..'`, and `".."` unless `ANSI_QUOTES`; `N'..'`; strings with
//!   a character-set introducer (`_utf8mb4'..'`, `_binary 'x'`, also before
//!   a hex or bit literal): introducer and string are one `?`;
//! * numbers: integers, decimals (`1.5`, `.5`, `1.`), exponents, hex `0x1F`
//!   and `X'1F'`, bits `0b101` and `b'101'`. A digit-led word that is not
//!   a number (`1abc`, an identifier in MySQL) is a word;
//! * `?` placeholders stay `?`; a sign before a number in operand position
//!   is part of the literal (`= -5` is `= ?`). `TRUE`, `FALSE` and `NULL`
//!   are key words and stay.
//!
//! Comments (`#`, `-- `, `/* */`, and so also optimizer hints `/*+ */`,
//! which are comments to the lexer) are dropped, but the content of
//! executable comments (`/*! .. */`, `/*!50700 .. */`, MariaDB `/*M! .. */`,
//! KB "Comment Syntax") is kept as SQL, since the server runs it; only the
//! markers go. Key words, unquoted identifiers and unquoted `@var` /
//! `@@var` names are lower-cased. Whether table names are case-sensitive
//! depends on the server's `lower_case_table_names`, so `T` and `t` may be
//! different tables that share a digest: digests group statements for
//! statistics, they do not identify objects. Backtick-quoted identifiers
//! (and `".."` ones under `ANSI_QUOTES`) are kept as written. Operators are
//! grouped as MySQL lexes them (`<=>`, `<=`, `!=`, `||`, `->>`, `:=`, ...).
//! `VALUE (..), (..)` folds like `VALUES`.

use super::Dialect;
use super::lexer::{Kind, Lexer, Token, is_ident_cont};
use crate::digest::{Digest, Tok, Writer, is_ellipsis, signed_op};

/// The digest of one MySQL/MariaDB statement under `dialect`. Never panics.
pub fn digest(stmt: &str, dialect: Dialect) -> Digest {
    let mut w = Writer::new(stmt.len());
    let mut lx = Lexer::new(stmt, dialect);
    while let Some(t) = lx.next() {
        let text = &stmt[t.start..t.end];
        match t.kind {
            Kind::String | Kind::Param => w.push(Tok::Literal),
            Kind::Number if is_number(text) => w.push(Tok::Literal),
            Kind::Number | Kind::Word => word(&mut w, &mut lx, t),
            Kind::QuotedIdent => w.push(Tok::Ident(text)),
            Kind::UserVar | Kind::SysVar if !text.contains(['\'', '"', '`']) => w.push(Tok::Word(text)),
            Kind::UserVar | Kind::SysVar => w.push(Tok::Ident(text)),
            Kind::Punct => punct(&mut w, &mut lx, t),
        }
    }
    w.finish()
}

/// A numeric literal: `0x` hex digits, `0b` bits, or digits with an
/// optional fraction and exponent (MariaDB KB "Numeric Literals").
fn is_number(s: &str) -> bool {
    let b = s.as_bytes();
    if let Some(hex) = s.strip_prefix("0x") {
        return !hex.is_empty() && hex.bytes().all(|c| c.is_ascii_hexdigit());
    }
    if let Some(bits) = s.strip_prefix("0b") {
        return !bits.is_empty() && bits.bytes().all(|c| matches!(c, b'0' | b'1'));
    }
    let digits = |mut i: usize| {
        let from = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i, i - from)
    };
    let (mut i, int) = digits(0);
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        (i, frac) = digits(i + 1);
    }
    if int + frac == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
        let exp;
        (i, exp) = digits(i + 1 + sign);
        if exp == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Character sets a `_name` introducer may name (MySQL 8.4 and MariaDB 11).
const CHARSETS: [&str; 43] = [
    "armscii8", "ascii", "big5", "binary", "cp1250", "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866", "cp932",
    "dec8", "eucjpms", "euckr", "filename", "gb18030", "gb2312", "gbk", "geostd8", "greek", "hebrew", "hp8", "keybcs2",
    "koi8r", "koi8u", "latin1", "latin2", "latin5", "latin7", "macce", "macroman", "sjis", "swe7", "tis620", "ucs2",
    "ujis", "utf16", "utf16le", "utf32", "utf8", "utf8mb3", "utf8mb4",
];

fn is_introducer(w: &str) -> bool {
    w.strip_prefix('_')
        .is_some_and(|cs| CHARSETS.iter().any(|c| cs.eq_ignore_ascii_case(c)))
}

/// The next token, if it starts right at `at` (nothing in between).
fn adjacent(lx: &Lexer<'_>, at: usize) -> Option<Token> {
    lx.clone().next().filter(|t| t.start == at)
}

/// If `x'..'`, `b'..'` or `n'..'` starts at `t`, consumes its string part.
fn prefixed_string(lx: &mut Lexer<'_>, t: Token) -> bool {
    let src = lx.src();
    let prefixed = matches!(&src[t.start..t.end], "x" | "X" | "b" | "B" | "n" | "N") && src[t.end..].starts_with('\'');
    if prefixed {
        lx.next();
    }
    prefixed
}

/// A word, or the start of a prefixed or introduced literal.
fn word(w: &mut Writer, lx: &mut Lexer<'_>, t: Token) {
    let src = lx.src();
    let text = &src[t.start..t.end];
    if prefixed_string(lx, t) {
        return w.push(Tok::Literal);
    }
    if is_introducer(text) {
        let mut after = lx.clone();
        match after.next() {
            Some(n) if n.kind == Kind::String => {
                lx.next();
                return w.push(Tok::Literal);
            }
            Some(n) if n.kind == Kind::Number && is_number(&src[n.start..n.end]) => {
                lx.next();
                return w.push(Tok::Literal);
            }
            Some(n) if n.kind == Kind::Word && prefixed_string(&mut after, n) => {
                *lx = after;
                return w.push(Tok::Literal);
            }
            _ => {}
        }
    }
    w.push(Tok::Word(text));
}

/// Multi-character operators, longest first (MySQL Reference Manual §14.4
/// "Operators"; JSON `->`, `->>`). `:=` is already one token.
const OPERATORS: [&str; 11] = ["<=>", "->>", "<=", ">=", "<>", "!=", "||", "&&", "<<", ">>", "->"];

fn punct(w: &mut Writer, lx: &mut Lexer<'_>, t: Token) {
    let src = lx.src();
    let b = src.as_bytes();
    let c = b[t.start];
    match c {
        b'(' | b'[' => w.push(Tok::Open(c)),
        b')' | b']' => w.push(Tok::Close(c)),
        b',' => w.push(Tok::Comma),
        b';' => w.push(Tok::Semi),
        b'.' => dot(w, lx, t),
        _ => {
            let rest = &src[t.start..];
            let len = OPERATORS
                .iter()
                .find(|op| rest.starts_with(*op))
                .map_or(1, |op| op.len());
            let mut end = t.end;
            while end < t.start + len {
                match adjacent(lx, end).filter(|n| n.kind == Kind::Punct && n.end <= t.start + len) {
                    Some(n) => {
                        lx.next();
                        end = n.end;
                    }
                    None => break,
                }
            }
            let op = &src[t.start..end];
            let mut peek = lx.clone();
            let number = || {
                peek.next()
                    .is_some_and(|n| n.kind == Kind::Number && is_number(&src[n.start..n.end]))
            };
            signed_op(w, op, number, || {
                lx.next();
            });
        }
    }
}

/// At a `.`: an ellipsis `...` (as in digest text), a decimal such as
/// `.5` (when the `.` does not follow a name or `)`), or a qualifier dot.
fn dot(w: &mut Writer, lx: &mut Lexer<'_>, t: Token) {
    let src = lx.src();
    let b = src.as_bytes();
    if is_ellipsis(src, t.start) {
        lx.next();
        lx.next();
        return w.push(Tok::Ellipsis);
    }
    let qualifier = t.start > 0 && {
        let p = b[t.start - 1];
        is_ident_cont(p) || matches!(p, b'`' | b'"' | b')')
    };
    let fraction = adjacent(lx, t.end).filter(|n| {
        let s = &src[n.start..n.end];
        let digits_exponent = s
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'e' | b'E' | b'+' | b'-'));
        n.kind == Kind::Number && digits_exponent && is_number(s)
    });
    if !qualifier && fraction.is_some() {
        lx.next();
        return w.push(Tok::Literal);
    }
    w.push(Tok::Dot);
}
