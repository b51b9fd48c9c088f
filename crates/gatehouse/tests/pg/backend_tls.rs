//! `backend_tls` against this binary's server, which has no TLS: `prefer`
//! (the default) and `disable` connect in plain text; `require` is
//! refused, and the client hears only that the server could not be
//! reached. The `backend_tls` binary covers servers with TLS.

use anyhow::{Result, ensure};

use crate::Ctx;
use crate::own::Own;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "backend_tls::prefer_goes_plain_and_require_is_refused_by_a_server_without_tls",
        prefer_goes_plain_and_require_is_refused_by_a_server_without_tls,
    )]
}

fn prefer_goes_plain_and_require_is_refused_by_a_server_without_tls(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        for mode in ["disable", "prefer", "require"] {
            let text = crate::config_text(&ctx.cluster, &ctx.dir)?.replacen(
                "health_check_interval = \"1s\"",
                &format!("health_check_interval = \"1s\"\nfailover_hold = \"1s\"\nbackend_tls = \"{mode}\""),
                1,
            );
            let settings = gatehouse::config::parse(&text, &ctx.dir).map_err(|p| anyhow::anyhow!("{p}"))?;
            let own = Own::start(settings).await?;
            let checked = async {
                let told = match own.client("rw").await {
                    Err(e) => format!("{e:#}"),
                    Ok(client) => match client
                        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                        .await
                    {
                        Ok(row) => {
                            ensure!(mode != "require", "require ran a query on a server without TLS");
                            ensure!(!row.get::<_, bool>(0), "{mode}: TLS on a server without TLS");
                            return Ok(());
                        }
                        Err(e) => crate::db_message(&e),
                    },
                };
                crate::refusal::require_refused_quietly(mode, &told)
            }
            .await;
            own.stop().await?;
            checked?;
        }
        Ok(())
    })
}
