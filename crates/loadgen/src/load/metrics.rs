//! The proxy's own metrics, sampled once a second while a load runs: a
//! `GET /metrics` (Prometheus text format) on its admin address, and the
//! chosen series summed over their other labels
//! (`gatehouse_pool_connections{state="leased"}`: leased connections of
//! every pool).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A scrape answered later than this is a gap in the series.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(500);
/// The largest metrics page read (the digests' series are bounded).
const PAGE_LIMIT: u64 = 8 * 1024 * 1024;

/// The series sampled when none are named: clients, backend connections
/// leased and idle, leases, pinned sessions, sessions waiting for a writer.
pub const DEFAULT_SERIES: &[&str] = &[
    "gatehouse_client_connections",
    "gatehouse_pool_connections{state=\"leased\"}",
    "gatehouse_pool_connections{state=\"idle\"}",
    "gatehouse_backend_leases",
    "gatehouse_pinned_sessions",
    "gatehouse_cluster_waiting_sessions",
];

/// One sampled series: a metric name and the labels it must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// As given (`name{label="v"}`), the series' name in the report.
    pub shown: String,
    metric: String,
    labels: Vec<(String, String)>,
}

impl Series {
    /// `name` or `name{label="value",…}`.
    pub fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        let (metric, labels) = match text.split_once('{') {
            None => (text, Vec::new()),
            Some((metric, rest)) => {
                let Some(inner) = rest.strip_suffix('}') else {
                    bail!("{text}: labels without their closing brace");
                };
                (
                    metric,
                    parse_labels(inner).with_context(|| format!("labels of {text}"))?,
                )
            }
        };
        if metric.is_empty()
            || !metric
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            bail!("{text}: not a metric name");
        }
        Ok(Self {
            shown: text.to_owned(),
            metric: metric.to_owned(),
            labels,
        })
    }
}

/// `a="x",b="y"` (values without escaped quotes, as the proxy's are).
fn parse_labels(inner: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let Some((name, after)) = rest.split_once("=\"") else {
            bail!("expected name=\"value\" at {rest:?}");
        };
        let Some((value, after)) = after.split_once('"') else {
            bail!("unterminated value at {rest:?}");
        };
        out.push((name.trim().to_owned(), value.to_owned()));
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    Ok(out)
}

/// The sum of each series over the exposition `page`; `None` for a series
/// with no sample in it.
pub fn sums(page: &str, series: &[Series]) -> Vec<Option<f64>> {
    let mut out = vec![None; series.len()];
    for line in page.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (head, value) = match line.rsplit_once(' ') {
            Some(parts) => parts,
            None => continue,
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let (metric, labels) = match head.split_once('{') {
            None => (head.trim(), Vec::new()),
            Some((m, rest)) => (
                m,
                parse_labels(rest.trim_end().trim_end_matches('}')).unwrap_or_default(),
            ),
        };
        for (s, sum) in series.iter().zip(out.iter_mut()) {
            let matches = s.metric == metric && s.labels.iter().all(|l| labels.contains(l));
            if matches {
                *sum = Some(sum.unwrap_or(0.0) + value);
            }
        }
    }
    out
}

/// Where the metrics are read and which series are kept.
pub struct Scraper {
    /// `host:port` of the admin API.
    address: String,
    bearer: Option<String>,
    pub series: Vec<Series>,
}

impl Scraper {
    /// `address` is the admin API's `host:port` (an `http://` prefix and a
    /// trailing `/metrics` are accepted).
    pub fn new(address: &str, bearer: Option<String>, series: Vec<Series>) -> Self {
        let address = address.trim().trim_start_matches("http://");
        let address = address.trim_end_matches('/').trim_end_matches("/metrics").to_owned();
        Self {
            address,
            bearer,
            series,
        }
    }

    /// Each series now, or all `None` when the page could not be read
    /// within the timeout.
    pub async fn sample(&self) -> Vec<Option<f64>> {
        match tokio::time::timeout(SCRAPE_TIMEOUT, self.page()).await {
            Ok(Ok(page)) => sums(&page, &self.series),
            _ => vec![None; self.series.len()],
        }
    }

    async fn page(&self) -> Result<String> {
        let mut stream = TcpStream::connect(&self.address).await?;
        let auth = self
            .bearer
            .as_deref()
            .map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let request = format!(
            "GET /metrics HTTP/1.0\r\nHost: {}\r\n{auth}Connection: close\r\n\r\n",
            self.address
        );
        stream.write_all(request.as_bytes()).await?;
        let mut body = Vec::new();
        stream.take(PAGE_LIMIT).read_to_end(&mut body).await?;
        let text = String::from_utf8_lossy(&body);
        let Some((head, page)) = text.split_once("\r\n\r\n") else {
            bail!("no HTTP header end");
        };
        if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
            bail!("{}", head.lines().next().unwrap_or_default());
        }
        Ok(page.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP gatehouse_pool_connections Backend connections per pool, idle or leased.
# TYPE gatehouse_pool_connections gauge
gatehouse_pool_connections{cluster=\"c\",backend=\"a:1\",user=\"u\",database=\"d\",state=\"idle\"} 3
gatehouse_pool_connections{cluster=\"c\",backend=\"a:1\",user=\"u\",database=\"d\",state=\"leased\"} 1
gatehouse_pool_connections{cluster=\"c\",backend=\"b:1\",user=\"u\",database=\"e\",state=\"idle\"} 2
gatehouse_client_connections{endpoint=\"rw\"} 7
gatehouse_client_connections_accepted_total{endpoint=\"rw\"} 70
# EOF
";

    #[test]
    fn series_sum_over_their_other_labels() -> Result<()> {
        let series: Vec<Series> = [
            "gatehouse_pool_connections{state=\"idle\"}",
            "gatehouse_pool_connections",
            "gatehouse_client_connections",
            "gatehouse_pinned_sessions",
        ]
        .iter()
        .map(|s| Series::parse(s))
        .collect::<Result<_>>()?;
        assert_eq!(sums(PAGE, &series), [Some(5.0), Some(6.0), Some(7.0), None]);
        Ok(())
    }

    #[test]
    fn malformed_series_are_refused() {
        for bad in ["", "a b", "x{state=\"idle\"", "x{state=idle}"] {
            assert!(Series::parse(bad).is_err(), "{bad}");
        }
        assert!(DEFAULT_SERIES.iter().all(|s| Series::parse(s).is_ok()));
    }
}
