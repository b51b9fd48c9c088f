//! The SQL admin console over MySQL's protocol, on a proxy of the case's
//! own with `[console]` (alice an admin, mona a monitor), reached as
//! database `gatehouse`: its `SHOW` tables over mysql_async against what
//! the proxy does (a client in a transaction listed active with its
//! backend), the mysql command-line client, the monitor refused every write
//! command with 1227, and the admin's `KILL` ending a client.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use mysql_async::prelude::Queryable;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        (
            "console::show_tables_list_the_client_in_a_transaction_with_its_backend",
            show_tables,
        ),
        ("console::mysql_client_runs_show_commands", mysql_client),
        (
            "console::monitor_role_shows_but_is_refused_every_write_command",
            monitor_refused,
        ),
        ("console::admin_kill_ends_the_client_session", admin_kill),
    ]
}

/// A proxy of the case's own with the console; its address, and a stop.
struct Proxy {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    path: std::path::PathBuf,
}

impl Proxy {
    fn stop(self) {
        let _ = self.stop.send(());
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn proxy(ctx: &Ctx, name: &str) -> Result<Proxy> {
    let mona = gatehouse_proto_mysql::auth::native_password::format_stored(
        &gatehouse_proto_mysql::auth::native_password::stored_hash(b"mona-pw"),
    );
    let more = format!(
        "\n[console]\nadmin_users = [\"alice\"]\nmonitor_users = [\"mona\"]\n\n\
         [[tenants]]\nname = \"mona\"\ndatabases = [\"app1\"]\nsecret = \"owner\"\nmysql_native_password = \"{mona}\"\n"
    );
    let text = crate::own_config_text(ctx, "", &more)?;
    let path = ctx.dir.join(format!("console-{name}.toml"));
    std::fs::write(&path, text)?;
    let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
    let app = gatehouse::App::bind(settings).await?;
    let addr = app.local_addr("rw").context("no rw")?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(gatehouse::run(app, async {
        let _ = stopped.await;
    }));
    Ok(Proxy { addr, stop, path })
}

fn opts(p: &Proxy, user: &str, password: &str, db: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname(p.addr.ip().to_string())
        .tcp_port(p.addr.port())
        .user(Some(user))
        .pass(Some(password))
        .db_name(Some(db))
        .prefer_socket(false)
        .into()
}

/// The rows of a console statement, each as column name → text.
async fn rows(c: &mut mysql_async::Conn, sql: &str) -> Result<Vec<HashMap<String, Option<String>>>> {
    let got: Vec<mysql_async::Row> = c.query(sql).await.with_context(|| sql.to_owned())?;
    Ok(got
        .into_iter()
        .map(|r| {
            let names: Vec<String> = r.columns_ref().iter().map(|c| c.name_str().into_owned()).collect();
            names
                .into_iter()
                .enumerate()
                .map(|(i, n)| (n, r.get::<Option<String>, _>(i).flatten()))
                .collect()
        })
        .collect())
}

fn get<'a>(row: &'a HashMap<String, Option<String>>, col: &str) -> &'a str {
    row.get(col).and_then(|v| v.as_deref()).unwrap_or("")
}

/// The server error code of a failed statement.
fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn show_tables(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let p = proxy(ctx, "show").await?;
        let mut console = mysql_async::Conn::new(opts(&p, "alice", "alice-pw", "gatehouse")).await?;
        let mut app = mysql_async::Conn::new(opts(&p, "alice", "alice-pw", "app1")).await?;
        app.query_drop("START TRANSACTION").await?;
        // The backend's own thread id (CONNECTION_ID() is the proxy's id).
        let thread: Option<u64> = app.query_first("SELECT @@pseudo_thread_id").await?;
        let thread = thread.context("no thread id")?;

        let clients = rows(&mut console, "SHOW CLIENTS").await?;
        let me = clients
            .iter()
            .find(|r| get(r, "database") == "app1")
            .with_context(|| format!("no app1 client in {clients:?}"))?;
        ensure!(get(me, "state") == "active" && get(me, "engine") == "mysql", "{me:?}");
        ensure!(get(me, "user") == "alice" && get(me, "endpoint") == "rw", "{me:?}");
        ensure!(get(me, "remote_pid") == thread.to_string(), "{me:?} vs thread {thread}");
        ensure!(
            get(me, "id") == app.id().to_string(),
            "{me:?} vs handshake id {}",
            app.id()
        );
        ensure!(get(me, "pinned").is_empty(), "{me:?}");

        let pools = rows(&mut console, "show pools").await?;
        let pool = pools
            .iter()
            .find(|r| get(r, "cluster") == "my" && get(r, "database") == "app1")
            .with_context(|| format!("no my/app1 pool in {pools:?}"))?;
        ensure!(
            get(pool, "cl_active") == "1" && get(pool, "sv_active") == "1",
            "{pool:?}"
        );

        let servers = rows(&mut console, "SHOW SERVERS").await?;
        // Lent, and (the binary's servers run without TLS) in plain text.
        ensure!(
            servers.iter().any(|r| get(r, "state") == "active"
                && get(r, "remote_pid") == thread.to_string()
                && r.get("tls") == Some(&None)),
            "{servers:?}"
        );
        for show in [
            "SHOW HELP",
            "SHOW VERSION",
            "SHOW BACKENDS",
            "SHOW CLUSTERS",
            "SHOW ENDPOINTS",
            "SHOW STATS",
            "SHOW TOTALS",
            "SHOW CONFIG",
        ] {
            ensure!(!rows(&mut console, show).await?.is_empty(), "{show} is empty");
        }
        let e = console.query_drop("SHOW NOTHING").await.err().context("bad SHOW ran")?;
        ensure!(code(&e) == Some(1064), "{e}");
        console.ping().await?;
        app.query_drop("COMMIT").await?;
        drop(app);
        console.disconnect().await?;
        p.stop();
        Ok(())
    })
}

fn mysql_client(ctx: &Ctx) -> Result<()> {
    let p = ctx.rt.block_on(proxy(ctx, "cli"))?;
    let out = std::process::Command::new("mysql")
        .args([
            "--no-defaults",
            "-h",
            &p.addr.ip().to_string(),
            "-P",
            &p.addr.port().to_string(),
        ])
        .args(["-u", "alice", "-palice-pw", "--skip-ssl", "-B", "gatehouse"])
        .args(["-e", "SHOW ENDPOINTS; SHOW VERSION"])
        .output()
        .context("running mysql")?;
    p.stop();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("mysql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    ensure!(
        stdout
            .lines()
            .any(|l| l.starts_with("endpoint\tengine\tcluster\trole\tlisten\tpool_mode\tcl_connected")),
        "{stdout}"
    );
    ensure!(stdout.contains("Gatehouse "), "{stdout}");
    Ok(())
}

fn monitor_refused(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let p = proxy(ctx, "monitor").await?;
        let mut monitor = mysql_async::Conn::new(opts(&p, "mona", "mona-pw", "gatehouse")).await?;
        ensure!(
            !rows(&mut monitor, "SHOW CLIENTS").await?.is_empty(),
            "mona is not listed"
        );
        for write in [
            "PAUSE",
            "RESUME my",
            "DISABLE rw",
            "RELOAD",
            "KILL 1",
            "DRAIN my 127.0.0.1:1",
        ] {
            let e = monitor
                .query_drop(write)
                .await
                .err()
                .with_context(|| format!("{write} ran"))?;
            ensure!(code(&e) == Some(1227), "{write}: {e}");
        }
        let mut app = mysql_async::Conn::new(opts(&p, "alice", "alice-pw", "app1")).await?;
        let one: Option<i64> = tokio::time::timeout(Duration::from_secs(20), app.query_first("SELECT 1"))
            .await
            .context("held")??;
        ensure!(one == Some(1));
        p.stop();
        Ok(())
    })
}

fn admin_kill(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let p = proxy(ctx, "kill").await?;
        let mut console = mysql_async::Conn::new(opts(&p, "alice", "alice-pw", "gatehouse")).await?;
        let mut victim = mysql_async::Conn::new(opts(&p, "alice", "alice-pw", "app1")).await?;
        victim.query_drop("SELECT 1").await?;
        console.query_drop(format!("KILL {}", victim.id())).await?;
        let after = tokio::time::timeout(Duration::from_secs(20), victim.query_drop("SELECT 1"))
            .await
            .context("the killed client's query hung")?;
        ensure!(after.is_err(), "the killed client still runs queries");
        let e = console.query_drop("KILL 1").await.err().context("KILL of no client")?;
        ensure!(code(&e) == Some(1094), "{e}");
        p.stop();
        Ok(())
    })
}
