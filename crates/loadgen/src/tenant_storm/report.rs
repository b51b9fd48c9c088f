//! Results of a tenant storm and their rendering: one [`StormRow`] per target
//! (successful connections per second of wall time, latency percentiles,
//! errors, the measured process's CPU per 1,000 connections), the ratio of
//! each target to the first, as a whitespace-separated text table (one token
//! per cell, so scripts can read it with awk) and as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::json::{number, object, string};
use crate::series::Series;
use crate::stats::{Summary, ms};

/// One target's results, pooled over rounds.
pub struct StormRow {
    pub target: String,
    pub series: Series,
    /// Wall time of the target's phases, from start until the last virtual
    /// user finished.
    pub elapsed: Duration,
    /// CPU time of the target's process (`--target-pid`) during its phases.
    pub cpu: Option<Duration>,
}

impl StormRow {
    /// Successful connect+query cycles per second of wall time.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.series.samples.len() as f64 / secs
        } else {
            0.0
        }
    }

    /// Milliseconds of the process's CPU per 1,000 successful connections.
    pub fn cpu_ms_per_1k(&self) -> Option<f64> {
        let n = self.series.samples.len();
        (n > 0).then_some(())?;
        Some(ms(self.cpu?) * 1000.0 / n as f64)
    }
}

pub struct StormReport {
    pub params: Vec<(String, String)>,
    pub rows: Vec<StormRow>,
}

/// A target against the first one.
struct Ratio {
    rate: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
}

fn divide(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

impl StormReport {
    fn ratio(&self, row: &StormRow) -> Option<Ratio> {
        let base = self.rows.first()?;
        let (b, t) = (base.series.samples.summary(), row.series.samples.summary());
        let quantile = |f: fn(&Summary) -> Duration| divide(ms(f(t.as_ref()?)), ms(f(b.as_ref()?)));
        Some(Ratio {
            rate: divide(row.rate(), base.rate()),
            p50: quantile(|s| s.p50),
            p99: quantile(|s| s.p99),
        })
    }

    /// Header, table, ratio lines and first errors.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let params: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "tenant-storm: {}", params.join(" "));
        let tw = self.rows.iter().map(|r| r.target.len()).chain([6]).max().unwrap_or(6);
        let _ = write!(out, "{:<tw$}", "target");
        for h in [
            "conn/s",
            "attempts",
            "errors",
            "mean_ms",
            "p50_ms",
            "p99_ms",
            "max_ms",
            "cpu_ms/1k",
        ] {
            let _ = write!(out, " {h:>9}");
        }
        out.push('\n');
        for row in &self.rows {
            let s = &row.series;
            let _ = write!(
                out,
                "{:<tw$} {:>9.1} {:>9} {:>9}",
                row.target,
                row.rate(),
                s.attempts,
                s.errors
            );
            let stats: Vec<String> = match s.samples.summary() {
                Some(x) => [x.mean, x.p50, x.p99, x.max]
                    .iter()
                    .map(|&d| format!("{:.3}", ms(d)))
                    .collect(),
                None => vec!["-".to_string(); 4],
            };
            for cell in stats {
                let _ = write!(out, " {cell:>9}");
            }
            let cpu = row.cpu_ms_per_1k().map_or("-".to_string(), |c| format!("{c:.1}"));
            let _ = writeln!(out, " {cpu:>9}");
        }
        if let Some((base, others)) = self.rows.split_first()
            && !others.is_empty()
        {
            out.push('\n');
            for row in others {
                let r = self.ratio(row);
                let f = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.2}x"));
                let (rate, p50, p99) = match r {
                    Some(r) => (f(r.rate), f(r.p50), f(r.p99)),
                    None => (f(None), f(None), f(None)),
                };
                let _ = writeln!(
                    out,
                    "ratio {}/{}: conn/s {rate}, p50 {p50}, p99 {p99}",
                    row.target, base.target
                );
            }
        }
        let failed: Vec<&StormRow> = self.rows.iter().filter(|r| r.series.errors > 0).collect();
        if !failed.is_empty() {
            out.push('\n');
            for row in failed {
                let s = &row.series;
                let _ = writeln!(
                    out,
                    "errors: {}: {}/{} failed (first: {})",
                    row.target,
                    s.errors,
                    s.attempts,
                    s.first_error.as_deref().unwrap_or("?")
                );
            }
        }
        out
    }

    /// The report as a JSON document.
    pub fn render_json(&self) -> String {
        let mut out = String::from("{\n  \"experiment\": \"tenant-storm\",\n");
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{}: {}", string(k), string(v)))
            .collect();
        let _ = writeln!(out, "  \"params\": {{{}}},", params.join(", "));
        let baseline = self.rows.first().map_or("null".to_string(), |r| string(&r.target));
        let _ = writeln!(out, "  \"baseline\": {baseline},");
        let rows: Vec<String> = self.rows.iter().map(|r| self.json_row(r)).collect();
        let _ = writeln!(out, "  \"results\": [\n{}\n  ]", rows.join(",\n"));
        out.push_str("}\n");
        out
    }

    fn json_row(&self, row: &StormRow) -> String {
        let s = &row.series;
        let summary = s.samples.summary();
        let stat = |f: fn(&Summary) -> Duration| summary.as_ref().map(|x| ms(f(x)));
        let ratio = self.ratio(row);
        let fields = [
            ("target", string(&row.target)),
            ("attempts", s.attempts.to_string()),
            ("connections", s.samples.len().to_string()),
            ("errors", s.errors.to_string()),
            ("elapsed_s", number(Some(row.elapsed.as_secs_f64()))),
            ("connections_per_s", number(Some(row.rate()))),
            ("mean_ms", number(stat(|x| x.mean))),
            ("p50_ms", number(stat(|x| x.p50))),
            ("p90_ms", number(stat(|x| x.p90))),
            ("p99_ms", number(stat(|x| x.p99))),
            ("max_ms", number(stat(|x| x.max))),
            ("cpu_ms_per_1k", number(row.cpu_ms_per_1k())),
            ("rate_ratio", number(ratio.as_ref().and_then(|r| r.rate))),
            ("p50_ratio", number(ratio.as_ref().and_then(|r| r.p50))),
            ("p99_ratio", number(ratio.as_ref().and_then(|r| r.p99))),
            (
                "first_error",
                s.first_error.as_deref().map_or("null".to_string(), string),
            ),
        ];
        object(&fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(target: &str, millis: &[u64], errors: u64, elapsed_s: u64, cpu_ms: Option<u64>) -> StormRow {
        let mut series = Series::default();
        for &m in millis {
            series.record(Ok(Duration::from_millis(m)));
        }
        for _ in 0..errors {
            series.record(Err(anyhow::anyhow!("too many clients")));
        }
        StormRow {
            target: target.into(),
            series,
            elapsed: Duration::from_secs(elapsed_s),
            cpu: cpu_ms.map(Duration::from_millis),
        }
    }

    fn sample() -> StormReport {
        StormReport {
            params: vec![("tenants".into(), "2".into())],
            rows: vec![
                row("direct", &[10, 20, 30, 40], 1, 2, None),
                row("gatehouse", &[1, 2, 3, 4, 5, 6, 7, 8], 0, 2, Some(4)),
            ],
        }
    }

    #[test]
    fn rate_and_cpu_per_thousand() {
        let r = sample();
        assert!((r.rows[0].rate() - 2.0).abs() < 1e-12);
        assert!((r.rows[1].rate() - 4.0).abs() < 1e-12);
        assert_eq!(r.rows[0].cpu_ms_per_1k(), None);
        // 4 ms over 8 connections: 500 ms per 1,000.
        assert!((r.rows[1].cpu_ms_per_1k().unwrap() - 500.0).abs() < 1e-9);
        let empty = row("x", &[], 3, 1, Some(5));
        assert_eq!(empty.rate(), 0.0);
        assert_eq!(empty.cpu_ms_per_1k(), None);
    }

    #[test]
    fn text_table_has_one_token_per_cell_and_ratios() {
        let text = sample().render_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "tenant-storm: tenants=2");
        let head: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(head.len(), 9);
        let direct: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            direct,
            ["direct", "2.0", "5", "1", "25.000", "20.000", "40.000", "40.000", "-"]
        );
        let gh: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            gh,
            [
                "gatehouse",
                "4.0",
                "8",
                "0",
                "4.500",
                "4.000",
                "8.000",
                "8.000",
                "500.0"
            ]
        );
        assert!(text.contains("ratio gatehouse/direct: conn/s 2.00x, p50 0.20x, p99 0.20x"));
        assert!(text.contains("errors: direct: 1/5 failed (first: too many clients)"));
    }

    #[test]
    fn json_has_rates_and_ratios() {
        let json = sample().render_json();
        assert!(json.contains(r#""baseline": "direct","#));
        assert!(json.contains(r#""target": "gatehouse", "attempts": 8, "connections": 8, "errors": 0"#));
        assert!(json.contains(r#""connections_per_s": 4.000000"#));
        assert!(json.contains(r#""rate_ratio": 2.000000, "p50_ratio": 0.200000"#));
        assert!(json.contains(r#""first_error": "too many clients""#));
        let depth = json.chars().fold(0i32, |d, c| match c {
            '{' | '[' => d + 1,
            '}' | ']' => d - 1,
            _ => d,
        });
        assert_eq!(depth, 0);
    }
}
