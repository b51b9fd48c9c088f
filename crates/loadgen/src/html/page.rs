//! The report as one self-contained HTML page (inline style and script, no
//! network): the title, the configuration and each target's plan, the
//! side-by-side summary with ratios to the baseline, failures by code, and
//! the charts, each a `<figure class="chart">` with its SVG, caption and
//! legend. On load, the page's script counts each chart's drawn data lines
//! (`g.series polyline` with two points or more) into the figure's
//! `data-drawn`, and sets `data-charts-ok` on `<body>`. Every text taken
//! from the input is escaped.

use std::fmt::Write as _;

use anyhow::Result;

use super::charts::{self, Chart};
use super::merge::Target;
use super::table;

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto; max-width: 1100px;
       padding: 0 1rem; color: #222; }
h1 { margin-bottom: .2rem; }
h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .6rem 0; }
th, td { border: 1px solid #ddd; padding: .3rem .6rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f5f5f5; }
.ratio { color: #555; margin-left: .4rem; font-size: .9em; }
.muted { color: #666; }
code { font-size: .92em; }
figure.chart { margin: 1.6rem 0; }
figure.chart svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { margin: .3rem 0; }
ul.legend { list-style: none; padding: 0; margin: .2rem 0; display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; }
ul.legend li { white-space: nowrap; }
.swatch { display: inline-block; width: 1.4em; height: .35em; vertical-align: middle; margin-right: .4em; }
#charts-status[data-ok='false'] { color: #b00; font-weight: bold; }
";

/// Counts each figure's data lines once the page has loaded.
const SCRIPT: &str = "
addEventListener('load', function () {
  var figures = document.querySelectorAll('figure.chart');
  var empty = [];
  figures.forEach(function (f) {
    var drawn = 0;
    f.querySelectorAll('svg g.series polyline').forEach(function (p) {
      var points = (p.getAttribute('points') || '').trim().split(/\\s+/).filter(Boolean);
      if (points.length >= 2) { drawn += 1; }
    });
    f.setAttribute('data-drawn', String(drawn));
    if (drawn < 1) { empty.push(f.getAttribute('data-chart')); }
  });
  var ok = figures.length > 0 && empty.length === 0;
  document.body.setAttribute('data-charts-ok', ok ? 'true' : 'false');
  var status = document.getElementById('charts-status');
  if (status) {
    status.setAttribute('data-ok', ok ? 'true' : 'false');
    status.textContent = ok ? 'Every chart (' + figures.length + ') has data.'
                            : 'Charts without data: ' + (empty.join(', ') || 'no charts at all') + '.';
  }
});
";

/// `s` safe as HTML text and inside a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// The configuration given on the command line, and the targets' plans
/// side by side (values that differ between rounds joined with ` / `).
fn setup(out: &mut String, config: &[(String, String)], targets: &[Target]) {
    out.push_str("<h2>Configuration</h2>\n");
    if config.is_empty() {
        out.push_str("<p class=\"muted\">No configuration given.</p>\n");
    } else {
        out.push_str("<table class=\"config\">\n");
        for (k, v) in config {
            let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        out.push_str("</table>\n");
    }
    out.push_str("<h2>Plans</h2>\n<table class=\"plans\">\n<tr><th></th>");
    for t in targets {
        let _ = write!(out, "<th>{}</th>", esc(&t.name));
    }
    out.push_str("</tr>\n");
    let mut keys: Vec<&str> = Vec::new();
    for (_, run) in targets.iter().flat_map(|t| &t.runs) {
        for (k, _) in &run.plan {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    let row = |out: &mut String, label: &str, cell: &dyn Fn(&Target) -> String| {
        let _ = write!(out, "<tr><th>{}</th>", esc(label));
        for t in targets {
            let _ = write!(out, "<td>{}</td>", esc(&cell(t)));
        }
        out.push_str("</tr>\n");
    };
    row(out, "engine", &|t| t.engine.clone());
    row(out, "rounds", &|t| {
        let rounds: Vec<String> = t.runs.iter().map(|(r, _)| r.to_string()).collect();
        format!("{} ({})", t.runs.len(), rounds.join(", "))
    });
    row(out, "files", &|t| {
        let files: Vec<&str> = t.runs.iter().map(|(_, r)| r.source.as_str()).collect();
        files.join(", ")
    });
    for key in keys {
        row(out, key, &|t| {
            let mut values: Vec<&str> = Vec::new();
            for (_, run) in &t.runs {
                let v = run.plan.iter().find(|(k, _)| k == key).map_or("–", |(_, v)| v.as_str());
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            values.join(" / ")
        });
    }
    out.push_str("</table>\n");
}

/// The summary table: a row per number, a column per target, ratios to
/// the first target.
fn summary(out: &mut String, targets: &[Target]) {
    let Some(baseline) = targets.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "<h2>Summary</h2>\n<p class=\"muted\">All rounds of a target merged; ratios are to <strong>{}</strong>.</p>",
        esc(&baseline.name)
    );
    out.push_str("<table class=\"summary\">\n<tr><th></th>");
    for t in targets {
        let _ = write!(
            out,
            "<th>{} <span class=\"muted\">({} rounds)</span></th>",
            esc(&t.name),
            t.merged.rounds
        );
    }
    out.push_str("</tr>\n");
    for key in table::shown_keys(targets) {
        let _ = write!(out, "<tr data-key=\"{}\"><th>{}</th>", key.id, esc(key.label));
        for (i, t) in targets.iter().enumerate() {
            let (v, r) = table::cell(key, t, baseline, i == 0);
            let r = r.map_or_else(String::new, |r| format!("<span class=\"ratio\">{}</span>", esc(&r)));
            let _ = write!(out, "<td class=\"num\">{}{r}</td>", esc(&v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("<tr><th>latency from</th>");
    for t in targets {
        let from = if t.merged.latency.exact {
            "merged histograms"
        } else {
            "median of the rounds"
        };
        let _ = write!(out, "<td class=\"muted\">{from}</td>");
    }
    out.push_str("</tr>\n</table>\n");
}

fn failures(out: &mut String, targets: &[Target]) {
    out.push_str("<h2>Failures</h2>\n");
    let any = targets.iter().any(|t| !t.merged.failures_by_code.is_empty());
    if !any {
        out.push_str("<p>No request failed.</p>\n");
        return;
    }
    out.push_str(
        "<table class=\"failures\">\n<tr><th>target</th><th>code</th><th>count</th><th>first message</th></tr>\n",
    );
    for t in targets {
        for (code, (n, first)) in &t.merged.failures_by_code {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td><code>{}</code></td><td class=\"num\">{n}</td><td>{}</td></tr>",
                esc(&t.name),
                esc(code),
                esc(first)
            );
        }
    }
    out.push_str("</table>\n");
}

fn figure(out: &mut String, chart: &Chart) -> Result<()> {
    let _ = writeln!(
        out,
        "<figure class=\"chart\" data-chart=\"{}\" data-series=\"{}\">",
        esc(&chart.id),
        chart.lines.len()
    );
    out.push_str(&charts::svg(chart)?);
    let _ = writeln!(
        out,
        "\n<figcaption><strong>{}</strong> — {}</figcaption>\n<ul class=\"legend\">",
        esc(&chart.title),
        esc(&chart.caption)
    );
    for line in &chart.lines {
        let _ = writeln!(
            out,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{} <span class=\"muted\">({} points)</span></li>",
            hex(line.color),
            esc(&line.label),
            line.points.len()
        );
    }
    out.push_str("</ul>\n</figure>\n");
    Ok(())
}

/// The whole page.
pub fn render(title: &str, config: &[(String, String)], targets: &[Target], charts: &[Chart]) -> Result<String> {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
    let names: Vec<String> = targets.iter().map(|t| esc(&t.name)).collect();
    let _ = writeln!(
        out,
        "<p class=\"muted\">gatehouse-loadgen report over {} runs of {} targets: {}.</p>",
        targets.iter().map(|t| t.runs.len()).sum::<usize>(),
        targets.len(),
        names.join(", ")
    );
    setup(&mut out, config, targets);
    summary(&mut out, targets);
    failures(&mut out, targets);
    out.push_str("<h2>Over time</h2>\n<p id=\"charts-status\" class=\"muted\"></p>\n");
    for chart in charts {
        figure(&mut out, chart)?;
    }
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::charts::Line;
    use super::super::merge::group;
    use super::super::run::{Run, Summary};
    use super::*;

    fn page() -> Result<String> {
        let mut run = Run {
            source: "r<1>.json".into(),
            target: "direct<script>".into(),
            engine: "postgres".into(),
            plan: vec![("sql".into(), "SELECT '<b>'".into())],
            duration_s: 1.0,
            summary: Summary {
                requests: 10,
                failures: 1,
                ..Summary::default()
            },
            ..Run::default()
        };
        run.failures.insert("42601".into(), (1, "syntax error at \"<\"".into()));
        let targets = group(vec![run]);
        let chart = Chart {
            id: "metric-a\"b".into(),
            title: "t".into(),
            caption: "c & d".into(),
            y_desc: "ms".into(),
            lines: vec![Line {
                label: "direct<script> · round 1".into(),
                color: (255, 0, 16),
                points: vec![(1.0, 1.0), (2.0, 2.0)],
            }],
        };
        render("A <title>", &[("cpu".into(), "2 & more".into())], &targets, &[chart])
    }

    #[test]
    fn every_text_from_the_input_is_escaped() -> Result<()> {
        let html = page()?;
        for raw in ["A <title>", "<b>", "r<1>", "\"<\"", "a\"b", "2 & more"] {
            assert!(!html.contains(raw), "{raw} left unescaped");
        }
        assert_eq!(html.matches("<script>").count(), 1, "only the page's own script");
        assert!(html.contains("direct&lt;script&gt;") && html.contains("2 &amp; more"));
        assert!(html.contains("data-chart=\"metric-a&quot;b\""));
        Ok(())
    }

    #[test]
    fn the_page_is_self_contained_with_figures_legends_and_the_check_script() -> Result<()> {
        let html = page()?;
        // The only address is the SVG namespace (a name, never fetched).
        assert_eq!(
            html.matches("http").count(),
            html.matches("http://www.w3.org/2000/svg").count()
        );
        assert!(!html.contains("<link") && !html.contains(" src=") && !html.contains("url("));
        assert!(html.contains("<figure class=\"chart\""));
        assert!(html.contains("<g class=\"series\">"));
        assert!(html.contains("background:#ff0010"));
        assert!(html.contains("data-charts-ok") && html.contains("data-drawn"));
        assert!(html.contains("<code>42601</code>") && html.contains("syntax error at &quot;&lt;&quot;"));
        Ok(())
    }
}
