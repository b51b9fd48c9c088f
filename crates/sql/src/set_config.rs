//! The one `set_config` shape we can track: a statement that is exactly
//! `SELECT [pg_catalog.]set_config('name', 'value', true|false) [[AS] alias]`
//! with plain literal arguments (PostgreSQL docs §9.27.1, `set_config`).
//! Anything else mentioning `set_config` is left to the function scan, which
//! reports it as unrecognized.

use crate::cursor::Cursor;
use crate::effect::{Effect, Scope};
use crate::ident::{literal_value, quote_literal};
use crate::lexer::{Kind, Token};
use crate::set::set_effect;

/// Recognises the simple form. `cur` is positioned just after `SELECT`, and
/// `parens` is the number of `(` that preceded it and must be closed.
pub(crate) fn simple_set_config(mut cur: Cursor<'_>, parens: usize) -> Option<Effect> {
    if cur.eat_word("pg_catalog") && !cur.eat_punct(b'.') {
        return None;
    }
    if !cur.eat_word("set_config") || !cur.eat_punct(b'(') {
        return None;
    }
    let tok = cur.next()?;
    let name = literal(&cur, tok)?;
    if !cur.eat_punct(b',') {
        return None;
    }
    let tok = cur.next()?;
    let value = literal(&cur, tok)?;
    if !cur.eat_punct(b',') {
        return None;
    }
    let tok = cur.next()?;
    let scope = match is_local(&cur, tok)? {
        true => Scope::Local,
        false => Scope::Session,
    };
    if !cur.eat_punct(b')') {
        return None;
    }
    if cur.eat_word("as")
        || cur
            .peek()
            .is_some_and(|t| t.kind == Kind::Word && !cur.is_word(Some(t), "from"))
    {
        cur.next()
            .filter(|t| matches!(t.kind, Kind::Word | Kind::QuotedIdent))?;
    }
    for _ in 0..parens {
        if !cur.eat_punct(b')') {
            return None;
        }
    }
    if !cur.at_end() {
        return None;
    }
    let name = name.to_ascii_lowercase();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    {
        return None;
    }
    Some(set_effect(name, quote_literal(&value), scope))
}

fn literal(cur: &Cursor<'_>, tok: Token) -> Option<String> {
    if tok.kind != Kind::String {
        return None;
    }
    literal_value(cur.text(tok)).map(|v| v.into_owned())
}

/// The `is_local` argument: `true`/`false` or a boolean string literal.
fn is_local(cur: &Cursor<'_>, tok: Token) -> Option<bool> {
    let (truthy, falsy): (&[&str], &[&str]) = match tok.kind {
        Kind::Word => (&["true"], &["false"]),
        Kind::String => (
            &["true", "t", "on", "yes", "y", "1"],
            &["false", "f", "off", "no", "n", "0"],
        ),
        _ => return None,
    };
    let text = match tok.kind {
        Kind::String => literal(cur, tok)?,
        _ => cur.text(tok).to_owned(),
    };
    let text = text.trim();
    if truthy.iter().any(|v| text.eq_ignore_ascii_case(v)) {
        Some(true)
    } else if falsy.iter().any(|v| text.eq_ignore_ascii_case(v)) {
        Some(false)
    } else {
        None
    }
}
