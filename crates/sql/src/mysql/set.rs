//! `SET` in its MySQL/MariaDB forms (MySQL Reference Manual §15.7.6.1 "SET
//! Syntax for Variable Assignment", §15.7.6.2 "SET CHARACTER SET",
//! §15.7.6.3 "SET NAMES", §15.3.7 "SET TRANSACTION", §15.7.1.11 "SET ROLE";
//! MariaDB KB "SET STATEMENT"). A scope key word (`GLOBAL`, `SESSION`,
//! `LOCAL`, `PERSIST`, `PERSIST_ONLY`) applies to the assignments after it
//! that have none of their own; `@@global.x` applies to `x` only.

use super::classify::{Ctx, classify_in};
use super::cursor::Cursor;
use super::effect::{MyEffect, PinReason, VarChange};
use super::lexer::{Kind, Token};
use super::vars::canonical;

const UNRECOGNIZED: MyEffect = MyEffect::Pin(PinReason::Unrecognized);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Session,
    Global,
}

/// Classifies a `SET` statement; `cur` is just after `SET`.
pub(crate) fn classify_set(cur: &mut Cursor<'_>, ctx: Ctx<'_>) -> MyEffect {
    let assign_next = cur.is_assign(cur.peek2());
    if !assign_next {
        if cur.eat_word("password") || cur.eat_words(&["default", "role"]) {
            return MyEffect::PLAIN;
        }
        if cur.eat_word("role") {
            return MyEffect::Pin(PinReason::SetRole);
        }
        if cur.eat_words(&["resource", "group"]) {
            return MyEffect::Pin(PinReason::SetUntracked);
        }
        if cur.eat_word("statement") {
            // MariaDB `SET STATEMENT a=1 [, ...] FOR stmt`: scoped to stmt.
            return match cur.find_words(&["for"]) {
                true => cur.peek().map_or(UNRECOGNIZED, |t| classify_in(cur.rest(t.start), ctx)),
                false => UNRECOGNIZED,
            };
        }
        if cur.eat_word("transaction") {
            return MyEffect::NextTransaction;
        }
    } else if cur.peek_word("password") {
        return MyEffect::PLAIN;
    }
    assignments(cur, ctx)
}

/// `item [, item ...]` where an item is a (scoped) variable assignment,
/// `NAMES ...`, `CHARACTER SET ...` or `[scope] TRANSACTION ...`.
fn assignments(cur: &mut Cursor<'_>, ctx: Ctx<'_>) -> MyEffect {
    let mut scope = Scope::Session;
    let mut changes = Vec::new();
    let mut global = false;
    loop {
        if !cur.is_assign(cur.peek2()) {
            if cur.eat_word("global") || cur.eat_word("persist") || cur.eat_word("persist_only") {
                scope = Scope::Global;
            } else if cur.eat_word("session") || cur.eat_word("local") {
                scope = Scope::Session;
            }
        }
        let item = if cur.eat_word("names") {
            names(cur).map(|c| (Scope::Session, c))
        } else if cur.eat_words(&["character", "set"]) || cur.eat_word("charset") {
            charset(cur).map(|c| (Scope::Session, c))
        } else if cur.eat_word("transaction") {
            return transaction(cur, scope, changes, global);
        } else {
            assignment(cur, scope, ctx)
        };
        match item {
            Ok((Scope::Global, _)) => global = true,
            Ok((Scope::Session, Some(change))) => changes.push(change),
            Ok((Scope::Session, None)) => {}
            Err(reason) => return MyEffect::Pin(reason),
        }
        if !cur.eat_punct(",") {
            break;
        }
    }
    finish(cur, changes, global)
}

fn finish(cur: &Cursor<'_>, changes: Vec<VarChange>, global: bool) -> MyEffect {
    match (cur.at_end(), changes.is_empty(), global) {
        (false, _, _) => UNRECOGNIZED,
        (true, true, true) => MyEffect::Global,
        (true, true, false) => UNRECOGNIZED,
        (true, false, _) => MyEffect::Set(changes),
    }
}

type Item = Result<(Scope, Option<VarChange>), PinReason>;

/// `target = value` with the scope in force; `cur` is at the target.
fn assignment(cur: &mut Cursor<'_>, scope: Scope, ctx: Ctx<'_>) -> Item {
    let tok = cur.next().ok_or(PinReason::Unrecognized)?;
    let text = cur.text(tok);
    let (scope, name) = match tok.kind {
        Kind::UserVar => return Err(PinReason::UserVariable),
        Kind::SysVar => sys_var(text)?,
        Kind::Word => (scope, text),
        Kind::QuotedIdent => (scope, text.get(1..text.len() - 1).ok_or(PinReason::Unrecognized)?),
        _ => return Err(PinReason::Unrecognized),
    };
    if cur.peek().is_some_and(|t| cur.text(t) == ".") {
        // Structured variable (`key_cache.key_buffer_size`): not tracked.
        return match scope {
            Scope::Global => skip_value(cur).map(|()| (scope, None)),
            Scope::Session => Err(PinReason::SetUntracked),
        };
    }
    let op = cur.next();
    if !cur.is_assign(op) {
        return Err(PinReason::Unrecognized);
    }
    if scope == Scope::Global {
        return skip_value(cur).map(|()| (scope, None));
    }
    let name = match canonical(name) {
        Some(known) => known.to_owned(),
        None if ctx.extra_tracked.iter().any(|t| t.eq_ignore_ascii_case(name)) => name.to_ascii_lowercase(),
        None => return Err(PinReason::SetUntracked),
    };
    let value = value(cur)?;
    if name == "sql_mode" && !matches!(value.kind, Kind::String | Kind::Word) {
        return Err(PinReason::Unrecognized);
    }
    let change = match value.is_default {
        true => VarChange::Reset { name },
        false => VarChange::Set {
            name,
            value: value.text.to_owned(),
        },
    };
    Ok((Scope::Session, Some(change)))
}

/// Splits `@@[scope.]name` into its scope and name.
fn sys_var(text: &str) -> Result<(Scope, &str), PinReason> {
    let body = text.get(2..).ok_or(PinReason::Unrecognized)?;
    let (scope, name) = match body.split_once('.') {
        Some((s, name))
            if ["global", "persist", "persist_only"]
                .iter()
                .any(|g| s.eq_ignore_ascii_case(g)) =>
        {
            (Scope::Global, name)
        }
        Some((s, name)) if s.eq_ignore_ascii_case("session") || s.eq_ignore_ascii_case("local") => {
            (Scope::Session, name)
        }
        Some(_) => return Err(PinReason::SetUntracked),
        None => (Scope::Session, body),
    };
    let name = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')).unwrap_or(name);
    match name.is_empty() {
        true => Err(PinReason::Unrecognized),
        false => Ok((scope, name)),
    }
}

/// A replayable value: its source text, whether it is `DEFAULT`, and the
/// kind of its first token.
struct Value<'a> {
    text: &'a str,
    is_default: bool,
    kind: Kind,
}

/// The value up to the next top-level `,` or the end. Variables,
/// placeholders, parentheses (calls, subqueries) and `SELECT` make it an
/// expression that cannot be replayed verbatim.
fn value<'a>(cur: &mut Cursor<'a>) -> Result<Value<'a>, PinReason> {
    let first = cur.peek().ok_or(PinReason::Unrecognized)?;
    let mut last = first;
    while let Some(tok) = cur.peek() {
        if cur.is_punct(Some(tok), ",") {
            break;
        }
        cur.next();
        match tok.kind {
            Kind::UserVar => return Err(PinReason::UserVariable),
            Kind::SysVar | Kind::Param => return Err(PinReason::SetExpression),
            Kind::Punct if matches!(cur.text(tok), "(" | ")") => return Err(PinReason::SetExpression),
            Kind::Word if cur.is_word(Some(tok), "select") => return Err(PinReason::SetExpression),
            _ => last = tok,
        }
    }
    let is_default = first == last && cur.is_word(Some(first), "default");
    Ok(Value {
        text: cur.span(first.start, last.end),
        is_default,
        kind: first.kind,
    })
}

/// Skips a global assignment's value (at parenthesis depth zero).
fn skip_value(cur: &mut Cursor<'_>) -> Result<(), PinReason> {
    let mut depth = 0usize;
    while let Some(tok) = cur.peek() {
        match cur.text(tok) {
            "," if depth == 0 => break,
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            _ if tok.kind == Kind::UserVar => return Err(PinReason::UserVariable),
            _ => {}
        }
        cur.next();
    }
    Ok(())
}

/// A charset or collation name token: word, string or quoted identifier.
fn name_token(cur: &mut Cursor<'_>) -> Option<Token> {
    cur.next()
        .filter(|t| matches!(t.kind, Kind::Word | Kind::String | Kind::QuotedIdent))
}

/// `NAMES {charset [COLLATE collation] | DEFAULT}`.
fn names(cur: &mut Cursor<'_>) -> Result<Option<VarChange>, PinReason> {
    let cs = name_token(cur).ok_or(PinReason::Unrecognized)?;
    let collation = match cur.eat_word("collate") {
        true => {
            let tok = name_token(cur).ok_or(PinReason::Unrecognized)?;
            Some(cur.text(tok).to_owned())
        }
        false => None,
    };
    Ok(Some(VarChange::Names {
        charset: cur.text(cs).to_owned(),
        collation,
    }))
}

/// `CHARACTER SET {charset | DEFAULT}`.
fn charset(cur: &mut Cursor<'_>) -> Result<Option<VarChange>, PinReason> {
    let cs = name_token(cur).ok_or(PinReason::Unrecognized)?;
    Ok(Some(VarChange::CharacterSet {
        charset: cur.text(cs).to_owned(),
    }))
}

/// `[scope] TRANSACTION characteristic [, ...]`, ending the statement.
fn transaction(cur: &mut Cursor<'_>, scope: Scope, mut changes: Vec<VarChange>, global: bool) -> MyEffect {
    loop {
        let (name, value) = if cur.eat_words(&["isolation", "level"]) {
            let level = if cur.eat_words(&["repeatable", "read"]) {
                "'REPEATABLE-READ'"
            } else if cur.eat_words(&["read", "committed"]) {
                "'READ-COMMITTED'"
            } else if cur.eat_words(&["read", "uncommitted"]) {
                "'READ-UNCOMMITTED'"
            } else if cur.eat_word("serializable") {
                "'SERIALIZABLE'"
            } else {
                return UNRECOGNIZED;
            };
            ("transaction_isolation", level)
        } else if cur.eat_words(&["read", "only"]) {
            ("transaction_read_only", "ON")
        } else if cur.eat_words(&["read", "write"]) {
            ("transaction_read_only", "OFF")
        } else {
            return UNRECOGNIZED;
        };
        if scope == Scope::Session {
            changes.push(VarChange::Set {
                name: name.to_owned(),
                value: value.to_owned(),
            });
        }
        if !cur.eat_punct(",") {
            break;
        }
    }
    finish(cur, changes, global || scope == Scope::Global)
}
