//! `DECLARE name ... CURSOR [WITH | WITHOUT HOLD] FOR query` (PostgreSQL
//! docs: DECLARE): only a holdable cursor outlives its transaction.

use crate::cursor::Cursor;

/// True if the cursor options before `FOR` include `WITH HOLD`. `cur` is
/// positioned just after `DECLARE`.
pub(crate) fn declares_with_hold(cur: &mut Cursor<'_>) -> bool {
    while let Some(tok) = cur.next() {
        if cur.is_word(Some(tok), "for") {
            return false;
        }
        if cur.is_word(Some(tok), "with") && cur.peek_word("hold") {
            return true;
        }
    }
    false
}
