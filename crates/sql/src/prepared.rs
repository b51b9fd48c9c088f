//! SQL-level prepared statements (PostgreSQL docs: PREPARE, EXECUTE,
//! DEALLOCATE) and `PREPARE TRANSACTION`, which shares the first key word.

use crate::cursor::Cursor;
use crate::effect::{Effect, PinReason, TxCommand};
use crate::ident::ident_name;
use crate::lexer::Kind;

const MALFORMED: Effect = Effect::Pin(PinReason::Unrecognized);

fn name(cur: &mut Cursor<'_>) -> Option<String> {
    let tok = cur.next()?;
    ident_name(cur, tok)
}

/// `PREPARE name [ (types) ] AS ...` or `PREPARE TRANSACTION 'gid'`.
pub(crate) fn classify_prepare(cur: &mut Cursor<'_>) -> Effect {
    if cur.peek_word("transaction") && cur.peek2().is_some_and(|t| t.kind == Kind::String) {
        return Effect::Transaction(TxCommand::PrepareTransaction);
    }
    match name(cur) {
        Some(name) => Effect::Prepare { name },
        None => MALFORMED,
    }
}

/// `EXECUTE name [ (args) ]`.
pub(crate) fn classify_execute(cur: &mut Cursor<'_>) -> Effect {
    match name(cur) {
        Some(name) => Effect::Execute { name },
        None => MALFORMED,
    }
}

/// `DEALLOCATE [PREPARE] { name | ALL }`.
pub(crate) fn classify_deallocate(cur: &mut Cursor<'_>) -> Effect {
    if cur.peek_word("prepare") && cur.peek2().is_some() {
        cur.next();
    }
    if cur.eat_word("all") {
        return match cur.at_end() {
            true => Effect::Deallocate { name: None },
            false => MALFORMED,
        };
    }
    match name(cur) {
        Some(name) if cur.at_end() => Effect::Deallocate { name: Some(name) },
        _ => MALFORMED,
    }
}
