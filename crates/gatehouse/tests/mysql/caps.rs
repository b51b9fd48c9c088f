//! Session capabilities through the proxy: what a client asks for in its
//! handshake that changes what the server does for its session
//! (`CLIENT_FOUND_ROWS`, `CLIENT_IGNORE_SPACE`) holds on every pooled
//! connection its statements run on, and never reaches a client that did
//! not ask for it, with both kinds of client sharing one small pool; and
//! MariaDB's extended type information (`json` columns named as such)
//! reaches the clients that negotiate it, in the proxy's own result sets
//! too; and a connection reset for the next client is what a new one
//! is (`IGNORE_SPACE`, the database's character set).

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "caps::found_rows_counts_matched_rows_only_for_clients_that_ask",
            found_rows,
        ),
        (
            "caps::ignore_space_from_the_handshake_is_the_sessions_sql_mode",
            ignore_space,
        ),
        (
            "caps::extended_type_info_shows_json_columns_as_direct",
            extended_type_info,
        ),
        (
            "caps::ignore_space_holds_on_a_connection_reset_for_the_next_client",
            ignore_space_after_reset,
        ),
        (
            "caps::a_reset_connection_keeps_its_databases_character_set",
            database_charset_after_reset,
        ),
    ]
}

/// An UPDATE that sets a row to the value it has: 1 affected row for a
/// client with `CLIENT_FOUND_ROWS` (matched), 0 for one without (changed),
/// as direct, in transaction mode on a pool of 2 shared by both, round
/// after round, and again after a COM_RESET_CONNECTION.
fn found_rows(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let opts = |found: bool| {
            mysql_async::OptsBuilder::from_opts(ctx.opts("small", "alice", "alice-pw", Some("app1")))
                .client_found_rows(found)
        };
        let mut setup = mysql_async::Conn::new(opts(false)).await?;
        setup
            .query_drop("CREATE TABLE IF NOT EXISTS caps_found (id INT PRIMARY KEY, v INT)")
            .await?;
        setup.query_drop("REPLACE INTO caps_found VALUES (1, 7)").await?;
        let mut found = mysql_async::Conn::new(opts(true)).await?;
        let mut changed = mysql_async::Conn::new(opts(false)).await?;
        for round in 0..8 {
            if round == 4 {
                found.reset().await?;
                changed.reset().await?;
            }
            for (conn, want, who) in [(&mut found, 1, "found_rows"), (&mut changed, 0, "plain")] {
                conn.query_drop("UPDATE caps_found SET v = 7 WHERE id = 1").await?;
                let got = conn.affected_rows();
                ensure!(
                    got == want,
                    "round {round}: the {who} client's UPDATE of an unchanged row: {got} affected rows, want {want}"
                );
            }
            // Held across statements, both on a connection at once: the
            // pool's two connections serve one client each.
            setup.query_drop("DO 1").await?;
        }
        setup.query_drop("DROP TABLE caps_found").await?;
        for c in [setup, found, changed] {
            c.disconnect().await?;
        }
        Ok(())
    })
}

/// The `mysql` client's `-i` (`CLIENT_IGNORE_SPACE`): the session's
/// `sql_mode` has `IGNORE_SPACE` and `COUNT (*)` parses, while a client
/// without it, served by the same pool in between, has neither.
/// In both modes.
fn ignore_space(ctx: &Ctx) -> Result<()> {
    let sql = "SELECT FIND_IN_SET('IGNORE_SPACE', @@sql_mode) > 0; SELECT COUNT (*) FROM (SELECT 1) t";
    for round in 0..6 {
        let endpoint = if round % 2 == 0 { "small" } else { "sess" };
        let r = crate::mysql_cli(ctx, endpoint, "alice", "alice-pw", false, &["-i"], sql)?;
        ensure!(r.ok, "round {round}, with -i: {}", r.stderr);
        ensure!(
            r.stdout.lines().collect::<Vec<_>>() == ["1", "1"],
            "round {round}, with -i: {}",
            r.stdout
        );
        let r = crate::mysql_cli(ctx, endpoint, "alice", "alice-pw", false, &[], "SELECT @@sql_mode")?;
        ensure!(r.ok, "round {round}, without -i: {}", r.stderr);
        ensure!(
            !r.stdout.contains("IGNORE_SPACE"),
            "round {round}: a client without -i got IGNORE_SPACE: {}",
            r.stdout
        );
        let r = crate::mysql_cli(ctx, endpoint, "alice", "alice-pw", false, &[], sql)?;
        ensure!(
            !r.ok && r.stderr.contains("1064"),
            "round {round}: COUNT (*) without -i: {} {}",
            r.stdout,
            r.stderr
        );
    }
    Ok(())
}

/// The `mariadb` client negotiates `MARIADB_CLIENT_EXTENDED_TYPE_INFO`
/// when the server offers it: `--column-type-info` then shows a JSON
/// column's format. Through the proxy (transaction mode) the output is the
/// server's own, as direct; the proxy's own result sets (`SHOW
/// PROCESSLIST`) read back in that form too.
fn extended_type_info(ctx: &Ctx) -> Result<()> {
    let sql = r#"SELECT JSON_COMPACT('{"a": 1}') AS j, 1 AS n"#;
    let proxy = ctx.addr("small");
    let p = ctx.cluster.mysql_primary().context("no primary")?;
    let su = (ctx.cluster.mysql_user(), ctx.cluster.mysql_password());
    let through = type_info(&proxy.ip().to_string(), proxy.port(), ("alice", "alice-pw"), sql)?;
    let direct = type_info(&p.host, p.port, su, sql)?;
    ensure!(
        direct.contains("(format=json)"),
        "the server's own answer names no json format: {direct}"
    );
    ensure!(
        through == direct,
        "column type information differs:\nthrough the proxy:\n{through}\ndirect:\n{direct}"
    );
    let list = type_info(
        &proxy.ip().to_string(),
        proxy.port(),
        ("alice", "alice-pw"),
        "SHOW PROCESSLIST",
    )?;
    ensure!(
        list.contains("Field   1:  `Id`") && list.contains("SHOW PROCESSLIST"),
        "SHOW PROCESSLIST: {list}"
    );
    Ok(())
}

/// `mysql -vvv --column-type-info` output of `sql` on app1 at `host:port`,
/// without the timing line.
fn type_info(host: &str, port: u16, (user, password): (&str, &str), sql: &str) -> Result<String> {
    let out = std::process::Command::new("mysql")
        .args(["--no-defaults", "-h", host, "-P", &port.to_string()])
        .args(["-u", user, &format!("-p{password}")])
        .args(["--skip-ssl", "-vvv", "--column-type-info", "app1", "-e", sql])
        .output()
        .context("running mysql")?;
    ensure!(
        out.status.success(),
        "{host}:{port}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "1 row in set (0.000 sec)": the time differs from run to run.
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains(" in set ("))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// In session mode each client's connection is reset for the next, and
/// the server's COM_RESET_CONNECTION drops the `IGNORE_SPACE` its login
/// gave: the proxy gives it back, so every `-i` client finds the session
/// a new connection has.
fn ignore_space_after_reset(ctx: &Ctx) -> Result<()> {
    let a = ctx.addr("sess");
    for client in 0..4 {
        let out = std::process::Command::new("mysql")
            .args(["--no-defaults", "-h", &a.ip().to_string(), "-P", &a.port().to_string()])
            .args(["-u", "alice", "-palice-pw", "--skip-ssl", "-N", "-B", "--ignore-spaces"])
            .args(["-e", "SELECT COUNT (*)"])
            .output()
            .context("running mysql")?;
        ensure!(
            out.status.success(),
            "client {client}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
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
