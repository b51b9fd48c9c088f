//! The database servers' client connections, counted once a second while
//! a load runs (the number a proxy is there to keep down): each counted
//! server gets one connection of the engine's own, which asks
//! `pg_stat_activity` (client backends) or the process list (client
//! threads), and leaves itself out of the count.

use std::time::Duration;

use super::client::{Conn, Target};

/// Counting a server waits at most this long each second; a slower answer
/// is a gap in its series, not a late tick.
const COUNT_TIMEOUT: Duration = Duration::from_millis(500);

/// PostgreSQL: client backends, all databases (the counting one included).
const PG_COUNT: &str = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'";
/// MySQL/MariaDB: client threads (not the server's own), the counting one included.
const MY_COUNT: &str = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Binlog Dump GTID') AND USER <> 'system user'";

/// A server whose connections are counted, under its name in the report.
pub struct Counted {
    pub name: String,
    pub target: Target,
    conn: Option<Conn>,
}

impl Counted {
    pub fn new(name: String, target: Target) -> Self {
        Self {
            name,
            target,
            conn: None,
        }
    }

    /// The server's client connections now, without the counting one;
    /// `None` when it could not be asked within the second.
    pub async fn count(&mut self) -> Option<u64> {
        let sql = match self.target {
            Target::Postgres { .. } => PG_COUNT,
            Target::Mysql(_) => MY_COUNT,
        };
        let answer = tokio::time::timeout(COUNT_TIMEOUT, async {
            let conn = match &mut self.conn {
                Some(c) => c,
                None => self.conn.insert(self.target.connect().await.ok()?),
            };
            conn.first_number(sql).await.ok()
        })
        .await;
        match answer {
            Ok(Some(n)) => Some(n.saturating_sub(1)),
            _ => {
                self.conn = None;
                None
            }
        }
    }
}

/// Counts every server, one after the other (each within its timeout).
pub async fn count_all(counted: &mut [Counted]) -> Vec<Option<u64>> {
    let mut out = Vec::with_capacity(counted.len());
    for c in counted {
        out.push(c.count().await);
    }
    out
}
