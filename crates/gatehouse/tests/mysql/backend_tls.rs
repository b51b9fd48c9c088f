//! `backend_tls` against this binary's MariaDB, which has no TLS: `prefer`
//! (the default) and `disable` connect in plain text (the greeting offers
//! no `CLIENT_SSL`); `require` is refused, and the client hears only that
//! the server could not be reached. The `backend_tls` binary covers
//! servers with TLS.

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::Queryable;

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "backend_tls::prefer_goes_plain_and_require_is_refused_by_a_server_without_tls",
        prefer_goes_plain_and_require_is_refused_by_a_server_without_tls,
    )]
}

fn prefer_goes_plain_and_require_is_refused_by_a_server_without_tls(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        for mode in ["disable", "prefer", "require"] {
            let text = crate::own_config_text(ctx, "", "")?.replacen(
                "monitor_secret = \"superuser\"",
                &format!("monitor_secret = \"superuser\"\nfailover_hold = \"1s\"\nbackend_tls = \"{mode}\""),
                1,
            );
            let path = ctx.dir.join(format!("backend-tls-{mode}.toml"));
            std::fs::write(&path, text)?;
            let settings = gatehouse::config::load(&path).map_err(|p| anyhow::anyhow!("{p}"))?;
            let app = gatehouse::App::bind(settings).await?;
            let addr = app.local_addr("rw").context("no rw endpoint")?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let run = tokio::spawn(gatehouse::run(app, async {
                let _ = stopped.await;
            }));
            let checked = async {
                let told = match mysql_async::Conn::new(crate::opts_at(addr, "alice", "alice-pw", Some("app1"))).await {
                    Err(e) => e.to_string(),
                    Ok(mut conn) => {
                        let r: Result<Option<(String, String)>, _> =
                            conn.query_first("SHOW SESSION STATUS LIKE 'Ssl_version'").await;
                        match r {
                            Ok(row) => {
                                ensure!(mode != "require", "require ran a query on a server without TLS");
                                let version = row.map(|r| r.1).unwrap_or_default();
                                ensure!(version.is_empty(), "{mode}: TLS ({version}) on a server without TLS");
                                conn.disconnect().await?;
                                return Ok(());
                            }
                            Err(e) => e.to_string(),
                        }
                    }
                };
                crate::refusal::require_refused_quietly(mode, &told)
            }
            .await;
            let _ = stop.send(());
            let _ = tokio::time::timeout(std::time::Duration::from_secs(15), run).await;
            checked?;
        }
        Ok(())
    })
}
