//! Prepared statements on a transaction pool when an extended-query
//! exchange fails: what the proxy prepared or closed on the backend
//! connection behind the client's back must stay what the server really
//! has, even when the client's next messages arrive in the same batch as
//! the ones the server skipped. Runs on a proxy of its own whose "tx" pool
//! has one connection (see `cancel.rs`), so every exchange meets the same
//! backend connection.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use bytes::{BufMut, BytesMut};
use gatehouse_proto_pg::extended::{put_bind, put_parse, put_sync};
use gatehouse_proto_pg::messages::{self, put_message};
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::cancel::OnePool;
use crate::raw::Raw;

/// The proxy's cap on statements kept per backend connection
/// (`MAX_PREPARED_PER_CONNECTION`): one more Parse evicts the oldest.
const CAP: usize = 256;
const WITHIN: Duration = Duration::from_secs(10);

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "prepared::statements_skipped_after_an_error_stay_as_the_server_has_them",
        skipped_after_error,
    )]
}

/// Bind with no parameters and text results, then Execute, of the unnamed portal.
fn put_bind_execute(out: &mut BytesMut, statement: &str) {
    put_bind(out, "", statement, &[0, 0, 0, 0, 0, 0]);
    put_message(out, b'E', |b| {
        b.put_u8(0);
        b.put_i32(0);
    });
}

/// Reads to ReadyForQuery: the first column of each DataRow, and the
/// errors (SQLSTATE and message) on the way.
async fn until_ready(raw: &mut Raw) -> Result<(Vec<String>, Vec<(String, String)>)> {
    let (mut rows, mut errors) = (Vec::new(), Vec::new());
    loop {
        let m = raw.read(WITHIN).await?.context("the proxy closed the connection")?;
        match m[0] {
            b'Z' => return Ok((rows, errors)),
            b'E' => {
                let e = messages::parse_error(&m)?;
                errors.push((e.code, e.message));
            }
            b'D' => {
                // DataRow: count (i16), then length (i32) and bytes of column 1.
                let len = i32::from_be_bytes(m[7..11].try_into()?) as usize;
                rows.push(String::from_utf8_lossy(&m[11..11 + len]).into_owned());
            }
            _ => {}
        }
    }
}

/// The connection holds as many proxy statements as it keeps. A client's
/// Execute fails before its Sync is sent; the client then sends, in one
/// batch: a new Parse (the proxy evicts the oldest statement with a Close
/// the server skips, and the Parse is skipped too), the Sync, and an
/// exchange using the evicted statement's text and the skipped one's name.
/// The evicted statement is still on the server, so it is not prepared
/// again (that would be 42P05 "already exists"); the skipped Parse
/// prepared nothing, so its name does not exist, under the client's name.
fn skipped_after_error(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OnePool::start(ctx).await?;
        let result = async {
            let mut raw = Raw::connect(own.tx).await?;
            raw.login(&[("user", "alice"), ("database", "app1")], "alice-pw")
                .await?;
            let text = |i: usize| format!("SELECT 'statement {i}'");
            // The oldest (least recently used) statement is statement 0.
            let mut out = BytesMut::new();
            for i in 0..CAP {
                put_parse(&mut out, &format!("p{i}"), &text(i), &[0, 0]);
            }
            put_sync(&mut out);
            raw.send(&out).await?;
            let (_, errors) = until_ready(&mut raw).await?;
            ensure!(errors.is_empty(), "preparing {CAP} statements: {errors:?}");

            // An error with the Sync not sent yet: the server skips to it.
            let mut out = BytesMut::new();
            put_parse(&mut out, "", "SELECT 1/0", &[0, 0]);
            put_bind_execute(&mut out, "");
            put_message(&mut out, b'H', |_| {});
            raw.send(&out).await?;
            let e = raw.expect_error(WITHIN).await?;
            ensure!(e.code == SqlState::DIVISION_BY_ZERO.code(), "{e:?}");

            let mut out = BytesMut::new();
            put_parse(&mut out, "skipped", "SELECT 'never prepared'", &[0, 0]);
            put_sync(&mut out);
            put_parse(&mut out, "again", &text(0), &[0, 0]);
            put_bind_execute(&mut out, "again");
            put_sync(&mut out);
            put_bind_execute(&mut out, "skipped");
            put_sync(&mut out);
            raw.send(&out).await?;

            let (rows, errors) = until_ready(&mut raw).await?;
            ensure!(
                rows.is_empty() && errors.is_empty(),
                "the skipped exchange: {rows:?} {errors:?}"
            );
            let (rows, errors) = until_ready(&mut raw).await?;
            ensure!(
                errors.is_empty(),
                "preparing the evicted statement's text again: {errors:?}"
            );
            ensure!(
                rows == [text(0).trim_start_matches("SELECT '").trim_end_matches('\'')],
                "{rows:?}"
            );
            let (_, errors) = until_ready(&mut raw).await?;
            match errors.as_slice() {
                [(code, message)] if code == SqlState::INVALID_SQL_STATEMENT_NAME.code() => {
                    ensure!(
                        message.contains("\"skipped\""),
                        "named as the client knows it: {message}"
                    );
                }
                other => bail!("binding the skipped statement: {other:?}"),
            }
            // The connection still serves the client, and its statements.
            let mut out = BytesMut::new();
            put_bind_execute(&mut out, "p1");
            put_sync(&mut out);
            raw.send(&out).await?;
            let (rows, errors) = until_ready(&mut raw).await?;
            ensure!(errors.is_empty() && rows == ["statement 1"], "{rows:?} {errors:?}");
            Ok(())
        }
        .await;
        own.stop().await?;
        result
    })
}
