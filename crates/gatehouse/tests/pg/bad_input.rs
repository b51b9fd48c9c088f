//! Bad input ends only the offending session, with the right SQLSTATE or a
//! timeout, while a well-behaved client keeps running queries untouched.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use bytes::{BufMut, BytesMut};
use gatehouse_proto_pg::messages;
use gatehouse_proto_pg::startup;

use crate::Ctx;
use crate::raw::Raw;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("bad_input::startup_garbage_and_truncation", startup_garbage),
        ("bad_input::session_protocol_violations", session_violations),
        ("bad_input::half_sent_messages_time_out", half_sent),
        ("bad_input::storm_leaves_good_client_untouched", storm),
    ]
}

const T: Duration = Duration::from_secs(5);

async fn logged_in(ctx: &Ctx) -> Result<Raw> {
    let mut raw = Raw::connect(ctx.addr("rw")).await?;
    raw.login(&[("user", "alice"), ("database", "app1")], "alice-pw")
        .await?;
    Ok(raw)
}

async fn expect_code(raw: &mut Raw, code: &str) -> Result<String> {
    let f = raw.expect_error(T).await?;
    ensure!(f.code == code, "expected {code}, got {f:?}");
    ensure!(raw.closed_within(T).await, "session not closed after {code}");
    Ok(f.message)
}

fn startup_garbage(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // A length no startup packet can have.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        raw.send(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4]).await?;
        expect_code(&mut raw, "08P01").await?;
        // A packet cut short by the client closing.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        let full = startup::startup_message([("user", "alice"), ("database", "app1")]);
        raw.send(&full[..full.len() - 3]).await?;
        raw.stream.shutdown().await?;
        expect_code(&mut raw, "08P01").await?;
        // Protocol 2.0 is not spoken.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        let mut v2 = 8u32.to_be_bytes().to_vec();
        v2.extend_from_slice(&(2u32 << 16).to_be_bytes());
        raw.send(&v2).await?;
        expect_code(&mut raw, "0A000").await?;
        // Garbage in place of the SCRAM initial response.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        raw.send(&startup::startup_message([("user", "alice"), ("database", "app1")]))
            .await?;
        let m = raw.read(T).await?;
        ensure!(m.is_some_and(|m| m[0] == b'R'));
        let mut out = BytesMut::new();
        messages::put_sasl_initial(&mut out, "SCRAM-SHA-256", b"\xff\xfe garbage");
        raw.send(&out).await?;
        expect_code(&mut raw, "08P01").await?;
        // An oversized password message.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        raw.send(&startup::startup_message([("user", "alice"), ("database", "app1")]))
            .await?;
        raw.read(T).await?;
        let mut out = BytesMut::new();
        out.put_u8(b'p');
        out.put_i32(10_000_000);
        raw.send(&out).await?;
        expect_code(&mut raw, "08P01").await?;
        Ok(())
    })
}

use tokio::io::AsyncWriteExt;

fn session_violations(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // A message over max_message_bytes (1 MiB in the test config).
        let mut raw = logged_in(ctx).await?;
        let mut out = BytesMut::new();
        out.put_u8(b'Q');
        out.put_i32(200 * 1024 * 1024);
        raw.send(&out).await?;
        let msg = expect_code(&mut raw, "08P01").await?;
        ensure!(msg.contains("exceeds the limit"), "{msg}");
        // An unknown message type.
        let mut raw = logged_in(ctx).await?;
        let mut out = BytesMut::new();
        messages::put_message(&mut out, b'Y', |b| b.put_slice(b"??"));
        raw.send(&out).await?;
        let msg = expect_code(&mut raw, "08P01").await?;
        ensure!(msg.contains("invalid frontend message type"), "{msg}");
        // A negative length.
        let mut raw = logged_in(ctx).await?;
        raw.send(&[b'Q', 0xff, 0xff, 0xff, 0xf0]).await?;
        expect_code(&mut raw, "08P01").await?;
        // A password message after login.
        let mut raw = logged_in(ctx).await?;
        let mut out = BytesMut::new();
        messages::put_password(&mut out, b"again", true);
        raw.send(&out).await?;
        expect_code(&mut raw, "08P01").await?;
        Ok(())
    })
}

fn half_sent(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // Half a startup packet, then silence: the login timeout (2 s) ends it.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        let full = startup::startup_message([("user", "alice"), ("database", "app1")]);
        raw.send(&full[..10]).await?;
        let started = Instant::now();
        ensure!(
            raw.closed_within(Duration::from_secs(6)).await,
            "half startup not timed out"
        );
        ensure!(
            started.elapsed() >= Duration::from_millis(1500),
            "closed before the login timeout"
        );
        // Half a query after login: the message timeout (2 s) ends it.
        let mut raw = logged_in(ctx).await?;
        let mut out = BytesMut::new();
        messages::put_query(&mut out, "SELECT 'this message never finishes arriving'");
        raw.send(&out[..12]).await?;
        let msg = expect_code(&mut raw, "08P01").await?;
        ensure!(msg.contains("incomplete message"), "{msg}");
        Ok(())
    })
}

fn storm(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let good = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        let steady = tokio::spawn(async move {
            let mut done = 0u32;
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(4) {
                let n: i32 = good.query_one("SELECT $1::int + 1", &[&(done as i32)]).await?.get(0);
                anyhow::ensure!(n == done as i32 + 1, "wrong answer");
                done += 1;
            }
            anyhow::Ok(done)
        });
        // 1,000 connections that never authenticate.
        let mut idle = Vec::new();
        for _ in 0..1000 {
            idle.push(Raw::connect(ctx.addr("rw")).await?);
        }
        // Meanwhile, assorted garbage on fresh connections.
        for i in 0..50u8 {
            let mut raw = Raw::connect(ctx.addr("rw")).await?;
            let junk: Vec<u8> = (0..64).map(|j| i.wrapping_mul(31).wrapping_add(j)).collect();
            raw.send(&junk).await?;
        }
        let done = steady.await??;
        ensure!(done > 50, "the good client ran only {done} queries");
        // The login timeout (2 s) has closed every silent connection.
        let deadline = Instant::now() + Duration::from_secs(10);
        for raw in &mut idle {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10));
            ensure!(raw.closed_within(left).await, "a silent connection was left open");
        }
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        c.simple_query("SELECT 1").await?;
        Ok(())
    })
}
