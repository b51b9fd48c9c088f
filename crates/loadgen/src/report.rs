//! Experiment results and their rendering: the [`Report`] rows, ratio lines
//! against the baseline (first) target, and the plain-text table. JSON
//! output lives in [`json`].

pub mod json;

use std::fmt::Write as _;
use std::time::Duration;

use crate::series::Series;
use crate::stats::{Summary, ms};

/// One (target, measurement) result.
pub struct Row {
    pub target: String,
    pub measurement: String,
    pub series: Series,
}

/// All rows of one experiment run, in target-then-measurement order.
pub struct Report {
    pub experiment: String,
    /// Run parameters, printed in the header and the JSON.
    pub params: Vec<(String, String)>,
    pub rows: Vec<Row>,
}

/// A target compared to the baseline for one measurement.
pub struct Ratio<'a> {
    pub measurement: &'a str,
    pub target: &'a str,
    pub baseline: &'a str,
    pub target_mean: Option<Duration>,
    pub baseline_mean: Option<Duration>,
}

impl Ratio<'_> {
    /// `target mean / baseline mean`.
    pub fn factor(&self) -> Option<f64> {
        let base = ms(self.baseline_mean?);
        let target = ms(self.target_mean?);
        (base > 0.0).then_some(target / base)
    }

    /// `target mean - baseline mean`, in ms per iteration.
    pub fn added_ms(&self) -> Option<f64> {
        Some(ms(self.target_mean?) - ms(self.baseline_mean?))
    }
}

impl Report {
    pub fn new(experiment: &str, params: Vec<(String, String)>) -> Self {
        Self {
            experiment: experiment.to_string(),
            params,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, target: &str, measurement: &str, series: Series) {
        self.rows.push(Row {
            target: target.to_string(),
            measurement: measurement.to_string(),
            series,
        });
    }

    /// Distinct values of `key` in first-appearance order.
    fn distinct<'a>(&'a self, key: impl Fn(&'a Row) -> &'a str) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for row in &self.rows {
            let k = key(row);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }

    pub fn targets(&self) -> Vec<&str> {
        self.distinct(|r| &r.target)
    }

    pub fn measurements(&self) -> Vec<&str> {
        self.distinct(|r| &r.measurement)
    }

    fn row(&self, target: &str, measurement: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.target == target && r.measurement == measurement)
    }

    /// Every non-baseline target against the first target, per measurement.
    pub fn ratios(&self) -> Vec<Ratio<'_>> {
        let targets = self.targets();
        let Some((&baseline, others)) = targets.split_first() else {
            return Vec::new();
        };
        let mean = |t, m| self.row(t, m).and_then(|r| r.series.samples.mean());
        let mut out = Vec::new();
        for measurement in self.measurements() {
            for &target in others {
                out.push(Ratio {
                    measurement,
                    target,
                    baseline,
                    target_mean: mean(target, measurement),
                    baseline_mean: mean(baseline, measurement),
                });
            }
        }
        out
    }

    /// Rows whose failed fraction exceeds `max_rate`.
    pub fn failing_rows(&self, max_rate: f64) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.series.failure_rate() > max_rate)
            .collect()
    }

    /// Header, table, ratio lines and error lines.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let params: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "{}: {}", self.experiment, params.join(" "));
        out.push_str(&self.render_table());
        let ratios = self.ratios();
        if !ratios.is_empty() {
            out.push('\n');
            for ratio in &ratios {
                let _ = writeln!(out, "{}", render_ratio(ratio));
            }
        }
        let failed: Vec<&Row> = self.rows.iter().filter(|r| r.series.errors > 0).collect();
        if !failed.is_empty() {
            out.push('\n');
            for row in failed {
                let s = &row.series;
                let _ = writeln!(
                    out,
                    "errors: {} {}: {}/{} failed (first: {})",
                    row.target,
                    row.measurement,
                    s.errors,
                    s.attempts,
                    s.first_error.as_deref().unwrap_or("?")
                );
            }
        }
        out
    }

    fn render_table(&self) -> String {
        const HEAD: [&str; 9] = [
            "samples", "errors", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "iter/s", "",
        ];
        let tw = self.rows.iter().map(|r| r.target.len()).chain([6]).max().unwrap_or(6);
        let mw = self
            .rows
            .iter()
            .map(|r| r.measurement.len())
            .chain([11])
            .max()
            .unwrap_or(11);
        let mut out = format!("{:<tw$}  {:<mw$}", "target", "measurement");
        for h in &HEAD[..8] {
            let _ = write!(out, " {h:>9}");
        }
        out.push('\n');
        for row in &self.rows {
            let s = &row.series;
            let _ = write!(out, "{:<tw$}  {:<mw$}", row.target, row.measurement);
            let _ = write!(out, " {:>9} {:>9}", s.samples.len(), s.errors);
            for cell in stat_cells(s.samples.summary()) {
                let _ = write!(out, " {cell:>9}");
            }
            out.push('\n');
        }
        out
    }
}

/// mean, p50, p90, p99, max (ms, 3 decimals) and throughput (1 decimal).
fn stat_cells(summary: Option<Summary>) -> Vec<String> {
    match summary {
        Some(s) => {
            let mut cells: Vec<String> = [s.mean, s.p50, s.p90, s.p99, s.max]
                .iter()
                .map(|&d| format!("{:.3}", ms(d)))
                .collect();
            cells.push(format!("{:.1}", s.throughput()));
            cells
        }
        None => vec!["-".to_string(); 6],
    }
}

fn render_ratio(r: &Ratio<'_>) -> String {
    let head = format!("{}: {}/{} mean =", r.measurement, r.target, r.baseline);
    match (r.factor(), r.added_ms(), r.target_mean, r.baseline_mean) {
        (Some(f), Some(added), Some(t), Some(b)) => format!(
            "{head} {f:.2}x ({:.3} ms vs {:.3} ms; added {added:+.3} ms per iteration)",
            ms(t),
            ms(b)
        ),
        _ => format!("{head} n/a (no successful samples to compare)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of the given per-iteration microseconds plus `errors` failures.
    pub(super) fn series(micros: &[u64], errors: u64) -> Series {
        let mut s = Series::default();
        for &us in micros {
            s.record(Ok(Duration::from_micros(us)));
        }
        for _ in 0..errors {
            s.record(Err(anyhow::anyhow!("refused")));
        }
        s
    }

    pub(super) fn sample_report() -> Report {
        let mut r = Report::new("connect-cost", vec![("iterations".into(), "2".into())]);
        r.push("direct", "connect", series(&[2000, 4000], 0));
        r.push("direct", "query", series(&[100, 100], 0));
        r.push("gatehouse", "connect", series(&[1000, 2000], 1));
        r.push("gatehouse", "query", series(&[150, 150], 0));
        r
    }

    #[test]
    fn table_rows_are_aligned_with_three_decimals() {
        let text = sample_report().render_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "connect-cost: iterations=2");
        assert_eq!(
            lines[1],
            "target     measurement   samples    errors   mean_ms    p50_ms    p90_ms    p99_ms    max_ms    iter/s"
        );
        assert_eq!(
            lines[2],
            "direct     connect             2         0     3.000     2.000     4.000     4.000     4.000     333.3"
        );
        assert_eq!(
            lines[4],
            "gatehouse  connect             2         1     1.500     1.000     2.000     2.000     2.000     666.7"
        );
    }

    #[test]
    fn ratios_compare_to_first_target() {
        let text = sample_report().render_text();
        assert!(
            text.contains(
                "connect: gatehouse/direct mean = 0.50x (1.500 ms vs 3.000 ms; added -1.500 ms per iteration)"
            )
        );
        assert!(
            text.contains("query: gatehouse/direct mean = 1.50x (0.150 ms vs 0.100 ms; added +0.050 ms per iteration)")
        );
        assert!(text.contains("errors: gatehouse connect: 1/3 failed (first: refused)"));
    }

    #[test]
    fn single_target_has_no_ratios_and_empty_series_prints_dashes() {
        let mut r = Report::new("connect-cost", Vec::new());
        r.push("direct", "connect", series(&[], 3));
        let text = r.render_text();
        assert!(r.ratios().is_empty());
        assert!(!text.contains(" mean ="));
        assert_eq!(
            text.lines().nth(2),
            Some("direct  connect             0         3         -         -         -         -         -         -")
        );
        assert_eq!(r.failing_rows(0.1).len(), 1);
    }

    #[test]
    fn ratio_without_samples_is_not_available() {
        let mut r = Report::new("connect-cost", Vec::new());
        r.push("direct", "connect", series(&[1000], 0));
        r.push("proxy", "connect", series(&[], 2));
        let text = r.render_text();
        assert!(text.contains("connect: proxy/direct mean = n/a"));
    }
}
