//! An observed run's report: the JSON run (the shape of `load --json`, so
//! `report` reads it: the plan with the tool and its command, the summary,
//! sysbench's histogram as `latency_histogram_us`, failures under the
//! tool's own code, and every second with the tool's numbers next to the
//! processes, connections and metrics sampled in it), the terminal
//! summary, and the exit status. A latency the tool does not give is left
//! out, never written as 0. sysbench at times skips the line of its last
//! second: the seconds it ran (by its own `total time`) after its last
//! line get what its summary counts beyond its lines, marked
//! `"estimated": true`; other seconds without a line have 0 requests and
//! `"reported": false`.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;

use serde_json::{Map, Value, json};

use super::{Observed, Progress, Sample, Tool};
use crate::html::merge::from_histogram;
use crate::load::report::{Sampled, sampled_json, sampled_table};

/// The run's latency, in ms, and where its percentiles come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
    /// For the plan: `histogram`, or what the tool gave instead.
    pub from: String,
}

/// The JSON key of percentile `percent` (`p99_ms`, `p99_9_ms`).
fn percentile_key(percent: f64) -> String {
    format!("p{}_ms", percent.to_string().replace('.', "_"))
}

/// The value of a `(percent, ms)` pair when its percent is `want`.
fn at(percentile: Option<(f64, f64)>, want: f64) -> Option<f64> {
    percentile.filter(|(p, _)| *p == want).map(|(_, ms)| ms)
}

impl Observed {
    /// Requests (transactions completed plus failed) and failures: the
    /// tool's summary, else (no summary: the command was stopped) the sum
    /// of its seconds.
    pub fn requests(&self) -> (u64, u64) {
        let t = &self.totals;
        match t.transactions {
            Some(done) => {
                let failed = t.failures.unwrap_or(0);
                (done + failed, failed)
            }
            None => {
                let failed = self.progress.values().map(|p| p.failures).sum();
                let done: u64 = self.progress.values().map(|p| p.transactions).sum();
                (done + failed, failed)
            }
        }
    }

    /// Requests per second of the wall time.
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.requests().0 as f64 / secs
        } else {
            0.0
        }
    }

    /// The tool's latency percentile (sysbench's `--percentile`), as its
    /// summary or, without one, its progress lines give it.
    pub fn percent(&self) -> Option<f64> {
        self.totals
            .percentile
            .map(|(p, _)| p)
            .or_else(|| self.progress.values().find_map(|p| p.percentile).map(|(p, _)| p))
    }

    /// p50, p90 and p99 from sysbench's histogram (nearest rank over its
    /// bucket values, each at most the summary's maximum, as a bucket's
    /// value may lie a little above the latencies in it); without one, the
    /// one percentile the tool gives where it is one of them, the others
    /// absent.
    pub fn latency(&self) -> Latency {
        let t = &self.totals;
        if !t.histogram.is_empty() {
            let h = self.histogram();
            let l = from_histogram(&h);
            let capped = |v: Option<f64>| match (v, t.max_ms) {
                (Some(v), Some(max)) => Some(v.min(max)),
                (v, _) => v,
            };
            return Latency {
                p50: capped(l.p50),
                p90: capped(l.p90),
                p99: capped(l.p99),
                max: t.max_ms.or(l.max),
                mean: t.mean_ms.or(l.mean),
                from: format!("{}'s histogram", self.tool.as_str()),
            };
        }
        let from = match (self.tool, t.percentile) {
            (Tool::Sysbench, Some((p, _))) => format!("sysbench's {p}th percentile only, the others absent"),
            (Tool::Sysbench, None) => "none: sysbench gave no percentile".to_owned(),
            (Tool::Pgbench, _) => "none: pgbench gives only the mean".to_owned(),
        };
        Latency {
            p50: at(t.percentile, 50.0),
            p90: at(t.percentile, 90.0),
            p99: at(t.percentile, 99.0),
            max: t.max_ms,
            mean: t.mean_ms,
            from,
        }
    }

    /// The histogram in µs, rows of the same value added up.
    fn histogram(&self) -> BTreeMap<u64, u64> {
        let mut h = BTreeMap::new();
        for &(value, n) in &self.totals.histogram {
            *h.entry(value).or_insert(0) += n;
        }
        h
    }

    /// How the command ended: `exit 0`, `signal 9`, `not waited for`.
    pub fn status_text(&self) -> String {
        match self.status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(sig)) => format!("signal {sig}"),
                (None, None) => "ended".to_owned(),
            },
            None => "not waited for".to_owned(),
        }
    }

    /// `observe`'s exit status: the command's (128 + the signal that ended
    /// it), or 1 when it succeeded without a single per-second line.
    pub fn exit_code(&self) -> u8 {
        let Some(s) = self.status else {
            return 1;
        };
        match (s.code(), s.signal()) {
            (Some(0), _) if self.progress.is_empty() => 1,
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
            (None, None) => 1,
        }
    }

    /// The seconds the tool ran after its last line (by its own duration;
    /// none without a line or a summary), each with its share of the
    /// requests and failures the summary counts beyond the lines.
    fn unreported(&self) -> BTreeMap<u64, (u64, u64)> {
        let mut out = BTreeMap::new();
        let (Some(ran), Some(_), Some(&last)) = (
            self.totals.duration_s,
            self.totals.transactions,
            self.progress.keys().next_back(),
        ) else {
            return out;
        };
        let missing: Vec<u64> = (last + 1..=ran.floor() as u64).collect();
        let Some(n) = u64::try_from(missing.len()).ok().filter(|n| *n > 0) else {
            return out;
        };
        let (requests, failed) = self.requests();
        let lines: u64 = self.progress.values().map(|p| p.transactions + p.failures).sum();
        let failed_lines: u64 = self.progress.values().map(|p| p.failures).sum();
        let extra = requests.saturating_sub(lines);
        let extra_failed = failed.saturating_sub(failed_lines).min(extra);
        for (k, second) in missing.into_iter().enumerate() {
            let first = k == 0;
            let share = |total: u64| total / n + if first { total % n } else { 0 };
            out.insert(second, (share(extra), share(extra_failed)));
        }
        out
    }

    /// Threads or clients: the tool's own count, else its progress lines'.
    fn users(&self) -> Option<u32> {
        self.totals
            .users
            .or_else(|| self.progress.values().find_map(|p| p.users))
    }

    /// One second: the tool's line for it (absent: its `estimate` of
    /// requests and failures, else 0; `reported` false) and the samples
    /// taken at its end (absent: none).
    fn second_json(
        &self,
        i: u64,
        line: Option<&Progress>,
        estimate: Option<(u64, u64)>,
        sample: Option<&Sample>,
    ) -> Value {
        let empty = Sample::default();
        let s = sample.unwrap_or(&empty);
        let [procs, connections, metrics] = sampled_json(
            (&s.procs, &self.watched),
            (&s.connections, &self.counted),
            (&s.metrics, &self.metrics),
        );
        let (requests, failures) = match (line, estimate) {
            (Some(p), _) => (p.transactions + p.failures, p.failures),
            (None, Some(e)) => e,
            (None, None) => (0, 0),
        };
        let users = match line {
            Some(p) => p.users.or(self.totals.users),
            None => estimate.and(self.users()),
        };
        let mut v = json!({
            "second": i, "users": users.unwrap_or(0),
            "requests": requests, "failures": failures,
            "reported": line.is_some(),
            "processes": procs, "connections": connections, "metrics": metrics,
        });
        if let Some(o) = v.as_object_mut() {
            if let Some((percent, ms)) = line.and_then(|p| p.percentile) {
                o.insert(percentile_key(percent), json!(ms));
            }
            if let Some(ms) = line.and_then(|p| p.mean_ms) {
                o.insert("mean_ms".to_owned(), json!(ms));
            }
            if line.is_none() && estimate.is_some() {
                o.insert("estimated".to_owned(), json!(true));
            }
        }
        v
    }

    /// The whole run as JSON, in the shape of `load --json`.
    pub fn json(&self) -> Value {
        let (requests, failed) = self.requests();
        let latency = self.latency();
        let unreported = self.unreported();
        let last_line = self.progress.keys().next_back().copied().unwrap_or(0);
        let last_estimate = unreported.keys().next_back().copied().unwrap_or(0);
        let count = (self.samples.len() as u64).max(last_line).max(last_estimate);
        let seconds: Vec<Value> = (1..=count)
            .map(|i| {
                let sample = usize::try_from(i - 1).ok().and_then(|k| self.samples.get(k));
                self.second_json(i, self.progress.get(&i), unreported.get(&i).copied(), sample)
            })
            .collect();
        let mut summary = Map::new();
        summary.insert("requests".into(), json!(requests));
        summary.insert("requests_per_second".into(), json!(self.rps()));
        summary.insert("failures".into(), json!(failed));
        for (key, v) in [
            ("p50_ms", latency.p50),
            ("p90_ms", latency.p90),
            ("p99_ms", latency.p99),
            ("max_ms", latency.max),
            ("mean_ms", latency.mean),
        ] {
            if let Some(v) = v {
                summary.insert(key.into(), json!(v));
            }
        }
        // The tool's own percentile, when not one just written.
        if let Some((percent, ms)) = self.totals.percentile {
            summary.entry(percentile_key(percent)).or_insert(json!(ms));
        }
        let mut plan = Map::new();
        plan.insert("tool".into(), json!(self.tool.as_str()));
        plan.insert("tool_version".into(), json!(self.totals.version));
        plan.insert("command".into(), json!(self.command));
        plan.insert("duration_s".into(), json!(self.elapsed.as_secs_f64()));
        plan.insert("users".into(), json!(self.users()));
        if let Some(percent) = self.percent() {
            plan.insert("latency_percentile".into(), json!(percent));
        }
        plan.insert("percentiles_from".into(), json!(latency.from));
        plan.insert(
            "requests_from".into(),
            json!(if self.totals.transactions.is_some() {
                "the tool's summary (completed + failed)"
            } else {
                "the per-second lines (no summary)"
            }),
        );
        plan.insert("exit".into(), json!(self.status_text()));
        let mut failures = Map::new();
        if failed > 0 {
            failures.insert(
                self.tool.failure_code().into(),
                json!({ "count": failed, "first": self.totals.first_error.clone().unwrap_or_default() }),
            );
        }
        let histogram: Option<Vec<[u64; 2]>> =
            (!self.totals.histogram.is_empty()).then(|| self.histogram().into_iter().map(|(v, n)| [v, n]).collect());
        let watched: Vec<Value> = self
            .watched
            .iter()
            .map(|w| json!({ "name": w.name, "role": w.role.as_str() }))
            .collect();
        json!({
            "target": self.target,
            "engine": self.engine,
            "round": self.round,
            "plan": plan,
            "summary": summary,
            "latency_histogram_us": histogram,
            "failures": failures,
            "watched": watched,
            "counted": self.counted,
            "metrics": self.metrics,
            "seconds": seconds,
        })
    }

    /// The terminal summary, as `load`'s.
    pub fn table(&self) -> String {
        let (requests, failed) = self.requests();
        let l = self.latency();
        let mut out = format!(
            "target {} ({}{}): {} {}, {} users, {:.1} s, {}\n  {}\n",
            self.target,
            self.engine,
            self.round.map_or(String::new(), |r| format!(", round {r}")),
            self.tool.as_str(),
            self.totals.version.as_deref().unwrap_or("(version not printed)"),
            self.users().map_or("?".to_owned(), |u| u.to_string()),
            self.elapsed.as_secs_f64(),
            self.status_text(),
            self.command,
        );
        let mut parts = vec![format!("requests {requests} ({:.1}/s)", self.rps())];
        for (name, v) in [
            ("p50", l.p50),
            ("p90", l.p90),
            ("p99", l.p99),
            ("max", l.max),
            ("mean", l.mean),
        ] {
            if let Some(v) = v {
                parts.push(format!("{name} {v:.2} ms"));
            }
        }
        if l.p50.is_none()
            && l.p90.is_none()
            && l.p99.is_none()
            && let Some((percent, ms)) = self.totals.percentile
        {
            parts.push(format!("p{percent} {ms:.2} ms"));
        }
        parts.push(format!("failures {failed}"));
        out.push_str(&parts.join(" | "));
        out.push('\n');
        if failed > 0 {
            out.push_str(&format!(
                "  failed {failed} x {}: {}\n",
                self.tool.failure_code(),
                self.totals.first_error.as_deref().unwrap_or("(no message)")
            ));
        }
        if self.progress.is_empty() {
            out.push_str(&format!(
                "  no per-second line from {}: give sysbench --report-interval=1, pgbench -P 1\n",
                self.tool.as_str()
            ));
        }
        let seconds: Vec<Sampled<'_>> = self
            .samples
            .iter()
            .map(|s| (s.procs.as_slice(), s.connections.as_slice(), s.metrics.as_slice()))
            .collect();
        out.push_str(&sampled_table(&seconds, &self.watched, &self.counted, &self.metrics));
        out
    }
}

#[cfg(test)]
mod tests {
    use std::process::ExitStatus;
    use std::time::Duration;

    use super::super::{Parser, Totals, pgbench, sysbench};
    use super::*;
    use crate::html::run::Run;
    use crate::load::procs::{ProcSample, Role, Watched};

    /// An observation of `text` (one line at a time, as read), `samples`
    /// seconds sampled with one watched server, exiting with `code`.
    fn observed(tool: Tool, text: &str, samples: usize, code: i32) -> Observed {
        let mut parser = Parser::new(tool);
        let mut progress = BTreeMap::new();
        for line in text.lines() {
            if let Some(p) = parser.line(line) {
                progress.insert(p.second, p);
            }
        }
        let sample = Sample {
            procs: vec![ProcSample {
                cpu_cores: 0.5,
                rss_bytes: 1 << 20,
                processes: 3,
            }],
            connections: vec![Some(2)],
            metrics: Vec::new(),
        };
        Observed {
            target: "direct".into(),
            tool,
            engine: "postgres",
            round: Some(2),
            command: "tool run".into(),
            elapsed: Duration::from_secs(3),
            status: Some(ExitStatus::from_raw(code << 8)),
            samples: vec![sample; samples],
            progress,
            totals: parser.totals().clone(),
            watched: vec![Watched {
                name: "pg".into(),
                pid: 1,
                role: Role::Server,
            }],
            counted: vec!["pg".into()],
            metrics: Vec::new(),
        }
    }

    #[test]
    fn a_pgbench_run_becomes_a_run_the_report_reads_without_percentiles() -> anyhow::Result<()> {
        let o = observed(Tool::Pgbench, pgbench::tests::RUN, 3, 0);
        let v = o.json();
        assert_eq!(v["summary"]["requests"], 71324);
        assert_eq!(v["summary"]["mean_ms"], 0.081);
        assert!(
            v["summary"].get("p50_ms").is_none() && v["summary"].get("max_ms").is_none(),
            "{v}"
        );
        assert!(v["latency_histogram_us"].is_null());
        assert_eq!(v["seconds"][0]["requests"], 21449);
        assert_eq!(v["seconds"][0]["users"], 2, "pgbench's clients, from its summary");
        assert_eq!(v["seconds"][2]["mean_ms"], 0.076);
        assert!(v["seconds"][1].get("p99_ms").is_none(), "{}", v["seconds"][1]);
        assert_eq!(v["seconds"][2]["processes"][0]["cpu_cores"], 0.5);
        assert_eq!(v["seconds"][2]["connections"][0], json!({"name": "pg", "count": 2}));
        assert_eq!(v["plan"]["tool"], "pgbench");
        let run = Run::parse(&v, "pgbench.json")?;
        assert_eq!(
            (run.round, run.summary.requests, run.summary.p99_ms),
            (Some(2), 71324, None)
        );
        assert_eq!(run.seconds.len(), 3);
        assert_eq!((run.seconds[2].p50_ms, run.seconds[2].mean_ms), (None, Some(0.076)));
        assert_eq!(o.exit_code(), 0);
        let table = o.table();
        assert!(
            table.contains("requests 71324") && table.contains("mean 0.08 ms"),
            "{table}"
        );
        assert!(!table.contains("p99"), "{table}");
        Ok(())
    }

    #[test]
    fn a_sysbench_run_takes_its_percentiles_from_the_histogram_capped_at_the_max() -> anyhow::Result<()> {
        let o = observed(Tool::Sysbench, sysbench::tests::RUN, 2, 0);
        let l = o.latency();
        // 114458 values: ranks 57229 (p50), 103013 (p90) and 113314 (p99)
        // all fall in 0.170; the max is the summary's.
        assert_eq!(
            (l.p50, l.p90, l.p99, l.max),
            (Some(0.17), Some(0.17), Some(0.17), Some(11.14))
        );
        let v = o.json();
        assert_eq!(v["summary"]["requests"], 121133 + 3);
        assert_eq!(v["failures"]["ignored_errors"]["count"], 3);
        assert_eq!(v["plan"]["latency_percentile"], 99.0);
        assert_eq!(
            v["latency_histogram_us"][1],
            json!([17, 13794]),
            "rows of one value added up"
        );
        assert_eq!(v["seconds"][0]["p99_ms"], 0.16);
        assert_eq!(
            v["seconds"].as_array().map(Vec::len),
            Some(3),
            "the tool's 3rd second, unsampled"
        );
        assert_eq!(v["seconds"][2]["processes"], json!([]));
        let run = Run::parse(&v, "sysbench.json")?;
        assert_eq!(run.histogram.as_ref().map(Vec::len), Some(7));
        assert_eq!((run.seconds[0].p99_ms, run.seconds[0].p50_ms), (Some(0.16), None));
        assert_eq!(run.seconds[0].users, 2);
        Ok(())
    }

    #[test]
    fn the_one_percentile_a_tool_gives_fills_only_its_own_field() {
        let mut o = observed(
            Tool::Sysbench,
            "[ 1s ] thds: 1 tps: 5.00 qps: 5.00 (r/w/o: 5.00/0.00/0.00) lat (ms,95%): 2.00 err/s: 0.00 reconn/s: 0.00",
            1,
            0,
        );
        o.totals = Totals {
            transactions: Some(5),
            percentile: Some((95.0, 2.0)),
            max_ms: Some(3.0),
            ..Totals::default()
        };
        let v = o.json();
        let summary = &v["summary"];
        assert_eq!(summary["p95_ms"], 2.0);
        assert!(
            summary.get("p99_ms").is_none() && summary.get("p50_ms").is_none(),
            "{summary}"
        );
        assert_eq!(v["seconds"][0]["p95_ms"], 2.0);
        assert!(v["seconds"][0].get("p99_ms").is_none());
        assert!(
            v["plan"]["percentiles_from"]
                .as_str()
                .is_some_and(|s| s.contains("95th"))
        );
        o.totals.percentile = Some((99.0, 2.5));
        assert_eq!(o.json()["summary"]["p99_ms"], 2.5);
    }

    #[test]
    fn a_last_second_sysbench_ran_but_did_not_report_gets_the_summarys_remainder() {
        // Its `[ 3s ]` line skipped, as sysbench at times does: 121133
        // transactions and 3 errors in all, 121074 + 0 in its lines.
        let text: String = sysbench::tests::RUN
            .lines()
            .filter(|l| !l.starts_with("[ 3s ]"))
            .map(|l| format!("{l}\n"))
            .collect();
        let o = observed(Tool::Sysbench, &text, 3, 0);
        let v = o.json();
        let third = &v["seconds"][2];
        assert_eq!(third["requests"], 121133 + 3 - 43181 - 35161, "{third}");
        assert_eq!((&third["failures"], &third["users"]), (&json!(3), &json!(2)));
        assert_eq!((&third["reported"], &third["estimated"]), (&json!(false), &json!(true)));
        assert!(third.get("p99_ms").is_none());
        assert_eq!(v["seconds"][1]["reported"], true);
        assert!(v["seconds"][1].get("estimated").is_none());
        // A second the tool did not run (past its `total time`) stays empty.
        let o = observed(Tool::Sysbench, &text, 4, 0);
        let fourth = &o.json()["seconds"][3];
        assert_eq!((&fourth["requests"], &fourth["reported"]), (&json!(0), &json!(false)));
        assert!(fourth.get("estimated").is_none());
    }

    #[test]
    fn the_exit_status_is_the_commands_and_a_run_without_seconds_fails() {
        assert_eq!(observed(Tool::Pgbench, pgbench::tests::RUN, 3, 0).exit_code(), 0);
        assert_eq!(observed(Tool::Pgbench, pgbench::tests::RUN, 3, 2).exit_code(), 2);
        let silent = observed(Tool::Pgbench, "number of transactions actually processed: 5", 1, 0);
        assert_eq!(silent.exit_code(), 1);
        assert!(silent.table().contains("no per-second line"));
        let mut killed = observed(Tool::Pgbench, pgbench::tests::RUN, 3, 0);
        killed.status = Some(ExitStatus::from_raw(9));
        assert_eq!((killed.exit_code(), killed.status_text()), (137, "signal 9".to_owned()));
    }
}
