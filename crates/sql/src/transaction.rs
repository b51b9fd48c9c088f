//! Transaction-control statements (PostgreSQL docs: BEGIN, START TRANSACTION,
//! COMMIT, END, ROLLBACK, ABORT, SAVEPOINT, RELEASE SAVEPOINT, ROLLBACK TO
//! SAVEPOINT, COMMIT PREPARED, ROLLBACK PREPARED; PREPARE TRANSACTION lives
//! with PREPARE).

use crate::cursor::Cursor;
use crate::effect::{Effect, PinReason, TxCommand};

/// Classifies a transaction statement given its lower-cased first key word,
/// or `None` if `kw` does not start one. `cur` is positioned after `kw`.
pub(crate) fn classify_tx(kw: &[u8], cur: &mut Cursor<'_>) -> Option<Effect> {
    let cmd = match kw {
        b"begin" => TxCommand::Begin,
        b"start" if cur.peek_word("transaction") => TxCommand::Begin,
        b"start" => return Some(Effect::Pin(PinReason::Unrecognized)),
        b"commit" if cur.peek_word("prepared") => TxCommand::CommitPrepared,
        b"commit" | b"end" => TxCommand::Commit,
        b"abort" => TxCommand::Rollback,
        b"rollback" if cur.peek_word("prepared") => TxCommand::RollbackPrepared,
        b"rollback" => {
            let _ = cur.eat_word("work") || cur.eat_word("transaction");
            match cur.peek_word("to") {
                true => TxCommand::RollbackTo,
                false => TxCommand::Rollback,
            }
        }
        b"savepoint" => TxCommand::Savepoint,
        b"release" => TxCommand::Release,
        _ => return None,
    };
    Some(Effect::Transaction(cmd))
}
