//! Token authentication for MySQL clients, as managed proxies do it: the
//! `mysql` client sends a signed token with `mysql_clear_password` over TLS
//! on an endpoint with `client_auth = "password"`. Expired tokens, another
//! tenant's token and any token over plain TCP are refused with 1045, and
//! no message shows the token.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![("tokens::token_over_tls_and_refusals", tokens)]
}

fn token(tenant: &str, issued: u64) -> Result<String> {
    let key = IssuingKey::hs256(crate::TOKEN_KEY.as_bytes(), None)?;
    Ok(issue(
        &key,
        &IssueRequest {
            issuer: "gatehouse-test".into(),
            audience: "tok".into(),
            tenant: tenant.into(),
            database: "app1".into(),
            ttl: Duration::from_secs(300),
            now: issued,
        },
    )?)
}

/// Runs the `mysql` client against the token endpoint: (success, stdout, stderr).
fn mysql(ctx: &Ctx, user: &str, password: &str, tls: bool) -> Result<(bool, String, String)> {
    let a = ctx.addr("tok");
    let mut cmd = std::process::Command::new("mysql");
    cmd.args(["--no-defaults", "-h", &a.ip().to_string(), "-P", &a.port().to_string()])
        .args(["-u", user, &format!("-p{password}"), "-N", "-B"])
        .args(["app1", "-e", "SELECT DATABASE(), CURRENT_USER()"]);
    if tls {
        cmd.args(["--ssl", "--ssl-verify-server-cert=0"]);
    } else {
        cmd.arg("--skip-ssl");
    }
    let out = cmd.output().context("running mysql")?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn tokens(ctx: &Ctx) -> Result<()> {
    let now = unix_seconds(std::time::SystemTime::now());
    let good = token("tina", now)?;
    let (ok, stdout, stderr) = mysql(ctx, "tina", &good, true)?;
    ensure!(ok, "token refused: {stderr}");
    ensure!(stdout.starts_with("app1\tapp_owner@"), "{stdout}");
    for (user, t, tls, what) in [
        ("tina", token("tina", now - 3600)?, true, "expired"),
        ("tina", token("alice", now)?, true, "another tenant's"),
        ("tina", good.clone(), false, "over plain TCP"),
    ] {
        let (ok, _, stderr) = mysql(ctx, user, &t, tls)?;
        ensure!(!ok, "{what} token accepted");
        ensure!(stderr.contains("1045"), "{what}: {stderr}");
        ensure!(!stderr.contains(&t), "{what}: the error shows the token");
    }
    Ok(())
}
