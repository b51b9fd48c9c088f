//! Abuse limits: failed logins limited per user name (known or not, with
//! one answer for both) and per source address (on a second proxy with a
//! low limit, since every case here connects from 127.0.0.1), and a tenant
//! over its connection rate refused while other tenants connect. Every
//! refusal is checked for its SQLSTATE and for what its message must not
//! show; every refusal is seen by a client over TLS.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;

/// The answer to a client over a failed-login limit.
const TOO_MANY_FAILURES: &str = "too many failed login attempts; try again later";

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("abuse::failed_logins_are_limited_per_user_name", per_user),
        ("abuse::failed_logins_are_limited_per_address", per_address),
        ("abuse::tenant_connection_rate_spares_other_tenants", connection_rate),
    ]
}

/// The error of a refused login over TLS, checked to show none of `secrets`.
async fn refused(ctx: &Ctx, endpoint: &str, user: &str, pw: &str, secrets: &[&str]) -> Result<tokio_postgres::Error> {
    let e = crate::tokens::connect_tls(ctx, endpoint, user, pw, "app1")
        .await?
        .err()
        .with_context(|| format!("{user} was let in"))?;
    let shown = format!("{} {e:?}", crate::db_message(&e));
    for s in secrets {
        ensure!(!shown.contains(s), "the error shows {s:?}: {shown}");
    }
    Ok(e)
}

fn ensure_too_many_failures(e: &tokio_postgres::Error, who: &str) -> Result<()> {
    ensure!(
        e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
        "{who}: {e:?}"
    );
    ensure!(crate::db_message(e) == TOO_MANY_FAILURES, "{who}: {e:?}");
    Ok(())
}

fn per_user(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // The test configuration allows 20 failures a minute per user name:
        // a burst of 20, then one more every 3 s.
        for (user, good) in [("ivan", "ivan-pw"), ("nobody-like-ivan", "whatever-pw")] {
            let mut failures = 0;
            loop {
                let guess = format!("guess-{failures}-{user}");
                let e = refused(ctx, "rw", user, &guess, &[&guess, good]).await?;
                if e.code() == Some(&SqlState::INVALID_PASSWORD) {
                    failures += 1;
                    ensure!(failures <= 60, "{user}: {failures} failures and no limit");
                    continue;
                }
                ensure_too_many_failures(&e, user)?;
                break;
            }
            ensure!(failures >= 20, "{user} limited after {failures} failures");
            // Over the limit, even the right password is refused before it
            // is checked, with the same answer for a tenant and a stranger.
            let e = refused(ctx, "rw", user, good, &[good, user]).await?;
            ensure_too_many_failures(&e, user)?;
        }
        // Other users, from the same address, are unaffected.
        let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
        c.simple_query("SELECT 1").await?;
        Ok(())
    })
}

fn per_address(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // A second proxy on the same cluster, allowing 3 failures a minute
        // from one address; its limits are its own.
        let settings = crate::reload::settings(ctx, |t| {
            t.replace(
                "auth_failures_per_minute_per_address = 1000",
                "auth_failures_per_minute_per_address = 3",
            )
        })?;
        let app = gatehouse::App::bind(settings).await?;
        let addr = app.local_addr("rw").context("no rw endpoint")?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let result = async {
            let conninfo = |user: &str, pw: &str| {
                format!(
                    "host=localhost hostaddr={} port={} user={user} password={pw} dbname=app1 sslmode=require",
                    addr.ip(),
                    addr.port()
                )
            };
            // Three wrong guesses under three names, known or not.
            for (user, guess) in [("alice", "guess-a"), ("stranger-1", "guess-b"), ("bob", "guess-c")] {
                let e = tokio_postgres::connect(&conninfo(user, guess), crate::tokens::tls_connector(ctx)?)
                    .await
                    .err()
                    .with_context(|| format!("{user} was let in"))?;
                ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{user}: {e:?}");
            }
            // Now every name from this address is refused untried, tenant or
            // not, right password or not, with one answer.
            for (user, pw) in [("alice", "alice-pw"), ("carol", "carol-pw"), ("stranger-2", "x-pw")] {
                let e = tokio_postgres::connect(&conninfo(user, pw), crate::tokens::tls_connector(ctx)?)
                    .await
                    .err()
                    .with_context(|| format!("{user} was let in over the address limit"))?;
                ensure_too_many_failures(&e, user)?;
                let shown = format!("{e:?}");
                ensure!(!shown.contains(pw) && !shown.contains(user), "{shown}");
            }
            // The main proxy keeps its own count: the same address gets in.
            let c = ctx.client("rw", "alice", "alice-pw", "app1").await?;
            c.simple_query("SELECT 1").await?;
            Ok(())
        }
        .await;
        let _ = tx.send(());
        tokio::time::timeout(Duration::from_secs(15), running)
            .await
            .context("second proxy did not stop")???;
        result
    })
}

fn connection_rate(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // rita may open 1 connection a second, 2 at once.
        let mut clients = Vec::new();
        let mut refusal = None;
        for _ in 0..8 {
            // Another tenant connects alongside each of rita's attempts.
            let (rita, alice) = tokio::join!(
                crate::tokens::connect_tls(ctx, "rw", "rita", "rita-pw", "app1"),
                ctx.client("rw", "alice", "alice-pw", "app1")
            );
            alice?.simple_query("SELECT 1").await?;
            let rita = rita?;
            match rita {
                Ok(c) => clients.push(c),
                Err(e) => {
                    refusal = Some(e);
                    break;
                }
            }
        }
        let e = refusal.context("rita was never held to her connection rate")?;
        ensure!(e.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{e:?}");
        ensure!(
            crate::db_message(&e) == "connection rate limit reached for user \"rita\"",
            "{e:?}"
        );
        ensure!(!format!("{e:?}").contains("rita-pw"), "{e:?}");
        ensure!(clients.len() >= 2, "the burst of 2 was not let in: {}", clients.len());
        // Over the rate, a wrong password is still answered as one (28P01):
        // the rate is checked only once the client proved who it is.
        let e = refused(ctx, "rw", "rita", "not-rita-pw", &["not-rita-pw"]).await?;
        ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
        // Connections already open keep working, and the rate comes back.
        for c in &clients {
            c.simple_query("SELECT 1").await?;
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
        ctx.client("rw", "rita", "rita-pw", "app1")
            .await?
            .simple_query("SELECT 1")
            .await?;
        Ok(())
    })
}
