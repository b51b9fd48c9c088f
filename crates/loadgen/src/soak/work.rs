//! The soak's workloads on one target, either engine: the table they share
//! (`soak_kv`, [`ROWS`] rows), a user's loop (a transaction or a statement
//! at a time, reconnecting after a failure), and the held idle clients.
//! Prepared statements go through the drivers' own prepare/execute:
//! tokio-postgres' extended protocol (Parse/Bind/Execute, Close when a
//! statement is dropped) and mysql_async's COM_STMT_PREPARE/EXECUTE (its
//! statement cache closes the evicted ones).

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::{Instant, sleep, timeout, timeout_at};

use super::{Counters, Plan};
use crate::load::client::{Conn, Failure, Target, my_failure as my, pg_failure as pg};

/// Rows of `soak_kv`; transactions update and read random ones.
pub const ROWS: i32 = 1000;
/// A transaction or statement taking longer fails (`timeout`).
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failure a user waits this long before reconnecting.
const BACKOFF: Duration = Duration::from_millis(200);
/// A `prep` user prepares a new statement after this many executions.
const STMT_USES: u32 = 50;
/// Distinct statement texts the `prep` users cycle through.
const STMT_TEXTS: u32 = 1000;
/// The `tx` users' statements, prepared once per connection (`?` is `$1`
/// on PostgreSQL): the UPDATE of one row, the SELECT of another.
const TX_SQL: [&str; 2] = [
    "UPDATE soak_kv SET v = v + 1 WHERE id = ?",
    "SELECT v FROM soak_kv WHERE id = ?",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tx,
    Prep,
    Churn,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Tx => "tx",
            Self::Prep => "prep",
            Self::Churn => "churn",
        }
    }
}

/// Creates `soak_kv` with its rows unless it is there.
pub async fn setup(target: &Target) -> Result<(), Failure> {
    let mut conn = target.connect().await?;
    let create = "CREATE TABLE IF NOT EXISTS soak_kv (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0)";
    let fill = match target {
        Target::Postgres { .. } => {
            format!("INSERT INTO soak_kv (id) SELECT g FROM generate_series(1, {ROWS}) g ON CONFLICT DO NOTHING")
        }
        Target::Mysql(_) => {
            let values: Vec<String> = (1..=ROWS).map(|i| format!("({i})")).collect();
            format!("INSERT IGNORE INTO soak_kv (id) VALUES {}", values.join(","))
        }
    };
    let mut result = conn.query(create).await;
    if result.is_ok() {
        result = conn.query(&fill).await;
    }
    conn.close().await;
    result
}

/// A connection a user keeps, with the statements it prepared on it.
struct Session {
    conn: Conn,
    stmts: Stmts,
    /// Executions of the current `prep` statement.
    uses: u32,
    /// Statements prepared so far (picks the next text).
    prepared: u32,
}

enum Stmts {
    None,
    Pg(Vec<tokio_postgres::Statement>),
    My(Vec<mysql_async::Statement>),
}

/// One user of `kind` until the deadline: a transaction (or statement) at a
/// time, a pause after each; a failure is counted, the connection dropped,
/// and the next attempt reconnects after [`BACKOFF`].
pub async fn user(kind: Kind, target: Target, plan: Plan, counters: Arc<Counters>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut session: Option<Session> = None;
    let deadline = Instant::from_std(plan.deadline);
    while Instant::now() < deadline {
        let attempt = one(kind, &target, &mut session, &mut rng);
        match timeout(OP_TIMEOUT, attempt).await {
            Ok(Ok(())) => counters.done(1),
            Ok(Err(failure)) => {
                counters.failed(&failure);
                session = None;
                sleep(BACKOFF).await;
            }
            Err(_) => {
                counters.failed(&Failure::new(
                    "timeout",
                    format!("{} took over {OP_TIMEOUT:?}", kind.name()),
                ));
                session = None;
                sleep(BACKOFF).await;
            }
        }
        if !plan.think.is_zero() {
            sleep(plan.think).await;
        }
    }
    if let Some(s) = session {
        s.conn.close().await;
    }
}

/// One transaction (`tx`, `churn`) or statement (`prep`).
async fn one(kind: Kind, target: &Target, session: &mut Option<Session>, rng: &mut StdRng) -> Result<(), Failure> {
    let a = rng.gen_range(1..=ROWS);
    let b = rng.gen_range(1..=ROWS);
    if kind == Kind::Churn {
        let mut conn = target.connect().await?;
        let result = churn(&mut conn, a, b).await;
        conn.close().await;
        return result;
    }
    let s = match session {
        Some(s) => s,
        None => session.insert(open(kind, target).await?),
    };
    match kind {
        Kind::Tx => transaction(s, a, b).await,
        _ => prepared(s, a).await,
    }
}

/// A connection with the `tx` statements prepared on it (none for `prep`,
/// whose statements come and go).
async fn open(kind: Kind, target: &Target) -> Result<Session, Failure> {
    let mut conn = target.connect().await?;
    let stmts = match (&mut conn, kind) {
        (Conn::Postgres { client, .. }, Kind::Tx) => {
            let mut prepared = Vec::new();
            for sql in TX_SQL.map(|q| q.replace('?', "$1")) {
                prepared.push(client.prepare(&sql).await.map_err(|e| pg(&e, "prepare"))?);
            }
            Stmts::Pg(prepared)
        }
        (Conn::Mysql(conn), Kind::Tx) => {
            let mut prepared = Vec::new();
            for sql in TX_SQL {
                prepared.push(conn.prep(sql).await.map_err(|e| my(&e, "prepare"))?);
            }
            Stmts::My(prepared)
        }
        _ => Stmts::None,
    };
    Ok(Session {
        conn,
        stmts,
        uses: 0,
        prepared: 0,
    })
}

/// BEGIN; the prepared UPDATE of row `a` (one row changed); the prepared
/// SELECT of row `b` (one row read); COMMIT.
async fn transaction(s: &mut Session, a: i32, b: i32) -> Result<(), Failure> {
    match (&mut s.conn, &s.stmts) {
        (Conn::Postgres { client, .. }, Stmts::Pg(st)) => {
            client.batch_execute("BEGIN").await.map_err(|e| pg(&e, "io"))?;
            let changed = client.execute(&st[0], &[&a]).await.map_err(|e| pg(&e, "io"))?;
            let row = client.query_opt(&st[1], &[&b]).await.map_err(|e| pg(&e, "io"))?;
            client.batch_execute("COMMIT").await.map_err(|e| pg(&e, "io"))?;
            check(changed == 1 && row.is_some(), a, b)
        }
        (Conn::Mysql(conn), Stmts::My(st)) => {
            conn.query_drop("BEGIN").await.map_err(|e| my(&e, "io"))?;
            conn.exec_drop(&st[0], (a,)).await.map_err(|e| my(&e, "io"))?;
            let changed = conn.affected_rows();
            let row: Option<i64> = conn.exec_first(&st[1], (b,)).await.map_err(|e| my(&e, "io"))?;
            conn.query_drop("COMMIT").await.map_err(|e| my(&e, "io"))?;
            check(changed == 1 && row.is_some(), a, b)
        }
        _ => Err(Failure::new("bug", "a tx session without its statements")),
    }
}

/// The current prepared `SELECT v + K FROM soak_kv WHERE id = ?` on row
/// `a`, outside a transaction; every [`STMT_USES`] executions a new one
/// (the next K) replaces it and the old one is closed.
async fn prepared(s: &mut Session, a: i32) -> Result<(), Failure> {
    let fresh = s.uses.is_multiple_of(STMT_USES);
    s.uses += 1;
    let k = s.prepared % STMT_TEXTS;
    if fresh {
        s.prepared += 1;
    }
    let found = match &mut s.conn {
        Conn::Postgres { client, .. } => {
            if fresh || !matches!(s.stmts, Stmts::Pg(_)) {
                let stmt = client
                    .prepare(&format!("SELECT v + {k} FROM soak_kv WHERE id = $1"))
                    .await
                    .map_err(|e| pg(&e, "prepare"))?;
                // Dropping the old statement sends its Close.
                s.stmts = Stmts::Pg(vec![stmt]);
            }
            let Stmts::Pg(st) = &s.stmts else {
                return Err(Failure::new("bug", "no PostgreSQL statement"));
            };
            client
                .query_opt(&st[0], &[&a])
                .await
                .map_err(|e| pg(&e, "io"))?
                .is_some()
        }
        Conn::Mysql(conn) => {
            if fresh || !matches!(s.stmts, Stmts::My(_)) {
                let stmt = conn
                    .prep(format!("SELECT v + {k} FROM soak_kv WHERE id = ?"))
                    .await
                    .map_err(|e| my(&e, "prepare"))?;
                if let Stmts::My(old) = std::mem::replace(&mut s.stmts, Stmts::My(vec![stmt])) {
                    for o in old {
                        conn.close(o).await.map_err(|e| my(&e, "close"))?;
                    }
                }
            }
            let Stmts::My(st) = &s.stmts else {
                return Err(Failure::new("bug", "no MySQL statement"));
            };
            let row: Option<i64> = conn.exec_first(&st[0], (a,)).await.map_err(|e| my(&e, "io"))?;
            row.is_some()
        }
    };
    check(found, a, a)
}

/// The churn's transaction, in the text protocol on a fresh connection.
async fn churn(conn: &mut Conn, a: i32, b: i32) -> Result<(), Failure> {
    conn.query("BEGIN").await?;
    conn.query(&format!("UPDATE soak_kv SET v = v + 1 WHERE id = {a}"))
        .await?;
    conn.first_number(&format!("SELECT v FROM soak_kv WHERE id = {b}"))
        .await?;
    conn.query("COMMIT").await
}

/// Holds `count` clients (each logged in and answered `SELECT 1`) until the
/// deadline, then checks each with another `SELECT 1`; `done` counts the
/// clients that passed both.
pub async fn idle(target: Target, count: u32, plan: Plan, counters: Arc<Counters>) {
    let deadline = Instant::from_std(plan.deadline);
    let mut held = Vec::new();
    for _ in 0..count {
        match timeout(OP_TIMEOUT, open_idle(&target)).await {
            Ok(Ok(conn)) => held.push(conn),
            Ok(Err(f)) => counters.failed(&f),
            Err(_) => counters.failed(&Failure::new("timeout", "an idle client's login")),
        }
    }
    // The deadline also bounds the hold when the opening took long.
    let _ = timeout_at(deadline, std::future::pending::<()>()).await;
    for mut conn in held {
        match timeout(OP_TIMEOUT, conn.first_number("SELECT 1")).await {
            Ok(Ok(1)) => counters.done(1),
            Ok(Ok(n)) => counters.failed(&Failure::new("check", format!("SELECT 1 answered {n}"))),
            Ok(Err(f)) => counters.failed(&f),
            Err(_) => counters.failed(&Failure::new("timeout", "an idle client's final SELECT 1")),
        }
        conn.close().await;
    }
}

async fn open_idle(target: &Target) -> Result<Conn, Failure> {
    let mut conn = target.connect().await?;
    match conn.first_number("SELECT 1").await {
        Ok(1) => Ok(conn),
        Ok(n) => Err(Failure::new("check", format!("SELECT 1 answered {n}"))),
        Err(f) => Err(f),
    }
}

fn check(ok: bool, a: i32, b: i32) -> Result<(), Failure> {
    if ok {
        Ok(())
    } else {
        Err(Failure::new(
            "check",
            format!("row {a} not updated or row {b} not read"),
        ))
    }
}
