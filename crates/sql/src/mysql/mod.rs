//! Cheap, sans-I/O classification of MySQL/MariaDB statement text by what
//! it does to *session state*, for the proxy's MySQL engine, which
//! multiplexes clients over backend connections at transaction granularity.
//!
//! The module tokenizes just enough (MySQL Reference Manual §11 "Language
//! Structure"; MariaDB KB "Comment Syntax") to
//!
//! * split a multi-statement `COM_QUERY` into statements
//!   ([`split_statements`]), and
//! * say for each statement whether it is transaction control, a `USE`, a
//!   tracked session-variable change the proxy can replay on another
//!   backend connection, table locking, `LOAD DATA LOCAL`, or state that
//!   pins the client to its backend, with a [`PinReason`] ([`classify`]).
//!
//! A plain `SELECT ... FROM t WHERE id = 5` costs one key-word look-up plus
//! one byte scan and does not allocate.
//!
//! Assumptions and decisions:
//! * `ANSI_QUOTES` and `NO_BACKSLASH_ESCAPES` are off unless the caller
//!   says otherwise through [`Dialect`] (tracked via `sql_mode`, see
//!   [`Dialect::from_sql_mode`]).
//! * Executable comments (`/*! */`, `/*!NNNNN */`, `/*M! */`) are code,
//!   whatever their version.
//! * Transaction boundaries come from the server's `SERVER_STATUS_IN_TRANS`
//!   flag, and, with autocommit off (where the flag is set only once a
//!   table is touched), from [`tx_boundary`], which knows the statements
//!   that commit implicitly.
//! * `ROW_COUNT()` and `FOUND_ROWS()` do not pin: the proxy writes the
//!   previous statement's values into a statement that runs on another
//!   connection ([`substitute_previous_results`]). `SQL_CALC_FOUND_ROWS`
//!   pins (`found_rows`): only the server knows that count.
//! * `LAST_INSERT_ID(expr)` does not pin: it is reported
//!   ([`Info::sets_last_insert_id`]) and the proxy reads the value back.
//! * `GET_LOCK(` pins; `RELEASE_LOCK(`, `RELEASE_ALL_LOCKS(`,
//!   `IS_USED_LOCK(`, `IS_FREE_LOCK(` do not (a session that took a lock
//!   is already pinned, and releasing one cannot prove none is left).
//! * `CALL` pins (`call`): a procedure may do anything. `CREATE
//!   PROCEDURE|FUNCTION|TRIGGER|EVENT` is plain and its body is not scanned.
//! * Every `PREPARE`, `EXECUTE` (also MariaDB `EXECUTE IMMEDIATE`) and
//!   `DEALLOCATE|DROP PREPARE` pins (`prepare`).
//! * `XA RECOVER` is plain; every other `XA` statement pins (`xa`).
//! * `SET` of an untracked session variable pins (`set_untracked`) unless
//!   the caller lists it in [`classify_with`]'s `extra_tracked`, which makes
//!   it tracked and replayed like the built-in list. `session_track_*` are
//!   not tracked. Unknown first key words are plain (after the scan).

mod admin;
mod boundary;
mod classify;
mod cursor;
mod dialect;
mod digest;
mod effect;
mod lexer;
#[cfg(test)]
mod lexer_tests;
mod route;
mod scan;
mod set;
mod split;
mod substitute;
mod tx;
mod vars;

pub use boundary::{TxBoundary, tx_boundary};
pub use classify::{classify, classify_all, classify_with};
pub use dialect::Dialect;
pub use digest::digest;
pub use effect::{Info, Kill, MyEffect, PinReason, TxCommand, VarChange};
pub use route::{route, route_with};
pub use split::split_statements;
pub use substitute::{PreviousResults, shows_its_text, substitute_previous_results};

/// The first key word of a MySQL statement, as the server reads it: in
/// MySQL's comment syntax, executable comments read (see
/// [`crate::statement_kind`]).
pub fn statement_kind(text: &str) -> Option<&str> {
    text.get(statement_kind_at(text)?)
}

/// Where [`statement_kind`] is in `text`.
pub fn statement_kind_at(text: &str) -> Option<std::ops::Range<usize>> {
    crate::kind::kind_range(text, crate::kind::Syntax::Mysql)
}
