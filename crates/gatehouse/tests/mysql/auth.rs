//! Logins through the MySQL endpoints: native password, TLS with the
//! `mysql` command-line client, and each refusal with its error number
//! (the message never shows the password).

use anyhow::{Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("auth::native_password_login", native_password),
        ("auth::refusals_carry_their_error_numbers", refusals),
        ("auth::mysql_cli_over_tls_and_plain", mysql_cli),
    ]
}

fn native_password(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let db: Option<String> = c.query_first("SELECT DATABASE()").await?;
        ensure!(db.as_deref() == Some("app1"), "{db:?}");
        let user: Option<String> = c.query_first("SELECT CURRENT_USER()").await?;
        ensure!(user.as_deref().is_some_and(|u| u.starts_with("app_owner@")), "{user:?}");
        c.disconnect().await?;
        Ok(())
    })
}

/// The server error of a failed connection attempt: (code, message).
async fn refused(ctx: &Ctx, user: &str, pw: &str, db: &str) -> Result<(u16, String)> {
    match mysql_async::Conn::new(ctx.opts("rw", user, pw, Some(db))).await {
        Ok(_) => anyhow::bail!("{user} logged in to {db}"),
        Err(mysql_async::Error::Server(e)) => Ok((e.code, e.message)),
        Err(e) => anyhow::bail!("{user}: not a server error: {e:?}"),
    }
}

fn refusals(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        for (user, pw, db, code) in [
            ("alice", "wrong-pw", "app1", 1045),
            ("nobody", "whatever-pw", "app1", 1045),
            ("alice", "alice-pw", "app2", 1044),
            ("alice", "alice-pw", "other", 1044),
        ] {
            let (got, message) = refused(ctx, user, pw, db).await?;
            ensure!(got == code, "{user}/{db}: {got} {message}");
            ensure!(!message.contains(pw), "the message shows the password: {message}");
        }
        // A wrong password and an unknown user read alike.
        let (_, a) = refused(ctx, "alice", "wrong-pw", "app1").await?;
        let (_, b) = refused(ctx, "nobody", "wrong-pw", "app1").await?;
        ensure!(a.replace("alice", "X") == b.replace("nobody", "X"), "{a} vs {b}");
        // So does a tenant with no MySQL hash (tokens only) on an endpoint
        // whose method is the hash exchange: nothing tells it exists.
        let (code, c) = refused(ctx, "tina", "wrong-pw", "app1").await?;
        ensure!(
            code == 1045 && c.replace("tina", "X") == b.replace("nobody", "X"),
            "{c} vs {b}"
        );
        Ok(())
    })
}

fn mysql_cli(ctx: &Ctx) -> Result<()> {
    for tls in [true, false] {
        let sql = "SELECT v FROM t WHERE id = 2; SHOW STATUS LIKE 'Ssl_cipher'";
        let r = crate::mysql_cli(ctx, "rw", "alice", "alice-pw", tls, &[], sql)?;
        ensure!(r.ok, "mysql (tls {tls}): {}", r.stderr);
        ensure!(r.stdout.lines().next() == Some("two"), "{}", r.stdout);
    }
    Ok(())
}
