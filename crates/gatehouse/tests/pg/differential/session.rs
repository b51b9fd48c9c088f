//! The client runner: one connection with the statements it prepares up
//! front, executing [`Op`]s and recording each one's results as a string.

use anyhow::Result;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Statement};

use super::results::{render_count, render_rows, render_simple};
use super::workload::{APP, INVALID, Op, PARAMS, SetHow, WORDS};

type Param = dyn ToSql + Sync;

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

/// One client's connection and the statements it prepared up front.
pub(super) struct Session {
    pub(super) c: Client,
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
    pub(super) async fn new(c: Client, tbl: String) -> Result<Self> {
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

    pub(super) async fn run(&self, op: &Op) -> String {
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
