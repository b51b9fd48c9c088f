//! Differential test of transaction pooling: many concurrent clients each run
//! a randomized but deterministic (seeded by client index) sequence of
//! operations, once directly against the primary and once through the "tx"
//! endpoint (a pool of two backend connections). Every client must see
//! exactly the same results both times: rows, SHOW values, SQLSTATEs.
//!
//! Known proxy bugs this case finds (it fails until they are fixed):
//! - a tracked parameter SET through the extended protocol with its Parse
//!   synced apart from its Execute (tokio-postgres `execute("SET ..")`) is
//!   never read back: the client loses it when it moves to the other
//!   backend connection, and the backend keeps it for the next client;
//! - when a Parse fails (aborted transaction, syntax error, unknown table),
//!   the Close the proxy queued behind it to evict an old statement is
//!   skipped by the server but forgotten by the proxy, so preparing that
//!   statement again on that connection fails with 42P05.

use std::fmt::Display;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tokio_postgres::types::{FromSql, ToSql, Type};
use tokio_postgres::{Client, Error, Row, SimpleQueryMessage, Statement};

use crate::Ctx;

type Param = dyn ToSql + Sync;

const DB: &str = "app2";
const CLIENTS: usize = 200;
/// Operations per client: OPS - 5 ..= OPS + 5.
const OPS: usize = 40;
/// Clients that connect at the same time (keeps logins within login_timeout).
const CONNECT_BATCH: usize = 25;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    // Fails on the two known proxy bugs listed at the top of this file.
    vec![("differential::direct_vs_transaction_pooling", direct_vs_proxy)]
}

/// splitmix64: tiny, deterministic, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Tracked parameters and the raw values clients give them.
const PARAMS: &[(&str, &[&str])] = &[
    (
        "search_path",
        &[
            "public",
            "\"$user\", public",
            "pg_catalog, public",
            "public, pg_catalog",
            "pg_catalog",
        ],
    ),
    ("application_name", &["diff-a", "diff b", "ünïcödé"]),
    (
        "TimeZone",
        &[
            "UTC",
            "Asia/Tokyo",
            "America/New_York",
            "Europe/Berlin",
            "Australia/Adelaide",
        ],
    ),
    ("DateStyle", &["ISO, MDY", "SQL, DMY", "German", "Postgres, YMD"]),
    ("statement_timeout", &["0", "45s", "2min", "3600000"]),
    ("lock_timeout", &["0", "5s", "90s"]),
    ("extra_float_digits", &["0", "1", "2", "-3", "3"]),
    (
        "default_transaction_isolation",
        &["read committed", "repeatable read", "serializable"],
    ),
];

/// Index of application_name in [`PARAMS`]: its default differs between a
/// direct connection and a pooled one, so it is only shown once set.
const APP: usize = 1;

/// Values the server rejects, by parameter index (none for search_path and
/// application_name, which take anything).
const INVALID: &[(usize, &str)] = &[
    (2, "Mars/Olympus_Mons"),
    (3, "bogus"),
    (4, "abc"),
    (5, "-1s"),
    (6, "99"),
    (7, "chaotic"),
];

const WORDS: &[&str] = &["a", "héllo", "it's", "x y z", "", "日本語", "tab\there", "50%"];

fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}

/// `SET name = value` syntax for a raw value (search_path is a list).
fn set_value(p: usize, v: &str) -> String {
    if PARAMS[p].0 == "search_path" {
        v.to_string()
    } else {
        quote(v)
    }
}

#[derive(Debug, Clone)]
enum SetHow {
    Plain,
    SessionTo,
    SetConfig,
    WithShow,
    /// Parse + Describe + Sync, then Bind + Execute + Sync (known proxy bug:
    /// the proxy does not notice the SET).
    Extended,
    /// The unnamed statement, Parse to Sync in one go.
    Unnamed,
}

#[derive(Debug, Clone)]
enum Op {
    SelectInt(i64),
    Repeat(usize),
    Multi(i64, i64),
    MultiWithError(i64),
    Set {
        p: usize,
        v: usize,
        how: SetHow,
    },
    SetInvalid {
        i: usize,
        set_config: bool,
    },
    SetLocalOutside {
        p: usize,
        v: usize,
    },
    Show(usize),
    Reset {
        p: usize,
        to_default: bool,
    },
    ResetAll,
    SetThenFail {
        p: usize,
        v: usize,
    },
    Settings,
    Formats,
    FormatsExt(i32),
    Prepared {
        a: i32,
        b: i32,
        w: usize,
    },
    Inline {
        a: i64,
        w: usize,
    },
    Typed {
        a: i32,
        w: usize,
    },
    BigText {
        w: usize,
        k: i32,
    },
    Count,
    TxCommit {
        rows: Vec<(i64, i64)>,
        local: Option<(usize, usize)>,
        iso: Option<usize>,
    },
    TxRollback {
        id: i64,
        p: usize,
        v: usize,
    },
    TxUnique {
        v: i64,
        commit: bool,
    },
    SimpleTx {
        id: i64,
        v: i64,
    },
    DivZero {
        extended: bool,
    },
    Syntax {
        extended: bool,
    },
    Pipeline {
        a: i32,
        b: i32,
        w: usize,
    },
    PipelineInTxn {
        id: i64,
        v: i64,
        a: i32,
    },
}

/// A parameter that SHOW may report (application_name only once set).
fn showable(r: &mut Rng, app_set: bool) -> usize {
    loop {
        let p = r.below(PARAMS.len());
        if p != APP || app_set {
            return p;
        }
    }
}

/// The operations of client `idx`: the same on every run.
fn generate(idx: usize) -> Vec<Op> {
    let mut r = Rng::new(idx as u64 + 1);
    let mut app_set = false;
    let mut next_id = 1i64;
    let mut id = move || {
        next_id += 1;
        next_id
    };
    let n = OPS - 5 + r.below(11);
    let mut ops = Vec::with_capacity(n);
    while ops.len() < n {
        let op = match r.below(100) {
            0..=4 => Op::SelectInt(r.range(-1000, 1_000_000)),
            5..=6 => Op::Repeat(r.below(3000)),
            7..=9 => Op::Multi(r.range(-50, 50), r.range(0, 1000)),
            10..=11 => Op::MultiWithError(r.range(0, 100)),
            12..=21 => {
                let p = r.below(PARAMS.len());
                let v = r.below(PARAMS[p].1.len());
                app_set |= p == APP;
                let how = match r.below(6) {
                    0 => SetHow::Plain,
                    1 => SetHow::SessionTo,
                    2 => SetHow::SetConfig,
                    3 => SetHow::WithShow,
                    4 => SetHow::Extended,
                    _ => SetHow::Unnamed,
                };
                Op::Set { p, v, how }
            }
            22..=24 => Op::SetInvalid {
                i: r.below(INVALID.len()),
                set_config: r.chance(30),
            },
            25 => {
                let p = showable(&mut r, app_set);
                Op::SetLocalOutside {
                    p,
                    v: r.below(PARAMS[p].1.len()),
                }
            }
            26..=32 => Op::Show(showable(&mut r, app_set)),
            33..=35 => {
                let p = r.below(PARAMS.len());
                if p == APP {
                    app_set = false;
                }
                Op::Reset {
                    p,
                    to_default: r.chance(40),
                }
            }
            36 => {
                app_set = false;
                Op::ResetAll
            }
            37..=39 => {
                let p = showable(&mut r, app_set);
                Op::SetThenFail {
                    p,
                    v: r.below(PARAMS[p].1.len()),
                }
            }
            40..=43 => Op::Settings,
            44..=46 => Op::Formats,
            47..=49 => Op::FormatsExt(r.range(-30, 30) as i32),
            50..=56 => Op::Prepared {
                a: r.range(-1000, 1000) as i32,
                b: r.range(-1000, 1000) as i32,
                w: r.below(WORDS.len()),
            },
            57..=60 => Op::Inline {
                a: r.range(-1_000_000, 1_000_000),
                w: r.below(WORDS.len()),
            },
            61..=64 => Op::Typed {
                a: r.range(-1000, 1000) as i32,
                w: r.below(WORDS.len()),
            },
            65..=66 => Op::BigText {
                w: r.below(WORDS.len()),
                k: r.range(0, 5000) as i32,
            },
            67..=69 => Op::Count,
            70..=77 => {
                let rows = (0..1 + r.below(3)).map(|_| (id(), r.range(-100, 100))).collect();
                let local = if r.chance(50) {
                    let p = showable(&mut r, app_set);
                    Some((p, r.below(PARAMS[p].1.len())))
                } else {
                    None
                };
                let iso = if r.chance(30) { Some(r.below(3)) } else { None };
                Op::TxCommit { rows, local, iso }
            }
            78..=82 => {
                let p = showable(&mut r, app_set);
                Op::TxRollback {
                    id: id(),
                    p,
                    v: r.below(PARAMS[p].1.len()),
                }
            }
            83..=86 => Op::TxUnique {
                v: r.range(1, 99),
                commit: r.chance(50),
            },
            87..=88 => Op::SimpleTx {
                id: id(),
                v: r.range(-100, 100),
            },
            89..=91 => Op::DivZero { extended: r.chance(50) },
            92..=93 => Op::Syntax { extended: r.chance(50) },
            94..=96 => Op::Pipeline {
                a: r.range(-100, 100) as i32,
                b: r.range(-100, 100) as i32,
                w: r.below(WORDS.len()),
            },
            _ => Op::PipelineInTxn {
                id: id(),
                v: r.range(-100, 100),
                a: r.range(-100, 100) as i32,
            },
        };
        ops.push(op);
    }
    ops
}

fn err(e: &Error) -> String {
    match e.code() {
        Some(code) => format!("ERR:{}", code.code()),
        None => format!("ERR:<{e}>"),
    }
}

fn render_simple(r: Result<Vec<SimpleQueryMessage>, Error>) -> String {
    match r {
        Err(e) => err(&e),
        Ok(msgs) => msgs
            .iter()
            .map(|m| match m {
                SimpleQueryMessage::Row(row) => (0..row.len())
                    .map(|i| row.get(i).unwrap_or("NULL"))
                    .collect::<Vec<_>>()
                    .join(","),
                SimpleQueryMessage::CommandComplete(n) => format!("#{n}"),
                SimpleQueryMessage::RowDescription(cols) => {
                    let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
                    format!("[{}]", names.join(","))
                }
                _ => "?".to_string(),
            })
            .collect::<Vec<_>>()
            .join(";"),
    }
}

fn cell<'a, T: FromSql<'a> + Display>(row: &'a Row, i: usize) -> String {
    match row.try_get::<_, Option<T>>(i) {
        Ok(Some(v)) => v.to_string(),
        Ok(None) => "NULL".to_string(),
        Err(e) => format!("<{e}>"),
    }
}

fn render_rows(r: Result<Vec<Row>, Error>) -> String {
    let rows = match r {
        Err(e) => return err(&e),
        Ok(rows) => rows,
    };
    let rendered: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .columns()
                .iter()
                .enumerate()
                .map(|(i, col)| {
                    let v = match *col.type_() {
                        Type::INT2 => cell::<i16>(row, i),
                        Type::INT4 => cell::<i32>(row, i),
                        Type::INT8 => cell::<i64>(row, i),
                        Type::FLOAT4 => cell::<f32>(row, i),
                        Type::FLOAT8 => cell::<f64>(row, i),
                        Type::BOOL => cell::<bool>(row, i),
                        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR => cell::<String>(row, i),
                        ref t => format!("<{t}>"),
                    };
                    format!("{}={v}", col.name())
                })
                .collect();
            cells.join(",")
        })
        .collect();
    format!("{}rows:{}", rows.len(), rendered.join(";"))
}

fn render_count(r: Result<u64, Error>) -> String {
    match r {
        Ok(n) => format!("n={n}"),
        Err(e) => err(&e),
    }
}

/// One client's connection and the statements it prepared up front.
struct Session {
    c: Client,
    /// The client's own table (unqualified: search_path decides).
    tbl: String,
    add: Statement,
    concat: Statement,
    div: Statement,
    insert: Statement,
    update: Statement,
    count: Statement,
    settings: Statement,
    fmt: Statement,
    big: Statement,
}

impl Session {
    async fn new(c: Client, tbl: String) -> Result<Self> {
        c.batch_execute(&format!(
            "DROP TABLE IF EXISTS public.{tbl}; \
             CREATE TABLE public.{tbl} (id int8 PRIMARY KEY, v int8 NOT NULL); \
             INSERT INTO public.{tbl} VALUES (0, 0)"
        ))
        .await?;
        let settings: Vec<String> = PARAMS
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != APP)
            .map(|(_, (n, _))| format!("current_setting('{n}') AS {n}"))
            .collect();
        Ok(Self {
            add: c
                .prepare("SELECT $1::int4 + $2::int4 AS s, $2::int4 - $1::int4 AS d")
                .await?,
            concat: c.prepare("SELECT $1::text || '-' || $2::int8::text AS c").await?,
            div: c.prepare("SELECT 100 / $1::int4 AS q").await?,
            insert: c.prepare(&format!("INSERT INTO {tbl} (id, v) VALUES ($1, $2)")).await?,
            update: c
                .prepare(&format!("UPDATE {tbl} SET v = v + $1 WHERE id % $2 = 0"))
                .await?,
            count: c
                .prepare(&format!(
                    "SELECT count(*) AS n, coalesce(sum(v), 0)::int8 AS s FROM {tbl}"
                ))
                .await?,
            settings: c.prepare(&format!("SELECT {}", settings.join(", "))).await?,
            fmt: c
                .prepare(
                    "SELECT (timestamptz '2024-03-05 13:14:15.25+00' + $1::int4 * interval '7 hours')::text AS ts, \
                     (1 / 3::float8 * $1::int4)::text AS f, (date '2001-02-03' + $1::int4)::text AS d, \
                     to_char(timestamptz '2024-03-05 13:14:15+00', 'YYYY-MM-DD HH24:MI TZ') AS tc",
                )
                .await?,
            big: c.prepare("SELECT repeat($1::text, $2::int4) AS r").await?,
            c,
            tbl,
        })
    }

    async fn simple(&self, sql: &str) -> String {
        render_simple(self.c.simple_query(sql).await)
    }

    async fn show(&self, p: usize) -> String {
        self.simple(&format!("SHOW {}", PARAMS[p].0)).await
    }

    async fn insert(&self, id: i64, v: i64) -> String {
        render_count(self.c.execute(&self.insert, &[&id, &v]).await)
    }

    async fn count(&self) -> String {
        render_rows(self.c.query(&self.count, &[]).await)
    }

    async fn run(&self, op: &Op) -> String {
        let c = &self.c;
        let tbl = &self.tbl;
        let parts: Vec<String> = match op {
            Op::SelectInt(n) => vec![self.simple(&format!("SELECT {n} AS n, {n} * 2 AS m, '{n}' || 'x' AS t")).await],
            Op::Repeat(k) => vec![
                self.simple(&format!("SELECT repeat('x', {k}) AS r, length(repeat('ab', {k})) AS l"))
                    .await,
            ],
            Op::Multi(a, b) => vec![
                self.simple(&format!(
                    "SELECT {a} AS a; SELECT {b}::text || 'b' AS t; VALUES ({a}, {b}), ({b}, {a}); \
                     SELECT {a} + {b} AS s WHERE false"
                ))
                .await,
            ],
            Op::MultiWithError(a) => vec![
                self.simple(&format!("SELECT {a}; SELECT 1/0; SELECT 2")).await,
                self.simple(&format!("SELECT {a} + 1 AS after")).await,
            ],
            Op::Set { p, v, how } => {
                let (name, raw) = (PARAMS[*p].0, PARAMS[*p].1[*v]);
                let val = set_value(*p, raw);
                match how {
                    SetHow::Plain => vec![self.simple(&format!("SET {name} = {val}")).await],
                    SetHow::SessionTo => vec![self.simple(&format!("SET SESSION {name} TO {val}")).await],
                    SetHow::SetConfig => vec![
                        self.simple(&format!("SELECT set_config('{name}', {}, false)", quote(raw)))
                            .await,
                    ],
                    SetHow::WithShow => vec![self.simple(&format!("SET {name} = {val}; SHOW {name}")).await],
                    SetHow::Extended => vec![render_count(c.execute(&format!("SET {name} = {val}"), &[]).await)],
                    SetHow::Unnamed => vec![render_rows(c.query_typed(&format!("SET {name} = {val}"), &[]).await)],
                }
            }
            Op::SetInvalid { i, set_config } => {
                let (p, raw) = INVALID[*i];
                let name = PARAMS[p].0;
                let sql = if *set_config {
                    format!("SELECT set_config('{name}', {}, false)", quote(raw))
                } else {
                    format!("SET {name} = {}", quote(raw))
                };
                vec![self.simple(&sql).await, self.show(p).await]
            }
            Op::SetLocalOutside { p, v } => {
                let val = set_value(*p, PARAMS[*p].1[*v]);
                vec![
                    self.simple(&format!("SET LOCAL {} = {val}", PARAMS[*p].0)).await,
                    self.show(*p).await,
                ]
            }
            Op::Show(p) => vec![self.show(*p).await],
            Op::Reset { p, to_default } => {
                let name = PARAMS[*p].0;
                let sql = if *to_default {
                    format!("SET {name} TO DEFAULT")
                } else {
                    format!("RESET {name}")
                };
                vec![self.simple(&sql).await]
            }
            Op::ResetAll => vec![self.simple("RESET ALL").await],
            Op::SetThenFail { p, v } => {
                let val = set_value(*p, PARAMS[*p].1[*v]);
                vec![
                    self.simple(&format!("SET {} = {val}; SELECT 1/0", PARAMS[*p].0)).await,
                    self.show(*p).await,
                ]
            }
            Op::Settings => vec![render_rows(c.query(&self.settings, &[]).await)],
            Op::Formats => vec![
                self.simple(
                    "SELECT timestamptz '2024-03-05 13:14:15.25+00' AS ts, date '2001-02-03' AS d, \
                     1/3::float8 AS f, 0.1::float4 AS g, interval '1 day 02:03:04' AS i, \
                     timestamp '2024-12-31 23:59:59' AS t, 1e100::float8 AS big",
                )
                .await,
            ],
            Op::FormatsExt(k) => vec![render_rows(c.query(&self.fmt, &[k]).await)],
            Op::Prepared { a, b, w } => vec![
                render_rows(c.query(&self.add, &[a, b]).await),
                render_rows(c.query(&self.concat, &[&WORDS[*w], &i64::from(*a)]).await),
            ],
            Op::Inline { a, w } => vec![render_rows(
                c.query(
                    "SELECT $1::int8 * 3 AS x, upper($2::text) AS u, $1::int8 % 7 = 0 AS b, $1::int8 / 3.0::float8 AS f",
                    &[a, &WORDS[*w]],
                )
                .await,
            )],
            Op::Typed { a, w } => vec![render_rows(
                c.query_typed(
                    "SELECT $1 - 7 AS x, $2 || '!' AS y",
                    &[(a, Type::INT4), (&WORDS[*w], Type::TEXT)],
                )
                .await,
            )],
            Op::BigText { w, k } => vec![render_rows(c.query(&self.big, &[&WORDS[*w], k]).await)],
            Op::Count => vec![self.count().await],
            Op::TxCommit { rows, local, iso } => {
                let begin = match iso {
                    None => "BEGIN".to_string(),
                    Some(i) => format!(
                        "BEGIN ISOLATION LEVEL {}",
                        ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"][*i]
                    ),
                };
                let mut out = vec![
                    self.simple(&begin).await,
                    self.simple("SHOW transaction_isolation").await,
                ];
                for (id, v) in rows {
                    out.push(self.insert(*id, *v).await);
                }
                if let Some((p, v)) = local {
                    let val = set_value(*p, PARAMS[*p].1[*v]);
                    out.push(self.simple(&format!("SET LOCAL {} = {val}", PARAMS[*p].0)).await);
                    out.push(self.show(*p).await);
                }
                out.push(render_count(c.execute(&self.update, &[&3i64, &2i64]).await));
                out.push(self.count().await);
                out.push(self.simple("COMMIT").await);
                if let Some((p, _)) = local {
                    out.push(self.show(*p).await);
                }
                out
            }
            Op::TxRollback { id, p, v } => {
                let (name, val) = (PARAMS[*p].0, set_value(*p, PARAMS[*p].1[*v]));
                vec![
                    self.simple("BEGIN").await,
                    self.insert(*id, id * 7).await,
                    self.simple(&format!("SET {name} = {val}")).await,
                    self.show(*p).await,
                    self.simple("ROLLBACK").await,
                    self.show(*p).await,
                    self.count().await,
                ]
            }
            Op::TxUnique { v, commit } => vec![
                self.simple("BEGIN").await,
                self.insert(0, *v).await,
                self.simple("SELECT 1").await,
                self.count().await,
                self.simple(if *commit { "COMMIT" } else { "ROLLBACK" }).await,
                self.count().await,
            ],
            // If the INSERT fails (search_path without public) the rest of
            // the string is skipped and the transaction stays open, failed.
            Op::SimpleTx { id, v } => vec![
                self.simple(&format!(
                    "BEGIN; INSERT INTO {tbl} VALUES ({id}, {v}); UPDATE {tbl} SET v = v - 1 WHERE id = {id}; \
                     SELECT id, v FROM {tbl} WHERE id = {id}; COMMIT"
                ))
                .await,
                self.simple("SELECT 1 AS still_open").await,
                self.simple("ROLLBACK").await,
            ],
            Op::DivZero { extended } => vec![if *extended {
                render_rows(c.query("SELECT $1::int4 / 0 AS z", &[&5i32]).await)
            } else {
                self.simple("SELECT 1/0").await
            }],
            Op::Syntax { extended } => vec![if *extended {
                render_rows(c.query("SELECT * FROM WHERE $1::int4", &[&1i32]).await)
            } else {
                self.simple("SELECT 1 +").await
            }],
            Op::Pipeline { a, b, w } => {
                let b8 = i64::from(*b);
                let (p1, p2, p3, p4): ([&Param; 2], [&Param; 1], [&Param; 2], [&Param; 1]) =
                    ([a, b], [&0i32], [&WORDS[*w], &b8], [a]);
                let (r1, r2, r3, r4) = tokio::join!(
                    c.query(&self.add, &p1),
                    c.query(&self.div, &p2),
                    c.query(&self.concat, &p3),
                    c.query("SELECT $1::int4 * 2 AS dbl", &p4),
                );
                vec![render_rows(r1), render_rows(r2), render_rows(r3), render_rows(r4)]
            }
            Op::PipelineInTxn { id, v, a } => {
                let begin = self.simple("BEGIN").await;
                let (p1, p2, p4): ([&Param; 2], [&Param; 1], [&Param; 2]) = ([id, v], [&0i32], [a, a]);
                let (r1, r2, r3, r4) = tokio::join!(
                    c.execute(&self.insert, &p1),
                    c.query(&self.div, &p2),
                    c.query(&self.count, &[]),
                    c.query(&self.add, &p4),
                );
                vec![
                    begin,
                    render_count(r1),
                    render_rows(r2),
                    render_rows(r3),
                    render_rows(r4),
                    self.simple("ROLLBACK").await,
                    self.count().await,
                ]
            }
        };
        parts.join(" | ")
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Direct,
    Proxy,
}

impl Run {
    fn name(self) -> &'static str {
        match self {
            Run::Direct => "direct",
            Run::Proxy => "proxy",
        }
    }
}

fn table(run: Run, idx: usize) -> String {
    format!("diff_{}_{idx}", run.name())
}

/// Both runs use MD5 authentication: a SCRAM handshake costs the unoptimized
/// client ~0.2 s of CPU, which for 2 x 200 connections would dominate the
/// run (and starve the proxy's login timeout). Through the proxy "bob" (an
/// MD5 tenant) reaches app2 as app_owner; directly, md5_owner (MD5 in
/// pg_hba) does. Nothing compared depends on the role.
async fn connect(ctx: &Ctx, run: Run) -> Result<Client> {
    match run {
        Run::Proxy => ctx.client("tx", "bob", "bob-pw", DB).await,
        Run::Direct => {
            let p = ctx.cluster.pg_primary().context("no primary")?;
            let conninfo = format!(
                "host={} port={} user=md5_owner password=md5-pw dbname={DB} sslmode=disable",
                p.host, p.port
            );
            let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            Ok(client)
        }
    }
}

/// Runs every client's operations concurrently; returns each client's results.
async fn run_all(ctx: &Ctx, run: Run, ops: &Arc<Vec<Vec<Op>>>) -> Result<Vec<Vec<String>>> {
    let mut clients = Vec::with_capacity(CLIENTS);
    for start in (0..CLIENTS).step_by(CONNECT_BATCH) {
        let batch = (start..(start + CONNECT_BATCH).min(CLIENTS)).map(|_| connect(ctx, run));
        let connected = futures_util::future::try_join_all(batch)
            .await
            .with_context(|| format!("{}: connecting", run.name()))?;
        clients.extend(connected);
    }
    let mut tasks = Vec::with_capacity(CLIENTS);
    for (idx, c) in clients.into_iter().enumerate() {
        let ops = ops.clone();
        tasks.push(tokio::spawn(async move {
            let tbl = table(run, idx);
            let s = Session::new(c, tbl.clone()).await?;
            let mut out = Vec::with_capacity(ops[idx].len());
            for op in &ops[idx] {
                out.push(s.run(op).await);
            }
            s.c.batch_execute(&format!("DROP TABLE public.{tbl}")).await?;
            anyhow::Ok(out)
        }));
    }
    let mut results = Vec::with_capacity(CLIENTS);
    for (idx, t) in tasks.into_iter().enumerate() {
        results.push(t.await?.with_context(|| format!("{}: client {idx}", run.name()))?);
    }
    Ok(results)
}

fn short(s: &str) -> String {
    const MAX: usize = 400;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

fn direct_vs_proxy(ctx: &Ctx) -> Result<()> {
    let ops: Arc<Vec<Vec<Op>>> = Arc::new((0..CLIENTS).map(generate).collect());
    let outcome = ctx.rt.block_on(async {
        let direct = run_all(ctx, Run::Direct, &ops).await?;
        let proxy = run_all(ctx, Run::Proxy, &ops).await?;
        anyhow::Ok((direct, proxy))
    });
    // Whatever happened, no table stays behind.
    let names: Vec<String> = [Run::Direct, Run::Proxy]
        .into_iter()
        .flat_map(|run| (0..CLIENTS).map(move |i| format!("public.{}", table(run, i))))
        .collect();
    let p = ctx.cluster.pg_primary().context("no primary")?.name.clone();
    ctx.cluster
        .pg_sql(&p, DB, &format!("DROP TABLE IF EXISTS {}", names.join(", ")))?;
    let (direct, proxy) = outcome?;

    // A client's first difference is the interesting one: later ones often follow from it.
    let mut total = 0;
    let mut firsts = Vec::new();
    for (idx, (d, x)) in direct.iter().zip(&proxy).enumerate() {
        let mut differing = d.iter().zip(x).enumerate().filter(|(_, (dr, pr))| dr != pr);
        if let Some((i, (dr, pr))) = differing.next() {
            total += 1 + differing.count();
            firsts.push(format!(
                "client {idx}, op {i}: {:?}\n  direct: {}\n  proxy:  {}",
                ops[idx][i],
                short(dr),
                short(pr)
            ));
        }
    }
    if !firsts.is_empty() {
        let clients = firsts.len();
        firsts.truncate(12);
        bail!(
            "{total} results of {clients} clients differ between direct and proxy; first difference of {} of them:\n{}",
            firsts.len(),
            firsts.join("\n")
        );
    }
    Ok(())
}
