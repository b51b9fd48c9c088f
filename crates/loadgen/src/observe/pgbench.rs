//! pgbench's output, line by line: the progress lines of `-P 1` (on
//! stderr: `progress: 1.0 s, 4117.9 tps, lat 2.424 ms stddev 1.234, 0
//! failed`, the failures only from PostgreSQL 15 on, and `lag`, `skipped`,
//! `retried` parts with `-R`, `-L`, `--max-tries`) and the final summary
//! (on stdout: clients, `duration`, `number of transactions actually
//! processed`, `number of failed transactions`, `latency average`). pgbench gives no
//! percentile and no maximum: only a mean, each second and overall.

use super::{Progress, Totals, first_number, number};

/// What pgbench has printed so far.
#[derive(Debug, Default)]
pub struct Parser {
    /// Progress lines seen (their second when the time is a Unix
    /// timestamp, `--progress-timestamp`).
    seen: u64,
    pub totals: Totals,
}

/// A progress time above this is a timestamp, not seconds into the run.
const TIMESTAMP_AFTER_S: f64 = 1e6;

impl Parser {
    /// Reads one line: a progress line is returned, anything of the
    /// summary goes into [`Parser::totals`].
    pub fn line(&mut self, line: &str) -> Option<Progress> {
        let text = line.trim();
        if let Some(rest) = text.strip_prefix("progress:") {
            let mut p = progress(rest)?;
            self.seen += 1;
            if p.second as f64 > TIMESTAMP_AFTER_S {
                p.second = self.seen;
            }
            return Some(p);
        }
        let t = &mut self.totals;
        if let Some(rest) = text.strip_prefix("pgbench (") {
            // `pgbench (15.18 (Debian 15.18-0+deb12u1))`, or with the
            // server's: `pgbench (16.1, server 15.4)`.
            t.version = rest
                .split([' ', ',', ')'])
                .next()
                .filter(|v| !v.is_empty())
                .map(str::to_owned);
        } else if let Some(rest) = text.strip_prefix("number of clients:") {
            t.users = number(rest).map(|n| n.round() as u32);
        } else if let Some(rest) = text.strip_prefix("number of transactions actually processed:") {
            // `71324`, or with -t: `1000/1000`.
            t.transactions = rest.trim().split('/').next().and_then(number).map(|n| n.round() as u64);
        } else if let Some(rest) = text.strip_prefix("number of failed transactions:") {
            t.failures = first_number(rest).map(|n| n.round() as u64);
        } else if let Some(rest) = text.strip_prefix("duration:") {
            t.duration_s = rest.trim().strip_suffix('s').and_then(number);
        } else if let Some(rest) = text.strip_prefix("latency average =") {
            t.mean_ms = rest.trim().strip_suffix("ms").and_then(number);
        }
        None
    }
}

/// What follows `progress:` — `1.0 s, 4117.9 tps, lat 2.424 ms stddev
/// 1.234, 0 failed, lag 0.154 ms, 0 retried, 0 retries`.
fn progress(rest: &str) -> Option<Progress> {
    let mut parts = rest.split(',').map(str::trim);
    let second = number(parts.next()?.strip_suffix('s')?)?;
    let (mut tps, mut failed, mut mean_ms) = (None, 0, None);
    for part in parts {
        let words: Vec<&str> = part.split_whitespace().collect();
        match words.as_slice() {
            [n, "tps"] => tps = number(n),
            ["lat", ms, "ms", ..] => mean_ms = number(ms),
            [n, "failed"] => failed = number(n).map_or(0, |n| n.round() as u64),
            _ => {}
        }
    }
    let transactions = tps?.round() as u64;
    Some(Progress {
        second: second.round() as u64,
        users: None,
        transactions,
        failures: failed,
        percentile: None,
        // A second without a transaction shows `lat 0.000`: no latency.
        mean_ms: mean_ms.filter(|_| transactions > 0),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `pgbench -S -T 3 -P 1 -c 2` against the test kit's PostgreSQL 15,
    /// stdout and stderr as they interleave.
    pub const RUN: &str = "pgbench (15.18 (Debian 15.18-0+deb12u1))
starting vacuum...end.
progress: 1.0 s, 21449.1 tps, lat 0.088 ms stddev 0.282, 0 failed
progress: 2.0 s, 24541.0 tps, lat 0.080 ms stddev 0.245, 0 failed
progress: 3.0 s, 25332.7 tps, lat 0.076 ms stddev 0.284, 0 failed
transaction type: <builtin: select only>
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
duration: 3 s
number of transactions actually processed: 71324
number of failed transactions: 0 (0.000%)
latency average = 0.081 ms
latency stddev = 0.271 ms
initial connection time = 29.020 ms
tps = 23983.160273 (without initial connection time)
";

    #[test]
    fn progress_lines_of_every_form_give_tps_failures_and_the_mean() {
        let mut p = Parser::default();
        let line = p.line("progress: 1.0 s, 4117.9 tps, lat 2.424 ms stddev 1.234, 3 failed");
        assert_eq!(
            line,
            Some(Progress {
                second: 1,
                users: None,
                transactions: 4118,
                failures: 3,
                percentile: None,
                mean_ms: Some(2.424),
            })
        );
        // Before PostgreSQL 15: no failures.
        let old = p.line("progress: 2.0 s, 10.0 tps, lat 1.500 ms stddev 0.100");
        assert_eq!(old.map(|l| (l.second, l.transactions, l.failures)), Some((2, 10, 0)));
        // With -R and --max-tries.
        let lag = p.line(
            "progress: 5.0 s, 466.9 tps, lat 0.382 ms stddev 0.543, 1 failed, lag 0.154 ms, 0 retried, 0 retries",
        );
        assert_eq!(
            lag.map(|l| (l.second, l.transactions, l.failures, l.mean_ms)),
            Some((5, 467, 1, Some(0.382)))
        );
        let idle = p.line("progress: 6.0 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed");
        assert_eq!(idle.map(|l| (l.transactions, l.mean_ms)), Some((0, None)));
        // --progress-timestamp: the fifth progress line is the fifth second.
        let stamped = p.line("progress: 1700000000.123 s, 10.0 tps, lat 1.000 ms stddev 0.100, 0 failed");
        assert_eq!(stamped.map(|l| l.second), Some(5));
        assert_eq!(p.line("progress: nonsense"), None);
    }

    #[test]
    fn a_whole_run_gives_its_seconds_and_summary() {
        let mut p = Parser::default();
        let seconds: Vec<Progress> = RUN.lines().filter_map(|l| p.line(l)).collect();
        let per: Vec<(u64, u64)> = seconds.iter().map(|s| (s.second, s.transactions)).collect();
        assert_eq!(per, [(1, 21449), (2, 24541), (3, 25333)]);
        let t = &p.totals;
        assert_eq!(t.version.as_deref(), Some("15.18"));
        assert_eq!((t.users, t.transactions, t.failures), (Some(2), Some(71324), Some(0)));
        assert_eq!((t.mean_ms, t.max_ms, t.percentile), (Some(0.081), None, None));
        assert_eq!(t.duration_s, Some(3.0));
        assert!(t.histogram.is_empty());
        let mut fixed = Parser::default();
        fixed.line("number of transactions actually processed: 1000/1000");
        fixed.line("number of failed transactions: 7 (0.700%)");
        assert_eq!(
            (fixed.totals.transactions, fixed.totals.failures),
            (Some(1000), Some(7))
        );
    }
}
