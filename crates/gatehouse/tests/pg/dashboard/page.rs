//! Reading the dashboard and checking it against `/metrics`: what the page
//! shows (its `data-metric` elements, read in the browser), samples summed
//! from a `/metrics` scrape, the comparisons of the two, and saving the
//! screenshot.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::http::request;
use serde_json::Value;

use crate::chromium::Chromium;

/// The sum of the samples of `name` whose labels include every one of
/// `labels` (`key="value"`), or `None` when no sample of `name` is there.
pub(super) fn sum(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(name) else { continue };
        let (labelset, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once("} ") {
                Some(p) => p,
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(v) => ("", v),
                None => continue,
            },
        };
        if !labels.iter().all(|l| labelset.split(',').any(|p| p == *l)) {
            continue;
        }
        if let Ok(v) = value.trim().parse::<f64>() {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

/// Every `data-metric` element of the page: (metric, labels of its row,
/// text). Before the page has drawn its header (just after navigating)
/// the scrape count reads 0, so a wait for scrapes goes on waiting.
const READ_PAGE: &str = r#"JSON.stringify({
  scrapes: Number((document.querySelector('header [data-metric="scrapes"]') || { textContent: '0' }).textContent),
  shown: [...document.querySelectorAll('[data-metric]')].map((e) => [
    e.dataset.metric,
    (e.closest('[data-labels]') || { dataset: {} }).dataset.labels || '',
    e.textContent.trim(),
  ]),
})"#;

pub(super) struct Shown {
    pub(super) scrapes: u64,
    values: Vec<(String, String, String)>,
}

impl Shown {
    /// The text of `metric` in the row whose labels include `labels` (or
    /// outside any row when `labels` is empty).
    pub(super) fn text(&self, metric: &str, labels: &[&str]) -> Option<&str> {
        self.values
            .iter()
            .find(|(m, l, _)| {
                m == metric
                    && if labels.is_empty() {
                        l.is_empty()
                    } else {
                        labels.iter().all(|want| l.split(',').any(|p| p == *want))
                    }
            })
            .map(|(_, _, t)| t.as_str())
    }

    /// The number shown for `metric`, or `None` for "—".
    pub(super) fn number(&self, metric: &str, labels: &[&str]) -> Result<Option<f64>> {
        let text = self
            .text(metric, labels)
            .with_context(|| format!("the page shows no {metric} {labels:?}"))?;
        if text == "\u{2014}" {
            return Ok(None);
        }
        Ok(Some(
            text.parse()
                .with_context(|| format!("{metric} {labels:?} shows {text:?}"))?,
        ))
    }
}

pub(super) async fn read_page(browser: &mut Chromium, session: &str) -> Result<Shown> {
    let v = browser.evaluate(session, READ_PAGE).await?;
    let v: Value = serde_json::from_str(v.as_str().context("not a string")?)?;
    let values = v["shown"]
        .as_array()
        .context("no shown values")?
        .iter()
        .map(|e| {
            let s = |i: usize| e[i].as_str().unwrap_or_default().to_owned();
            (s(0), s(1), s(2))
        })
        .collect();
    Ok(Shown {
        scrapes: v["scrapes"].as_u64().unwrap_or(0),
        values,
    })
}

/// Waits (up to 60 s) until the page has taken `scrapes` scrapes.
pub(super) async fn wait_scrapes(browser: &mut Chromium, session: &str, scrapes: u64) -> Result<Shown> {
    for _ in 0..300 {
        let shown = read_page(browser, session).await?;
        if shown.scrapes >= scrapes {
            return Ok(shown);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("the page did not reach {scrapes} scrapes in 60 s")
}

pub(super) fn metrics(admin: SocketAddr, token: &str) -> Result<String> {
    let r = request(admin, "GET", "/metrics", Some(token))?;
    ensure!(r.status == 200, "/metrics: {} {}", r.status, r.body);
    Ok(r.body)
}

/// Database connections as the page counts them: the newer gauge if the
/// proxy has it, else the pools' connections.
pub(super) fn database_connections(m: &str, labels: &[&str]) -> Option<f64> {
    sum(m, "gatehouse_database_connections", labels).or_else(|| sum(m, "gatehouse_pool_connections", labels))
}

/// The rates the page shows while queries run: positive, and no more than
/// the counter's whole count over half a second; "—" for a counter or
/// histogram this proxy does not export.
pub(super) fn check_rates(shown: &Shown, m: &str) -> Result<()> {
    for (metric, counter) in [
        ("leases_per_second", "gatehouse_backend_routed_total"),
        ("transactions_per_second", "gatehouse_transactions_total"),
        ("queries_per_second", "gatehouse_queries_total"),
        ("accepted_per_second", "gatehouse_client_connections_accepted_total"),
    ] {
        let rate = shown.number(metric, &[])?;
        match sum(m, counter, &[]) {
            Some(total) if metric != "accepted_per_second" => {
                let rate = rate.with_context(|| format!("{metric} shows no rate while queries run"))?;
                ensure!(
                    rate > 0.0 && rate <= total * 2.0,
                    "{metric} {rate}/s, {counter} {total}"
                );
            }
            Some(total) => {
                let rate = rate.with_context(|| format!("{metric} shows no rate"))?;
                ensure!(
                    rate >= 0.0 && rate <= total * 2.0,
                    "{metric} {rate}/s, {counter} {total}"
                );
            }
            None => ensure!(rate.is_none(), "{metric} shows {rate:?} with no {counter}"),
        }
    }
    for (p50, p99, histogram) in [
        ("query_p50_ms", "query_p99_ms", "gatehouse_query_seconds_bucket"),
        (
            "lease_wait_p50_ms",
            "lease_wait_p99_ms",
            "gatehouse_lease_wait_seconds_bucket",
        ),
    ] {
        let (low, high) = (shown.number(p50, &[])?, shown.number(p99, &[])?);
        if sum(m, histogram, &[]).is_some() {
            let (low, high) = (low.context(p50)?, high.context(p99)?);
            ensure!(low >= 0.0 && high >= low, "{p50} {low} ms, {p99} {high} ms");
        } else {
            ensure!(low.is_none() && high.is_none(), "{p50}/{p99} shown with no {histogram}");
        }
    }
    Ok(())
}

/// What the page shows against one scrape of `/metrics` once the traffic
/// has stopped: every mismatch, as text (none: they agree).
pub(super) fn mismatches(shown: &Shown, m: &str, backends: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut health = Vec::new();
    let mut expect = |what: &str, labels: &[&str], want: Option<f64>| -> Result<()> {
        let got = shown.number(what, labels)?;
        if got != want {
            out.push(format!("{what} {labels:?}: page {got:?}, metrics {want:?}"));
        }
        Ok(())
    };
    expect("client_connections", &[], sum(m, "gatehouse_client_connections", &[]))?;
    expect("database_connections", &[], database_connections(m, &[]))?;
    expect("backends_up", &[], sum(m, "gatehouse_backend_up", &[]))?;
    expect(
        "waiting_clients",
        &[],
        sum(m, "gatehouse_cluster_waiting_sessions", &[]),
    )?;
    expect("errors_total", &[], sum(m, "gatehouse_client_errors_total", &[]))?;
    expect("pinned_total", &[], sum(m, "gatehouse_pinned_sessions_total", &[]))?;
    // The client held with its temporary table is pinned now.
    let pinned_now = sum(m, "gatehouse_sessions_pinned", &["reason=\"temp_table\""]);
    expect("pinned_now", &[], sum(m, "gatehouse_sessions_pinned", &[]))?;
    expect(
        "accepted_total",
        &[],
        sum(m, "gatehouse_client_connections_accepted_total", &[]),
    )?;
    let applied = sum(m, "gatehouse_reloads_total", &["result=\"applied\""]);
    expect("reloads_applied", &[], applied)?;
    expect(
        "pinned_total",
        &["reason=temp_table"],
        sum(m, "gatehouse_pinned_sessions_total", &["reason=\"temp_table\""]),
    )?;
    expect(
        "errors_total",
        &["kind=auth", "condition=invalid_password"],
        sum(
            m,
            "gatehouse_client_errors_total",
            &["kind=\"auth\"", "condition=\"invalid_password\""],
        ),
    )?;
    for b in backends {
        let row = format!("backend={b}");
        let quoted = format!("backend=\"{b}\"");
        expect(
            "backend_connections",
            &[&row],
            database_connections(m, &["cluster=\"main\"", &quoted]),
        )?;
        let up = sum(m, "gatehouse_backend_up", &["cluster=\"main\"", &quoted]);
        let shows = shown.text("backend_up", &[&row]);
        if shows != up.map(|u| if u == 1.0 { "up" } else { "down" }) {
            health.push(format!("backend_up {b}: page {shows:?}, metrics {up:?}"));
        }
    }
    out.extend(health);
    if pinned_now != Some(1.0) {
        out.push(format!(
            "gatehouse_sessions_pinned{{reason=\"temp_table\"}} is {pinned_now:?}, not 1"
        ));
    }
    Ok(out)
}

pub(super) fn save_screenshot(png: &[u8], dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("dashboard.png");
    std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("dashboard screenshot: {} ({} bytes)", path.display(), png.len());
    Ok(())
}
