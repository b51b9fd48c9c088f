//! `gatehouse-loadgen report`: the side-by-side report of `load` runs.
//! Reads the runs' JSON ([`run`]), groups them by target and merges each
//! target's rounds ([`merge`]), compares the targets to the first one
//! ([`table`]), draws the charts over time ([`charts`]) and writes one
//! self-contained HTML page ([`page`]), the summary as JSON, and the
//! summary table for the terminal. Everything but reading and writing the
//! files is a pure function of the runs.

pub mod charts;
pub mod merge;
pub mod page;
pub mod run;
pub mod table;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use self::run::Run;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The page's title.
    #[arg(long)]
    pub title: String,
    /// Write the HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Also write the merged summary (per target values and ratios to the
    /// first target) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// KEY=VALUE shown on the page as the experiment's configuration
    /// (machine, versions, settings); repeat.
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_config)]
    pub config: Vec<(String, String)>,
    /// The runs' JSON files (`load --json`); targets in the order they
    /// first appear, the first one the baseline.
    #[arg(value_name = "RUN.json", required = true)]
    pub runs: Vec<PathBuf>,
}

fn parse_config(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {raw:?}")),
    }
}

/// What the report writes.
pub struct Rendered {
    pub html: String,
    pub summary: Value,
    pub text: String,
}

/// Reads and parses every run file.
pub fn read_runs(paths: &[PathBuf]) -> Result<Vec<Run>> {
    paths
        .iter()
        .map(|path| {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {shown}"))?;
            let v: Value = serde_json::from_str(&text).with_context(|| format!("{shown}: not JSON"))?;
            Run::parse(&v, &shown)
        })
        .collect()
}

/// The page, the JSON summary and the terminal table of `runs`.
pub fn render(title: &str, config: &[(String, String)], runs: Vec<Run>) -> Result<Rendered> {
    if runs.is_empty() {
        bail!("no runs to report");
    }
    let targets = merge::group(runs);
    let charts = charts::build(&targets);
    Ok(Rendered {
        html: page::render(title, config, &targets, &charts)?,
        summary: table::json(title, config, &targets),
        text: table::text(&targets),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_takes_key_equals_value_and_keeps_later_equals_signs() {
        assert_eq!(parse_config("pool = a=b"), Ok(("pool".to_owned(), " a=b".to_owned())));
        assert!(parse_config("novalue").is_err());
        assert!(parse_config("=x").is_err());
    }

    #[test]
    fn a_report_of_two_targets_has_every_part() -> Result<()> {
        let direct = run::tests::today();
        let mut proxied = run::tests::today();
        proxied["target"] = serde_json::json!("gatehouse");
        proxied["summary"]["requests"] = serde_json::json!(50);
        let runs = vec![
            Run::parse(&direct, "d1.json")?,
            Run::parse(&proxied, "g1.json")?,
            Run::parse(&direct, "d2.json")?,
        ];
        let r = render("Direct vs proxy", &[("host".into(), "ci".into())], runs)?;
        assert_eq!(r.summary["targets"][0]["rounds"], 2);
        assert_eq!(r.summary["targets"][1]["ratios"]["requests"], 0.25);
        assert!(r.text.contains("gatehouse (1 rounds)"), "{}", r.text);
        for chart in [
            "latency-p50",
            "latency-p99",
            "requests",
            "failures",
            "connections",
            "cpu",
        ] {
            assert!(r.html.contains(&format!("data-chart=\"{chart}\"")), "{chart}");
        }
        assert!(!r.html.contains("data-chart=\"proxy-rss\""));
        assert!(render("x", &[], Vec::new()).is_err());
        Ok(())
    }
}
