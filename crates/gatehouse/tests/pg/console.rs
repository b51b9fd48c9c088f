//! The SQL admin console over PostgreSQL's protocol, on a proxy of the
//! case's own with `[console]` (alice an admin, bob a monitor), reached
//! as database `gatehouse` on any endpoint: its `SHOW` tables against what
//! the proxy does (a client in a transaction is listed active, with its
//! backend), the monitor refused every write command, the admin's `KILL`,
//! `PAUSE`/`RESUME`, `DISABLE`/`ENABLE` and `RELOAD` acting on clients,
//! and psql as the client.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tokio_postgres::{SimpleQueryMessage, error::SqlState};

use crate::Ctx;
use crate::own::Own;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "console::show_tables_list_the_client_in_a_transaction_with_its_backend",
            show_tables,
        ),
        (
            "console::monitor_role_shows_but_is_refused_every_write_command",
            monitor_refused,
        ),
        ("console::admin_kills_pauses_disables_and_reloads", admin_commands),
        ("console::psql_runs_show_commands", psql_shows),
    ]
}

const CONSOLE: &str = "\n[console]\nadmin_users = [\"alice\"]\nmonitor_users = [\"bob\"]\n";

/// A proxy with the console, its configuration in a file of its own (so
/// `RELOAD` has one to read).
async fn proxy(ctx: &Ctx, name: &str) -> Result<(Own, std::path::PathBuf)> {
    let text = {
        let _lock = crate::reload::lock_config();
        std::fs::read_to_string(ctx.dir.join("gatehouse.toml"))?
    };
    let path = ctx.dir.join(format!("console-{name}.toml"));
    std::fs::write(&path, format!("{text}{CONSOLE}"))?;
    let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
    Ok((Own::start(settings).await?, path))
}

async fn connect(
    own: &Own,
    user: &str,
    password: &str,
    db: &str,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let at = own.addr("ops_rw").expect("ops_rw");
    let info = format!(
        "host={} port={} user={user} password={password} dbname={db} sslmode=disable",
        at.ip(),
        at.port()
    );
    let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// The rows of a console statement, each as column name → text.
async fn rows(c: &tokio_postgres::Client, sql: &str) -> Result<Vec<HashMap<String, Option<String>>>> {
    let mut out = Vec::new();
    for m in c.simple_query(sql).await.with_context(|| sql.to_owned())? {
        if let SimpleQueryMessage::Row(r) = m {
            let mut row = HashMap::new();
            for (i, col) in r.columns().iter().enumerate() {
                row.insert(col.name().to_owned(), r.get(i).map(str::to_owned));
            }
            out.push(row);
        }
    }
    Ok(out)
}

fn get<'a>(row: &'a HashMap<String, Option<String>>, col: &str) -> &'a str {
    row.get(col).and_then(|v| v.as_deref()).unwrap_or("")
}

/// Runs a console command, its error with the server's message.
async fn exec(c: &tokio_postgres::Client, sql: &str) -> Result<Vec<SimpleQueryMessage>> {
    c.simple_query(sql).await.map_err(|e| {
        let msg = e
            .as_db_error()
            .map_or_else(|| e.to_string(), |d| d.message().to_owned());
        anyhow::anyhow!("{sql}: {msg}")
    })
}

fn code(e: &tokio_postgres::Error) -> Option<&SqlState> {
    e.code()
}

fn show_tables(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (own, _) = proxy(ctx, "show").await?;
        let console = connect(&own, "alice", "alice-pw", "gatehouse").await?;
        let app = connect(&own, "alice", "alice-pw", "app1").await?;
        app.batch_execute("BEGIN; SELECT 1").await?;
        let pid: i32 = app.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);

        let clients = rows(&console, "SHOW CLIENTS").await?;
        let me = clients
            .iter()
            .find(|r| get(r, "database") == "app1")
            .with_context(|| format!("no app1 client in {clients:?}"))?;
        ensure!(get(me, "state") == "active", "{me:?}");
        ensure!(get(me, "user") == "alice" && get(me, "endpoint") == "ops_rw", "{me:?}");
        ensure!(get(me, "remote_pid") == pid.to_string(), "{me:?} vs pid {pid}");
        ensure!(get(me, "server").starts_with("127.0.0.1:"), "{me:?}");
        ensure!(get(me, "addr") == "127.0.0.1" && get(me, "tls") == "0", "{me:?}");
        let console_row = clients
            .iter()
            .find(|r| get(r, "console") == "1")
            .context("the console session itself is not listed")?;
        ensure!(get(console_row, "database") == "gatehouse", "{console_row:?}");

        let pools = rows(&console, "show pools;").await?;
        let pool = pools
            .iter()
            .find(|r| get(r, "cluster") == "ops" && get(r, "database") == "app1")
            .with_context(|| format!("no ops/app1 pool in {pools:?}"))?;
        ensure!(
            get(pool, "cl_active") == "1" && get(pool, "sv_active") == "1",
            "{pool:?}"
        );
        ensure!(
            get(pool, "cl_waiting") == "0" && get(pool, "pool_size") == "4",
            "{pool:?}"
        );

        let servers = rows(&console, "SHOW SERVERS").await?;
        let lent = servers
            .iter()
            .find(|r| get(r, "state") == "active" && get(r, "remote_pid") == pid.to_string())
            .with_context(|| format!("the lent connection is not in {servers:?}"))?;
        ensure!(get(lent, "client_id") == get(me, "id"), "{lent:?} vs {me:?}");
        // The binary's servers run without TLS.
        ensure!(lent.get("tls") == Some(&None), "{lent:?}");

        let backends = rows(&console, "SHOW BACKENDS").await?;
        // Both of the ops cluster's servers, with what their probes said
        // (whether a probe under load timed out is not this test's matter).
        let ops: Vec<_> = backends.iter().filter(|r| get(r, "cluster") == "ops").collect();
        ensure!(ops.len() == 2, "{backends:?}");
        ensure!(
            ops.iter()
                .all(|r| ["0", "1"].contains(&get(r, "up")) && !get(r, "role").is_empty()),
            "{ops:?}"
        );
        let endpoints = rows(&console, "SHOW ENDPOINTS").await?;
        let ops = endpoints
            .iter()
            .find(|r| get(r, "endpoint") == "ops_rw")
            .context("no ops_rw")?;
        ensure!(
            get(ops, "cl_connected") == "2" && get(ops, "disabled") == "0",
            "{ops:?}"
        );
        let config = rows(&console, "SHOW CONFIG").await?;
        ensure!(
            config
                .iter()
                .any(|r| get(r, "key") == "console.database" && get(r, "value") == "gatehouse"),
            "{config:?}"
        );
        // The transaction's statements so far, counted for the endpoint and
        // the tenant (PgBouncer's SHOW STATS columns).
        let stats = rows(&console, "SHOW STATS").await?;
        let endpoint = stats
            .iter()
            .find(|r| get(r, "scope") == "endpoint" && get(r, "name") == "ops_rw")
            .with_context(|| format!("no ops_rw in {stats:?}"))?;
        let queries: u64 = get(endpoint, "total_query_count").parse()?;
        // The simple query "BEGIN; SELECT 1" and the extended pg_backend_pid().
        ensure!(queries >= 2, "{endpoint:?}");
        ensure!(get(endpoint, "total_received").parse::<u64>()? > 0, "{endpoint:?}");
        ensure!(
            stats
                .iter()
                .any(|r| get(r, "scope") == "tenant" && get(r, "name") == "alice"),
            "{stats:?}"
        );
        for show in ["SHOW HELP", "SHOW VERSION", "SHOW TOTALS", "SHOW CLUSTERS"] {
            ensure!(!rows(&console, show).await?.is_empty(), "{show} is empty");
        }
        ensure!(rows(&console, "SHOW DIGESTS").await?.is_empty(), "digests are off here");

        // The extended protocol is refused, and the session goes on.
        let e = console
            .query("SHOW POOLS", &[])
            .await
            .err()
            .context("extended query ran")?;
        ensure!(
            code(&e) == Some(&SqlState::FEATURE_NOT_SUPPORTED),
            "{}",
            crate::db_message(&e)
        );
        let e = console
            .simple_query("SHOW NOTHING")
            .await
            .err()
            .context("bad SHOW ran")?;
        ensure!(code(&e) == Some(&SqlState::SYNTAX_ERROR), "{}", crate::db_message(&e));
        ensure!(!rows(&console, "SHOW VERSION").await?.is_empty());
        app.batch_execute("COMMIT").await?;
        own.stop().await
    })
}

fn monitor_refused(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (own, _) = proxy(ctx, "monitor").await?;
        let monitor = connect(&own, "bob", "bob-pw", "gatehouse").await?;
        rows(&monitor, "SHOW POOLS").await?;
        ensure!(!rows(&monitor, "SHOW CLIENTS").await?.is_empty(), "bob is not listed");
        for write in [
            "PAUSE",
            "RESUME",
            "PAUSE ops",
            "DISABLE ops_rw",
            "ENABLE ops_rw",
            "RELOAD",
            "KILL 1",
            "DRAIN ops 127.0.0.1:1",
            "SWITCHOVER ops 127.0.0.1:1",
        ] {
            let e = monitor
                .simple_query(write)
                .await
                .err()
                .with_context(|| format!("{write} ran"))?;
            ensure!(
                code(&e) == Some(&SqlState::INSUFFICIENT_PRIVILEGE),
                "{write}: {}",
                crate::db_message(&e)
            );
        }
        // Nothing was paused: a client's query runs (the bound is for a
        // loaded machine: a PAUSE would hold it for good).
        let app = connect(&own, "alice", "alice-pw", "app1").await?;
        let one: i32 = tokio::time::timeout(Duration::from_secs(20), app.query_one("SELECT 1", &[]))
            .await
            .context("held")??
            .get(0);
        ensure!(one == 1);
        // A tenant listed in neither role has no console database.
        let e = connect(&own, "carol", "carol-pw", "gatehouse")
            .await
            .err()
            .context("carol reached the console")?;
        ensure!(
            code(&e) == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{}",
            crate::db_message(&e)
        );
        own.stop().await
    })
}

async fn client_id(console: &tokio_postgres::Client, db: &str) -> Result<String> {
    let clients = rows(console, "SHOW CLIENTS").await?;
    let row = clients
        .iter()
        .find(|r| get(r, "database") == db && get(r, "console") == "0")
        .with_context(|| format!("no {db} client in {clients:?}"))?;
    Ok(get(row, "id").to_owned())
}

fn admin_commands(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (own, path) = proxy(ctx, "admin").await?;
        let console = connect(&own, "alice", "alice-pw", "gatehouse")
            .await
            .context("console")?;

        // KILL ends the client's session; the next statement fails.
        let victim = connect(&own, "alice", "alice-pw", "app1").await.context("victim")?;
        victim.query_one("SELECT 1", &[]).await.context("victim before")?;
        let id = client_id(&console, "app1").await?;
        exec(&console, &format!("KILL {id}")).await?;
        let gone = tokio::time::timeout(Duration::from_secs(20), victim.query_one("SELECT 1", &[]))
            .await
            .context("the killed client's query hung")?;
        ensure!(gone.is_err(), "the killed client still runs queries");
        let e = console
            .simple_query("KILL 1")
            .await
            .err()
            .context("KILL of no client")?;
        ensure!(
            code(&e) == Some(&SqlState::UNDEFINED_OBJECT),
            "{:?} {}",
            code(&e),
            crate::db_message(&e)
        );

        // PAUSE holds new transactions on the endpoint until RESUME.
        let app = connect(&own, "alice", "alice-pw", "app1").await.context("app")?;
        exec(&console, "PAUSE ENDPOINT ops_rw").await?;
        let held = tokio::spawn(async move { app.query_one("SELECT 7", &[]).await.map(|r| r.get::<_, i32>(0)) });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let clients = rows(&console, "SHOW CLIENTS").await?;
        let waiting = clients.iter().any(|r| get(r, "state") == "waiting");
        let still = !held.is_finished();
        exec(&console, "RESUME ENDPOINT ops_rw").await?;
        ensure!(still && waiting, "not held while paused: {clients:?}");
        let got = tokio::time::timeout(Duration::from_secs(20), held)
            .await
            .context("held after RESUME")??
            .map_err(|e| anyhow::anyhow!("the held query failed: {e:?}"))?;
        ensure!(got == 7);

        // DISABLE refuses new logins on the endpoint (its sessions go on).
        let before = connect(&own, "alice", "alice-pw", "app1").await.context("before")?;
        exec(&console, "DISABLE ops_rw").await?;
        let refused = connect(&own, "alice", "alice-pw", "app1")
            .await
            .err()
            .context("login on a disabled endpoint")?;
        let why = crate::db_message(&refused);
        ensure!(why.contains("disabled"), "{why}");
        before
            .query_one("SELECT 1", &[])
            .await
            .map_err(|e| anyhow::anyhow!("a session of the disabled endpoint: {}", crate::db_message(&e)))?;
        let disabled = rows(&console, "SHOW ENDPOINTS").await?;
        ensure!(
            disabled
                .iter()
                .any(|r| get(r, "endpoint") == "ops_rw" && get(r, "disabled") == "1"),
            "{disabled:?}"
        );
        exec(&console, "ENABLE ops_rw").await?;
        connect(&own, "alice", "alice-pw", "app1")
            .await
            .context("login after ENABLE")?
            .query_one("SELECT 1", &[])
            .await
            .map_err(|e| anyhow::anyhow!("a query after ENABLE: {}", crate::db_message(&e)))?;

        // RELOAD reads the file again: a new monitor may log in after it.
        std::fs::write(
            &path,
            std::fs::read_to_string(&path)?.replace("monitor_users = [\"bob\"]", "monitor_users = [\"bob\", \"erin\"]"),
        )?;
        ensure!(
            connect(&own, "erin", "erin-pw", "gatehouse").await.is_err(),
            "erin before the reload"
        );
        let answer = exec(&console, "RELOAD").await?;
        ensure!(
            matches!(answer.last(), Some(SimpleQueryMessage::CommandComplete(_))),
            "{answer:?}"
        );
        let erin = connect(&own, "erin", "erin-pw", "gatehouse")
            .await
            .context("erin after the reload")?;
        ensure!(!rows(&erin, "SHOW VERSION").await?.is_empty());
        drop(erin);
        std::fs::remove_file(&path)?;
        own.stop().await
    })
}

fn psql_shows(ctx: &Ctx) -> Result<()> {
    let (own, path) = ctx.rt.block_on(proxy(ctx, "psql"))?;
    let at = own.addr("ops_rw")?;
    let out = std::process::Command::new("psql")
        .args([
            "-X",
            "-A",
            "-F",
            "|",
            "-c",
            "SHOW POOLS",
            "-c",
            "SHOW VERSION",
            &format!(
                "host={} port={} user=alice dbname=gatehouse sslmode=disable",
                at.ip(),
                at.port()
            ),
        ])
        .env("PGPASSWORD", "alice-pw")
        .output()?;
    let _ = std::fs::remove_file(&path);
    ctx.rt.block_on(own.stop())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    ensure!(
        stdout
            .lines()
            .any(|l| l.starts_with("engine|cluster|database|user|backends|cl_active|cl_waiting")),
        "{stdout}"
    );
    ensure!(stdout.contains("Gatehouse "), "{stdout}");
    Ok(())
}
