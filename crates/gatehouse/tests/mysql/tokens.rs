//! Token authentication for MySQL clients, as managed proxies do it: the
//! `mysql` client sends a signed token with `mysql_clear_password` over TLS
//! on an endpoint with `client_auth = "password"`. Expired tokens, another
//! tenant's token and any token over plain TCP are refused with 1045, and
//! no message shows the token. mysql_async, which sends its TLS ClientHello
//! in the same write as its SSLRequest now and then, logs in every time.

use std::time::Duration;

use anyhow::{Result, ensure};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("tokens::token_over_tls_and_refusals", tokens),
        (
            "tokens::tls_logins_succeed_when_the_client_hello_follows_the_ssl_request_at_once",
            pipelined_tls,
        ),
    ]
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

/// Logins this many times: mysql_async writes its SSLRequest and its
/// ClientHello back to back, so some arrive in the proxy's first read
/// together (1 in 20 on this machine).
const PIPELINED_LOGINS: usize = 300;

fn pipelined_tls(ctx: &Ctx) -> Result<()> {
    let now = unix_seconds(std::time::SystemTime::now());
    let good = token("tina", now)?;
    let ca = std::fs::read(ctx.dir.join("server.pem"))?;
    let addr = ctx.addr("tok");
    let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("tina"))
        .pass(Some(good))
        .db_name(Some("app1"))
        .prefer_socket(false)
        .enable_cleartext_plugin(true)
        .ssl_opts(
            mysql_async::SslOpts::default()
                .with_root_certs(vec![ca.into()])
                .with_danger_tls_hostname_override(Some("localhost")),
        )
        .into();
    ctx.rt.block_on(async {
        use mysql_async::prelude::Queryable;
        for i in 0..PIPELINED_LOGINS {
            let mut conn = mysql_async::Conn::new(opts.clone())
                .await
                .map_err(|e| anyhow::anyhow!("login {i}: {e}"))?;
            let one: Option<u8> = conn.query_first("SELECT 1").await?;
            ensure!(one == Some(1), "login {i}: {one:?}");
            conn.disconnect().await?;
        }
        Ok(())
    })
}
