//! `RESET` and `DISCARD` (PostgreSQL docs: RESET, DISCARD).

use crate::cursor::Cursor;
use crate::effect::{DiscardKind, Effect, PinReason};
use crate::ident::dotted_name;

const MALFORMED: Effect = Effect::Pin(PinReason::Unrecognized);

/// Classifies `RESET ...`; `cur` is positioned just after `RESET`.
pub(crate) fn classify_reset(cur: &mut Cursor<'_>) -> Effect {
    let effect = if cur.eat_word("all") {
        Effect::ResetAll
    } else if let Some(name) = special_name(cur) {
        Effect::Reset { name: name.to_owned() }
    } else {
        match dotted_name(cur) {
            Some(name) => Effect::Reset { name },
            None => return MALFORMED,
        }
    };
    if cur.at_end() { effect } else { MALFORMED }
}

fn special_name(cur: &mut Cursor<'_>) -> Option<&'static str> {
    if cur.eat_words(&["time", "zone"]) {
        Some("timezone")
    } else if cur.eat_words(&["session", "authorization"]) {
        Some("session_authorization")
    } else if cur.eat_words(&["transaction", "isolation", "level"]) {
        Some("transaction_isolation")
    } else {
        None
    }
}

/// Classifies `DISCARD ...`; `cur` is positioned just after `DISCARD`.
pub(crate) fn classify_discard(cur: &mut Cursor<'_>) -> Effect {
    let kind = if cur.eat_word("all") {
        DiscardKind::All
    } else if cur.eat_word("plans") {
        DiscardKind::Plans
    } else if cur.eat_word("sequences") {
        DiscardKind::Sequences
    } else if cur.eat_word("temp") || cur.eat_word("temporary") {
        DiscardKind::Temp
    } else {
        return MALFORMED;
    };
    if cur.at_end() { Effect::Discard(kind) } else { MALFORMED }
}
