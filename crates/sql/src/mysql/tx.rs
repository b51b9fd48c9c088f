//! Transaction-control and XA statements (MySQL Reference Manual §15.3.1
//! "START TRANSACTION, COMMIT, and ROLLBACK", §15.3.4 "SAVEPOINT, ROLLBACK
//! TO SAVEPOINT, and RELEASE SAVEPOINT", §15.3.8 "XA Transactions").

use super::cursor::Cursor;
use super::effect::{MyEffect, PinReason, TxCommand};

/// Classifies a transaction-control statement by its first key word `kw`
/// (lower case); `cur` is just after it. `None` if `kw` is not one.
pub(crate) fn classify_tx(kw: &[u8], cur: &mut Cursor<'_>) -> Option<MyEffect> {
    let cmd = match kw {
        b"begin" => {
            if cur.peek_word("not") {
                // MariaDB `BEGIN NOT ATOMIC ... END` compound statement.
                return Some(MyEffect::Pin(PinReason::CompoundStatement));
            }
            TxCommand::Begin {
                read_only: false,
                consistent_snapshot: false,
            }
        }
        b"start" if cur.eat_word("transaction") => start_transaction(cur),
        b"commit" => {
            cur.eat_word("work");
            let (chain, release) = chain_release(cur);
            TxCommand::Commit { chain, release }
        }
        b"rollback" => {
            cur.eat_word("work");
            if cur.peek_word("to") {
                TxCommand::RollbackToSavepoint
            } else {
                let (chain, release) = chain_release(cur);
                TxCommand::Rollback { chain, release }
            }
        }
        b"savepoint" => TxCommand::Savepoint,
        b"release" if cur.peek_word("savepoint") => TxCommand::ReleaseSavepoint,
        // XA RECOVER only lists prepared branches; every other XA
        // statement ties the branch to this connection.
        b"xa" if cur.peek_word("recover") => return Some(MyEffect::PLAIN),
        b"xa" => return Some(MyEffect::Pin(PinReason::Xa)),
        _ => return None,
    };
    Some(MyEffect::Transaction(cmd))
}

/// `START TRANSACTION [WITH CONSISTENT SNAPSHOT | READ ONLY | READ WRITE] [, ...]`.
fn start_transaction(cur: &mut Cursor<'_>) -> TxCommand {
    let (mut read_only, mut consistent_snapshot) = (false, false);
    loop {
        if cur.eat_words(&["with", "consistent", "snapshot"]) {
            consistent_snapshot = true;
        } else if cur.eat_words(&["read", "only"]) {
            read_only = true;
        } else if cur.eat_words(&["read", "write"]) {
            read_only = false;
        }
        if !cur.eat_punct(",") {
            break;
        }
    }
    TxCommand::Begin {
        read_only,
        consistent_snapshot,
    }
}

/// `[AND [NO] CHAIN] [[NO] RELEASE]`.
fn chain_release(cur: &mut Cursor<'_>) -> (bool, bool) {
    let chain = cur.eat_words(&["and", "chain"]);
    cur.eat_words(&["and", "no", "chain"]);
    let release = cur.eat_word("release");
    (chain, release)
}
