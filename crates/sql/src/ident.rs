//! Identifier and literal helpers: name folding (`Foo` → `foo`, `"Foo"` →
//! `Foo`), decoding plain string constants, and quoting values back as SQL.

use std::borrow::Cow;

use crate::cursor::Cursor;
use crate::lexer::{Kind, Token};

/// The folded name of a word or quoted identifier token.
pub(crate) fn ident_name(cur: &Cursor<'_>, tok: Token) -> Option<String> {
    let text = cur.text(tok);
    match tok.kind {
        Kind::Word => Some(text.to_ascii_lowercase()),
        Kind::QuotedIdent => {
            let name = unquote(text.strip_prefix('"')?, '"')?;
            (!name.is_empty()).then(|| name.into_owned())
        }
        _ => None,
    }
}

/// Consumes `ident ('.' ident)*` and returns the folded, dot-joined name.
pub(crate) fn dotted_name(cur: &mut Cursor<'_>) -> Option<String> {
    let first = cur.next()?;
    let mut name = ident_name(cur, first)?;
    while cur.eat_punct(b'.') {
        let tok = cur.next()?;
        name.push('.');
        name.push_str(&ident_name(cur, tok)?);
    }
    Some(name)
}

/// The value of a plain string constant: `'..'` (with `''` doubling),
/// `E'..'` without backslashes, or `$tag$..$tag$`. `None` for anything else,
/// including unterminated constants.
pub(crate) fn literal_value(text: &str) -> Option<Cow<'_, str>> {
    if let Some(rest) = text.strip_prefix('$') {
        let tag = &text[..rest.find('$')? + 2];
        return Some(Cow::Borrowed(text.get(tag.len()..)?.strip_suffix(tag)?));
    }
    let quoted = match text.strip_prefix(['e', 'E']) {
        Some(_) if text.contains('\\') => return None,
        Some(rest) => rest,
        None => text,
    };
    unquote(quoted.strip_prefix('\'')?, '\'')
}

/// Decodes `body` (the text after an opening quote `q`), which must end with
/// the closing quote; doubled quotes stand for one.
fn unquote(body: &str, q: char) -> Option<Cow<'_, str>> {
    let bytes = body.as_bytes();
    let qb = q as u8;
    let mut doubled = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != qb {
            i += 1;
        } else if bytes.get(i + 1) == Some(&qb) {
            doubled = true;
            i += 2;
        } else if i + 1 == bytes.len() {
            let inner = &body[..i];
            if !doubled {
                return Some(Cow::Borrowed(inner));
            }
            let pair: String = [q, q].into_iter().collect();
            return Some(Cow::Owned(inner.replace(&pair, &q.to_string())));
        } else {
            return None;
        }
    }
    None
}

/// `value` as a standard-conforming SQL string literal.
pub(crate) fn quote_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    out
}
