//! Transaction pooling's reset values: what `RESET`, `SET ... TO DEFAULT`,
//! `RESET ALL` and `DISCARD ALL` return a client's tracked parameters to
//! (its startup values, not the server's), and what the client is told.

use anyhow::{Result, ensure};

use crate::Ctx;
use crate::txn::{client_with, text};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "txn::reset_returns_to_the_startup_values_not_the_servers",
            reset_to_startup_values,
        ),
        (
            "txn::reset_to_startup_values_reaches_the_client_as_parameter_status_pinned_or_not",
            reset_reported_pinned_or_not,
        ),
        (
            "txn::alter_role_set_reaches_the_next_session_as_direct",
            alter_role_set_next_session,
        ),
    ]
}

/// `ALTER ROLE ... SET` changes what *new* sessions of the role start
/// with: a new direct connection sees it, and so must the next client
/// through the pool, whose pooled connections' sessions started before (in
/// PgBouncer they keep the old value until they are closed). The backend's
/// pooled connections are replaced at the end of the transaction that ran
/// it; `RESET` the same.
fn alter_role_set_next_session(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let show = |c: tokio_postgres::Client| async move {
            let v: String = c.query_one("SHOW statement_timeout", &[]).await?.get(0);
            anyhow::Ok(v)
        };
        // Warm connections in the pool, opened before the change.
        let warm = [
            ctx.client("tx", "alice", "alice-pw", "app1").await?,
            ctx.client("tx", "alice", "alice-pw", "app1").await?,
        ];
        let before = text(&warm[0], "SHOW statement_timeout").await?;
        drop(warm);
        let admin = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        admin
            .batch_execute("ALTER ROLE CURRENT_USER SET statement_timeout = '123s'")
            .await?;
        let after = show(ctx.client("tx", "alice", "alice-pw", "app1").await?).await?;
        admin
            .batch_execute("ALTER ROLE CURRENT_USER RESET statement_timeout")
            .await?;
        let reset = show(ctx.client("tx", "alice", "alice-pw", "app1").await?).await?;
        ensure!(
            after == "123s",
            "the next session after ALTER ROLE SET has statement_timeout {after}"
        );
        ensure!(
            [reset.as_str()] == before.iter().map(String::as_str).collect::<Vec<_>>()[..],
            "after RESET: {reset}, before: {before:?}"
        );
        Ok(())
    })
}

/// A client that connected with DateStyle, TimeZone and (through
/// `options`) extra_float_digits of its own gets them back from `RESET`,
/// `SET … TO DEFAULT`, `RESET ALL` and `DISCARD ALL`, as a direct
/// session does (pg_regress connects so: its `RESET datestyle` must not
/// land on the server's `ISO, MDY`), on whichever connection of the pool of
/// two its next transaction runs; a reset rolled back is undone; another
/// client still gets the server's defaults.
fn reset_to_startup_values(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let a = client_with(ctx, "options='-c datestyle=Postgres,MDY -c timezone=PST8PDT -c extra_float_digits=2'").await?;
        let b = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let server_datestyle = text(&b, "SHOW datestyle").await?;
        ensure!(server_datestyle != ["Postgres, MDY"], "{server_datestyle:?}");
        async fn show(c: &tokio_postgres::Client) -> Result<(String, String, String)> {
            let row = c
                .query_one(
                    "SELECT current_setting('datestyle'), current_setting('timezone'), current_setting('extra_float_digits')",
                    &[],
                )
                .await?;
            Ok((row.get(0), row.get(1), row.get(2)))
        }
        let startup = ("Postgres, MDY".to_string(), "PST8PDT".to_string(), "2".to_string());
        ensure!(show(&a).await? == startup, "at login: {:?}", show(&a).await?);
        for (round, reset) in [
            "RESET datestyle; RESET timezone; RESET extra_float_digits",
            "SET datestyle TO DEFAULT; SET timezone TO DEFAULT; SET extra_float_digits TO DEFAULT",
            "RESET ALL",
            "DISCARD ALL",
        ]
        .into_iter()
        .enumerate()
        {
            a.batch_execute("SET datestyle = 'ISO, DMY'; SET timezone = 'UTC'; SET extra_float_digits = 0")
                .await?;
            ensure!(show(&a).await?.0 == "ISO, DMY", "round {round}: SET not kept");
            // Another client between the two keeps the server's values.
            ensure!(text(&b, "SHOW datestyle").await? == server_datestyle, "round {round}: leaked");
            a.batch_execute(reset).await?;
            ensure!(show(&a).await? == startup, "round {round}, after {reset}: {:?}", show(&a).await?);
        }
        // A reset inside a transaction that rolls back is undone with it.
        a.batch_execute("SET datestyle = 'SQL, DMY'").await?;
        a.batch_execute("BEGIN; RESET datestyle; ROLLBACK").await?;
        ensure!(show(&a).await?.0 == "SQL, DMY", "rolled-back RESET kept: {:?}", show(&a).await?);
        // A SET after the reset, in the same transaction, wins.
        a.batch_execute("BEGIN; RESET datestyle; SET datestyle = 'German'; COMMIT").await?;
        ensure!(show(&a).await?.0 == "German, DMY", "{:?}", show(&a).await?);
        ensure!(text(&b, "SHOW datestyle").await? == server_datestyle, "leaked at the end");
        Ok(())
    })
}

/// The startup value a `RESET` goes back to reaches the client the way a
/// server's own change does (ParameterStatus, which libpq and pgjdbc keep
/// their view of `DateStyle`, `TimeZone` and `client_encoding` from), and
/// holds on a pinned session too (whose connection, opened without the
/// client's startup parameters, would reset to the server's defaults).
fn reset_reported_pinned_or_not(ctx: &Ctx) -> Result<()> {
    use bytes::BytesMut;
    use gatehouse_proto_pg::messages;
    use std::time::Duration;
    ctx.rt.block_on(async {
        let mut raw = crate::raw::Raw::connect(ctx.addr("tx")).await?;
        raw.login(
            &[("user", "alice"), ("database", "app1"), ("DateStyle", "Postgres, MDY")],
            "alice-pw",
        )
        .await?;
        for pinned in [false, true] {
            if pinned {
                raw.query("SET work_mem = '1234kB'").await?;
            }
            raw.query("SET datestyle = 'ISO, DMY'").await?;
            let mut out = BytesMut::new();
            messages::put_query(&mut out, "RESET datestyle");
            raw.send(&out).await?;
            // Every DateStyle the client is told, up to ReadyForQuery and a
            // moment after (ParameterStatus may come at any time).
            let mut told = Vec::new();
            let mut ready = false;
            loop {
                let m = if ready {
                    match tokio::time::timeout(Duration::from_millis(300), raw.read(Duration::from_secs(10))).await {
                        Ok(m) => m?,
                        Err(_) => break,
                    }
                } else {
                    raw.read(Duration::from_secs(10)).await?
                };
                let Some(m) = m else { break };
                match m[0] {
                    b'S' => {
                        let (name, value) = messages::parse_parameter_status(&m)?;
                        if name.eq_ignore_ascii_case("datestyle") {
                            told.push(value.to_string());
                        }
                    }
                    b'Z' => ready = true,
                    b'E' => anyhow::bail!("RESET failed: {:?}", messages::parse_error(&m)?),
                    _ => {}
                }
            }
            ensure!(ready, "pinned {pinned}: no ReadyForQuery");
            ensure!(
                told.last().map(String::as_str) == Some("Postgres, MDY"),
                "pinned {pinned}: the client was told DateStyle {told:?}"
            );
            let shown = raw.query("SHOW datestyle").await?;
            ensure!(
                shown == ["Postgres, MDY"],
                "pinned {pinned}: SHOW datestyle after RESET: {shown:?}"
            );
        }
        Ok(())
    })
}
