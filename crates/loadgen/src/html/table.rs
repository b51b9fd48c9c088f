//! The side-by-side summary: which merged numbers are compared, how each is
//! shown, its ratio to the baseline (the first target), and the summary as
//! a terminal table and as JSON (`--json-out`).

use serde_json::{Map, Value, json};

use super::merge::{Merged, Target};

/// How a value is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    PerSecond,
    Ms,
    Cores,
    CoreSeconds,
    Bytes,
}

/// One compared number.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Its name in the JSON summary.
    pub id: &'static str,
    pub label: &'static str,
    pub unit: Unit,
    value: fn(&Merged) -> Option<f64>,
}

/// Every compared number, in the table's order.
pub const KEYS: &[Key] = &[
    Key {
        id: "requests",
        label: "requests",
        unit: Unit::Count,
        value: |m| Some(m.requests as f64),
    },
    Key {
        id: "requests_per_second",
        label: "requests/s",
        unit: Unit::PerSecond,
        value: |m| Some(m.requests_per_second),
    },
    Key {
        id: "succeeded_per_second",
        label: "successful requests/s",
        unit: Unit::PerSecond,
        value: |m| (m.duration_s > 0.0).then(|| m.requests.saturating_sub(m.failures) as f64 / m.duration_s),
    },
    Key {
        id: "p50_ms",
        label: "p50",
        unit: Unit::Ms,
        value: |m| m.latency.p50,
    },
    Key {
        id: "p90_ms",
        label: "p90",
        unit: Unit::Ms,
        value: |m| m.latency.p90,
    },
    Key {
        id: "p99_ms",
        label: "p99",
        unit: Unit::Ms,
        value: |m| m.latency.p99,
    },
    Key {
        id: "max_ms",
        label: "max",
        unit: Unit::Ms,
        value: |m| m.latency.max,
    },
    Key {
        id: "mean_ms",
        label: "mean",
        unit: Unit::Ms,
        value: |m| m.latency.mean,
    },
    Key {
        id: "tenant_p99_median_ms",
        label: "per-tenant p99, median",
        unit: Unit::Ms,
        value: |m| m.fairness.as_ref().map(|f| f.p99_median_ms),
    },
    Key {
        id: "tenant_p99_worst_ms",
        label: "per-tenant p99, worst",
        unit: Unit::Ms,
        value: |m| m.fairness.as_ref().map(|f| f.p99_worst_ms),
    },
    Key {
        id: "tenants_p99_over_twice_overall",
        label: "tenants with a p99 over 2× the p99",
        unit: Unit::Count,
        value: |m| m.fairness.as_ref().map(|f| f.over_twice_overall as f64),
    },
    Key {
        id: "failures",
        label: "failures",
        unit: Unit::Count,
        value: |m| Some(m.failures as f64),
    },
    Key {
        id: "backend_connections_peak",
        label: "backend connections, peak",
        unit: Unit::Count,
        value: |m| m.connections_peak,
    },
    Key {
        id: "backend_connections_mean",
        label: "backend connections, mean",
        unit: Unit::Count,
        value: |m| m.connections_mean,
    },
    Key {
        id: "backend_cpu_cores",
        label: "backend CPU, mean",
        unit: Unit::Cores,
        value: |m| m.backend_cpu.as_ref().map(|c| c.mean_cores),
    },
    Key {
        id: "backend_cpu_core_s_per_1k",
        label: "backend CPU per 1,000 successful requests",
        unit: Unit::CoreSeconds,
        value: |m| m.backend_cpu.as_ref().and_then(|c| c.core_s_per_1k),
    },
    Key {
        id: "proxy_cpu_cores",
        label: "proxy CPU, mean",
        unit: Unit::Cores,
        value: |m| m.proxy_cpu.as_ref().map(|c| c.mean_cores),
    },
    Key {
        id: "proxy_cpu_core_s_per_1k",
        label: "proxy CPU per 1,000 successful requests",
        unit: Unit::CoreSeconds,
        value: |m| m.proxy_cpu.as_ref().and_then(|c| c.core_s_per_1k),
    },
    Key {
        id: "proxy_rss_peak_bytes",
        label: "proxy RSS, peak",
        unit: Unit::Bytes,
        value: |m| m.proxy_rss_peak_bytes,
    },
];

impl Key {
    pub fn of(&self, m: &Merged) -> Option<f64> {
        (self.value)(m)
    }
}

/// A value with its unit, `–` when there is none.
pub fn format(unit: Unit, v: Option<f64>) -> String {
    let Some(v) = v else {
        return "–".to_owned();
    };
    match unit {
        Unit::Count if v.fract() == 0.0 => format!("{v:.0}"),
        Unit::Count => format!("{v:.1}"),
        Unit::PerSecond => format!("{v:.1}/s"),
        Unit::Ms => format!("{v:.2} ms"),
        Unit::Cores => format!("{v:.3} cores"),
        Unit::CoreSeconds => format!("{v:.3} core-s"),
        Unit::Bytes => format!("{:.1} MiB", v / (1024.0 * 1024.0)),
    }
}

/// `value / baseline`, when both exist and the baseline is not 0.
pub fn ratio(value: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    match (value, baseline) {
        (Some(v), Some(b)) if b != 0.0 => Some(v / b),
        _ => None,
    }
}

/// A ratio as shown: `1.25×`, `250×`; one under 0.1 with two significant
/// digits (`0.080×`, `0.0016×`).
pub fn format_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}×")
    } else if r >= 0.1 || r <= 0.0 {
        format!("{r:.2}×")
    } else {
        let decimals = (-r.log10()).ceil() as usize + 1;
        format!("{r:.decimals$}×")
    }
}

/// The keys worth a row: those with a value for some target.
pub fn shown_keys(targets: &[Target]) -> Vec<&'static Key> {
    KEYS.iter()
        .filter(|k| targets.iter().any(|t| k.of(&t.merged).is_some()))
        .collect()
}

/// One cell: the value, and for targets after the baseline its ratio.
pub fn cell(key: &Key, t: &Target, baseline: &Target, is_baseline: bool) -> (String, Option<String>) {
    let v = key.of(&t.merged);
    let r = if is_baseline {
        None
    } else {
        ratio(v, key.of(&baseline.merged)).map(format_ratio)
    };
    (format(key.unit, v), r)
}

/// The summary as a terminal table: a row per number, a column per target.
pub fn text(targets: &[Target]) -> String {
    let Some(baseline) = targets.first() else {
        return "no runs\n".to_owned();
    };
    let mut rows: Vec<Vec<String>> = vec![
        std::iter::once(String::new())
            .chain(
                targets
                    .iter()
                    .map(|t| format!("{} ({} rounds)", t.name, t.merged.rounds)),
            )
            .collect(),
    ];
    for key in shown_keys(targets) {
        let mut row = vec![key.label.to_owned()];
        for (i, t) in targets.iter().enumerate() {
            let (v, r) = cell(key, t, baseline, i == 0);
            row.push(match r {
                Some(r) => format!("{v} ({r})"),
                None => v,
            });
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..=targets.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (s, w))| {
                let pad = w.saturating_sub(s.chars().count());
                if c == 0 {
                    format!("{s}{}", " ".repeat(pad))
                } else {
                    format!("{}{s}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for t in targets {
        for (code, (n, first)) in &t.merged.failures_by_code {
            out.push_str(&format!("{}: failed {n} x {code}: {first}\n", t.name));
        }
    }
    out
}

/// The summary as JSON: per target its values, ratios to the baseline,
/// failures by code and rounds.
pub fn json(title: &str, config: &[(String, String)], targets: &[Target]) -> Value {
    let baseline = targets.first();
    let per_target: Vec<Value> = targets
        .iter()
        .map(|t| {
            let mut values = Map::new();
            let mut ratios = Map::new();
            for key in KEYS {
                let v = key.of(&t.merged);
                values.insert(key.id.to_owned(), json!(v));
                let r = baseline.and_then(|b| ratio(v, key.of(&b.merged)));
                ratios.insert(key.id.to_owned(), json!(r));
            }
            let failures: Map<String, Value> = t
                .merged
                .failures_by_code
                .iter()
                .map(|(code, (n, first))| (code.clone(), json!({"count": n, "first": first})))
                .collect();
            json!({
                "target": t.name,
                "engine": t.engine,
                "rounds": t.merged.rounds,
                "duration_s": t.merged.duration_s,
                "latency_from": if t.merged.latency.exact { "merged_histograms" } else { "median_of_rounds" },
                "tenants_with_p99": t.merged.fairness.as_ref().map(|f| f.tenants),
                "tenant_p99_worst": t.merged.fairness.as_ref().map(|f| f.worst.clone()),
                "files": t.runs.iter().map(|(_, r)| r.source.clone()).collect::<Vec<_>>(),
                "values": values,
                "ratios": ratios,
                "failures": failures,
            })
        })
        .collect();
    let config: Map<String, Value> = config.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    json!({
        "title": title,
        "baseline": baseline.map(|b| b.name.clone()),
        "config": config,
        "targets": per_target,
    })
}

#[cfg(test)]
mod tests {
    use super::super::merge::{Cpu, group};
    use super::super::run::{Run, Summary};
    use super::*;

    fn targets() -> Vec<Target> {
        let run = |target: &str, requests: u64| Run {
            target: target.to_owned(),
            duration_s: 10.0,
            summary: Summary {
                requests,
                ..Summary::default()
            },
            ..Run::default()
        };
        let mut targets = group(vec![run("direct", 1000), run("gatehouse", 80)]);
        targets[0].merged.backend_cpu = Some(Cpu {
            mean_cores: 0.5,
            core_s_per_1k: Some(5.0),
        });
        targets
    }

    #[test]
    fn ratios_are_to_the_first_target_and_missing_when_either_side_is() {
        let targets = targets();
        let key = KEYS.iter().find(|k| k.id == "requests_per_second");
        let cells = key.map(|k| cell(k, &targets[1], &targets[0], false));
        assert_eq!(cells, Some(("8.0/s".to_owned(), Some("0.080×".to_owned()))));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(format_ratio(250.4), "250×");
        assert_eq!(format_ratio(0.0016), "0.0016×");
        assert_eq!(format_ratio(0.0), "0.00×");
    }

    #[test]
    fn the_text_table_has_a_row_per_number_with_a_value() {
        let out = text(&targets());
        assert!(
            out.contains("direct (1 rounds)") && out.contains("gatehouse (1 rounds)"),
            "{out}"
        );
        assert!(out.contains("requests/s") && out.contains("(0.080×)"), "{out}");
        assert!(
            out.contains("backend CPU, mean") && out.contains("0.500 cores"),
            "{out}"
        );
        assert!(!out.contains("proxy RSS"), "no target has it: {out}");
    }

    #[test]
    fn the_json_summary_has_values_and_ratios_per_target() {
        let config = vec![("machine".to_owned(), "2 cores".to_owned())];
        let v = json("t", &config, &targets());
        assert_eq!(v["baseline"], "direct");
        assert_eq!(v["config"]["machine"], "2 cores");
        assert_eq!(v["targets"][1]["values"]["requests_per_second"], 8.0);
        assert_eq!(v["targets"][1]["ratios"]["requests_per_second"], 0.08);
        assert_eq!(v["targets"][0]["ratios"]["requests"], 1.0);
        assert!(v["targets"][1]["values"]["proxy_cpu_cores"].is_null());
        assert_eq!(v["targets"][0]["latency_from"], "median_of_rounds");
    }
}
