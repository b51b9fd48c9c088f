//! Reloads that change settings other than the topology, on a proxy of the
//! case's own read from a file of its own (the reload reads it again, as
//! SIGHUP does), each checked by what clients see and by the reload's
//! answer naming it: a TLS certificate rotated in its files serves the
//! handshakes from then on while a TLS session from before goes on (and a
//! certificate that does not load refuses the reload); a lowered
//! failed-login limit refuses the next failure of a name at once; a
//! tenant's raised client connection limit admits one more at once.

use anyhow::{Context, Result, ensure};
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::own::OwnFile;
use crate::tls_probe::{TestCa, Upgrade, served_certificate};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "reload::rotated_tls_certificate_serves_new_handshakes",
            rotated_certificate,
        ),
        (
            "reload::lowered_failed_login_limit_applies_without_restart",
            lowered_failure_limit,
        ),
        (
            "reload::raised_tenant_connection_limit_admits_at_once",
            raised_tenant_limit,
        ),
    ]
}

fn rotated_certificate(ctx: &Ctx) -> Result<()> {
    let ca = TestCa::new()?;
    let (a, b) = (ca.leaf()?, ca.leaf()?);
    let (cert, key) = (ctx.dir.join("rotating.pem"), ctx.dir.join("rotating.key"));
    a.write(&cert, &key)?;
    ctx.rt.block_on(async {
        // The TLS endpoints of the test configuration, on these files.
        let own = OwnFile::start_edited(ctx, "own-tls.toml", |t| {
            t.replace("/server.pem\"", "/rotating.pem\"")
                .replace("/server.key\"", "/rotating.key\"")
        })
        .await?;
        let at = own.addr("tls_only")?;
        ensure!(
            served_certificate(at, Upgrade::Postgres, &ca).await? == a.der,
            "not the first certificate at start"
        );
        let info = format!(
            "host=localhost hostaddr={} port={} user=alice password=alice-pw dbname=app1 sslmode=require",
            at.ip(),
            at.port()
        );
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new((*ca.client_config()?).clone());
        let (before, conn) = tokio_postgres::connect(&info, tls.clone()).await?;
        tokio::spawn(conn);
        ensure!(before.query_one("SELECT 1", &[]).await?.get::<_, i32>(0) == 1);

        // Rotated in place: same paths, new content.
        b.write(&cert, &key)?;
        let outcome = own.reload_with("").await?;
        ensure!(
            outcome
                .applied
                .iter()
                .any(|c| c.starts_with("endpoint \"tls_only\": TLS certificate reloaded")),
            "{outcome:?}"
        );
        ensure!(outcome.not_applied.is_empty(), "{outcome:?}");
        ensure!(
            served_certificate(at, Upgrade::Postgres, &ca).await? == b.der,
            "a handshake after the reload got the old certificate"
        );
        let one: i32 = before.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1, "the TLS session from before the reload");
        let (after, conn) = tokio_postgres::connect(&info, tls).await?;
        tokio::spawn(conn);
        ensure!(after.query_one("SELECT 2", &[]).await?.get::<_, i32>(0) == 2);

        // A certificate that does not load refuses the reload whole.
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n",
        )?;
        let refused = own.reload_with("").await;
        ensure!(
            matches!(&refused, Err(gatehouse::reload::ReloadError::Invalid(p)) if p.contains("rotating.pem")),
            "{refused:?}"
        );
        ensure!(
            served_certificate(at, Upgrade::Postgres, &ca).await? == b.der,
            "a refused reload changed the certificate"
        );
        let one: i32 = before.query_one("SELECT 1", &[]).await?.get(0);
        ensure!(one == 1);
        Ok(())
    })
}

/// Ivan's password, wrong.
const WRONG: &str = "not-ivan-pw";

fn lowered_failure_limit(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OwnFile::start(ctx, "own-failures.toml").await?;
        let failed = |e: Result<tokio_postgres::Client, tokio_postgres::Error>| match e {
            Ok(_) => anyhow::bail!("a wrong password logged in"),
            Err(e) => Ok(e),
        };
        // 20 a minute: two failures are just failures.
        for _ in 0..2 {
            let e = failed(own.try_client("rw", "ivan", WRONG).await?)?;
            ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
        }
        let outcome = own
            .reload_edited(|t| {
                t.replace(
                    "auth_failures_per_minute_per_user = 20",
                    "auth_failures_per_minute_per_user = 1",
                )
            })
            .await?;
        ensure!(
            outcome
                .applied
                .iter()
                .any(|c| c.starts_with("proxy.auth_failures_per_minute_per_user: 20 -> 1")),
            "{outcome:?}"
        );
        ensure!(outcome.not_applied.is_empty(), "{outcome:?}");
        // Counted afresh under 1 a minute: one failure, then refused untried.
        let e = failed(own.try_client("rw", "ivan", WRONG).await?)?;
        ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
        let e = failed(own.try_client("rw", "ivan", WRONG).await?)?;
        ensure!(
            crate::db_message(&e) == gatehouse::limits::TOO_MANY_FAILURES,
            "the second failure after the reload: {e:?}"
        );
        let e = failed(own.try_client("rw", "ivan", "ivan-pw").await?)?;
        ensure!(
            crate::db_message(&e) == gatehouse::limits::TOO_MANY_FAILURES,
            "the name is refused untried, the right password too: {e:?}"
        );
        let c = own.try_client("rw", "alice", "alice-pw").await??;
        ensure!(c.query_one("SELECT 1", &[]).await?.get::<_, i32>(0) == 1);
        Ok(())
    })
}

fn raised_tenant_limit(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let own = OwnFile::start(ctx, "own-tenant-limit.toml").await?;
        // erin may hold 2 client connections.
        let mut held = Vec::new();
        for _ in 0..2 {
            held.push(own.try_client("rw", "erin", "erin-pw").await??);
        }
        let e = own
            .try_client("rw", "erin", "erin-pw")
            .await?
            .err()
            .context("a third connection over a limit of 2")?;
        ensure!(e.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{e:?}");
        let outcome = own
            .reload_edited(|t| {
                t.replace(
                    "name = \"erin\"\nmax_client_connections = 2\n",
                    "name = \"erin\"\nmax_client_connections = 3\n",
                )
            })
            .await?;
        ensure!(
            outcome
                .applied
                .iter()
                .any(|c| c.starts_with("tenants: ") && c.contains("changed \"erin\" (max_client_connections: 2 -> 3)")),
            "{outcome:?}"
        );
        // The two held count: one more, not three more.
        held.push(own.try_client("rw", "erin", "erin-pw").await??);
        let e = own
            .try_client("rw", "erin", "erin-pw")
            .await?
            .err()
            .context("a fourth connection over a limit of 3")?;
        ensure!(e.code() == Some(&SqlState::TOO_MANY_CONNECTIONS), "{e:?}");
        for c in &held {
            ensure!(c.query_one("SELECT 1", &[]).await?.get::<_, i32>(0) == 1);
        }
        Ok(())
    })
}
