//! `SET` in all its forms (PostgreSQL docs: SET, SET ROLE, SET SESSION
//! AUTHORIZATION, SET TRANSACTION, SET CONSTRAINTS) and the shared rules that
//! turn a parsed setting into an [`Effect`].

use crate::cursor::Cursor;
use crate::effect::{Effect, PinReason, Scope};
use crate::ident::dotted_name;
use crate::lexer::Kind;

const MALFORMED: Effect = Effect::Pin(PinReason::Unrecognized);

/// A parsed value list: its raw source span, or `DEFAULT`.
enum Value<'a> {
    Raw(&'a str),
    Default,
}

/// Classifies a `SET` statement; `cur` is positioned just after `SET`.
pub(crate) fn classify_set(cur: &mut Cursor<'_>) -> Effect {
    let scope = modifier(cur);
    let generic = {
        let mut ahead = cur.clone();
        dotted_name(&mut ahead).is_some() && ahead.peek_assign()
    };
    if !generic {
        if cur.eat_words(&["time", "zone"]) {
            return time_zone(cur, scope);
        }
        if cur.eat_word("names") {
            return match cur.at_end() {
                true => setting("client_encoding", Value::Default, scope),
                false => value_effect(cur, "client_encoding", scope),
            };
        }
        if cur.eat_word("schema") {
            return value_effect(cur, "search_path", scope);
        }
        if cur.eat_words(&["xml", "option"]) {
            return value_effect(cur, "xmloption", scope);
        }
        if cur.eat_word("role") {
            return value_effect(cur, "role", scope);
        }
        if cur.eat_words(&["session", "authorization"]) {
            return value_effect(cur, "session_authorization", scope);
        }
        if cur.eat_words(&["session", "characteristics", "as", "transaction"]) {
            return session_characteristics(cur, scope);
        }
        if cur.peek_word("transaction") || cur.peek_word("constraints") {
            // Lasts only for the current transaction.
            return Effect::None;
        }
    }
    let Some(name) = dotted_name(cur) else {
        return MALFORMED;
    };
    if !cur.peek_assign() {
        // `SET name FROM CURRENT` and anything else we do not model.
        return MALFORMED;
    }
    cur.next();
    value_effect(cur, &name, scope)
}

/// Consumes an optional `SESSION` / `LOCAL` modifier. `SESSION` directly
/// followed by `AUTHORIZATION` or `CHARACTERISTICS` belongs to the form, and
/// a modifier word followed by `=`/`TO` is really the parameter name.
fn modifier(cur: &mut Cursor<'_>) -> Scope {
    let next = cur.peek2();
    if cur.is_punct(next, b'=') || cur.is_word(next, "to") {
        return Scope::Session;
    }
    if cur.eat_word("local") {
        return Scope::Local;
    }
    if cur.peek_word("session") && !cur.is_word(next, "authorization") && !cur.is_word(next, "characteristics") {
        cur.next();
    }
    Scope::Session
}

fn time_zone(cur: &mut Cursor<'_>, scope: Scope) -> Effect {
    if cur.peek_word("interval") {
        // Not replayable as `SET timezone TO ...`.
        return MALFORMED;
    }
    if cur.peek_word("local") && cur.peek2().is_none() {
        return setting("timezone", Value::Default, scope);
    }
    value_effect(cur, "timezone", scope)
}

fn value_effect(cur: &mut Cursor<'_>, name: &str, scope: Scope) -> Effect {
    match value_list(cur) {
        Some(value) => setting(name, value, scope),
        None => MALFORMED,
    }
}

/// Parses the rest of the statement as `item [, item ...]` where an item is a
/// word, quoted identifier, string constant or optionally signed number.
fn value_list<'a>(cur: &mut Cursor<'a>) -> Option<Value<'a>> {
    let first = cur.peek()?;
    let mut items = 0usize;
    let end = loop {
        let mut tok = cur.next()?;
        if cur.is_punct(Some(tok), b'-') || cur.is_punct(Some(tok), b'+') {
            tok = cur.next().filter(|t| t.kind == Kind::Number)?;
        }
        if !matches!(tok.kind, Kind::Word | Kind::QuotedIdent | Kind::String | Kind::Number) {
            return None;
        }
        items += 1;
        if !cur.eat_punct(b',') {
            break tok.end;
        }
    };
    if !cur.at_end() {
        return None;
    }
    if items == 1 && cur.is_word(Some(first), "default") {
        return Some(Value::Default);
    }
    Some(Value::Raw(cur.span(first.start, end)))
}

/// `SET SESSION CHARACTERISTICS AS TRANSACTION mode`: a single mode maps to
/// the matching `default_transaction_*` setting; several are not modelled.
fn session_characteristics(cur: &mut Cursor<'_>, scope: Scope) -> Effect {
    let (name, value) = if cur.eat_word("isolation") && cur.eat_word("level") {
        let level = if cur.eat_word("serializable") {
            "'serializable'"
        } else if cur.eat_word("repeatable") && cur.eat_word("read") {
            "'repeatable read'"
        } else if cur.eat_word("read") && cur.eat_word("committed") {
            "'read committed'"
        } else if cur.eat_word("uncommitted") {
            "'read uncommitted'"
        } else {
            return MALFORMED;
        };
        ("default_transaction_isolation", level)
    } else if cur.eat_word("read") {
        let value = if cur.eat_word("only") {
            "on"
        } else if cur.eat_word("write") {
            "off"
        } else {
            return MALFORMED;
        };
        ("default_transaction_read_only", value)
    } else if cur.eat_word("deferrable") {
        ("default_transaction_deferrable", "on")
    } else if cur.eat_word("not") && cur.eat_word("deferrable") {
        ("default_transaction_deferrable", "off")
    } else {
        return MALFORMED;
    };
    if !cur.at_end() {
        return MALFORMED;
    }
    setting(name, Value::Raw(value), scope)
}

/// Builds the effect of setting `name`, applying the pinning rules for
/// identity-changing and lexer-changing parameters.
fn setting(name: &str, value: Value<'_>, scope: Scope) -> Effect {
    let value = match (value, scope) {
        (Value::Default, Scope::Session) => return Effect::Reset { name: name.to_owned() },
        (Value::Default, Scope::Local) => "DEFAULT",
        (Value::Raw(raw), _) => raw,
    };
    set_effect(name.to_owned(), value.to_owned(), scope)
}

/// The effect of `SET name TO value` with an explicit value.
pub(crate) fn set_effect(name: String, value: String, scope: Scope) -> Effect {
    match (name.as_str(), scope) {
        ("role", Scope::Session) => return Effect::Pin(PinReason::SetRole),
        ("session_authorization", Scope::Session) => return Effect::Pin(PinReason::SetSessionAuthorization),
        // The tokenizer assumes backslashes in '..' are literal.
        ("standard_conforming_strings", _) if !is_on(&value) => return MALFORMED,
        _ => {}
    }
    Effect::Set { name, value, scope }
}

fn is_on(value: &str) -> bool {
    let v = value.trim_matches('\'');
    ["on", "true", "yes", "1"].iter().any(|on| v.eq_ignore_ascii_case(on))
}
