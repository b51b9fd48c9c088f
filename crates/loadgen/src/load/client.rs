//! The load engine's clients: a target is any PostgreSQL or MySQL/MariaDB
//! connection string (`postgres://…`, a libpq `key=value` string, or
//! `mysql://…`), driven by the drivers users run (tokio-postgres,
//! mysql_async). A failure carries the server's own code (SQLSTATE, MySQL
//! error number) or the kind of client-side failure, so failures can be
//! counted by cause.

use std::str::FromStr;

use anyhow::{Context, Result, bail};
use mysql_async::prelude::Queryable;

/// Where the load goes.
#[derive(Clone)]
pub enum Target {
    Postgres(Box<tokio_postgres::Config>),
    Mysql(mysql_async::Opts),
}

/// Why a request failed: `code` is the server's (`42601`, `1064`) or one
/// of `connect`, `io`, `timeout`; `message` the first words of the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

impl Failure {
    pub fn new(code: impl Into<String>, message: impl std::fmt::Display) -> Self {
        let mut message = message.to_string();
        let mut at = MESSAGE_LIMIT.min(message.len());
        while !message.is_char_boundary(at) {
            at -= 1;
        }
        message.truncate(at);
        Self {
            code: code.into(),
            message,
        }
    }
}

/// The longest error message a failure keeps (the first of each code is
/// reported).
const MESSAGE_LIMIT: usize = 300;

/// A connection of one virtual user.
pub enum Conn {
    Postgres {
        client: tokio_postgres::Client,
        driver: tokio::task::JoinHandle<()>,
    },
    Mysql(mysql_async::Conn),
}

impl Target {
    /// A target from a connection string: `postgres://` / `postgresql://`
    /// URLs and libpq `key=value` strings are PostgreSQL; `mysql://` and
    /// `mariadb://` URLs are MySQL.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("mysql://").or_else(|| s.strip_prefix("mariadb://")) {
            let opts = mysql_async::Opts::from_url(&format!("mysql://{rest}"))
                .with_context(|| format!("not a MySQL URL: {s}"))?;
            return Ok(Self::Mysql(opts));
        }
        if s.is_empty() {
            bail!("an empty connection string");
        }
        let config =
            tokio_postgres::Config::from_str(s).with_context(|| format!("not a PostgreSQL connection string: {s}"))?;
        Ok(Self::Postgres(Box::new(config)))
    }

    pub fn engine(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Mysql(_) => "mysql",
        }
    }

    /// Opens a connection (its startup and authentication).
    pub async fn connect(&self) -> Result<Conn, Failure> {
        match self {
            Self::Postgres(config) => {
                let (client, connection) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| pg_failure(&e, "connect"))?;
                let driver = tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(Conn::Postgres { client, driver })
            }
            Self::Mysql(opts) => mysql_async::Conn::new(opts.clone())
                .await
                .map(Conn::Mysql)
                .map_err(|e| my_failure(&e, "connect")),
        }
    }
}

impl Conn {
    /// Runs `sql` (one statement or several, text protocol) and reads its
    /// whole answer.
    pub async fn query(&mut self, sql: &str) -> Result<(), Failure> {
        match self {
            Self::Postgres { client, .. } => client
                .simple_query(sql)
                .await
                .map(drop)
                .map_err(|e| pg_failure(&e, "io")),
            Self::Mysql(conn) => conn.query_drop(sql).await.map_err(|e| my_failure(&e, "io")),
        }
    }

    /// The number in the first column of the first row `sql` answers.
    pub async fn first_number(&mut self, sql: &str) -> Result<u64, Failure> {
        let number = match self {
            Self::Postgres { client, .. } => client
                .simple_query(sql)
                .await
                .map_err(|e| pg_failure(&e, "io"))?
                .into_iter()
                .find_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
                    _ => None,
                }),
            Self::Mysql(conn) => conn
                .query_first::<u64, _>(sql)
                .await
                .map_err(|e| my_failure(&e, "io"))?,
        };
        number.ok_or_else(|| Failure::new("io", format!("no number in the answer to {sql}")))
    }

    /// Closes the connection as a client that is done with it would.
    pub async fn close(self) {
        match self {
            Self::Postgres { client, driver } => {
                drop(client);
                let _ = driver.await;
            }
            Self::Mysql(conn) => {
                let _ = conn.disconnect().await;
            }
        }
    }
}

/// A PostgreSQL error's SQLSTATE, or `otherwise` (`connect`, `io`) when the
/// server sent none.
fn pg_failure(e: &tokio_postgres::Error, otherwise: &str) -> Failure {
    match e.as_db_error() {
        Some(db) => Failure::new(db.code().code(), db.message()),
        None => Failure::new(otherwise, e),
    }
}

/// A MySQL error's number, or `otherwise` when the server sent none.
fn my_failure(e: &mysql_async::Error, otherwise: &str) -> Failure {
    match e {
        mysql_async::Error::Server(s) => Failure::new(s.code.to_string(), &s.message),
        other => Failure::new(otherwise, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_name_their_engine() {
        let pg = [
            "postgres://u:p@127.0.0.1:5432/db",
            "postgresql://u@h/db",
            "host=127.0.0.1 user=u dbname=db",
        ];
        for s in pg {
            assert_eq!(Target::parse(s).map(|t| t.engine()).ok(), Some("postgres"), "{s}");
        }
        for s in ["mysql://u:p@127.0.0.1:3306/db", "mariadb://u@h:3307/db"] {
            assert_eq!(Target::parse(s).map(|t| t.engine()).ok(), Some("mysql"), "{s}");
        }
        assert!(Target::parse("").is_err());
        assert!(Target::parse("mysql://[bad").is_err());
    }

    #[test]
    fn failure_messages_are_bounded() {
        let f = Failure::new("42601", "x".repeat(10_000));
        assert_eq!(f.message.len(), MESSAGE_LIMIT);
        let f = Failure::new("42601", "é".repeat(10_000));
        assert!(f.message.len() <= MESSAGE_LIMIT && f.message.chars().all(|c| c == 'é'));
    }
}
