//! Transaction pooling with real clients: many clients on a small pool,
//! tracked variables that follow the client and never leak, each pinning
//! reason recorded (with its state kept), prepared statements reused across
//! transactions on whichever connection serves them, LAST_INSERT_ID() after
//! an INSERT, and sysbench oltp_read_write with more threads than
//! connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("txn::many_clients_share_a_small_pool", many_clients),
        ("txn::tracked_variables_follow_the_client", tracked_variables),
        ("txn::pinning_reasons_are_recorded", pinning),
        ("txn::prepared_statements_across_transactions", prepared),
        ("txn::last_insert_id_after_insert", last_insert_id),
        ("txn::last_insert_id_after_prepared_insert", last_insert_id_prepared),
        ("txn::autocommit_off_transaction_stays_on_one_backend", autocommit_off),
        ("txn::idle_session_after_insert_holds_no_connection", idle_after_insert),
        (
            "txn::prepared_statements_follow_the_clients_sql_mode",
            prepared_sql_mode,
        ),
        ("txn::sysbench_oltp_read_write_small_pool", sysbench),
    ]
}

/// Backend connections the small cluster's pool for app2 holds now.
fn small_pool_connections(ctx: &Ctx) -> usize {
    ctx.core
        .pools
        .all()
        .iter()
        .filter(|p| p.key().cluster == "mysmall" && p.key().database == "app2")
        .map(|p| p.open_count())
        .sum()
}

fn small_pool_leased(ctx: &Ctx) -> usize {
    ctx.core
        .pools
        .all()
        .iter()
        .filter(|p| p.key().cluster == "mysmall" && p.key().database == "app2")
        .map(|p| p.leased_count())
        .sum()
}

fn many_clients(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut setup = ctx.conn("small", "bob", "bob-pw", "app2").await?;
        setup
            .query_drop("CREATE TABLE IF NOT EXISTS many (id INT AUTO_INCREMENT PRIMARY KEY, client INT)")
            .await?;
        let errors = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for client in 0..40 {
            let opts = ctx.opts("small", "bob", "bob-pw", Some("app2"));
            let errors = errors.clone();
            tasks.push(tokio::spawn(async move {
                let run = async {
                    let mut c = mysql_async::Conn::new(opts).await?;
                    for _ in 0..10 {
                        c.query_drop("BEGIN").await?;
                        c.query_drop(format!("INSERT INTO many (client) VALUES ({client})"))
                            .await?;
                        c.query_drop("COMMIT").await?;
                    }
                    c.disconnect().await?;
                    anyhow::Ok(())
                };
                if let Err(e) = run.await {
                    eprintln!("client {client}: {e:#}");
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await?;
        }
        ensure!(errors.load(Ordering::Relaxed) == 0, "clients failed");
        let n: Option<i64> = setup.query_first("SELECT COUNT(*) FROM many").await?;
        ensure!(n == Some(400), "{n:?} rows");
        // The reply reaches the client a moment before the proxy gives the
        // lease back (while a returned connection is counted both idle and
        // leased): count once nothing is leased.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while small_pool_leased(ctx) > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        ensure!(
            small_pool_connections(ctx) <= 4,
            "{} connections",
            small_pool_connections(ctx)
        );
        Ok(())
    })
}

fn tracked_variables(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut a = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        let defaults: Option<(String, String)> = a.query_first("SELECT @@sql_mode, @@time_zone").await?;
        let defaults = defaults.context("no row")?;
        a.query_drop("SET sql_mode = 'ANSI_QUOTES', time_zone = '+05:00'")
            .await?;
        a.query_drop("SET SESSION group_concat_max_len = 777").await?;
        for round in 0..10 {
            // Other clients run on the same four connections in between.
            let mut others = Vec::new();
            for _ in 0..6 {
                let opts = ctx.opts("small", "alice", "alice-pw", Some("app1"));
                others.push(tokio::spawn(async move {
                    let mut c = mysql_async::Conn::new(opts).await?;
                    let seen: Option<(String, String, u64)> = c
                        .query_first("SELECT @@sql_mode, @@time_zone, @@group_concat_max_len")
                        .await?;
                    c.disconnect().await?;
                    anyhow::Ok(seen)
                }));
            }
            for o in others {
                let seen = o.await??.context("no row")?;
                ensure!(
                    (seen.0.as_str(), seen.1.as_str()) == (defaults.0.as_str(), defaults.1.as_str()) && seen.2 != 777,
                    "round {round}: another client saw {seen:?}"
                );
            }
            let mine: Option<(String, String, u64)> = a
                .query_first("SELECT @@sql_mode, @@time_zone, @@group_concat_max_len")
                .await?;
            ensure!(
                mine == Some(("ANSI_QUOTES".into(), "+05:00".into(), 777)),
                "round {round}: {mine:?}"
            );
        }
        // ANSI_QUOTES is in force: "t" is an identifier.
        let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM \"t\"").await?;
        ensure!(n == Some(3));
        a.query_drop("SET sql_mode = DEFAULT, time_zone = DEFAULT").await?;
        let back: Option<(String, String)> = a.query_first("SELECT @@sql_mode, @@time_zone").await?;
        ensure!(back == Some(defaults), "{back:?}");
        Ok(())
    })
}

fn pinning(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        for (setup, check, reason) in [
            ("SET @x = 41", "SELECT @x + 1", "user_variable"),
            (
                "CREATE TEMPORARY TABLE tt (a INT)",
                "SELECT COUNT(*) + 42 FROM tt",
                "temporary_table",
            ),
            (
                "DO GET_LOCK('gh_lock', 1)",
                "SELECT (IS_USED_LOCK('gh_lock') = CONNECTION_ID()) + 41",
                "get_lock",
            ),
            ("PREPARE s FROM 'SELECT 42'", "EXECUTE s", "prepare"),
            (
                "SELECT SQL_CALC_FOUND_ROWS id FROM t LIMIT 1",
                "SELECT FOUND_ROWS() + 39",
                "found_rows",
            ),
            ("LOCK TABLES t READ", "SELECT COUNT(*) + 39 FROM t", "lock_tables"),
        ] {
            let before = ctx.core.stats.pins().get(reason).copied().unwrap_or(0);
            let mut c = ctx.conn("small", "alice", "alice-pw", "app1").await?;
            c.query_drop(setup).await?;
            // Other clients churn through the pool meanwhile.
            for _ in 0..6 {
                let mut o = ctx.conn("small", "alice", "alice-pw", "app1").await?;
                o.query_drop("SELECT 1").await?;
                o.disconnect().await?;
            }
            let v: Option<i64> = c.query_first(check).await?;
            ensure!(v == Some(42), "{reason}: {check} gave {v:?}");
            let after = ctx.core.stats.pins().get(reason).copied().unwrap_or(0);
            ensure!(after == before + 1, "{reason}: recorded {before} → {after}");
            if reason == "lock_tables" {
                c.query_drop("UNLOCK TABLES").await?;
            }
            c.disconnect().await?;
        }
        Ok(())
    })
}

fn prepared(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut tasks = Vec::new();
        for client in 0..12i64 {
            let opts = ctx.opts("small", "alice", "alice-pw", Some("app1"));
            tasks.push(tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await?;
                let stmt = c.prep("SELECT v, ? + id FROM t WHERE id = ?").await?;
                for i in 0..30i64 {
                    let id = i % 3 + 1;
                    let row: Option<(String, i64)> = c.exec_first(&stmt, (client, id)).await?;
                    let (v, sum) = row.context("no row")?;
                    ensure!(sum == client + id, "client {client}: {sum}");
                    ensure!(v == ["one", "two", "three"][(id - 1) as usize], "{v}");
                    if i % 10 == 0 {
                        // A transaction around an execute, on whichever connection.
                        c.query_drop("BEGIN").await?;
                        let again: Option<(String, i64)> = c.exec_first(&stmt, (0, 1)).await?;
                        ensure!(again == Some(("one".into(), 1)), "{again:?}");
                        c.query_drop("COMMIT").await?;
                    }
                }
                c.close(stmt).await?;
                c.disconnect().await?;
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    })
}

fn last_insert_id(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut setup = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        setup
            .query_drop("CREATE TABLE IF NOT EXISTS ids (id INT AUTO_INCREMENT PRIMARY KEY, who INT)")
            .await?;
        let mut tasks = Vec::new();
        for who in 0..8i64 {
            let opts = ctx.opts("small", "alice", "alice-pw", Some("app1"));
            tasks.push(tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await?;
                for _ in 0..15 {
                    c.query_drop(format!("INSERT INTO ids (who) VALUES ({who})")).await?;
                    let id: Option<i64> = c.query_first("SELECT LAST_INSERT_ID()").await?;
                    let id = id.context("no id")?;
                    let owner: Option<i64> = c.query_first(format!("SELECT who FROM ids WHERE id = {id}")).await?;
                    ensure!(owner == Some(who), "client {who} got id {id} of {owner:?}");
                }
                c.disconnect().await?;
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    })
}

/// A prepared INSERT (COM_STMT_EXECUTE), then `SELECT LAST_INSERT_ID()`
/// as a text query, as mysql-connector-python, go-sql-driver, mysql2 and
/// Connector/J do: the client's own id, never 0 or another client's.
fn last_insert_id_prepared(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut setup = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        setup
            .query_drop("CREATE TABLE IF NOT EXISTS pids (id INT AUTO_INCREMENT PRIMARY KEY, who INT)")
            .await?;
        let mut tasks = Vec::new();
        for who in 0..12i64 {
            let opts = ctx.opts("small", "alice", "alice-pw", Some("app1"));
            tasks.push(tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await?;
                for _ in 0..15 {
                    c.exec_drop("INSERT INTO pids (who) VALUES (?)", (who,)).await?;
                    let ok_id = c.last_insert_id().context("no insert id in the OK packet")?;
                    let id: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await?;
                    ensure!(
                        id == Some(ok_id),
                        "client {who}: OK said {ok_id}, LAST_INSERT_ID() {id:?}"
                    );
                    let identity: Option<u64> = c.query_first("SELECT @@identity").await?;
                    ensure!(
                        identity == Some(ok_id),
                        "client {who}: @@identity {identity:?}, expected {ok_id}"
                    );
                    let owner: Option<i64> = c.exec_first("SELECT who FROM pids WHERE id = ?", (ok_id,)).await?;
                    ensure!(owner == Some(who), "client {who} got id {ok_id} of {owner:?}");
                }
                c.disconnect().await?;
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    })
}

/// With autocommit off, a transaction that starts with a table-less
/// SELECT runs on one backend connection until COMMIT (as Connector/J's
/// `setAutoCommit(false)` does), while other clients compete for the pool.
fn autocommit_off(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut setup = ctx.conn("small", "bob", "bob-pw", "app2").await?;
        setup
            .query_drop("CREATE TABLE IF NOT EXISTS ac0 (id INT AUTO_INCREMENT PRIMARY KEY, who INT)")
            .await?;
        let mut tasks = Vec::new();
        for who in 0..12i64 {
            let opts = ctx.opts("small", "bob", "bob-pw", Some("app2"));
            tasks.push(tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(opts).await?;
                c.query_drop("SET autocommit = 0").await?;
                for round in 0..10 {
                    let first: Option<u64> = c.query_first("SELECT @@pseudo_thread_id").await?;
                    c.query_drop(format!("INSERT INTO ac0 (who) VALUES ({who})")).await?;
                    let seen: Option<i64> = c
                        .query_first(format!(
                            "SELECT COUNT(*) FROM ac0 WHERE id = LAST_INSERT_ID() AND who = {who}"
                        ))
                        .await?;
                    ensure!(seen == Some(1), "client {who} round {round}: own insert not visible");
                    tokio::task::yield_now().await;
                    let last: Option<u64> = c.query_first("SELECT @@pseudo_thread_id").await?;
                    ensure!(
                        first == last,
                        "client {who} round {round}: transaction moved from backend {first:?} to {last:?}"
                    );
                    if round % 2 == 0 {
                        c.query_drop("COMMIT").await?;
                    } else {
                        c.query_drop("ROLLBACK").await?;
                    }
                }
                c.disconnect().await?;
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let committed: Option<i64> = setup.query_first("SELECT COUNT(*) FROM ac0").await?;
        ensure!(committed == Some(12 * 5), "committed rows: {committed:?}");
        Ok(())
    })
}

/// A proxy of the test's own with one backend connection for app1, so
/// every client shares it: its "one" endpoint and core.
pub async fn one_connection_proxy(
    ctx: &Ctx,
) -> Result<(
    mysql_async::Opts,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), gatehouse::AppError>>,
)> {
    let addr = ctx.cluster.mysql_primary().context("no primary")?.addr();
    let more = format!(
        r#"
[[clusters]]
name = "one"
engine = "mysql"
backends = ["{addr}"]
monitor_secret = "superuser"
pool = {{ size = 1, borrow_timeout = "5s" }}

[[endpoints]]
name = "one"
listen = "127.0.0.1:0"
cluster = "one"
role = "read_write"
"#
    );
    let settings = crate::own_config(ctx, "", &more)?;
    let app = gatehouse::App::bind(settings).await?;
    let one = app.local_addr("one").context("one")?;
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let proxy = tokio::spawn(gatehouse::run(app, async {
        let _ = rx.await;
    }));
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(one.ip().to_string())
        .tcp_port(one.port())
        .user(Some("alice"))
        .pass(Some("alice-pw"))
        .db_name(Some("app1"))
        .prefer_socket(false)
        .into();
    Ok((opts, stop, proxy))
}

/// The same statement text prepared by two clients with different
/// `sql_mode`s on one backend connection: each runs as the server parses
/// it under the client's own mode (`||` is OR, or with PIPES_AS_CONCAT
/// concatenation), as on a direct connection; also after a `SET` of
/// `sql_mode` the proxy cannot follow.
fn prepared_sql_mode(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let (opts, stop, proxy) = one_connection_proxy(ctx).await?;
        let mut a = mysql_async::Conn::new(opts.clone()).await?;
        let mut b = mysql_async::Conn::new(opts).await?;
        b.query_drop("SET SESSION sql_mode = 'PIPES_AS_CONCAT,STRICT_TRANS_TABLES'")
            .await?;
        for round in 0..3 {
            let ra: Option<String> = a.exec_first("SELECT CAST(('a' || 'b') AS CHAR)", ()).await?;
            ensure!(
                ra.as_deref() == Some("0"),
                "round {round}: default sql_mode gave {ra:?}"
            );
            let rb: Option<String> = b.exec_first("SELECT CAST(('a' || 'b') AS CHAR)", ()).await?;
            ensure!(
                rb.as_deref() == Some("ab"),
                "round {round}: PIPES_AS_CONCAT gave {rb:?}"
            );
        }
        // A SET the proxy cannot follow (a prepared one, with its value a
        // parameter) pins the client; the statement prepared on its
        // connection before is not reused under the new mode.
        let concat = "SELECT CAST(('a' || 'b') AS CHAR)";
        let ra: Option<String> = a.exec_first(concat, ()).await?;
        ensure!(ra.as_deref() == Some("0"), "default sql_mode gave {ra:?}");
        a.exec_drop("SET SESSION sql_mode = ?", ("PIPES_AS_CONCAT",)).await?;
        let ra: Option<String> = a.exec_first(concat, ()).await?;
        ensure!(
            ra.as_deref() == Some("ab"),
            "after a prepared SET of PIPES_AS_CONCAT: {ra:?}"
        );
        a.disconnect().await?;
        b.disconnect().await?;
        let _ = stop.send(());
        proxy.await??;
        Ok(())
    })
}

/// Clients that each ran one autocommit INSERT and went idle hold no
/// backend connection: as many clients as the pool has connections, then
/// one more client's `SELECT 1` runs at once. (A proxy of the test's own:
/// the shared pools are busy with other cases.)
fn idle_after_insert(ctx: &Ctx) -> Result<()> {
    let addr = ctx.cluster.mysql_primary().context("no primary")?.addr();
    let more = format!(
        r#"
[[clusters]]
name = "four"
engine = "mysql"
backends = ["{addr}"]
monitor_secret = "superuser"
pool = {{ size = 4, borrow_timeout = "2s" }}

[[endpoints]]
name = "four"
listen = "127.0.0.1:0"
cluster = "four"
role = "read_write"
"#
    );
    let settings = crate::own_config(ctx, "", &more)?;
    ctx.rt.block_on(async {
        let app = gatehouse::App::bind(settings).await?;
        let four = app.local_addr("four").context("four")?;
        let core = app.mysql_core();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let proxy = tokio::spawn(gatehouse::run(app, async {
            let _ = rx.await;
        }));
        let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(four.ip().to_string())
            .tcp_port(four.port())
            .user(Some("alice"))
            .pass(Some("alice-pw"))
            .db_name(Some("app1"))
            .prefer_socket(false)
            .into();
        let leased = || core.pools.all().iter().map(|p| p.leased_count()).sum::<usize>();
        let mut idle = Vec::new();
        for _ in 0..4 {
            let mut c = mysql_async::Conn::new(opts.clone()).await?;
            c.query_drop("CREATE TABLE IF NOT EXISTS idle_ins (id INT AUTO_INCREMENT PRIMARY KEY)")
                .await?;
            c.query_drop("INSERT INTO idle_ins VALUES ()").await?;
            idle.push(c);
        }
        // The reply reaches the client before its lease goes back.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while leased() > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        ensure!(
            leased() == 0,
            "idle clients after an INSERT hold {} backend connections",
            leased()
        );
        let mut other = mysql_async::Conn::new(opts).await?;
        let one: Option<i64> = other.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        for (i, c) in idle.iter_mut().enumerate() {
            let id: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await?;
            ensure!(id.is_some_and(|v| v > 0), "idle client {i}: LAST_INSERT_ID() {id:?}");
        }
        for c in idle {
            c.disconnect().await?;
        }
        other.disconnect().await?;
        let _ = stop.send(());
        proxy.await??;
        Ok(())
    })
}

fn sysbench(ctx: &Ctx) -> Result<()> {
    let p = ctx.cluster.mysql_primary().context("no primary")?;
    let common = |host: &str, port: u16, user: &str, pw: &str| {
        vec![
            "oltp_read_write".to_string(),
            format!("--mysql-host={host}"),
            format!("--mysql-port={port}"),
            format!("--mysql-user={user}"),
            format!("--mysql-password={pw}"),
            "--mysql-db=app2".into(),
            "--tables=4".into(),
            "--table-size=10000".into(),
            "--mysql-ssl=off".into(),
        ]
    };
    let prepare = std::process::Command::new("sysbench")
        .args(common(&p.host, p.port, "app_owner", crate::OWNER_PW))
        .arg("prepare")
        .output()?;
    ensure!(
        prepare.status.success(),
        "prepare: {}",
        String::from_utf8_lossy(&prepare.stderr)
    );
    let a = ctx.addr("small");
    let run = std::process::Command::new("sysbench")
        .args(common(&a.ip().to_string(), a.port(), "bob", "bob-pw"))
        .args(["--threads=8", "--time=5", "--report-interval=0", "run"])
        .output()?;
    let out = String::from_utf8_lossy(&run.stdout);
    ensure!(
        run.status.success(),
        "run: {out}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let errors = out
        .lines()
        .find(|l| l.trim_start().starts_with("ignored errors:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|n| n.parse::<u64>().ok())
        .context("no error count in the sysbench output")?;
    let transactions = out
        .lines()
        .find(|l| l.trim_start().starts_with("transactions:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse::<u64>().ok())
        .context("no transaction count")?;
    eprintln!(
        "sysbench oltp_read_write through a pool of 4, 8 threads, 5 s: {transactions} transactions, {errors} errors"
    );
    // "Ignored errors" are transactions sysbench retried after a deadlock
    // or lock wait timeout between its own threads (the database's answer,
    // as on a direct connection); anything else fails the run itself.
    ensure!(transactions > 0 && errors * 100 <= transactions, "{out}");
    // The last reply reaches sysbench before its lease goes back (a
    // returned connection is counted both idle and leased a moment).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while small_pool_leased(ctx) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ensure!(
        small_pool_connections(ctx) <= 4,
        "{} connections",
        small_pool_connections(ctx)
    );
    Ok(())
}
