//! A backend lost under a MySQL session between the client's statements
//! (server killed, failed over, restarted): unless the session holds state
//! that died with the server (pinned, LOCK TABLES, an open cursor, long
//! data: it ends), only the statement in flight fails, with
//! ER_SERVER_SHUTDOWN (1053, SQLSTATE 08S01: drivers take it for a lost
//! server, never the generic 1105), and the session goes on: its next
//! statement is routed afresh, to whatever backend is the writer by then.
//!
//! Inside a transaction the client still believes in it, but it was rolled
//! back with its server: until the client ends it, nothing it sends may run
//! outside the transaction it meant. `ROLLBACK` is answered OK; `COMMIT`
//! (nothing was committed) and every other statement get 1053 again, the
//! COMMIT ending the lost transaction too; `BEGIN` / `START TRANSACTION`
//! (which would commit it implicitly) end it and run. COM_RESET_CONNECTION
//! and COM_CHANGE_USER start the session over.

use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::errors;

use super::{Fatal, Session};
use gatehouse_core::engine::stream::ClientStream;

/// What the client is told of a statement lost with its server.
pub const LOST_MESSAGE: &str = "Lost connection to the database server during the statement (server failure or \
     failover); it may or may not have been applied, and the session goes on";

/// What the client is told of a statement in a transaction lost with its server.
pub const LOST_TRANSACTION_MESSAGE: &str = "The transaction was rolled back: its database server was lost \
     (server failure or failover); ROLLBACK to go on";

/// How a statement sent in a lost transaction is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InLost {
    /// ROLLBACK: answered OK, the session goes on.
    Rollback,
    /// COMMIT: refused (nothing was committed), the lost transaction ends.
    Commit,
    /// BEGIN / START TRANSACTION: the lost transaction ends; it runs.
    Begin,
    /// Anything else: refused.
    Refused,
}

/// Classifies the first statement of `sql` sent in a lost transaction.
pub fn in_lost(sql: &str) -> InLost {
    let lower = sql.trim().trim_end_matches(';').trim().to_ascii_lowercase();
    let mut words = lower.split_whitespace();
    let rest_plain =
        |w: &mut std::str::SplitWhitespace| w.all(|w| matches!(w, "work" | "and" | "no" | "chain" | "release"));
    match words.next().unwrap_or_default() {
        "rollback" if !lower.contains(" to ") => InLost::Rollback,
        "commit" if rest_plain(&mut words) => InLost::Commit,
        "begin" => InLost::Begin,
        "start" if words.next() == Some("transaction") => InLost::Begin,
        _ => InLost::Refused,
    }
}

impl Session {
    /// A command of a session whose transaction was lost: `Ok(true)` when
    /// it was answered here, `Ok(false)` when it is to run (the lost
    /// transaction is over).
    pub(crate) async fn in_lost_transaction(
        &mut self,
        stream: &mut ClientStream,
        cmd: u8,
        payload: &[u8],
    ) -> Result<bool, Fatal> {
        match cmd {
            COM_PING | COM_STMT_CLOSE | COM_RESET_CONNECTION | COM_CHANGE_USER => {
                if matches!(cmd, COM_RESET_CONNECTION | COM_CHANGE_USER) {
                    self.lost_block = false;
                }
                Ok(false)
            }
            COM_QUERY => {
                let sql = String::from_utf8_lossy(&payload[1..]);
                match in_lost(&sql) {
                    InLost::Rollback => {
                        self.lost_block = false;
                        self.local_ok(stream).await?;
                        Ok(true)
                    }
                    InLost::Commit => {
                        self.lost_block = false;
                        self.error(stream, 1, errors::ER_SERVER_SHUTDOWN, LOST_TRANSACTION_MESSAGE)
                            .await?;
                        Ok(true)
                    }
                    InLost::Begin => {
                        self.lost_block = false;
                        Ok(false)
                    }
                    InLost::Refused => {
                        self.error(stream, 1, errors::ER_SERVER_SHUTDOWN, LOST_TRANSACTION_MESSAGE)
                            .await?;
                        Ok(true)
                    }
                }
            }
            _ => {
                self.error(stream, 1, errors::ER_SERVER_SHUTDOWN, LOST_TRANSACTION_MESSAGE)
                    .await?;
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{InLost, in_lost};

    #[test]
    fn statements_in_a_lost_transaction_are_classified() {
        assert_eq!(in_lost("ROLLBACK"), InLost::Rollback);
        assert_eq!(in_lost("rollback work;"), InLost::Rollback);
        assert_eq!(in_lost("ROLLBACK TO SAVEPOINT a"), InLost::Refused);
        assert_eq!(in_lost("COMMIT"), InLost::Commit);
        assert_eq!(in_lost("commit work and no chain"), InLost::Commit);
        assert_eq!(in_lost("BEGIN"), InLost::Begin);
        assert_eq!(in_lost("START TRANSACTION READ ONLY"), InLost::Begin);
        assert_eq!(in_lost("INSERT INTO t VALUES (1)"), InLost::Refused);
        assert_eq!(in_lost("SET autocommit = 1"), InLost::Refused);
    }
}
