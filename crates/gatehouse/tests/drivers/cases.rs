//! The trials themselves: one driver program in one mode, every program
//! at once, the MariaDB programs as many tenants on a few connections, and
//! a secrets reload under load. The harness (the cluster, the proxy, how a
//! program is started and waited for) is in `main.rs`.

use anyhow::{Context, Result, bail};

use crate::{
    ADMIN_TOKEN, ALL_AT_ONCE_LIMIT, Ctx, DATABASE, Login, MANY_ITERATIONS, MANY_TENANTS, MY_TENANT, PG_TENANT,
    PROGRAM_LIMIT, PROGRAMS, Running, TENANT_PW, many,
};

pub(crate) fn one(ctx: &Ctx, lang: &'static str, driver: &str, mode: &str) -> Result<()> {
    let program = PROGRAMS
        .iter()
        .find(|p| p.0 == lang && p.1 == driver && p.3 == mode)
        .copied()
        .with_context(|| format!("no program {lang} {driver} {mode}"))?;
    let _shared = ctx.gate.read().unwrap_or_else(|p| p.into_inner());
    ctx.spawn(program, "", PROGRAM_LIMIT)?.wait()
}

/// Every program at once: the proxy's pools shared by all their workers.
pub(crate) fn all_at_once(ctx: &Ctx) -> Result<()> {
    for lang in ["python", "node", "go", "java", "cli"] {
        ctx.ensure(lang)?;
    }
    let _alone = ctx.gate.write().unwrap_or_else(|p| p.into_inner());
    let running = PROGRAMS
        .iter()
        .map(|p| ctx.spawn(*p, "_all", ALL_AT_ONCE_LIMIT))
        .collect::<Result<Vec<_>>>()?;
    wait_all(running)
}

/// Waits for every program; each failed one's log is in the error.
fn wait_all(running: Vec<Running>) -> Result<()> {
    let total = running.len();
    let failures: Vec<String> = running
        .into_iter()
        .filter_map(|r| r.wait().err().map(|e| format!("{e:#}")))
        .collect();
    if !failures.is_empty() {
        bail!(
            "{} of {total} programs failed:\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }
    Ok(())
}

/// Every MariaDB program twice at once, each run as a tenant of its own
/// (20 tenants, each its own backend user and database) on a cluster whose
/// share of the server is 4 connections: nearly every lease takes a
/// connection another tenant used last and switches it, and every program
/// still checks every result it gets. The switches are counted.
pub(crate) fn many_tenants(ctx: &Ctx) -> Result<()> {
    let programs: Vec<_> = PROGRAMS.iter().filter(|p| p.2 == "mysql").copied().collect();
    for lang in ["python", "node", "go", "java", "cli"] {
        ctx.ensure(lang)?;
    }
    let _alone = ctx.gate.write().unwrap_or_else(|p| p.into_inner());
    let before = switched(ctx)?;
    let mut running = Vec::new();
    for (i, program) in programs.iter().cycle().take(MANY_TENANTS).enumerate() {
        let (tenant, _, database) = many(i);
        let login = Login {
            addr: ctx.my_many,
            tenant,
            database,
            iterations: MANY_ITERATIONS,
        };
        running.push(ctx.spawn_as(*program, &format!("_many{i:02}"), ALL_AT_ONCE_LIMIT, &login)?);
    }
    wait_all(running)?;
    let (opened, switches) = switched(ctx)?;
    let switches = switches - before.1;
    eprintln!(
        "mymany: {switches} tenant switches, {} connections opened",
        opened - before.0
    );
    anyhow::ensure!(switches > 0.0, "no connection changed tenant");
    Ok(())
}

/// mymany's backend connections opened and switched so far, from `/metrics`.
fn switched(ctx: &Ctx) -> Result<(f64, f64)> {
    let r = gatehouse_testkit::http::request(ctx.admin, "GET", "/metrics", Some(ADMIN_TOKEN))?;
    anyhow::ensure!(r.status == 200, "metrics: {} {}", r.status, r.body);
    let sum = |name: &str| {
        r.body
            .lines()
            .filter(|l| l.starts_with(name) && l.contains("cluster=\"mymany\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    Ok((
        sum("gatehouse_database_connections_setup_succeeded_total{"),
        sum("gatehouse_database_connections_switched_total{"),
    ))
}

/// Two secrets share a backend user name (one for the PostgreSQL, one for
/// the MariaDB cluster, with different passwords): a reload with nothing
/// changed leaves every pool on its own secret, so clients logged in
/// before it still get backend connections on both engines after it (by
/// user name alone, one engine's pool took the other's password, and its
/// new backend logins failed until a client logged in again).
pub(crate) fn reload_secrets(ctx: &Ctx) -> Result<()> {
    ctx._rt.block_on(async {
        let mut pg = Vec::new();
        let mut my = Vec::new();
        for _ in 0..8 {
            let conninfo = format!(
                "host={} port={} user={PG_TENANT} password={TENANT_PW} dbname={DATABASE} sslmode=disable",
                ctx.pg.ip(),
                ctx.pg.port()
            );
            let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            pg.push(client);
            let opts: mysql_async::Opts = mysql_async::OptsBuilder::default()
                .ip_or_hostname(ctx.my.ip().to_string())
                .tcp_port(ctx.my.port())
                .user(Some(MY_TENANT))
                .pass(Some(TENANT_PW))
                .db_name(Some(DATABASE))
                .prefer_socket(false)
                .into();
            my.push(mysql_async::Conn::new(opts).await?);
        }
        let (pg, my) = transactions(pg, my).await.context("before the reload")?;
        let reload = gatehouse_testkit::http::request(ctx.admin, "POST", "/api/reload", Some(ADMIN_TOKEN))?;
        anyhow::ensure!(reload.status == 200, "reload: {} {}", reload.status, reload.body);
        transactions(pg, my).await.context("after the reload")?;
        anyhow::Ok(())
    })
}

/// One transaction on every client at once: more than the pools hold, so
/// backend connections are opened (the reload closes idle ones of a pool
/// whose credentials changed).
async fn transactions(
    pg: Vec<tokio_postgres::Client>,
    my: Vec<mysql_async::Conn>,
) -> Result<(Vec<tokio_postgres::Client>, Vec<mysql_async::Conn>)> {
    use mysql_async::prelude::Queryable;
    let pg_tasks: Vec<_> = pg
        .into_iter()
        .map(|client| {
            tokio::spawn(async move {
                client.batch_execute("BEGIN; SELECT pg_sleep(0.2); COMMIT").await?;
                anyhow::Ok(client)
            })
        })
        .collect();
    let my_tasks: Vec<_> = my
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                c.query_drop("BEGIN").await?;
                c.query_drop("DO SLEEP(0.2)").await?;
                c.query_drop("COMMIT").await?;
                anyhow::Ok(c)
            })
        })
        .collect();
    let mut pg = Vec::new();
    for t in pg_tasks {
        pg.push(t.await?.context("PostgreSQL transaction")?);
    }
    let mut my = Vec::new();
    for t in my_tasks {
        my.push(t.await?.context("MariaDB transaction")?);
    }
    Ok((pg, my))
}
