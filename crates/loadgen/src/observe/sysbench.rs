//! sysbench 1.0's output, line by line: the per-second progress lines of
//! `--report-interval=1` (`[ 1s ] thds: 8 tps: … lat (ms,99%): … err/s: …`)
//! and, at the end, the `--histogram=on` block (`value |bars count`, values
//! in milliseconds), the statistics (`transactions:`, `ignored errors:`,
//! `total time:`) and the `Latency (ms):` block (min, avg, max, the
//! `--percentile` one, sum).

use super::{Progress, Totals, first_number, number};

/// The block of the final report a line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Block {
    #[default]
    Other,
    /// Inside `Latency histogram (values are in milliseconds)`.
    Histogram,
    /// Inside `Latency (ms):`.
    Latency,
}

/// What sysbench has printed so far.
#[derive(Debug, Default)]
pub struct Parser {
    block: Block,
    pub totals: Totals,
}

impl Parser {
    /// Reads one line: a progress line is returned, anything of the final
    /// report goes into [`Parser::totals`].
    pub fn line(&mut self, line: &str) -> Option<Progress> {
        let text = line.trim();
        match self.block {
            Block::Histogram => {
                if text.starts_with("value") {
                    return None;
                }
                match histogram_row(text) {
                    Some(row) => {
                        self.totals.histogram.push(row);
                        return None;
                    }
                    None => self.block = Block::Other,
                }
            }
            Block::Latency => {
                if self.latency_row(text) {
                    return None;
                }
                self.block = Block::Other;
            }
            Block::Other => {}
        }
        if text.starts_with('[') {
            return progress(text);
        }
        if text.starts_with("Latency histogram") {
            self.block = Block::Histogram;
        } else if text == "Latency (ms):" {
            self.block = Block::Latency;
        } else if let Some(rest) = text.strip_prefix("sysbench ") {
            self.totals.version = rest.split_whitespace().next().map(str::to_owned);
        } else if let Some(rest) = text.strip_prefix("Number of threads:") {
            self.totals.users = number(rest).map(|n| n.round() as u32);
        } else if let Some(rest) = text.strip_prefix("transactions:") {
            self.totals.transactions = first_number(rest).map(|n| n.round() as u64);
        } else if let Some(rest) = text.strip_prefix("ignored errors:") {
            self.totals.failures = first_number(rest).map(|n| n.round() as u64);
        } else if let Some(rest) = text.strip_prefix("total time:") {
            self.totals.duration_s = rest.trim().strip_suffix('s').and_then(number);
        }
        None
    }

    /// One `key: value` row of the `Latency (ms):` block; false at its end.
    fn latency_row(&mut self, text: &str) -> bool {
        let Some((key, value)) = text.split_once(':') else {
            return false;
        };
        let Some(ms) = number(value) else {
            return false;
        };
        let key = key.trim();
        match key {
            "avg" => self.totals.mean_ms = Some(ms),
            "max" => self.totals.max_ms = Some(ms),
            "min" | "sum" => {}
            _ => {
                // `95th percentile`, `99th percentile`, …
                let Some(ordinal) = key.strip_suffix(" percentile") else {
                    return false;
                };
                let percent = ordinal.trim_end_matches(|c: char| c.is_ascii_alphabetic());
                if let Ok(percent) = percent.parse::<f64>() {
                    self.totals.percentile = Some((percent, ms));
                }
            }
        }
        true
    }
}

/// `[ 3s ] thds: 8 tps: 1234.56 qps: … lat (ms,99%): 12.08 err/s: 0.00 …`
/// (`lat` missing with `--percentile=0`); `None` for any other line, such
/// as `--rate`'s `[ 3s ] queue length: 0, concurrency: 0`.
pub fn progress(text: &str) -> Option<Progress> {
    let rest = text.strip_prefix('[')?;
    let (time, rest) = rest.split_once(']')?;
    let second = number(time.trim().strip_suffix('s')?)?;
    let mut words = rest.split_whitespace();
    let (mut users, mut tps, mut errors, mut percentile) = (None, None, None, None);
    while let Some(word) = words.next() {
        match word {
            "thds:" => users = words.next().and_then(number),
            "tps:" => tps = words.next().and_then(number),
            "err/s:" => errors = words.next().and_then(number),
            "lat" => {
                // `(ms,99%):` then the value.
                let percent = words
                    .next()
                    .and_then(|w| w.strip_prefix("(ms,"))
                    .and_then(|w| w.strip_suffix("%):"))
                    .and_then(number);
                let ms = words.next().and_then(number);
                if let (Some(p), Some(ms)) = (percent, ms) {
                    percentile = Some((p, ms));
                }
            }
            _ => {}
        }
    }
    let tps = tps?;
    Some(Progress {
        second: second.round() as u64,
        users: users.map(|n| n.round() as u32),
        transactions: tps.round() as u64,
        failures: errors.map_or(0, |e| e.round() as u64),
        percentile,
        mean_ms: None,
    })
}

/// `0.250 |****   12`: the value in µs and the count.
fn histogram_row(text: &str) -> Option<(u64, u64)> {
    let (value, rest) = text.split_once('|')?;
    let ms: f64 = value.trim().parse().ok()?;
    let count: u64 = rest.split_whitespace().last()?.parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| ((ms * 1000.0).round() as u64, count))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A whole run of `sysbench oltp_point_select --threads=2 --time=3
    /// --report-interval=1 --histogram=on --percentile=99 run` against the
    /// test kit's MariaDB (the histogram shortened).
    pub const RUN: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 2
Report intermediate results every 1 second(s)
Initializing random number generator from current time


Initializing worker threads...

Threads started!

[ 1s ] thds: 2 tps: 43180.85 qps: 43180.85 (r/w/o: 43180.85/0.00/0.00) lat (ms,99%): 0.16 err/s: 0.00 reconn/s: 0.00
[ 2s ] thds: 2 tps: 35161.16 qps: 35161.16 (r/w/o: 35161.16/0.00/0.00) lat (ms,99%): 0.19 err/s: 0.00 reconn/s: 0.00
[ 3s ] thds: 2 tps: 42731.68 qps: 42731.68 (r/w/o: 42731.68/0.00/0.00) lat (ms,99%): 0.18 err/s: 0.00 reconn/s: 0.00
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       0.016 |**                                       430
       0.017 |******************************           5875
       0.017 |**************************************** 7919
       0.050 |*                                        226
       0.170 |***************************************  100000
       3.130 |                                         6
      10.844 |                                         1
      11.041 |                                         1
 
SQL statistics:
    queries performed:
        read:                            121133
        write:                           0
        other:                           0
        total:                           121133
    transactions:                        121133 (40305.76 per sec.)
    queries:                             121133 (40305.76 per sec.)
    ignored errors:                      3      (1.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          3.0041s
    total number of events:              121133

Latency (ms):
         min:                                    0.02
         avg:                                    0.05
         max:                                   11.14
         99th percentile:                        0.18
         sum:                                 5960.99

Threads fairness:
    events (avg/stddev):           60566.5000/6050.50
    execution time (avg/stddev):   2.9805/0.00
";

    #[test]
    fn a_progress_line_gives_transactions_errors_threads_and_its_percentile() {
        let line = "[ 1s ] thds: 8 tps: 1234.56 qps: 24691.20 (r/w/o: 17283.84/4938.24/2469.12) \
                    lat (ms,99%): 12.08 err/s: 2.40 reconn/s: 0.00";
        assert_eq!(
            progress(line),
            Some(Progress {
                second: 1,
                users: Some(8),
                transactions: 1235,
                failures: 2,
                percentile: Some((99.0, 12.08)),
                mean_ms: None,
            })
        );
        let p95 = progress(
            "[ 12s ] thds: 4 tps: 10.00 qps: 200.00 (r/w/o: 140.00/40.00/20.00) lat (ms,95%): 3.5 err/s: 0.00 reconn/s: 0.00",
        );
        assert_eq!(p95.map(|p| (p.second, p.percentile)), Some((12, Some((95.0, 3.5)))));
        let no_lat = progress("[ 2s ] thds: 1 tps: 5.00 qps: 5.00 (r/w/o: 5.00/0.00/0.00) err/s: 0.00 reconn/s: 0.00");
        assert_eq!(no_lat.map(|p| p.percentile), Some(None));
        assert_eq!(progress("[ 3s ] queue length: 0, concurrency: 0"), None);
        assert_eq!(progress("[ not a progress line"), None);
    }

    #[test]
    fn a_whole_run_gives_its_seconds_totals_and_histogram() {
        let mut p = Parser::default();
        let seconds: Vec<Progress> = RUN.lines().filter_map(|l| p.line(l)).collect();
        assert_eq!(seconds.iter().map(|s| s.second).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(seconds[1].transactions, 35161);
        let t = &p.totals;
        assert_eq!(t.version.as_deref(), Some("1.0.20"));
        assert_eq!((t.users, t.transactions, t.failures), (Some(2), Some(121133), Some(3)));
        assert_eq!(
            (t.mean_ms, t.max_ms, t.percentile),
            (Some(0.05), Some(11.14), Some((99.0, 0.18)))
        );
        assert_eq!(t.duration_s, Some(3.0041));
        assert_eq!(
            t.histogram,
            [
                (16, 430),
                (17, 5875),
                (17, 7919),
                (50, 226),
                (170, 100000),
                (3130, 6),
                (10844, 1),
                (11041, 1)
            ]
        );
    }

    #[test]
    fn without_histogram_the_summary_still_reads_and_a_95th_percentile_is_kept_as_such() {
        let mut p = Parser::default();
        let text = "
SQL statistics:
    transactions:                        10000  (998.83 per sec.)
    ignored errors:                      0      (0.00 per sec.)

Latency (ms):
         min:                                    0.55
         avg:                                    1.00
         max:                                    5.25
         95th percentile:                        1.55
         sum:                                 9995.42

Threads fairness:
    events (avg/stddev):           10000.0000/0.00
";
        for line in text.lines() {
            assert_eq!(p.line(line), None);
        }
        let t = &p.totals;
        assert_eq!((t.transactions, t.failures), (Some(10000), Some(0)));
        assert_eq!((t.percentile, t.max_ms), (Some((95.0, 1.55)), Some(5.25)));
        assert!(t.histogram.is_empty());
    }
}
