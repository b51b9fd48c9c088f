//! Differential test of MySQL transaction pooling: many concurrent clients
//! each run a randomized but deterministic (seeded by client index)
//! sequence of operations — simple queries, prepared statements (binary
//! protocol), SETs of tracked variables, transactions committed and rolled
//! back, errors, inserts that generate ids (text and prepared) or insert
//! them explicitly, then `LAST_INSERT_ID()`, `@@identity`,
//! `@@last_insert_id`, `ROW_COUNT()`, `FOUND_ROWS()` (text and prepared),
//! `LAST_INSERT_ID(expr)`, with autocommit on and off — once directly
//! against the primary and once through the "small" endpoint (four backend
//! connections). Every client must see exactly the same results both times:
//! rows, variable values, error numbers, the OK packets' ids and counts.

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, Row, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::Ctx;

const CLIENTS: usize = 60;
const OPS: usize = 40;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![("differential::direct_vs_transaction_pooling", direct_vs_proxy)]
}

/// One step of a client's sequence.
#[derive(Debug, Clone)]
enum Op {
    Insert(i64, i64),
    Update(i64, i64),
    Select,
    Prepared(i64),
    Set(&'static str, String),
    ReadVars,
    Begin,
    Commit,
    Rollback,
    DuplicateKey(i64),
    SyntaxError,
    SumInTransaction,
    /// An INSERT that generates an id, text or prepared.
    InsertAuto {
        prepared: bool,
        v: i64,
    },
    /// An INSERT giving the AUTO_INCREMENT column explicitly: its OK
    /// carries the id, `LAST_INSERT_ID()` does not change.
    InsertExplicit(i64),
    /// Reads one of [`PREVIOUS`], text or prepared.
    ReadPrevious {
        which: usize,
        prepared: bool,
    },
    /// `SELECT LAST_INSERT_ID(n)`.
    SetLastInsertId(i64),
    /// A SELECT with LIMIT, for FOUND_ROWS().
    SelectLimit,
}

/// What depends on the previous statement.
const PREVIOUS: [&str; 5] = [
    "SELECT LAST_INSERT_ID()",
    "SELECT @@identity",
    "SELECT @@last_insert_id",
    "SELECT ROW_COUNT()",
    "SELECT FOUND_ROWS()",
];

const VARS: [(&str, &[&str]); 4] = [
    ("sql_mode", &["'ANSI_QUOTES'", "'STRICT_TRANS_TABLES'", "DEFAULT", "''"]),
    ("time_zone", &["'+01:00'", "'-05:00'", "DEFAULT"]),
    ("group_concat_max_len", &["100", "2048", "DEFAULT"]),
    ("autocommit", &["0", "1"]),
];

fn generate(client: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(client as u64 * 7919 + 1);
    let mut ops = Vec::with_capacity(OPS);
    let mut next_id = 1i64;
    for _ in 0..OPS {
        let op = match rng.gen_range(0..17) {
            0 | 1 => {
                next_id += 1;
                Op::Insert(next_id, rng.gen_range(0..1000))
            }
            2 => Op::Update(rng.gen_range(1..=next_id), rng.gen_range(0..1000)),
            3 => Op::Select,
            4 => Op::Prepared(rng.gen_range(1..=next_id)),
            5 => {
                let (name, values) = VARS[rng.gen_range(0..VARS.len())];
                Op::Set(name, values[rng.gen_range(0..values.len())].to_owned())
            }
            6 => Op::ReadVars,
            7 => Op::Begin,
            8 => Op::Commit,
            9 => Op::Rollback,
            10 => Op::DuplicateKey(rng.gen_range(1..=next_id)),
            11 | 12 => Op::InsertAuto {
                prepared: rng.gen_bool(0.5),
                v: rng.gen_range(0..1000),
            },
            13 => match rng.gen_range(0..3) {
                0 => Op::InsertExplicit(rng.gen_range(100_000..200_000)),
                1 => Op::SetLastInsertId(rng.gen_range(1..1000)),
                _ => Op::SelectLimit,
            },
            14 | 15 => Op::ReadPrevious {
                which: rng.gen_range(0..PREVIOUS.len()),
                prepared: rng.gen_bool(0.3),
            },
            _ => {
                if rng.gen_bool(0.5) {
                    Op::SyntaxError
                } else {
                    Op::SumInTransaction
                }
            }
        };
        ops.push(op);
    }
    ops
}

fn render(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}

fn rows(result: Result<Vec<Row>, mysql_async::Error>) -> String {
    match result {
        Ok(rows) => rows
            .iter()
            .map(|r| {
                r.columns_ref()
                    .iter()
                    .enumerate()
                    .map(|(i, _)| render(&r[i]))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect::<Vec<_>>()
            .join(";"),
        Err(mysql_async::Error::Server(e)) => format!("ERR {}", e.code),
        Err(e) => format!("CLIENT ERROR {e}"),
    }
}

/// Runs one client's sequence on `conn`: one rendered result per step.
async fn run_client(mut conn: Conn, client: usize, ops: &[Op]) -> Result<Vec<String>> {
    let table = format!("diff_{client}");
    conn.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY, v INT)"))
        .await?;
    conn.query_drop(format!("INSERT INTO {table} VALUES (1, 0)")).await?;
    let auto = format!("diffai_{client}");
    conn.query_drop(format!(
        "CREATE TABLE {auto} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ))
    .await?;
    let stmt = conn.prep(format!("SELECT id, v FROM {table} WHERE id = ?")).await?;
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let r = match op {
            Op::Insert(id, v) => rows(conn.query(format!("INSERT INTO {table} VALUES ({id}, {v})")).await),
            Op::Update(id, v) => rows(conn.query(format!("UPDATE {table} SET v = {v} WHERE id = {id}")).await),
            Op::Select => rows(conn.query(format!("SELECT id, v FROM {table} ORDER BY id")).await),
            Op::Prepared(id) => rows(conn.exec(&stmt, (id,)).await),
            Op::Set(name, value) => rows(conn.query(format!("SET SESSION {name} = {value}")).await),
            Op::ReadVars => rows(
                conn.query("SELECT @@sql_mode, @@time_zone, @@group_concat_max_len, @@autocommit, @@in_transaction")
                    .await,
            ),
            Op::Begin => rows(conn.query("BEGIN").await),
            Op::Commit => rows(conn.query("COMMIT").await),
            Op::Rollback => rows(conn.query("ROLLBACK").await),
            Op::DuplicateKey(id) => rows(conn.query(format!("INSERT INTO {table} VALUES ({id}, 1)")).await),
            Op::SyntaxError => rows(conn.query("SELEC 1").await),
            Op::SumInTransaction => rows(conn.query(format!("SELECT COUNT(*), SUM(v) FROM {table}")).await),
            Op::InsertAuto { prepared, v } => {
                let sql = format!("INSERT INTO {auto} (v) VALUES (?)");
                let r = match prepared {
                    true => conn.exec_drop(sql, (v,)).await,
                    false => conn.query_drop(sql.replace('?', &v.to_string())).await,
                };
                match r {
                    Ok(()) => format!("id {:?} rows {}", conn.last_insert_id(), conn.affected_rows()),
                    Err(e) => rows(Err(e)),
                }
            }
            Op::InsertExplicit(id) => match conn.query_drop(format!("INSERT INTO {auto} VALUES ({id}, 0)")).await {
                Ok(()) => format!("id {:?} rows {}", conn.last_insert_id(), conn.affected_rows()),
                Err(e) => rows(Err(e)),
            },
            Op::ReadPrevious { which, prepared: true } => rows(conn.exec(PREVIOUS[*which], ()).await),
            Op::ReadPrevious { which, prepared: false } => rows(conn.query(PREVIOUS[*which]).await),
            Op::SetLastInsertId(n) => rows(conn.query(format!("SELECT LAST_INSERT_ID({n})")).await),
            Op::SelectLimit => rows(conn.query(format!("SELECT id FROM {table} ORDER BY id LIMIT 2")).await),
        };
        out.push(format!("{op:?} -> {r}"));
    }
    // Whatever is still open is rolled back, as a disconnect does.
    conn.query_drop("ROLLBACK").await?;
    let final_rows = rows(conn.query(format!("SELECT id, v FROM {table} ORDER BY id")).await);
    out.push(format!("final -> {final_rows}"));
    conn.query_drop(format!("DROP TABLE {table}, {auto}")).await?;
    conn.disconnect().await?;
    Ok(out)
}

async fn run_all(opts: Opts) -> Result<Vec<Vec<String>>> {
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let opts = opts.clone();
        tasks.push(tokio::spawn(async move {
            let ops = generate(client);
            let conn = Conn::new(opts).await?;
            run_client(conn, client, &ops).await
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await??);
    }
    Ok(results)
}

fn direct_vs_proxy(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let direct = run_all(ctx.direct_opts("app2")?).await.context("direct run")?;
        let proxy = run_all(ctx.opts("small", "bob", "bob-pw", Some("app2")))
            .await
            .context("proxy run")?;
        let mut differing = 0;
        let mut first = None;
        for (client, (d, p)) in direct.iter().zip(&proxy).enumerate() {
            if let Some(step) = d.iter().zip(p).position(|(a, b)| a != b) {
                differing += 1;
                first.get_or_insert_with(|| {
                    let before = d[step.saturating_sub(8)..step].join("\n  ");
                    format!(
                        "client {client} step {step}: direct {:?}, proxy {:?}; the steps before:\n  {before}",
                        d[step], p[step]
                    )
                });
            }
        }
        ensure!(
            differing == 0,
            "{differing} of {CLIENTS} clients differ; first: {}",
            first.unwrap_or_default()
        );
        let steps: usize = direct.iter().map(Vec::len).sum();
        ensure!(steps == CLIENTS * (OPS + 1));
        Ok(())
    })
}
