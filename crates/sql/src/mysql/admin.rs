//! Locking, loading and diagnostics statements: `FLUSH TABLES ... WITH READ
//! LOCK | FOR EXPORT` (MySQL Reference Manual §15.7.8.3 "FLUSH"), MariaDB
//! `BACKUP STAGE` / `BACKUP LOCK` (MariaDB KB), `LOAD DATA|XML ... LOCAL`
//! (§15.2.9, §15.2.10, §8.1.6 "Security Considerations for LOAD DATA
//! LOCAL"), `SHOW WARNINGS|ERRORS` (§15.7.7.42, §15.7.7.17).

use super::cursor::Cursor;
use super::effect::{Info, MyEffect};

/// `FLUSH [NO_WRITE_TO_BINLOG | LOCAL] TABLE[S] [t, ...] {WITH READ LOCK |
/// FOR EXPORT}` takes locks held by this connection; other flushes are plain.
pub(crate) fn flush(cur: &mut Cursor<'_>) -> MyEffect {
    let _ = cur.eat_word("no_write_to_binlog") || cur.eat_word("local");
    if !(cur.eat_word("tables") || cur.eat_word("table")) {
        return MyEffect::PLAIN;
    }
    let mut ahead = cur.clone();
    if ahead.find_words(&["with", "read", "lock"]) || cur.find_words(&["for", "export"]) {
        return MyEffect::LockTables;
    }
    MyEffect::PLAIN
}

/// MariaDB `BACKUP STAGE {START|FLUSH|BLOCK_DDL|BLOCK_COMMIT|END}`,
/// `BACKUP LOCK t`, `BACKUP UNLOCK`.
pub(crate) fn backup(cur: &mut Cursor<'_>) -> MyEffect {
    if cur.eat_word("stage") {
        return match cur.peek_word("end") {
            true => MyEffect::UnlockTables,
            false => MyEffect::LockTables,
        };
    }
    if cur.eat_word("lock") {
        return MyEffect::LockTables;
    }
    if cur.eat_word("unlock") {
        return MyEffect::UnlockTables;
    }
    MyEffect::PLAIN
}

/// `LOAD {DATA | XML} [LOW_PRIORITY | CONCURRENT] LOCAL INFILE ...`.
pub(crate) fn load(cur: &mut Cursor<'_>) -> MyEffect {
    if !(cur.eat_word("data") || cur.eat_word("xml")) {
        return MyEffect::PLAIN;
    }
    let _ = cur.eat_word("low_priority") || cur.eat_word("concurrent");
    match cur.peek_word("local") {
        true => MyEffect::LoadDataLocal,
        false => MyEffect::PLAIN,
    }
}

/// `SHOW [COUNT(*)] {WARNINGS | ERRORS}` reads the previous statement's
/// diagnostics area.
pub(crate) fn show(cur: &mut Cursor<'_>) -> MyEffect {
    let full = cur.eat_word("full");
    if cur.eat_word("processlist") && cur.peek().is_none() {
        return MyEffect::ProcessList { full };
    }
    if full {
        return MyEffect::PLAIN;
    }
    if cur.eat_word("count") {
        for p in ["(", "*", ")"] {
            if !cur.eat_punct(p) {
                return MyEffect::PLAIN;
            }
        }
    }
    match cur.peek_word("warnings") || cur.peek_word("errors") {
        true => MyEffect::Plain(Info {
            reads_diagnostics: true,
            ..Info::NONE
        }),
        false => MyEffect::PLAIN,
    }
}
