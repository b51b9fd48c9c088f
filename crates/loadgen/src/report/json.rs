//! JSON rendering of a [`Report`], written by hand (no serde): parameters,
//! one object per row with its statistics in ms, and the ratio list.

use std::fmt::Write as _;

use super::{Ratio, Report, Row};
use crate::stats::ms;

/// The whole report as a JSON document (pretty enough to diff).
pub fn render(report: &Report) -> String {
    let mut out = String::from("{\n");
    let _ = writeln!(out, "  \"experiment\": {},", string(&report.experiment));
    let params: Vec<String> = report
        .params
        .iter()
        .map(|(k, v)| format!("{}: {}", string(k), string(v)))
        .collect();
    let _ = writeln!(out, "  \"params\": {{{}}},", params.join(", "));
    let baseline = report.targets().first().map_or("null".to_string(), |t| string(t));
    let _ = writeln!(out, "  \"baseline\": {baseline},");
    let rows: Vec<String> = report.rows.iter().map(row).collect();
    let _ = writeln!(out, "  \"results\": [\n{}\n  ],", rows.join(",\n"));
    let ratios: Vec<String> = report.ratios().iter().map(ratio).collect();
    let _ = writeln!(out, "  \"ratios\": [\n{}\n  ]", ratios.join(",\n"));
    out.push_str("}\n");
    out
}

fn row(row: &Row) -> String {
    let s = &row.series;
    let summary = s.samples.summary();
    let stat = |f: fn(&crate::stats::Summary) -> f64| summary.as_ref().map(f);
    let fields = [
        ("target", string(&row.target)),
        ("measurement", string(&row.measurement)),
        ("attempts", s.attempts.to_string()),
        ("samples", s.samples.len().to_string()),
        ("errors", s.errors.to_string()),
        ("mean_ms", number(stat(|x| ms(x.mean)))),
        ("p50_ms", number(stat(|x| ms(x.p50)))),
        ("p90_ms", number(stat(|x| ms(x.p90)))),
        ("p99_ms", number(stat(|x| ms(x.p99)))),
        ("max_ms", number(stat(|x| ms(x.max)))),
        ("throughput_per_s", number(stat(|x| x.throughput()))),
        (
            "first_error",
            s.first_error.as_deref().map_or("null".to_string(), string),
        ),
    ];
    object(&fields)
}

fn ratio(r: &Ratio<'_>) -> String {
    let fields = [
        ("measurement", string(r.measurement)),
        ("target", string(r.target)),
        ("baseline", string(r.baseline)),
        ("mean_ratio", number(r.factor())),
        ("added_ms", number(r.added_ms())),
    ];
    object(&fields)
}

pub(crate) fn object(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{}: {v}", string(k))).collect();
    format!("    {{{}}}", body.join(", "))
}

/// A finite number with 6 decimals, else `null` (JSON has no NaN/inf).
pub(crate) fn number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.6}"),
        _ => "null".to_string(),
    }
}

/// A JSON string literal with the mandatory escapes.
pub(crate) fn string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample_report;
    use super::*;

    #[test]
    fn escapes_strings() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
        assert_eq!(number(Some(f64::NAN)), "null");
        assert_eq!(number(None), "null");
    }

    #[test]
    fn renders_rows_and_ratios() {
        let json = render(&sample_report());
        assert!(json.contains(r#""baseline": "direct","#));
        assert!(json.contains(
            r#"{"target": "direct", "measurement": "connect", "attempts": 2, "samples": 2, "errors": 0, "mean_ms": 3.000000, "p50_ms": 2.000000, "p90_ms": 4.000000, "p99_ms": 4.000000, "max_ms": 4.000000, "throughput_per_s": 333.333333, "first_error": null}"#
        ));
        assert!(json.contains(r#""first_error": "refused""#));
        assert!(json.contains(
            r#"{"measurement": "query", "target": "gatehouse", "baseline": "direct", "mean_ratio": 1.500000, "added_ms": 0.050000}"#
        ));
        // Balanced braces/brackets: a cheap structural sanity check.
        let depth = json.chars().fold(0i32, |d, c| match c {
            '{' | '[' => d + 1,
            '}' | ']' => d - 1,
            _ => d,
        });
        assert_eq!(depth, 0);
    }
}
