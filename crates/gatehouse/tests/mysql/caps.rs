//! What a connection reset for the next client keeps: its database's
//! character set, as a new connection on that database has it.

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "caps::a_reset_connection_keeps_its_databases_character_set",
        database_charset_after_reset,
    )]
}

/// A connection reset for the next client keeps its database, but the
/// server's COM_RESET_CONNECTION sets `character_set_database` back to the
/// server's: a client of a latin1 database then got utf8mb4 from `SET
/// CHARACTER SET` (which takes the database's). Every client, on a new
/// connection or one reset after another client (in session and
/// transaction mode), sees its database's character set, as direct.
fn database_charset_after_reset(ctx: &Ctx) -> Result<()> {
    let p = ctx.cluster.mysql_primary().context("no primary")?;
    let su = std::process::Command::new("mysql")
        .args(["--no-defaults", "-h", &p.host, "-P", &p.port.to_string()])
        .args([
            "-u",
            ctx.cluster.mysql_user(),
            &format!("-p{}", ctx.cluster.mysql_password()),
        ])
        .args(["-e", "CREATE DATABASE IF NOT EXISTS caps_latin1 CHARACTER SET latin1"])
        .output()
        .context("running mysql")?;
    ensure!(su.status.success(), "{}", String::from_utf8_lossy(&su.stderr));
    crate::with_superuser_tenant_proxy(ctx, "latin", "latin-pw", "caps_latin1", |addrs| async move {
        for a in addrs {
            for client in 0..3 {
                let opts = crate::opts_at(a, "latin", "latin-pw", Some("caps_latin1"));
                let mut c = mysql_async::Conn::new(opts).await?;
                c.query_drop("SET CHARACTER SET 'latin1'").await?;
                let row: Option<(String, String)> =
                    c.query_first("SELECT charset('a'), @@character_set_database").await?;
                ensure!(
                    row == Some(("latin1".into(), "latin1".into())),
                    "{a}, client {client}: {row:?}"
                );
                c.disconnect().await?;
            }
        }
        Ok(())
    })
}
