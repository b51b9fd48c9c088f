//! The cases where the network is slow, not broken, for both engines:
//! latency with jitter each way, and a bandwidth limit towards the proxy.
//! Results must stay whole, correct and in order, with no error, and the
//! pools must keep reusing their connections.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::faults::Direction;
use mysql_async::prelude::Queryable;

use crate::Ctx;
use crate::cases::{pg_rows, with_proxy};

/// Sessions per engine, and transactions per session.
const SESSIONS: i32 = 3;
const TRANSACTIONS: i32 = 8;
/// The least a session's transactions take under the delay: four round
/// trips or more each, each at least twice 20 - 10 ms.
const SLOWED: Duration = Duration::from_millis(8 * 4 * 20);

pub fn latency_and_jitter(ctx: &Ctx) -> Result<()> {
    use futures_util::future::try_join_all;
    with_proxy(ctx, "latency_and_jitter", |p| async move {
        // A table of the case's own, made directly.
        let direct = p.pg("pgd").await?;
        direct
            .simple_query("DROP TABLE IF EXISTS faults_latency; CREATE TABLE faults_latency (s int, i int)")
            .await?;
        let mut my_direct = p.my("myd").await?;
        my_direct
            .query_drop("CREATE OR REPLACE TABLE faults_latency (s INT, i INT)")
            .await?;

        // Every session holds a transaction at once, so each pool opens a
        // connection for each; after that, none more. They are opened
        // before the network slows down: an open takes six or more round
        // trips, which at 20 ± 10 ms each way on a loaded machine came near
        // the 1 s connect_timeout (a login was refused once).
        let pg: Vec<tokio_postgres::Client> = try_join_all((0..SESSIONS).map(|_| p.pg("pgc"))).await?;
        for c in &pg {
            c.simple_query("BEGIN").await?;
        }
        for c in &pg {
            c.simple_query("COMMIT").await?;
        }
        let mut my: Vec<mysql_async::Conn> = try_join_all((0..SESSIONS).map(|_| p.my("myc"))).await?;
        for c in &mut my {
            c.query_drop("START TRANSACTION").await?;
        }
        for c in &mut my {
            c.query_drop("COMMIT").await?;
        }
        for relay in [&p.pg_relay, &p.my_relay] {
            for d in [Direction::ToClient, Direction::ToServer] {
                relay.delay(d, Duration::from_millis(20), Duration::from_millis(10));
            }
        }

        // PostgreSQL.
        let (opened, _) = p.connects("pgc");
        let started = Instant::now();
        try_join_all(pg.iter().zip(0..).map(|(c, s)| async move {
            for i in 1..=TRANSACTIONS {
                c.simple_query("BEGIN").await?;
                let pid = pg_rows(&c.simple_query("SELECT pg_backend_pid()").await?);
                c.simple_query(&format!("INSERT INTO faults_latency VALUES ({s}, {i})"))
                    .await?;
                let seen = pg_rows(
                    &c.simple_query(&format!("SELECT count(*), max(i) FROM faults_latency WHERE s = {s}"))
                        .await?,
                );
                ensure!(
                    seen == [[i.to_string(), i.to_string()]],
                    "session {s}, transaction {i}: {seen:?}"
                );
                let same = pg_rows(&c.simple_query("SELECT pg_backend_pid()").await?);
                ensure!(pid == same, "a transaction moved between backend connections");
                c.simple_query("COMMIT").await?;
                // Pipelined statements: their answers come in order.
                let answers =
                    try_join_all((0..10).map(|k: i32| async move { c.query_one("SELECT $1::int * 2", &[&k]).await }))
                        .await?;
                let got: Vec<i32> = answers.iter().map(|r| r.get(0)).collect();
                ensure!(
                    got == (0..10).map(|k| k * 2).collect::<Vec<_>>(),
                    "pipelined answers {got:?}"
                );
            }
            Ok::<_, anyhow::Error>(())
        }))
        .await?;
        let took = started.elapsed();
        ensure!(took >= SLOWED, "PostgreSQL's transactions took only {took:?}");
        let (opened_after, failed) = p.connects("pgc");
        ensure!(
            opened_after == opened && failed == 0,
            "PostgreSQL: {opened} connections before, {opened_after} after ({failed} failed)"
        );
        let total = pg_rows(&direct.simple_query("SELECT count(*) FROM faults_latency").await?);
        ensure!(
            total == [[(SESSIONS * TRANSACTIONS).to_string()]],
            "committed rows {total:?}"
        );

        // MariaDB, the same.
        let (opened, _) = p.connects("myc");
        let started = Instant::now();
        try_join_all(my.iter_mut().zip(0..).map(|(c, s)| async move {
            for i in 1..=TRANSACTIONS {
                c.query_drop("START TRANSACTION").await?;
                c.exec_drop("INSERT INTO faults_latency VALUES (?, ?)", (s, i)).await?;
                let seen: Option<(i64, i64)> = c
                    .exec_first("SELECT COUNT(*), MAX(i) FROM faults_latency WHERE s = ?", (s,))
                    .await?;
                ensure!(
                    seen == Some((i64::from(i), i64::from(i))),
                    "session {s}, transaction {i}: {seen:?}"
                );
                c.query_drop("COMMIT").await?;
                let rows: Vec<(i32, i32)> = c.query(format!("SELECT seq, seq * {i} FROM seq_1_to_10")).await?;
                ensure!(
                    rows == (1..=10).map(|k| (k, k * i)).collect::<Vec<_>>(),
                    "rows {rows:?}"
                );
            }
            Ok::<_, anyhow::Error>(())
        }))
        .await?;
        let took = started.elapsed();
        ensure!(took >= SLOWED, "MariaDB's transactions took only {took:?}");
        let (opened_after, failed) = p.connects("myc");
        ensure!(
            opened_after == opened && failed == 0,
            "MariaDB: {opened} connections before, {opened_after} after ({failed} failed)"
        );
        let total: Option<i64> = my_direct.query_first("SELECT COUNT(*) FROM faults_latency").await?;
        ensure!(
            total == Some(i64::from(SESSIONS * TRANSACTIONS)),
            "committed rows {total:?}"
        );

        for relay in [&p.pg_relay, &p.my_relay] {
            relay.heal();
        }
        direct.simple_query("DROP TABLE faults_latency").await?;
        my_direct.query_drop("DROP TABLE faults_latency").await?;
        my_direct.disconnect().await?;
        for c in my {
            c.disconnect().await?;
        }
        drop((pg, direct));
        Ok(p)
    })
}

/// About 1 MB of rows on either engine, each with a 32-character digest.
const PG_MB: &str = "SELECT g, md5(g::text) FROM generate_series(1, 20000) g";
const MY_MB: &str = "SELECT seq, MD5(seq) FROM seq_1_to_24000";
/// The limit towards the proxy.
const BYTES_PER_SECOND: u64 = 256 * 1024;

/// The rows' count and a checksum of them, in order.
fn checksum<T: Hash>(rows: &[T]) -> (usize, u64) {
    let mut h = DefaultHasher::new();
    rows.hash(&mut h);
    (rows.len(), h.finish())
}

pub fn bandwidth_limit(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "bandwidth_limit", |p| async move {
        // What the direct clusters give, to compare with.
        let pg_want = checksum(&pg_rows(&p.pg("pgd").await?.simple_query(PG_MB).await?));
        let mut my_direct = p.my("myd").await?;
        let my_want = checksum(&my_direct.query::<(u64, String), _>(MY_MB).await?);
        my_direct.disconnect().await?;
        ensure!(
            pg_want.0 == 20000 && my_want.0 == 24000,
            "direct results {pg_want:?} {my_want:?}"
        );

        let pg = p.pg("pgc").await?;
        let mut my = p.my("myc").await?;
        p.pg_relay.limit_bandwidth(Direction::ToClient, BYTES_PER_SECOND);
        p.my_relay.limit_bandwidth(Direction::ToClient, BYTES_PER_SECOND);

        let started = Instant::now();
        let got = checksum(&pg_rows(&pg.simple_query(PG_MB).await.context("PostgreSQL")?));
        let took = started.elapsed();
        ensure!(got == pg_want, "PostgreSQL result {got:?}, directly {pg_want:?}");
        // About 1 MB at 256 KiB/s: about 4 s; at least 2 s shows the limit.
        ensure!(took >= Duration::from_secs(2), "PostgreSQL's 1 MB came in {took:?}");

        let started = Instant::now();
        let got = checksum(&my.query::<(u64, String), _>(MY_MB).await.context("MariaDB")?);
        let took = started.elapsed();
        ensure!(got == my_want, "MariaDB result {got:?}, directly {my_want:?}");
        ensure!(took >= Duration::from_secs(2), "MariaDB's 1 MB came in {took:?}");

        p.pg_relay.heal();
        p.my_relay.heal();
        pg.simple_query("SELECT 1").await?;
        my.disconnect().await?;
        drop(pg);
        Ok(p)
    })
}
