//! The cases whose fault is on the way to the server: a new MariaDB
//! connection cut inside its password exchange (after the server's
//! greeting, while the reply to the proxy's login is under way), and a
//! bandwidth limit towards the servers while clients send statements of
//! about 1 MiB each (PostgreSQL: a bind parameter and a COPY FROM STDIN;
//! MariaDB: a prepared statement's parameter and a long literal). The
//! statements must arrive whole (length and MD5 checked on the server),
//! with no new backend connection.

use std::fmt::Write as _;
use std::pin::pin;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use futures_util::SinkExt;
use gatehouse_testkit::faults::Direction;
use md5::{Digest, Md5};
use mysql_async::prelude::Queryable;
use tokio::io::AsyncReadExt;

use crate::cases::{login_cut_checked, pg_rows, with_proxy};
use crate::{BOUND, Ctx, my_code};

/// Bytes of the server's reply to the proxy's login let through after the
/// greeting: a packet header and two bytes, fewer than any such reply
/// has (an OK packet is at least 11 bytes, an auth switch request more).
const INTO_THE_REPLY: u64 = 6;

/// The length in bytes of a MariaDB server's greeting (its handshake
/// packet, header included), read from the server directly.
async fn mariadb_greeting_len(addr: &str) -> Result<u64> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let mut header = [0u8; 4];
    tokio::time::timeout(BOUND, s.read_exact(&mut header))
        .await
        .context("no greeting")??;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]);
    let mut payload = vec![0; usize::try_from(len)?];
    tokio::time::timeout(BOUND, s.read_exact(&mut payload))
        .await
        .context("half a greeting")??;
    ensure!(
        payload.first() == Some(&10),
        "not a protocol 10 greeting: {:?}",
        payload.first()
    );
    Ok(4 + u64::from(len))
}

pub fn cut_inside_password_exchange(ctx: &Ctx) -> Result<()> {
    let server = ctx.cluster.mysql_primary().context("no MariaDB")?.addr();
    with_proxy(ctx, "cut_inside_password_exchange", |p| async move {
        let greeting = mariadb_greeting_len(&server).await?;
        let mut my = p.my("myc").await?;
        my.query_drop("SELECT 1").await?;
        // The pooled connection dies: the next statement needs a new one,
        // whose reply to the login is cut after a few bytes.
        p.my_relay.reset_all().await;
        let cut_at = greeting + INTO_THE_REPLY;
        p.my_relay.cut_next_connection_after_server_bytes(cut_at);
        let (result, took) = login_cut_checked(&p, &p.my_relay, "MariaDB", "myc", my.query_drop("SELECT 2"), |e| {
            let code = my_code(e).map_err(|e| anyhow::anyhow!("no error packet: {e}"))?;
            ensure!(
                code == 1053,
                "a cut during the password exchange gave error {code}: {e}"
            );
            Ok(())
        })
        .await?;
        println!("greeting {greeting} bytes, cut at {cut_at}: {result:?} after {took:?}");

        // The session goes on (the cut is one-shot).
        p.no_lease_leaked().await?;
        my.query_drop("SELECT 3").await.context("the MariaDB session after")?;
        my.disconnect().await?;
        Ok(p)
    })
}

/// The size of each statement's large value.
const UPLOAD: usize = 1024 * 1024;
/// The COPY's rows (their values add up to [`UPLOAD`]).
const COPY_ROWS: usize = 1024;
/// The limit towards the server: about 4 s for [`UPLOAD`].
const TO_SERVER: u64 = 256 * 1024;
/// The least a limited [`UPLOAD`] takes: half its time at the limit.
const LIMITED: Duration = Duration::from_secs(2);

/// `len` letters and digits, the same for the same `seed` (none that a
/// COPY's text format or an SQL literal would escape).
fn text(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(ALPHABET[(x % ALPHABET.len() as u64) as usize])
        })
        .collect()
}

/// The MD5 of `s` in hex, as both servers' `md5()` give it.
fn md5_hex(s: &str) -> String {
    format!("{:x}", Md5::digest(s.as_bytes()))
}

pub fn bandwidth_limit_to_server(ctx: &Ctx) -> Result<()> {
    with_proxy(ctx, "bandwidth_limit_to_server", |p| async move {
        // PostgreSQL. A table of the case's own, made directly.
        let direct = p.pg("pgd").await?;
        direct
            .simple_query("DROP TABLE IF EXISTS faults_upload; CREATE TABLE faults_upload (k text, n int, v text)")
            .await?;
        let (a, b) = (p.pg("pgc").await?, p.pg("pgc").await?);
        // Both hold a transaction at once: the pool has a connection for each.
        a.simple_query("BEGIN").await?;
        b.simple_query("BEGIN").await?;
        a.simple_query("COMMIT").await?;
        b.simple_query("COMMIT").await?;
        let pg_connects = p.connects("pgc");
        let bound = text(1, UPLOAD);
        let rows: Vec<String> = (0..COPY_ROWS).map(|n| text(n as u64 + 2, UPLOAD / COPY_ROWS)).collect();
        let mut copy = String::with_capacity(UPLOAD + COPY_ROWS * 16);
        for (n, v) in rows.iter().enumerate() {
            writeln!(copy, "copy\t{n}\t{v}")?;
        }
        p.pg_relay.limit_bandwidth(Direction::ToServer, TO_SERVER);

        let started = Instant::now();
        let (inserted, copied) = tokio::join!(
            async {
                a.execute("INSERT INTO faults_upload VALUES ('bind', 0, $1)", &[&bound])
                    .await
            },
            async {
                let mut sink = pin!(b.copy_in::<_, Bytes>("COPY faults_upload (k, n, v) FROM STDIN").await?);
                sink.send(Bytes::from(copy)).await?;
                sink.as_mut().finish().await
            }
        );
        let took = started.elapsed();
        ensure!(inserted.context("the INSERT")? == 1, "the INSERT made no row");
        let copied = copied.context("the COPY")?;
        ensure!(copied == COPY_ROWS as u64, "the COPY made {copied} rows");
        ensure!(took >= LIMITED, "PostgreSQL's 1 MiB statements went in {took:?}");
        let got = pg_rows(
            &a.simple_query("SELECT octet_length(v), md5(v) FROM faults_upload WHERE k = 'bind'")
                .await?,
        );
        ensure!(
            got == [[UPLOAD.to_string(), md5_hex(&bound)]],
            "the bound value came as {got:?}"
        );
        let got = pg_rows(
            &b.simple_query(
                "SELECT count(*), sum(octet_length(v)), md5(string_agg(v, '' ORDER BY n)) \
                 FROM faults_upload WHERE k = 'copy'",
            )
            .await?,
        );
        let want = [COPY_ROWS.to_string(), UPLOAD.to_string(), md5_hex(&rows.concat())];
        ensure!(got == [want], "the copied rows came as {got:?}");
        let after = p.connects("pgc");
        ensure!(
            after == pg_connects,
            "PostgreSQL's pool connected: {pg_connects:?} -> {after:?}"
        );
        println!("PostgreSQL: 2 x 1 MiB at {TO_SERVER} bytes/s in {took:?}");

        // MariaDB: a prepared statement's parameter, and a long literal.
        let mut my_direct = p.my("myd").await?;
        my_direct
            .query_drop("CREATE OR REPLACE TABLE faults_upload (k VARCHAR(8), v LONGTEXT)")
            .await?;
        let (mut c, mut d) = (p.my("myc").await?, p.my("myc").await?);
        c.query_drop("START TRANSACTION").await?;
        d.query_drop("START TRANSACTION").await?;
        c.query_drop("COMMIT").await?;
        d.query_drop("COMMIT").await?;
        let my_connects = p.connects("myc");
        let (bound, literal) = (text(3, UPLOAD), text(4, UPLOAD));
        let long_insert = format!("INSERT INTO faults_upload VALUES ('text', '{literal}')");
        p.my_relay.limit_bandwidth(Direction::ToServer, TO_SERVER);

        let started = Instant::now();
        let (prepared, long) = tokio::join!(
            c.exec_drop("INSERT INTO faults_upload VALUES ('bind', ?)", (bound.as_str(),)),
            d.query_drop(long_insert.as_str())
        );
        let took = started.elapsed();
        prepared.context("the prepared INSERT")?;
        long.context("the long INSERT")?;
        ensure!(took >= LIMITED, "MariaDB's 1 MiB statements went in {took:?}");
        for (conn, key, sent) in [(&mut c, "bind", &bound), (&mut d, "text", &literal)] {
            let got: Option<(u64, String)> = conn
                .exec_first("SELECT OCTET_LENGTH(v), MD5(v) FROM faults_upload WHERE k = ?", (key,))
                .await?;
            ensure!(
                got == Some((UPLOAD as u64, md5_hex(sent))),
                "the {key} value came as {got:?}"
            );
        }
        let after = p.connects("myc");
        ensure!(
            after == my_connects,
            "MariaDB's pool connected: {my_connects:?} -> {after:?}"
        );
        println!("MariaDB: 2 x 1 MiB at {TO_SERVER} bytes/s in {took:?}");

        p.pg_relay.heal();
        p.my_relay.heal();
        p.no_lease_leaked().await?;
        direct.simple_query("DROP TABLE faults_upload").await?;
        my_direct.query_drop("DROP TABLE faults_upload").await?;
        for conn in [my_direct, c, d] {
            conn.disconnect().await?;
        }
        drop((direct, a, b));
        Ok(p)
    })
}
