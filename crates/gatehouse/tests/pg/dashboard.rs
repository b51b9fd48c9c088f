//! The live dashboard in a real browser: headless Chromium opens
//! `/dashboard` on a proxy of the case's own while clients connect and run
//! queries through it; the numbers the page shows are the ones `/metrics`
//! shows, the page reaches no host but the admin listener (and says so in
//! its Content-Security-Policy), and a screenshot of it is saved (also to
//! `GH_SCREENSHOT_DIR` when that is set). Reading the page and comparing it
//! with `/metrics` lives in [`page`].

mod page;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_testkit::http::request;

use crate::Ctx;
use crate::chromium::Chromium;
use crate::own::Own;
use page::{check_rates, metrics, mismatches, read_page, save_screenshot, sum, wait_scrapes};

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![(
        "dashboard::shows_the_numbers_the_metrics_show_and_saves_a_screenshot",
        shows_the_numbers_the_metrics_show,
    )]
}

/// Client connections the case holds open while the page watches: some on
/// the read/write endpoint, some on the read-only one, one of them pinned.
const CLIENTS: usize = 8;

/// The cluster's servers, `host:port`: the primary, then its replica.
fn backends(ctx: &Ctx) -> Vec<String> {
    ctx.cluster
        .pg_primary()
        .into_iter()
        .chain(ctx.cluster.pg_replicas())
        .map(|s| format!("{}:{}", s.host, s.port))
        .collect()
}

/// One cluster (the primary and its replica) behind a read/write and a
/// read-only endpoint, and an admin listener with a token.
fn config(ctx: &Ctx) -> Result<String> {
    let backends: Vec<String> = backends(ctx).iter().map(|b| format!("\"{b}\"")).collect();
    Ok(format!(
        r#"
[proxy]
log_filter = "warn"

[[clusters]]
name = "main"
engine = "postgres"
backends = [{backends}]
monitor_secret = "superuser"
health_check_interval = "1s"
# Generous: Chromium starting on the same two cores slows the first probes.
health_check_timeout = "5s"
pool = {{ size = 4, borrow_timeout = "3s" }}

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"

[[endpoints]]
name = "ro"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_only"

[admin]
listen = "127.0.0.1:0"
token_file = "{d}/admin.token"

[[tenants]]
name = "alice"
databases = ["app1"]
secret = "owner"
scram_verifier = "{verifier}"

[[secrets]]
name = "superuser"
user = "{su}"
password = "{su_pw}"

[[secrets]]
name = "owner"
user = "app_owner"
password = "owner-pw"
"#,
        backends = backends.join(", "),
        d = ctx.dir.display(),
        verifier = ScramVerifier::from_password("alice-pw", &random_salt(), 4096),
        su = ctx.cluster.pg_user(),
        su_pw = ctx.cluster.pg_password(),
    ))
}

/// Runs a query (and every fourth time a transaction) about every 20 ms
/// until `stop`, counting them in `ran`; at most 20,000 rounds.
fn traffic(
    client: tokio_postgres::Client,
    stop: Arc<AtomicBool>,
    ran: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<Result<tokio_postgres::Client>> {
    tokio::spawn(async move {
        for i in 0..20_000_i32 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let n: i32 = client.query_one("SELECT $1::int + 1", &[&i]).await?.get(0);
            ensure!(n == i + 1);
            if i % 4 == 0 {
                client.batch_execute("BEGIN; SELECT 1; COMMIT").await?;
            }
            ran.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(client)
    })
}

/// Chromium opens the dashboard (token in the URL fragment) while clients
/// connect one by one and run queries: the page's rates are positive and
/// bounded by the counters; once the queries stop, its client and database
/// connections, backends up, waiting clients, pins, errors and accepted
/// connections (in total and in their tables' rows) equal `/metrics`, and
/// it shows as many client connections as are held open. Every request it
/// made went to the admin listener, whose page response carries
/// `default-src 'self'`. The screenshot is a PNG.
fn shows_the_numbers_the_metrics_show(ctx: &Ctx) -> Result<()> {
    let text = config(ctx)?;
    let settings = gatehouse::config::parse(&text, &ctx.dir).map_err(|p| anyhow::anyhow!("{p}"))?;
    let work = ctx.dir.join("dashboard");
    std::fs::create_dir_all(&work)?;
    ctx.rt.block_on(async {
        let own = Own::start(settings).await?;
        let result = async {
            let admin = own.admin.context("no admin listener")?;
            let browser = Chromium::launch(&work.join("chromium-profile")).await?;
            watch(ctx, &own, admin, browser, &work).await
        }
        .await;
        own.stop().await?;
        result
    })
}

async fn watch(ctx: &Ctx, own: &Own, admin: SocketAddr, mut browser: Chromium, work: &Path) -> Result<()> {
    // The page carries no data: it is served without the token, `/` leads
    // to it, and the data it reads still needs the token.
    let page = request(admin, "GET", "/dashboard", None)?;
    ensure!(
        page.status == 200 && page.body.contains("data-metric"),
        "{}",
        page.status
    );
    ensure!(
        !page.body.contains("http://") && !page.body.contains("https://"),
        "the page names a URL"
    );
    ensure!(request(admin, "GET", "/", None)?.status == 303);
    ensure!(request(admin, "GET", "/metrics", None)?.status == 401);

    let stop = Arc::new(AtomicBool::new(false));
    let ran = Arc::new(AtomicU64::new(0));
    let pinned = own.client("rw").await?;
    pinned.batch_execute("CREATE TEMP TABLE dashboard_pin (x int)").await?;
    let refused = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=alice password=wrong dbname=app1 sslmode=disable",
            own.addr("rw")?.port()
        ),
        tokio_postgres::NoTls,
    )
    .await;
    ensure!(refused.is_err(), "a wrong password logged in");
    let mut workers = vec![traffic(own.client("rw").await?, stop.clone(), ran.clone())];

    // Both backends probed up before the page opens (so it starts with no
    // health change to report).
    let backends = backends(ctx);
    let mut up = None;
    for _ in 0..150 {
        up = sum(&metrics(admin, &ctx.admin_token)?, "gatehouse_backend_up", &[]);
        if up == Some(backends.len() as f64) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(
        up == Some(backends.len() as f64),
        "backends up: {up:?} of {}",
        backends.len()
    );

    asks_for_the_token(&mut browser, admin, &ctx.admin_token).await?;
    let session = browser.new_page(1280, 1000).await?;
    let url = format!("http://{admin}/dashboard#token={}", ctx.admin_token);
    browser.navigate(&session, &url).await?;
    wait_scrapes(&mut browser, &session, 2).await?;
    // More clients, one by one, so the chart shows them arrive (slower
    // for a screenshot kept for the documentation, so its chart fills).
    let keep = std::env::var_os("GH_SCREENSHOT_DIR");
    let spacing = Duration::from_millis(if keep.is_some() { 4000 } else { 600 });
    for i in 1..CLIENTS - 1 {
        let endpoint = if i % 3 == 0 { "ro" } else { "rw" };
        workers.push(traffic(own.client(endpoint).await?, stop.clone(), ran.clone()));
        tokio::time::sleep(spacing).await;
    }
    // A rate is over one scrape interval: on a loaded machine (the suite's
    // other cases share the two cores) one interval can see no query end,
    // so the check gets a few intervals to pass.
    let mut scrapes = read_page(&mut browser, &session).await?.scrapes + 3;
    let mut rates = Err(anyhow::anyhow!("not checked"));
    let mut during = None;
    for _ in 0..5 {
        let shown = wait_scrapes(&mut browser, &session, scrapes).await?;
        let m = metrics(admin, &ctx.admin_token)?;
        rates = check_rates(&shown, &m);
        scrapes = shown.scrapes + 1;
        during = Some(shown);
        if rates.is_ok() {
            break;
        }
    }
    rates.context("the page's rates while queries run")?;
    let during = during.context("no scrape read")?;
    ensure!(ran.load(Ordering::Relaxed) > 0, "no query ran");

    // The whole page, while the queries run.
    let height = browser
        .evaluate(&session, "Math.ceil(document.body.getBoundingClientRect().height)")
        .await?
        .as_u64()
        .context("no page height")?;
    browser
        .resize(&session, 1280, u32::try_from(height.clamp(600, 4000))?)
        .await?;
    wait_scrapes(&mut browser, &session, during.scrapes + 1).await?;
    let png = browser.screenshot(&session).await?;
    ensure!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "the screenshot is not a PNG");
    save_screenshot(&png, work)?;
    if let Some(dir) = keep {
        save_screenshot(&png, Path::new(&dir))?;
    }

    stop.store(true, Ordering::Relaxed);
    let mut held = vec![pinned];
    for w in workers {
        held.push(w.await??);
    }
    ensure!(held.len() == CLIENTS);
    let mut last = Vec::new();
    let mut scrapes = read_page(&mut browser, &session).await?.scrapes + 2;
    for _ in 0..5 {
        wait_scrapes(&mut browser, &session, scrapes).await?;
        let shown = read_page(&mut browser, &session).await?;
        let m = metrics(admin, &ctx.admin_token)?;
        let clients = shown.number("client_connections", &[])?;
        last = mismatches(&shown, &m, &backends)?;
        if clients != Some(CLIENTS as f64) {
            last.push(format!("client_connections {clients:?}, {CLIENTS} held open"));
        }
        if last.is_empty() {
            ensure!(
                shown.number("backends_up", &[])? == Some(backends.len() as f64),
                "backends up"
            );
            break;
        }
        scrapes = shown.scrapes + 1;
    }
    ensure!(last.is_empty(), "the page and /metrics differ: {last:#?}");
    drop(held);
    check_requests(&mut browser, &session, admin).await?;
    browser.close().await;
    Ok(())
}

/// Opened without the token (in a tab of its own: the token is kept per
/// tab), the page shows its token form and no number; given the token
/// there, it goes live.
async fn asks_for_the_token(browser: &mut Chromium, admin: SocketAddr, token: &str) -> Result<()> {
    let session = browser.new_page(1000, 700).await?;
    browser.navigate(&session, &format!("http://{admin}/dashboard")).await?;
    let state = "[document.getElementById('login').hidden, document.getElementById('status').textContent, \
                 document.querySelector('header [data-metric=\"scrapes\"]').textContent].join('|')";
    let mut seen = String::new();
    for _ in 0..100 {
        // Until the page has loaded, its elements are not there yet.
        seen = match browser.evaluate(&session, state).await {
            Ok(v) => v.as_str().unwrap_or_default().to_owned(),
            Err(e) => format!("{e:#}"),
        };
        if seen.starts_with("false|") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure!(
        seen == "false|token needed|0",
        "without the token the page shows {seen:?}"
    );
    let submit = format!(
        "document.getElementById('token-input').value = {}; document.getElementById('login').requestSubmit()",
        serde_json::to_string(token)?
    );
    browser.evaluate(&session, &submit).await?;
    for _ in 0..100 {
        seen = browser
            .evaluate(&session, state)
            .await?
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if seen.starts_with("true|live|") {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("given the token, the page shows {seen:?}")
}

/// Everything the page asked for was on the admin listener; its response
/// forbade anything else; its script threw nothing, and nothing was logged
/// as an error.
async fn check_requests(browser: &mut Chromium, session: &str, admin: SocketAddr) -> Result<()> {
    // A round trip, so that every event sent before it has been read.
    browser.evaluate(session, "1").await?;
    let origin = format!("http://{admin}/");
    let requests: Vec<String> = browser
        .events_of(session, "Network.requestWillBeSent")
        .filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_owned))
        .collect();
    ensure!(requests.iter().any(|u| u.ends_with("/metrics")), "{requests:?}");
    let elsewhere: Vec<_> = requests
        .iter()
        .filter(|u| !u.starts_with(&origin) && !u.starts_with("data:"))
        .collect();
    ensure!(elsewhere.is_empty(), "requests to other hosts: {elsewhere:?}");
    let policy = browser
        .events_of(session, "Network.responseReceived")
        .filter(|e| e["params"]["response"]["url"] == format!("{origin}dashboard"))
        .find_map(|e| {
            let headers = e["params"]["response"]["headers"].as_object()?;
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-security-policy"))
                .and_then(|(_, v)| v.as_str().map(str::to_owned))
        })
        .context("no Content-Security-Policy on the page's response")?;
    ensure!(policy.contains("default-src 'self'"), "{policy}");
    let thrown: Vec<_> = browser.events_of(session, "Runtime.exceptionThrown").collect();
    ensure!(thrown.is_empty(), "the page's script threw: {thrown:?}");
    let errors: Vec<_> = browser
        .events_of(session, "Log.entryAdded")
        .filter(|e| e["params"]["entry"]["level"] == "error")
        .collect();
    ensure!(errors.is_empty(), "the browser logged errors: {errors:?}");
    Ok(())
}
