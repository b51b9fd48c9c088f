//! The SQL admin console, engine-neutral: what an operator types on it
//! ([`parse`]), who may run what ([`Role`]: `SHOW` for monitors, every
//! command for admins), and what comes back ([`Reply`]: a table or a
//! command tag), which each engine writes in its own protocol (PostgreSQL
//! RowDescription/DataRow, MySQL result sets). The commands are carried out
//! by whatever implements [`Commands`] (the app's, over every engine's core:
//! `gatehouse_admin::console`), so the sessions below it never see the app.
//!
//! Operators reach it as the database named `[console] database` (default
//! `gatehouse`) on any endpoint, logging in as a tenant listed in
//! `[console] admin_users` or `monitor_users`, as PgBouncer's `pgbouncer`
//! database with its `admin_users` and `stats_users`.

mod parse;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;

pub use parse::{Command, Show, Target, parse};

pub use gatehouse_settings::console::Role;

/// Who runs a console command.
#[derive(Debug, Clone)]
pub struct Caller {
    pub tenant: String,
    pub role: Role,
    /// The caller's own client id (it cannot `KILL` itself).
    pub client_id: u32,
}

/// A column's type: how engines declare it (text or a number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Integer,
    Real,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Text(String),
    Integer(i64),
    Real(f64),
}

impl Cell {
    /// The value as text, as both protocols send it; `None` for NULL.
    pub fn text(&self) -> Option<String> {
        match self {
            Self::Null => None,
            Self::Text(s) => Some(s.clone()),
            Self::Integer(i) => Some(i.to_string()),
            Self::Real(r) => Some(format!("{r:.6}")),
        }
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<Option<String>> for Cell {
    fn from(s: Option<String>) -> Self {
        s.map_or(Self::Null, Self::Text)
    }
}

impl From<u64> for Cell {
    fn from(n: u64) -> Self {
        Self::Integer(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Cell {
    fn from(n: usize) -> Self {
        Self::Integer(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Cell {
    fn from(n: u32) -> Self {
        Self::Integer(i64::from(n))
    }
}

impl From<bool> for Cell {
    fn from(b: bool) -> Self {
        Self::Integer(i64::from(b))
    }
}

impl From<f64> for Cell {
    fn from(r: f64) -> Self {
        Self::Real(r)
    }
}

/// A result set: named, typed columns and rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<(&'static str, ColumnType)>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, ColumnType)]) -> Self {
        Self {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (as many cells as columns; a short row is padded with NULL).
    pub fn push(&mut self, mut row: Vec<Cell>) {
        row.resize(self.columns.len(), Cell::Null);
        self.rows.push(row);
    }

    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|(n, _)| *n == name)
    }
}

/// What a command answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Rows, then the tag (PostgreSQL's CommandComplete, e.g. `SHOW`).
    Rows(Table, &'static str),
    /// Done, with the tag and a line of what was done (MySQL's OK info;
    /// PostgreSQL clients get it as a NOTICE).
    Done(&'static str, String),
}

/// Why a command was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a console command (PostgreSQL 42601, MySQL 1064).
    Syntax,
    /// The caller's role may not run it (42501, MySQL 1227).
    Denied,
    /// It names no such client, cluster, endpoint or backend (42704,
    /// MySQL 1094 for a client, else 1105).
    NotFound,
    /// It could not be carried out (a reload refused, a switchover failed:
    /// 55000, MySQL 1105).
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConsoleError {
    pub refusal: Refusal,
    pub message: String,
}

impl ConsoleError {
    pub fn new(refusal: Refusal, message: impl Into<String>) -> Self {
        Self {
            refusal,
            message: message.into(),
        }
    }
}

pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<Reply, ConsoleError>> + Send + 'a>>;

/// Carries out console commands (the role was checked before).
pub trait Commands: Send + Sync {
    fn run<'a>(&'a self, caller: &'a Caller, command: Command) -> Answer<'a>;
}

/// Runs the statements of `text` (separated by `;`) for `caller`, each
/// with its answer: parsed, checked against the caller's role, carried
/// out. An empty statement has no answer.
pub async fn execute(commands: &dyn Commands, caller: &Caller, text: &str) -> Vec<Result<Reply, ConsoleError>> {
    let mut out = Vec::new();
    for statement in parse::statements(text) {
        let answer = match parse(statement) {
            Err(e) => Err(e),
            Ok(c) if c.changes_state() && caller.role != Role::Admin => Err(ConsoleError::new(
                Refusal::Denied,
                format!(
                    "permission denied: \"{}\" may only run SHOW on the console ({} is an admin command)",
                    caller.tenant,
                    c.verb()
                ),
            )),
            Ok(c) => commands.run(caller, c).await,
        };
        let failed = answer.is_err();
        out.push(answer);
        if failed {
            // As a server does with a multi-statement string: the rest
            // does not run.
            break;
        }
    }
    out
}
