//! Transaction pooling with real drivers: many clients multiplexed on a pool
//! of two, prepared statements that hop between backend connections,
//! tracked parameters that follow their client and never leak, and each
//! pinning condition with its recorded reason.

use anyhow::{Context, Result, ensure};
use tokio_postgres::SimpleQueryMessage;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("txn::many_clients_share_two_connections", multiplexing),
        ("txn::prepared_statements_follow_the_client", prepared_statements),
        ("txn::pgbench_prepared_200_clients_pool_10", pgbench_prepared),
        ("txn::tracked_parameters_move_and_never_leak", tracked_parameters),
        ("txn::pinning_conditions_are_recorded", pinning),
        ("txn::deallocate_all_affects_only_the_client", deallocate_all),
        ("txn::sqlx_statement_cache", sqlx_cache),
        ("txn::leak_check_over_thousands_of_transactions", leak_check),
        (
            "txn::idle_in_transaction_is_not_a_half_sent_message",
            idle_in_transaction,
        ),
        (
            "txn::untracked_startup_parameter_pins_and_never_leaks",
            untracked_startup_parameter,
        ),
        ("txn::cached_greeting_needs_no_backend", cached_greeting),
        ("txn::set_inside_a_do_block_pins_and_never_leaks", set_in_do_block),
    ]
}

pub async fn text(c: &tokio_postgres::Client, sql: &str) -> Result<Vec<String>> {
    Ok(c.simple_query(sql)
        .await?
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or_default().to_string()),
            _ => None,
        })
        .collect())
}

/// Backend connections the "tx" pool (size 2) holds right now.
fn tx_backends(ctx: &Ctx) -> usize {
    ctx.core
        .pools
        .all()
        .iter()
        .filter(|p| p.key().cluster == "txpool")
        .map(|p| p.open_count())
        .sum()
}

fn multiplexing(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..50i32 {
            let mut c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            tasks.push(tokio::spawn(async move {
                let stmt = c.prepare("SELECT $1::int * 2").await?;
                for j in 0..20i32 {
                    let n: i32 = c.query_one(&stmt, &[&(i * 100 + j)]).await?.get(0);
                    anyhow::ensure!(n == (i * 100 + j) * 2);
                    let t = c.build_transaction().start().await?;
                    let v: i32 = t.query_one("SELECT $1::int + 1", &[&j]).await?.get(0);
                    anyhow::ensure!(v == j + 1);
                    t.commit().await?;
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        ensure!(tx_backends(ctx) <= 2, "used {} backend connections", tx_backends(ctx));
        Ok(())
    })
}

fn prepared_statements(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let a = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let b = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let sa = a.prepare("SELECT $1::text || '-a'").await?;
        let sb = b.prepare("SELECT $1::text || '-b'").await?;
        // Interleave so statements are used on connections that never saw their Parse.
        for i in 0..30 {
            let busy = c.query_one("SELECT pg_sleep(0.001), 1", &[]);
            let arg = i.to_string();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&arg];
            let (ra, rb, _) = tokio::join!(a.query_one(&sa, &params), b.query_one(&sb, &params), busy);
            ensure!(ra?.get::<_, String>(0) == format!("{i}-a"));
            ensure!(rb?.get::<_, String>(0) == format!("{i}-b"));
        }
        // A pipeline with an error in the middle: the failure and the skip to
        // Sync stay with this client.
        let (p1, p2): (
            [&(dyn tokio_postgres::types::ToSql + Sync); 1],
            [&(dyn tokio_postgres::types::ToSql + Sync); 1],
        ) = ([&"p1"], [&"p2"]);
        let ok1 = a.query_one(&sa, &p1);
        let bad = a.query_one("SELECT 1/0", &[]);
        let ok2 = a.query_one(&sa, &p2);
        let (r1, r2, r3) = tokio::join!(ok1, bad, ok2);
        ensure!(r1?.get::<_, String>(0) == "p1-a");
        ensure!(r2.err().and_then(|e| e.code().cloned()) == Some(tokio_postgres::error::SqlState::DIVISION_BY_ZERO));
        ensure!(r3?.get::<_, String>(0) == "p2-a");
        // Unnamed statements (query_typed uses the unnamed statement).
        let rows = b
            .query_typed("SELECT $1::int + 40", &[(&2i32, tokio_postgres::types::Type::INT4)])
            .await?;
        ensure!(rows[0].get::<_, i32>(0) == 42);
        // Describe of an unknown statement fails as it would directly.
        drop(sa);
        let err = a
            .execute("EXECUTE nosuch", &[])
            .await
            .err()
            .context("EXECUTE of nothing succeeded")?;
        ensure!(
            err.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_PSTATEMENT),
            "{err:?}"
        );
        Ok(())
    })
}

fn pgbench_prepared(ctx: &Ctx) -> Result<()> {
    let a = ctx.addr("tx10");
    let out = std::process::Command::new("pgbench")
        .args(["-h", &a.ip().to_string(), "-p", &a.port().to_string(), "-U", "bob"])
        .args(["-n", "-S", "-M", "prepared", "-c", "200", "-j", "2", "-t", "25", "app2"])
        .env("PGPASSWORD", "bob-pw")
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "{text}");
    ensure!(
        text.contains("number of transactions actually processed: 5000/5000"),
        "{text}"
    );
    ensure!(text.contains("number of failed transactions: 0"), "{text}");
    Ok(())
}

/// (parameter, value a client sets, as SHOW reports it)
const SETTINGS: &[(&str, &str, &str)] = &[
    ("search_path", "pg_catalog, public", "pg_catalog, public"),
    ("application_name", "'tracked-app'", "tracked-app"),
    ("TimeZone", "'Asia/Tokyo'", "Asia/Tokyo"),
    ("DateStyle", "'SQL, DMY'", "SQL, DMY"),
    ("IntervalStyle", "'iso_8601'", "iso_8601"),
    ("client_encoding", "'UTF8'", "UTF8"),
    ("extra_float_digits", "2", "2"),
    ("statement_timeout", "'1234s'", "1234s"),
    ("lock_timeout", "'4321ms'", "4321ms"),
    ("idle_in_transaction_session_timeout", "'99s'", "99s"),
    ("standard_conforming_strings", "on", "on"),
    ("default_transaction_isolation", "'repeatable read'", "repeatable read"),
    ("default_transaction_read_only", "on", "on"),
];

fn tracked_parameters(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let setter = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let fresh = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let mut defaults = Vec::new();
        for (name, _, _) in SETTINGS {
            defaults.push(text(&fresh, &format!("SHOW {name}")).await?.remove(0));
        }
        for (name, value, _) in SETTINGS {
            setter.batch_execute(&format!("SET {name} = {value}")).await?;
        }
        // SET inside a rolled-back transaction does not stick, as on a direct connection.
        setter.batch_execute("BEGIN; SET lock_timeout = '1s'; ROLLBACK").await?;
        for round in 0..10 {
            // Keep both pool connections busy in turn so the setter hops.
            let hold = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            let sleeper = tokio::spawn(async move { hold.simple_query("SELECT pg_sleep(0.02)").await });
            for (i, (name, _, shown)) in SETTINGS.iter().enumerate() {
                let got = text(&setter, &format!("SHOW {name}")).await?.remove(0);
                ensure!(got == *shown, "round {round}: {name} = {got}, expected {shown}");
                let other = text(&fresh, &format!("SHOW {name}")).await?.remove(0);
                ensure!(
                    other == defaults[i],
                    "round {round}: {name} leaked to another client: {other}"
                );
            }
            sleeper.await??;
        }
        // RESET brings the default back and it stays.
        setter.batch_execute("RESET search_path; RESET ALL").await?;
        for (i, (name, _, _)) in SETTINGS.iter().enumerate() {
            let got = text(&setter, &format!("SHOW {name}")).await?.remove(0);
            ensure!(got == defaults[i], "after RESET ALL {name} = {got}");
        }
        Ok(())
    })
}

fn pinning(ctx: &Ctx) -> Result<()> {
    let _pair = ctx.both_tx_connections();
    let cases: &[(&str, &str)] = &[
        ("CREATE TEMP TABLE pin_t(x int)", "temp_table"),
        ("SELECT pg_advisory_lock(777)", "advisory_lock"),
        ("LISTEN pin_channel", "listen"),
        (
            "BEGIN; DECLARE pin_c CURSOR WITH HOLD FOR SELECT 1; COMMIT",
            "cursor_with_hold",
        ),
        ("SET work_mem = '8MB'", "set_untracked"),
        ("SET ROLE app_owner", "set_role"),
        ("SET SESSION AUTHORIZATION app_owner", "set_session_authorization"),
        ("LOAD 'plpgsql'", "load"),
        ("PREPARE pin_p AS SELECT 1", "sql_prepare"),
        ("FROBNICATE the database", "unrecognized"),
    ];
    ctx.rt.block_on(async {
        for (sql, code) in cases {
            let before = ctx.core.stats.pins().get(code).copied().unwrap_or(0);
            let c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            let pid1: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
            let _ = c.batch_execute(sql).await; // some fail (privileges, syntax): they pin all the same
            let after = ctx.core.stats.pins().get(code).copied().unwrap_or(0);
            ensure!(
                after == before + 1,
                "{sql}: pin count for {code} went {before} -> {after}"
            );
            // A pinned session keeps its backend: keep the other connection busy and check.
            let other = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            let busy = tokio::spawn(async move { other.simple_query("SELECT pg_sleep(0.05)").await });
            for _ in 0..5 {
                let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
                let _ = pid1;
                let pid2: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
                ensure!(pid == pid2, "{sql}: pinned session moved between backends");
            }
            busy.await??;
        }
        // The temporary table is still there in later transactions of its session.
        let c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        c.batch_execute("CREATE TEMP TABLE pin_keep(x int); INSERT INTO pin_keep VALUES (5)")
            .await?;
        for _ in 0..5 {
            let n: i32 = c.query_one("SELECT x FROM pin_keep", &[]).await?.get(0);
            ensure!(n == 5);
        }
        // A parameter in the endpoint's pinning filter does not pin.
        let before = ctx.core.stats.pins().get("set_untracked").copied().unwrap_or(0);
        let c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        c.batch_execute("SET geqo = off").await?;
        ensure!(ctx.core.stats.pins().get("set_untracked").copied().unwrap_or(0) == before);
        Ok(())
    })
}

fn deallocate_all(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let a = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let b = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let sa = a.prepare("SELECT 'a' || $1::text").await?;
        let sb = b.prepare("SELECT 'a' || $1::text").await?; // same text: same backend statement
        for i in 0..10 {
            b.batch_execute("DEALLOCATE ALL").await?;
            a.batch_execute("DISCARD ALL").await?;
            let r: String = a
                .query_one(&sa, &[&i.to_string()])
                .await
                .map(|r| r.get(0))
                .unwrap_or_default();
            let _ = r;
            let rb = b.query_one(&sb, &[&i.to_string()]).await;
            let _ = rb;
        }
        // After DEALLOCATE ALL the client's own statements are gone from its view...
        let gone = b.query_one(&sb, &[&"x"]).await;
        ensure!(gone.is_err(), "statement survived DEALLOCATE ALL in its own session");
        // ...but another client's are untouched.
        let c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let sc = c.prepare("SELECT 'c' || $1::text").await?;
        b.batch_execute("DEALLOCATE ALL").await?;
        let r: String = c.query_one(&sc, &[&"1"]).await?.get(0);
        ensure!(r == "c1");
        Ok(())
    })
}

fn sqlx_cache(ctx: &Ctx) -> Result<()> {
    use sqlx::{Connection, Row};
    ctx.rt.block_on(async {
        let a = ctx.addr("tx");
        let url = format!("postgres://alice:alice-pw@{}:{}/app1?sslmode=disable", a.ip(), a.port());
        let mut conns = Vec::new();
        for _ in 0..6 {
            conns.push(sqlx::PgConnection::connect(&url).await?);
        }
        for round in 0..20i32 {
            for (k, conn) in conns.iter_mut().enumerate() {
                let k = k as i32;
                let row = sqlx::query("SELECT $1::int4 + $2::int4 AS s")
                    .bind(round)
                    .bind(k)
                    .fetch_one(&mut *conn)
                    .await?;
                let s: i32 = row.try_get("s")?;
                ensure!(s == round + k);
            }
        }
        for c in conns {
            c.close().await?;
        }
        Ok(())
    })
}

fn leak_check(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut tasks = Vec::new();
        for w in 0..6 {
            let dirty = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            let checker = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            tasks.push(tokio::spawn(async move {
                let s = dirty.prepare(&format!("SELECT {w} + $1::int")).await?;
                dirty.batch_execute("SET search_path = pg_catalog; SET statement_timeout = '77s'; SET TimeZone = 'Pacific/Auckland'").await?;
                let mut checks = 0;
                for i in 0..150 {
                    let _: i32 = dirty.query_one(&s, &[&i]).await?.get(0);
                    dirty.batch_execute("BEGIN; SET LOCAL work_mem = '1MB'; SELECT 1; COMMIT").await?;
                    let row = checker
                        .query_one(
                            "SELECT current_setting('search_path'), current_setting('statement_timeout'),
                                    current_setting('TimeZone'), current_setting('work_mem')",
                            &[],
                        )
                        .await?;
                    anyhow::ensure!(row.get::<_, String>(0) == "\"$user\", public", "search_path leaked");
                    anyhow::ensure!(row.get::<_, String>(1) == "0", "statement_timeout leaked");
                    anyhow::ensure!(row.get::<_, String>(2) != "Pacific/Auckland", "TimeZone leaked");
                    anyhow::ensure!(row.get::<_, String>(3) == "4MB", "SET LOCAL leaked");
                    checks += 1;
                }
                anyhow::Ok(checks)
            }));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await??;
        }
        ensure!(total == 900);
        Ok(())
    })
}

fn idle_in_transaction(ctx: &Ctx) -> Result<()> {
    // The test config's client_message_timeout is 2 s: a client that sits
    // in an open transaction longer than that must keep its session.
    ctx.rt.block_on(async {
        let c = ctx.client("tx10", "alice", "alice-pw", "app1").await?;
        c.batch_execute("BEGIN; SELECT 1").await?;
        tokio::time::sleep(std::time::Duration::from_millis(2600)).await;
        let n: i32 = c.query_one("SELECT 5", &[]).await?.get(0);
        ensure!(n == 5);
        c.batch_execute("COMMIT").await?;
        Ok(())
    })
}

/// Connects to the "tx" endpoint as alice with extra conninfo words.
pub async fn client_with(ctx: &Ctx, extra: &str) -> Result<tokio_postgres::Client> {
    let info = format!("{} {extra}", ctx.conninfo("tx", "alice", "alice-pw", "app1"));
    let (client, conn) = tokio_postgres::connect(&info, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

fn untracked_startup_parameter(ctx: &Ctx) -> Result<()> {
    let _pair = ctx.both_tx_connections();
    ctx.rt.block_on(async {
        let before = ctx.core.stats.pins().get("startup_untracked").copied().unwrap_or(0);
        let a = client_with(ctx, "options='-c work_mem=1234kB'").await?;
        let after = ctx.core.stats.pins().get("startup_untracked").copied().unwrap_or(0);
        ensure!(
            after == before + 1,
            "pin count for startup_untracked went {before} -> {after}"
        );
        let pid = text(&a, "SELECT pg_backend_pid()").await?;
        let b = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        for round in 0..10 {
            ensure!(
                text(&a, "SHOW work_mem").await? == ["1234kB"],
                "round {round}: lost on its own session"
            );
            ensure!(
                text(&a, "SELECT pg_backend_pid()").await? == pid,
                "round {round}: pinned session moved"
            );
            let seen = text(&b, "SHOW work_mem").await?;
            ensure!(
                seen != ["1234kB"],
                "round {round}: another client sees work_mem {seen:?}"
            );
        }
        drop(a);
        // Once the pinned client has left, its connection was reset before reuse.
        for _ in 0..10 {
            let c = ctx.client("tx", "alice", "alice-pw", "app1").await?;
            ensure!(
                text(&c, "SHOW work_mem").await? != ["1234kB"],
                "leaked after the session ended"
            );
        }
        Ok(())
    })
}

fn cached_greeting(ctx: &Ctx) -> Result<()> {
    let _pair = ctx.both_tx_connections();
    ctx.rt.block_on(async {
        let app = "application_name=greeting_cache_check";
        // The first login reads the greeting from a backend connection...
        let first = client_with(ctx, app).await?;
        ensure!(text(&first, "SHOW application_name").await? == ["greeting_cache_check"]);
        drop(first);
        // ...later ones need none: with every connection of the pool (size 2)
        // inside a transaction, a login still completes at once.
        let h1 = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let h2 = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        h1.batch_execute("BEGIN; SELECT 1").await?;
        h2.batch_execute("BEGIN; SELECT 1").await?;
        ensure!(tx_backends(ctx) == 2, "holders use {} connections", tx_backends(ctx));
        let quick = tokio::time::timeout(std::time::Duration::from_secs(2), client_with(ctx, app)).await;
        let c = quick.context("login waited for a backend connection")??;
        // Its first transaction waits for a connection, then sees its own value.
        let query = tokio::spawn(async move { text(&c, "SHOW application_name").await });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        ensure!(
            !query.is_finished(),
            "a query ran while every connection was in a transaction"
        );
        h1.batch_execute("COMMIT").await?;
        ensure!(query.await?? == ["greeting_cache_check"]);
        h2.batch_execute("COMMIT").await?;
        // Different startup parameters are a different greeting.
        let other = client_with(ctx, "application_name=greeting_other").await?;
        ensure!(text(&other, "SHOW application_name").await? == ["greeting_other"]);
        Ok(())
    })
}

/// A `DO` block that runs `SET` (PL/pgSQL; PostgreSQL's brin test does it
/// in a loop) pins its session: the setting holds for it, on its one
/// connection, and no other session gets that connection with it.
fn set_in_do_block(ctx: &Ctx) -> Result<()> {
    let _pair = ctx.both_tx_connections();
    ctx.rt.block_on(async {
        let before = ctx.core.stats.pins().get("set_in_do_block").copied().unwrap_or(0);
        let a = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        let b = ctx.client("tx", "alice", "alice-pw", "app1").await?;
        a.batch_execute("DO $$ BEGIN SET work_mem = '1234kB'; SET enable_seqscan = off; END $$")
            .await?;
        let after = ctx.core.stats.pins().get("set_in_do_block").copied().unwrap_or(0);
        ensure!(
            after == before + 1,
            "pin count for set_in_do_block went {before} -> {after}"
        );
        let pid = text(&a, "SELECT pg_backend_pid()").await?;
        for round in 0..10 {
            ensure!(
                text(&a, "SHOW enable_seqscan").await? == ["off"],
                "round {round}: lost on its own session"
            );
            ensure!(
                text(&a, "SELECT pg_backend_pid()").await? == pid,
                "round {round}: pinned session moved"
            );
            let work_mem = text(&b, "SHOW work_mem").await?;
            ensure!(
                work_mem != ["1234kB"],
                "round {round}: another client sees work_mem {work_mem:?}"
            );
            let seqscan = text(&b, "SHOW enable_seqscan").await?;
            ensure!(
                seqscan == ["on"],
                "round {round}: another client sees enable_seqscan {seqscan:?}"
            );
        }
        a.batch_execute("RESET enable_seqscan").await?;
        ensure!(
            text(&a, "SHOW enable_seqscan").await? == ["on"],
            "RESET after the block"
        );
        Ok(())
    })
}
