//! `caching_sha2_password` with the RSA exchange over plain TCP: real
//! clients (mysql_async, the `mysql` command-line client) against the
//! "sha2" endpoint, which greets with MySQL 8's default plugin; and the
//! proxy's own backend logins through the full path (RSA) and the fast path
//! (cached verifier), with the proxy's "sha2" endpoint as the server; and
//! MariaDB's `client_ed25519` with the `mysql` command-line client.

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::*;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("plugins::caching_sha2_rsa_then_fast_path", rsa_then_fast),
        ("plugins::mysql_cli_caching_sha2_over_plain_tcp", mysql_cli),
        ("plugins::backend_logins_through_caching_sha2", backend_chain),
        (
            "plugins::a_tenant_switch_follows_the_servers_auth_switch_inside_com_change_user",
            switch_chain,
        ),
        ("plugins::mysql_cli_client_ed25519", ed25519_cli),
    ]
}

fn verifier_cached(ctx: &Ctx, tenant: &str) -> Result<bool> {
    let t = ctx.core.tenants.get(tenant).context("tenant")?;
    Ok(ctx.core.engine.sha2_verifier(&t).is_some())
}

async fn whoami(c: &mut mysql_async::Conn) -> Result<(Option<String>, Option<String>)> {
    let row: Option<(Option<String>, Option<String>)> = c.query_first("SELECT CURRENT_USER(), DATABASE()").await?;
    row.context("no row")
}

fn rsa_then_fast(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        ensure!(!verifier_cached(ctx, "dave")?, "dave has a verifier before logging in");
        // No verifier yet: full authentication, RSA over plain TCP.
        let mut c = ctx.conn("sha2", "dave", "dave-pw", "app1").await?;
        let (user, db) = whoami(&mut c).await?;
        ensure!(user.as_deref().is_some_and(|u| u.starts_with("app_owner@")), "{user:?}");
        ensure!(db.as_deref() == Some("app1"), "{db:?}");
        c.disconnect().await?;
        ensure!(verifier_cached(ctx, "dave")?, "the full path did not cache a verifier");
        // Now the fast path.
        let mut c = ctx.conn("sha2", "dave", "dave-pw", "app1").await?;
        let v: Option<String> = c.query_first("SELECT v FROM t WHERE id = 3").await?;
        ensure!(v.as_deref() == Some("three"), "{v:?}");
        c.disconnect().await?;
        // A wrong password fails both paths with the same error.
        for user in ["dave", "nobody"] {
            match mysql_async::Conn::new(ctx.opts("sha2", user, "wrong-pw", Some("app1"))).await {
                Err(mysql_async::Error::Server(e)) => ensure!(e.code == 1045, "{user}: {e:?}"),
                Err(e) => anyhow::bail!("{user}: not a server error: {e:?}"),
                Ok(_) => anyhow::bail!("{user} logged in with a wrong password"),
            }
        }
        Ok(())
    })
}

fn mysql_cli(ctx: &Ctx) -> Result<()> {
    ensure!(!verifier_cached(ctx, "erin")?, "erin has a verifier before logging in");
    let sql = "SELECT v FROM t WHERE id = 1";
    let run = |password: &str| crate::mysql_cli(ctx, "sha2", "erin", password, false, &[], sql);
    // First login: full path (RSA); second: fast path.
    for round in 0..2 {
        let r = run("erin-pw")?;
        ensure!(r.ok, "mysql round {round}: {}", r.stderr);
        ensure!(r.stdout.lines().next() == Some("one"), "{}", r.stdout);
        ensure!(verifier_cached(ctx, "erin")?, "no verifier after round {round}");
    }
    let r = run("wrong-pw")?;
    ensure!(!r.ok && r.stderr.contains("1045"), "{}", r.stderr);
    ensure!(!r.stderr.contains("wrong-pw"), "{}", r.stderr);
    Ok(())
}

/// The "chain" endpoint's cluster is the proxy's own "sha2" endpoint: its
/// backend connections log in as carol with caching_sha2_password over plain
/// TCP. The first takes the full path (the proxy asks for the RSA key and
/// sends the encrypted password); once the verifier is cached, a second
/// concurrent backend connection takes the fast path.
fn backend_chain(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        // The chain's backend (the "sha2" endpoint) started listening after
        // the first probe; wait for the monitor to find it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while ctx.core.topology.cluster("mychain").and_then(|c| c.writer()).is_none() {
            ensure!(
                std::time::Instant::now() < deadline,
                "the chain's backend never came up"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let mut a = ctx.conn("chain", "chained", "chained-pw", "app1").await?;
        let (user, db) = whoami(&mut a).await?;
        ensure!(user.as_deref().is_some_and(|u| u.starts_with("app_owner@")), "{user:?}");
        ensure!(db.as_deref() == Some("app1"), "{db:?}");
        ensure!(
            verifier_cached(ctx, "carol")?,
            "backend login did not take the full path"
        );
        // Two transactions open at once need two backend connections.
        let mut b = ctx.conn("chain", "chained", "chained-pw", "app1").await?;
        a.query_drop("BEGIN").await?;
        b.query_drop("BEGIN").await?;
        let ids: Vec<Option<u64>> = vec![
            a.query_first("SELECT @@pseudo_thread_id").await?,
            b.query_first("SELECT @@pseudo_thread_id").await?,
        ];
        ensure!(ids[0].is_some() && ids[0] != ids[1], "{ids:?}");
        let v: Option<String> = b.query_first("SELECT v FROM t WHERE id = 2").await?;
        ensure!(v.as_deref() == Some("two"), "{v:?}");
        a.query_drop("COMMIT").await?;
        b.query_drop("COMMIT").await?;
        a.disconnect().await?;
        b.disconnect().await?;
        Ok(())
    })
}

/// Two tenants of the "chainsw" endpoint log in to its backend (the
/// proxy's own "sha2" endpoint, which greets with caching_sha2_password) as
/// carol and as gina: taking turns, each finds the other's connection idle
/// and moves it with COM_CHANGE_USER. The first answer is computed for the
/// greeting's caching_sha2_password; the "sha2" endpoint answers a
/// COM_CHANGE_USER with an auth switch (a fresh nonce, its own choice of
/// plugin), which the switch follows. Two sessions hold two connections in
/// open transactions, so the share is full: one more connection is opened,
/// every later turn is a switch, and none fails.
fn switch_chain(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while ctx
            .core
            .topology
            .cluster("mychainsw")
            .and_then(|c| c.writer())
            .is_none()
        {
            ensure!(
                std::time::Instant::now() < deadline,
                "the chain's backend never came up"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let counts = || {
            ctx.core
                .pools
                .backend_connects()
                .iter()
                .filter(|b| b.cluster == "mychainsw")
                .fold((0, 0, 0), |a, b| {
                    (a.0 + b.switched, a.1 + b.switch_failed, a.2 + b.opened)
                })
        };
        // Two sessions of "chained" hold two of the share's three
        // connections in open transactions, so the share is full once a
        // third is open (with room, a tenant opens one of its own).
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut c = ctx.conn("chainsw", "chained", "chained-pw", "app1").await?;
            c.query_drop("BEGIN").await?;
            let _: Option<String> = c.query_first("SELECT v FROM t WHERE id = 1").await?;
            held.push(c);
        }
        // The chain's other connection is idle between turns: each turn's
        // lease takes the connection the other tenant gave back.
        let settle = || async {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while ctx
                .core
                .pools
                .all()
                .iter()
                .filter(|p| p.key().cluster == "mychainsw")
                .map(|p| p.leased_count())
                .sum::<usize>()
                > held.len()
            {
                ensure!(std::time::Instant::now() < deadline, "a chain connection stays lent");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            anyhow::Ok(())
        };
        for turn in 0..4 {
            let (tenant, pw) = if turn % 2 == 0 {
                ("chained", "chained-pw")
            } else {
                ("chained2", "chained2-pw")
            };
            settle().await?;
            let mut c = ctx.conn("chainsw", tenant, pw, "app1").await?;
            let v: Option<String> = c.query_first("SELECT v FROM t WHERE id = 1").await?;
            ensure!(v.as_deref() == Some("one"), "{tenant}: {v:?}");
            c.disconnect().await?;
        }
        let (switched, failed, opened) = counts();
        ensure!(failed == 0, "{failed} switches failed");
        ensure!(opened == 3 && switched == 3, "opened {opened}, switched {switched}");
        for c in held {
            c.disconnect().await?;
        }
        Ok(())
    })
}

/// The "ed" endpoint switches every client to `client_ed25519`: frank
/// (whose key is what `ed25519_password()` would store) logs in with the
/// `mysql` client's ed25519 plugin; a wrong password, an unknown user and a
/// tenant with only a native hash all get the same 1045.
fn ed25519_cli(ctx: &Ctx) -> Result<()> {
    let sql = "SELECT v FROM t WHERE id = 2";
    let r = crate::mysql_cli(ctx, "ed", "frank", "frank-pw", false, &[], sql)?;
    ensure!(r.ok, "frank: {}", r.stderr);
    ensure!(r.stdout.lines().next() == Some("two"), "{}", r.stdout);
    let mut refusals = Vec::new();
    for (user, pw) in [("frank", "wrong-pw"), ("nobody", "wrong-pw"), ("alice", "alice-pw")] {
        let r = crate::mysql_cli(ctx, "ed", user, pw, false, &[], sql)?;
        ensure!(!r.ok && r.stderr.contains("1045"), "{user}: {}", r.stderr);
        refusals.push(r.stderr.replace(user, "X"));
    }
    ensure!(refusals.iter().all(|m| *m == refusals[0]), "{refusals:?}");
    Ok(())
}
