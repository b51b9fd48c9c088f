//! Who may connect: SCRAM and md5 clients, backend md5/trust credentials,
//! TLS (require, verify-full), and each refusal with its SQLSTATE.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::BytesMut;
use gatehouse_proto_pg::startup::{self, GSSENC_REQUEST_CODE};
use tokio_postgres::error::SqlState;

use crate::Ctx;
use crate::queries::{psql_err, psql_ok};
use crate::raw::Raw;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("auth::scram_and_md5_clients", scram_and_md5_clients),
        ("auth::backend_md5_and_trust", backend_md5_and_trust),
        ("auth::refusals_carry_their_sqlstate", refusals),
        ("auth::tls_require_and_verify_full", tls),
        ("auth::gssenc_is_refused_then_startup_proceeds", gssenc),
        ("auth::startup_parameters_reach_the_backend", startup_parameters),
    ]
}

async fn connect_err(ctx: &Ctx, endpoint: &str, user: &str, pw: &str, db: &str) -> Result<tokio_postgres::Error> {
    match tokio_postgres::connect(&ctx.conninfo(endpoint, user, pw, db), tokio_postgres::NoTls).await {
        Ok(_) => anyhow::bail!("{user}@{db} on {endpoint} was let in"),
        Err(e) => Ok(e),
    }
}

fn scram_and_md5_clients(ctx: &Ctx) -> Result<()> {
    let who = psql_ok(
        ctx,
        "rw",
        "alice",
        "alice-pw",
        "sslmode=disable",
        "SELECT current_database()",
    )?;
    ensure!(who == "app1", "{who}");
    let a = ctx.addr("rw");
    let out = std::process::Command::new("psql")
        .arg(format!(
            "host={} port={} user=bob dbname=app2 sslmode=disable",
            a.ip(),
            a.port()
        ))
        .args(["-X", "-A", "-t", "-c", "SELECT current_user"])
        .env("PGPASSWORD", "bob-pw")
        .output()?;
    ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ensure!(
        String::from_utf8(out.stdout)?.trim() == "app_owner",
        "md5 tenant not mapped to its backend user"
    );
    ctx.rt.block_on(async {
        let c = ctx.client("rw", "bob", "bob-pw", "app2").await?;
        let n: i32 = c.query_one("SELECT 7", &[]).await?.get(0);
        ensure!(n == 7);
        Ok(())
    })
}

fn backend_md5_and_trust(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        for (tenant, pw, backend_user) in [("carol", "carol-pw", "md5_owner"), ("dave", "dave-pw", "trust_owner")] {
            let c = ctx.client("rw", tenant, pw, "app1").await?;
            let user: String = c.query_one("SELECT current_user::text", &[]).await?.get(0);
            ensure!(user == backend_user, "{tenant} ran as {user}");
        }
        Ok(())
    })
}

fn refusals(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let e = connect_err(ctx, "rw", "alice", "wrong", "app1").await?;
        ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
        let e = connect_err(ctx, "rw", "bob", "wrong", "app2").await?;
        ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "md5: {e}");
        // Unknown users get the same answer as a wrong password.
        let e = connect_err(ctx, "rw", "mallory", "whatever", "app1").await?;
        ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{e:?}");
        ensure!(
            crate::db_message(&e).contains("password authentication failed for user \"mallory\""),
            "{e:?}"
        );
        // Another tenant's database and a database that does not exist get
        // the same answer.
        let e = connect_err(ctx, "rw", "alice", "alice-pw", "app2").await?;
        ensure!(
            e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{e:?}"
        );
        let other = crate::db_message(&e).replace("app2", "X");
        let e = connect_err(ctx, "rw", "alice", "alice-pw", "nosuchdb").await?;
        ensure!(
            e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{e:?}"
        );
        ensure!(crate::db_message(&e).replace("nosuchdb", "X") == other, "{e:?}");
        // Plain text on a TLS-only endpoint.
        let e = connect_err(ctx, "tls_only", "alice", "alice-pw", "app1").await?;
        ensure!(
            e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{e:?}"
        );
        // No user name at all.
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        raw.send(&startup::startup_message([("database", "app1")])).await?;
        let f = raw.expect_error(Duration::from_secs(5)).await?;
        ensure!(f.code == "28000", "{f:?}");
        Ok(())
    })
}

fn tls(ctx: &Ctx) -> Result<()> {
    let ca = ctx.ca.display().to_string();
    let out = psql_ok(
        ctx,
        "tls_only",
        "alice",
        "alice-pw",
        "sslmode=require",
        "SELECT 'tls ok'",
    )?;
    ensure!(out == "tls ok", "{out}");
    let a = ctx.addr("tls_only");
    let verify = format!("sslmode=verify-full sslrootcert={ca}");
    // verify-full checks the name: the test certificate is for "localhost".
    let out = std::process::Command::new("psql")
        .arg(format!(
            "host=localhost hostaddr={} port={} user=alice dbname=app1 {verify}",
            a.ip(),
            a.port()
        ))
        .args(["-X", "-A", "-t", "-c", "SELECT 'verified'"])
        .env("PGPASSWORD", "alice-pw")
        .output()?;
    ensure!(
        out.status.success(),
        "verify-full failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(String::from_utf8(out.stdout)?.trim() == "verified");
    let err = psql_err(ctx, "tls_only", "alice", "alice-pw", &verify, "SELECT 1")?;
    ensure!(
        err.contains("does not match host name") || err.contains("certificate"),
        "{err}"
    );
    let err = psql_err(ctx, "tls_only", "alice", "alice-pw", "sslmode=disable", "SELECT 1")?;
    ensure!(err.contains("requires TLS"), "{err}");
    // TLS offered but optional on "rw".
    let out = psql_ok(ctx, "rw", "alice", "alice-pw", "sslmode=require", "SELECT 2")?;
    ensure!(out == "2");
    Ok(())
}

fn gssenc(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        let mut req = 8u32.to_be_bytes().to_vec();
        req.extend_from_slice(&GSSENC_REQUEST_CODE.to_be_bytes());
        raw.send(&req).await?;
        ensure!(raw.read_byte().await? == b'N');
        raw.login(&[("user", "alice"), ("database", "app1")], "alice-pw")
            .await?;
        let rows = raw.query("SELECT 'after gss'").await?;
        ensure!(rows == ["after gss"]);
        Ok(())
    })
}

fn startup_parameters(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut raw = Raw::connect(ctx.addr("rw")).await?;
        let g = raw
            .login(
                &[
                    ("user", "alice"),
                    ("database", "app1"),
                    ("application_name", "gh-test-app"),
                    ("TimeZone", "Asia/Tokyo"),
                    ("options", "-c statement_timeout=4321 --search_path=pg_catalog"),
                ],
                "alice-pw",
            )
            .await?;
        let param = |n: &str| g.params.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        ensure!(
            param("application_name").as_deref() == Some("gh-test-app"),
            "{:?}",
            g.params
        );
        ensure!(param("TimeZone").as_deref() == Some("Asia/Tokyo"), "{:?}", g.params);
        ensure!(
            param("server_version").is_some_and(|v| v.starts_with("15")),
            "{:?}",
            g.params
        );
        ensure!(raw.query("SHOW statement_timeout").await? == ["4321ms"]);
        ensure!(raw.query("SHOW search_path").await? == ["pg_catalog"]);
        // The key the client got is the proxy's, not the backend's.
        let (pid, _) = g.key.context("no BackendKeyData")?;
        let backend_pid: i64 = raw.query("SELECT pg_backend_pid()").await?[0].parse()?;
        ensure!(
            i64::from(pid) != backend_pid,
            "the backend's cancel key leaked to the client"
        );
        // ParameterStatus stays truthful after SET.
        let mut out = BytesMut::new();
        gatehouse_proto_pg::messages::put_query(&mut out, "SET application_name = 'renamed'");
        raw.send(&out).await?;
        let mut seen = false;
        while let Some(m) = raw.read(Duration::from_secs(5)).await? {
            if m[0] == b'S' {
                seen |= gatehouse_proto_pg::messages::parse_parameter_status(&m)?
                    == ("application_name".into(), "renamed".into());
            }
            if m[0] == b'Z' {
                break;
            }
        }
        ensure!(seen, "no ParameterStatus for the SET");
        Ok(())
    })
}
