//! Token authentication for MySQL clients, as managed proxies do it: the
//! `mysql` client sends a signed token with `mysql_clear_password` over TLS
//! on an endpoint with `client_auth = "password"`. Expired tokens, another
//! tenant's token and any token over plain TCP are refused with 1045, and
//! no message shows the token.

use std::time::Duration;

use anyhow::{Result, ensure};
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
    let r = crate::mysql_cli(
        ctx,
        "tok",
        user,
        password,
        tls,
        &[],
        "SELECT DATABASE(), CURRENT_USER()",
    )?;
    Ok((r.ok, r.stdout, r.stderr))
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
