//! Where a transaction ends from the client's point of view, for sessions
//! with `autocommit` off, where the server's `SERVER_STATUS_IN_TRANS` flag
//! is set only once a transactional table is touched (MySQL Reference
//! Manual §15.3.1 "START TRANSACTION, COMMIT, and ROLLBACK": with
//! autocommit off a session always has a transaction open; §15.3.3
//! "Statements That Cause an Implicit Commit"; MariaDB KB "SQL statements
//! That Cause an Implicit Commit").

use super::Dialect;
use super::cursor::Cursor;
use super::effect::{MyEffect, TxCommand};

/// What one statement does to the client's transaction when autocommit is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxBoundary {
    /// Runs inside the transaction (starting it if none is open).
    Within,
    /// Ends the transaction: `COMMIT`/`ROLLBACK` without `AND CHAIN`, or a
    /// statement that commits implicitly (DDL, account management, table
    /// maintenance, `LOCK TABLES`, ...).
    Ends,
    /// Neither starts nor ends one: tracked `SET`s and `USE`, which the
    /// proxy replays on whichever connection runs the next statement.
    Neutral,
}

/// Object kinds whose `CREATE`/`ALTER`/`DROP` commit implicitly (everything
/// but temporary tables, which the classifier reports as pins).
const DDL_KEYWORDS: [&[u8]; 3] = [b"create", b"alter", b"drop"];

/// Statements that commit implicitly by their first key word.
const COMMITTING: [&[u8]; 13] = [
    b"rename",
    b"truncate",
    b"grant",
    b"revoke",
    b"analyze",
    b"check",
    b"optimize",
    b"repair",
    b"flush",
    b"install",
    b"uninstall",
    b"cache",
    b"reset",
];

/// The boundary `stmt` (already classified as `effect`) marks.
pub fn tx_boundary(stmt: &str, effect: &MyEffect, dialect: Dialect) -> TxBoundary {
    match effect {
        MyEffect::Transaction(TxCommand::Commit { chain, .. } | TxCommand::Rollback { chain, .. }) => {
            if *chain {
                TxBoundary::Within
            } else {
                TxBoundary::Ends
            }
        }
        MyEffect::Set(_) | MyEffect::Use(_) | MyEffect::NextTransaction | MyEffect::Global => TxBoundary::Neutral,
        MyEffect::LockTables | MyEffect::UnlockTables => TxBoundary::Ends,
        MyEffect::Plain(_) => {
            let mut cur = Cursor::new(stmt, dialect);
            while cur.eat_punct("(") {}
            let Some(first) = cur.next() else {
                return TxBoundary::Within;
            };
            let word = cur.text(first).as_bytes();
            let is = |k: &[u8]| word.eq_ignore_ascii_case(k);
            if COMMITTING.iter().any(|k| is(k)) || DDL_KEYWORDS.iter().any(|k| is(k)) {
                return TxBoundary::Ends;
            }
            if is(b"load") && (cur.eat_word("index")) {
                return TxBoundary::Ends;
            }
            if is(b"set") && cur.eat_word("password") {
                return TxBoundary::Ends;
            }
            TxBoundary::Within
        }
        _ => TxBoundary::Within,
    }
}
