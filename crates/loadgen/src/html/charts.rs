//! The report's charts over time: which charts there are and their lines
//! (a line per target and round for latency, requests and failures; a line
//! per target and server or process, averaged over the rounds second by
//! second, for connections, CPU, RSS and proxy metrics), and each drawn
//! with plotters into an SVG whose data lines sit in `<g class="series">`,
//! apart from the axes and grid in `<g class="mesh">`, so a page script can
//! count them.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::merge::Target;
use super::run::{Role, Run, Second};

const WIDTH: u32 = 900;
const HEIGHT: u32 = 340;

/// Base colours, one per target.
const PALETTE: [(u8, u8, u8); 8] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (23, 190, 207),
];

/// One line of a chart: (second, value) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub color: (u8, u8, u8),
    pub points: Vec<(f64, f64)>,
}

/// One chart over the seconds of the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// `data-chart`: `latency-p50`, `requests`, `metric-NAME`, ...
    pub id: String,
    pub title: String,
    /// What the chart shows, under it.
    pub caption: String,
    pub y_desc: String,
    pub lines: Vec<Line>,
}

/// The `k`-th shade of target `t`'s colour (lighter with `k`).
pub fn shade(t: usize, k: usize) -> (u8, u8, u8) {
    const TOWARDS_WHITE: [f64; 5] = [0.0, 0.4, 0.2, 0.55, 0.3];
    let (r, g, b) = PALETTE[t % PALETTE.len()];
    let f = TOWARDS_WHITE[k % TOWARDS_WHITE.len()];
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * f).round() as u8;
    (mix(r), mix(g), mix(b))
}

/// A line per target and round: `value` of each second that has one.
fn per_round(targets: &[Target], value: impl Fn(&Second) -> Option<f64>) -> Vec<Line> {
    let mut lines = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        for (ri, (round, run)) in t.runs.iter().enumerate() {
            lines.push(Line {
                label: format!("{} · round {round}", t.name),
                color: shade(ti, ri),
                points: run
                    .seconds
                    .iter()
                    .filter_map(|s| Some((s.second as f64, value(s)?)))
                    .collect(),
            });
        }
    }
    lines
}

/// A line per target and name (of `names`, in first-seen order): the mean
/// over the target's rounds, second by second, of the values `values`
/// gives for that name (a second without one is left out).
fn per_name(
    targets: &[Target],
    names: impl Fn(&Run) -> Vec<String>,
    values: impl Fn(&Second) -> Vec<(String, Option<f64>)>,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let mut order: Vec<String> = Vec::new();
        let mut sums: BTreeMap<(usize, u64), (f64, u32)> = BTreeMap::new();
        for (_, run) in &t.runs {
            for name in names(run) {
                index_of(&mut order, &name);
            }
            for s in &run.seconds {
                for (name, v) in values(s) {
                    let i = index_of(&mut order, &name);
                    if let Some(v) = v {
                        let e = sums.entry((i, s.second)).or_insert((0.0, 0));
                        e.0 += v;
                        e.1 += 1;
                    }
                }
            }
        }
        for (i, name) in order.iter().enumerate() {
            lines.push(Line {
                label: format!("{} · {name}", t.name),
                color: shade(ti, i),
                points: sums
                    .range((i, 0)..=(i, u64::MAX))
                    .map(|(&(_, sec), &(sum, n))| (sec as f64, sum / f64::from(n)))
                    .collect(),
            });
        }
    }
    lines
}

/// `name`'s place in `order`, added at the end when new.
fn index_of(order: &mut Vec<String>, name: &str) -> usize {
    match order.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            order.push(name.to_owned());
            order.len() - 1
        }
    }
}

fn any_run(targets: &[Target], f: impl Fn(&Run) -> bool) -> bool {
    targets.iter().flat_map(|t| &t.runs).any(|(_, r)| f(r))
}

/// A watched process as its lines name it: `postgres (server)`.
fn proc_label(name: &str, role: Role) -> String {
    format!("{name} ({})", role.as_str())
}

/// The processes (of `role`, or all) a run declares or sampled.
fn procs_of(run: &Run, role: Option<Role>) -> Vec<String> {
    let wanted = |r: Role| role.is_none_or(|want| r == want);
    let declared = run.watched.iter().filter(|(_, r)| wanted(*r));
    let sampled = run.seconds.iter().flat_map(|s| &s.processes).filter(|p| wanted(p.role));
    declared
        .map(|(n, r)| proc_label(n, *r))
        .chain(sampled.map(|p| proc_label(&p.name, p.role)))
        .collect()
}

/// The metrics a run has a value of in some second (a series the proxy
/// never exposed during the run, such as pins when nothing pinned, has no
/// chart).
fn metrics_of(run: &Run) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let sampled = run
        .seconds
        .iter()
        .flat_map(|s| &s.metrics)
        .filter(|(_, v)| v.is_some())
        .map(|(n, _)| n);
    for name in sampled {
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

/// Every chart the runs have data for: latency p50 and p99, requests/s and
/// failures/s always (a second whose percentile is not known, as with a
/// load tool that gives only a mean, has no point); the mean latency when
/// some second has one (`observe` around pgbench); connections when
/// servers were counted; CPU when processes were watched; proxy RSS when
/// one is a proxy; one per proxy metric sampled.
pub fn build(targets: &[Target]) -> Vec<Chart> {
    let chart = |id: &str, title: &str, caption: &str, y_desc: &str, lines| Chart {
        id: id.to_owned(),
        title: title.to_owned(),
        caption: caption.to_owned(),
        y_desc: y_desc.to_owned(),
        lines,
    };
    let answered = |s: &Second, v: Option<f64>| v.filter(|_| s.successes() > 0);
    let mut charts = vec![
        chart(
            "latency-p50",
            "Latency p50",
            "Median latency of the requests that succeeded in each second; a line per target and round.",
            "ms",
            per_round(targets, |s| answered(s, s.p50_ms)),
        ),
        chart(
            "latency-p99",
            "Latency p99",
            "99th-percentile latency of the requests that succeeded in each second; a line per target and round.",
            "ms",
            per_round(targets, |s| answered(s, s.p99_ms)),
        ),
        chart(
            "requests",
            "Requests per second",
            "Requests that ended in each second (succeeded or failed); a line per target and round.",
            "requests/s",
            per_round(targets, |s| Some(s.requests as f64)),
        ),
        chart(
            "failures",
            "Failures per second",
            "Requests that failed in each second; a line per target and round.",
            "failures/s",
            per_round(targets, |s| Some(s.failures as f64)),
        ),
    ];
    if any_run(targets, |r| r.seconds.iter().any(|s| s.mean_ms.is_some())) {
        charts.insert(
            2,
            chart(
                "latency-mean",
                "Latency mean",
                "Mean latency of the requests that succeeded in each second, where the run gives it; a line per target and round.",
                "ms",
                per_round(targets, |s| answered(s, s.mean_ms)),
            ),
        );
    }
    let names = |s: &Second, f: fn(&super::run::Proc) -> f64, role: Option<Role>| -> Vec<(String, Option<f64>)> {
        s.processes
            .iter()
            .filter(|p| role.is_none_or(|want| p.role == want))
            .map(|p| (proc_label(&p.name, p.role), Some(f(p))))
            .collect()
    };
    if any_run(targets, |r| {
        !r.counted.is_empty() || r.seconds.iter().any(|s| !s.connections.is_empty())
    }) {
        charts.push(chart(
            "connections",
            "Backend connections",
            "Client connections on each counted server, each second (the mean over a target's rounds); a line per server and target.",
            "connections",
            per_name(targets, |r| r.counted.clone(), |s| s.connections.clone()),
        ));
    }
    if any_run(targets, |r| !procs_of(r, None).is_empty()) {
        charts.push(chart(
            "cpu",
            "CPU per watched process",
            "Cores used by each watched process tree, each second (the mean over a target's rounds); a line per process and target.",
            "cores",
            per_name(targets, |r| procs_of(r, None), |s| names(s, |p| p.cpu_cores, None)),
        ));
    }
    if any_run(targets, |r| !procs_of(r, Some(Role::Proxy)).is_empty()) {
        charts.push(chart(
            "proxy-rss",
            "Proxy RSS",
            "Resident memory of each watched proxy's process tree, each second (the mean over a target's rounds).",
            "MiB",
            per_name(
                targets,
                |r| procs_of(r, Some(Role::Proxy)),
                |s| names(s, |p| p.rss_bytes / (1024.0 * 1024.0), Some(Role::Proxy)),
            ),
        ));
    }
    let mut metrics: Vec<String> = Vec::new();
    for name in targets.iter().flat_map(|t| &t.runs).flat_map(|(_, r)| metrics_of(r)) {
        if !metrics.contains(&name) {
            metrics.push(name);
        }
    }
    for metric in metrics {
        let has = |r: &Run| metrics_of(r).contains(&metric);
        let lines = per_name(
            targets,
            |r| if has(r) { vec![metric.clone()] } else { Vec::new() },
            |s| s.metrics.iter().filter(|(n, _)| *n == metric).cloned().collect(),
        );
        charts.push(chart(
            &format!("metric-{metric}"),
            &metric,
            &format!("The proxy metric {metric}, sampled each second (the mean over a target's rounds)."),
            "value",
            lines,
        ));
    }
    charts
}

/// The axes' extent: the first and last second, and 0 to a little over the
/// highest value.
fn extent(chart: &Chart) -> (f64, f64, f64) {
    let points = chart.lines.iter().flat_map(|l| &l.points);
    let xmin = points.clone().map(|p| p.0).reduce(f64::min).unwrap_or(0.0);
    let xmax = points.clone().map(|p| p.0).fold(xmin, f64::max);
    let ymax = points.map(|p| p.1).filter(|y| y.is_finite()).fold(0.0, f64::max);
    (
        xmin,
        if xmax > xmin { xmax } else { xmin + 1.0 },
        if ymax > 0.0 { ymax * 1.1 } else { 1.0 },
    )
}

/// What one plotters pass draws: the background, caption, axes and grid,
/// or the data lines alone (on the same layout).
#[derive(Clone, Copy, PartialEq)]
enum Layer {
    Mesh,
    Series,
}

fn draw(chart: &Chart, layer: Layer) -> Result<String> {
    let (xmin, xmax, ymax) = extent(chart);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        let caption_color = if layer == Layer::Mesh {
            BLACK.to_rgba()
        } else {
            TRANSPARENT
        };
        if layer == Layer::Mesh {
            root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        }
        let mut c = ChartBuilder::on(&root)
            .margin(12)
            .caption(&chart.title, ("sans-serif", 20).into_font().color(&caption_color))
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(xmin..xmax, 0f64..ymax)
            .map_err(|e| anyhow!("{e}"))?;
        match layer {
            Layer::Mesh => {
                let decimals = if ymax >= 100.0 {
                    0
                } else if ymax >= 5.0 {
                    1
                } else {
                    2
                };
                c.configure_mesh()
                    .x_desc("second of the run")
                    .y_desc(&chart.y_desc)
                    .label_style(("sans-serif", 13))
                    .axis_desc_style(("sans-serif", 14))
                    .light_line_style(RGBColor(240, 240, 240))
                    .bold_line_style(RGBColor(215, 215, 215))
                    .x_labels(((xmax - xmin) as usize + 1).min(12))
                    .x_label_formatter(&|x| {
                        // Whole seconds only (ticks between them unlabelled).
                        if (x - x.round()).abs() < 1e-6 {
                            format!("{x:.0}")
                        } else {
                            String::new()
                        }
                    })
                    .y_label_formatter(&|y| format!("{y:.decimals$}"))
                    .draw()
                    .map_err(|e| anyhow!("{e}"))?;
            }
            Layer::Series => {
                for line in &chart.lines {
                    let (r, g, b) = line.color;
                    let style = RGBColor(r, g, b).stroke_width(2);
                    c.draw_series(LineSeries::new(line.points.iter().copied(), style))
                        .map_err(|e| anyhow!("{e}"))?;
                }
            }
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(out)
}

/// What lies inside a document's outer `<svg ...>` element.
fn inner(svg: &str) -> &str {
    let start = svg.find("<svg").and_then(|i| svg[i..].find('>').map(|j| i + j + 1));
    let end = svg.rfind("</svg>");
    match (start, end) {
        (Some(s), Some(e)) if s <= e => &svg[s..e],
        _ => "",
    }
}

/// The chart as one SVG element: the mesh layer, then the data lines in
/// `<g class="series">` (a `<polyline>` each).
pub fn svg(chart: &Chart) -> Result<String> {
    let mesh = draw(chart, Layer::Mesh)?;
    let series = draw(chart, Layer::Series)?;
    Ok(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\">\n\
         <g class=\"mesh\">{}</g>\n<g class=\"series\">{}</g>\n</svg>",
        inner(&mesh),
        inner(&series)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::merge::group;
    use super::super::run::Proc;
    use super::*;

    fn second(n: u64, requests: u64, failures: u64, procs: &[(&str, Role, f64)]) -> Second {
        Second {
            second: n,
            requests,
            failures,
            p50_ms: Some(n as f64),
            p99_ms: Some(10.0 * n as f64),
            processes: procs
                .iter()
                .map(|&(name, role, cpu_cores)| Proc {
                    name: name.to_owned(),
                    role,
                    cpu_cores,
                    rss_bytes: 1024.0 * 1024.0,
                })
                .collect(),
            connections: vec![("pg".to_owned(), Some(n as f64))],
            ..Second::default()
        }
    }

    fn run(target: &str, seconds: Vec<Second>) -> Run {
        Run {
            target: target.to_owned(),
            counted: vec!["pg".to_owned()],
            seconds,
            ..Run::default()
        }
    }

    fn ids(charts: &[Chart]) -> Vec<&str> {
        charts.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn every_target_and_round_gets_a_latency_line_without_failed_seconds() {
        let direct = vec![second(1, 5, 0, &[]), second(2, 3, 3, &[])];
        let targets = group(vec![run("direct", direct.clone()), run("direct", direct)]);
        let charts = build(&targets);
        assert_eq!(
            ids(&charts),
            ["latency-p50", "latency-p99", "requests", "failures", "connections"]
        );
        let p99 = &charts[1].lines;
        assert_eq!(p99.len(), 2);
        assert_eq!(p99[1].label, "direct · round 2");
        assert_eq!(p99[0].points, [(1.0, 10.0)], "second 2 had no success");
        assert_eq!(charts[3].lines[0].points, [(1.0, 0.0), (2.0, 3.0)]);
        assert_ne!(p99[0].color, p99[1].color);
    }

    #[test]
    fn unknown_percentiles_draw_no_point_and_a_known_mean_gets_its_chart() {
        let mut tool = vec![second(1, 5, 0, &[]), second(2, 5, 0, &[]), second(3, 0, 0, &[])];
        for s in &mut tool {
            (s.p50_ms, s.p99_ms, s.mean_ms) = (None, None, Some(2.0));
        }
        tool[1].p99_ms = Some(7.0);
        let charts = build(&group(vec![run("pgbench", tool)]));
        assert_eq!(
            ids(&charts),
            [
                "latency-p50",
                "latency-p99",
                "latency-mean",
                "requests",
                "failures",
                "connections"
            ]
        );
        assert!(charts[0].lines[0].points.is_empty(), "{:?}", charts[0].lines);
        assert_eq!(charts[1].lines[0].points, [(2.0, 7.0)]);
        assert_eq!(
            charts[2].lines[0].points,
            [(1.0, 2.0), (2.0, 2.0)],
            "no success, no point"
        );
        let load = build(&group(vec![run("load", vec![second(1, 5, 0, &[])])]));
        assert!(!ids(&load).contains(&"latency-mean"));
    }

    #[test]
    fn process_lines_average_the_rounds_and_proxy_charts_need_a_proxy() {
        let a = vec![
            second(1, 1, 0, &[("pg", Role::Server, 1.0), ("gh", Role::Proxy, 0.5)]),
            second(2, 1, 0, &[("pg", Role::Server, 2.0), ("gh", Role::Proxy, 0.5)]),
        ];
        let b = vec![second(1, 1, 0, &[("pg", Role::Server, 3.0), ("gh", Role::Proxy, 1.5)])];
        let mut with_metric = run("gatehouse", b);
        with_metric.metrics = vec!["gatehouse_pool_waiting".to_owned(), "gatehouse_pinned".to_owned()];
        with_metric.seconds[0].metrics = vec![
            ("gatehouse_pool_waiting".to_owned(), Some(4.0)),
            ("gatehouse_pinned".to_owned(), None),
        ];
        let charts = build(&group(vec![run("gatehouse", a), with_metric]));
        assert_eq!(
            ids(&charts)[4..],
            ["connections", "cpu", "proxy-rss", "metric-gatehouse_pool_waiting"],
            "a metric never sampled has no chart"
        );
        let cpu = &charts[5].lines;
        assert_eq!(cpu[0].label, "gatehouse · pg (server)");
        assert_eq!(cpu[1].label, "gatehouse · gh (proxy)");
        assert_eq!(cpu[0].points, [(1.0, 2.0), (2.0, 2.0)]);
        assert_eq!(cpu[1].points, [(1.0, 1.0), (2.0, 0.5)]);
        assert_eq!(charts[6].lines[0].points, [(1.0, 1.0), (2.0, 1.0)], "MiB");
        assert_eq!(charts[7].lines[0].points, [(1.0, 4.0)]);
        let direct = build(&group(vec![run(
            "d",
            vec![second(1, 1, 0, &[("pg", Role::Server, 1.0)])],
        )]));
        assert!(!ids(&direct).contains(&"proxy-rss"));
    }

    #[test]
    fn the_svg_has_text_and_a_series_polyline_per_line_apart_from_the_mesh() -> Result<()> {
        let chart = Chart {
            id: "x".into(),
            title: "Latency <&>".into(),
            caption: String::new(),
            y_desc: "ms".into(),
            lines: vec![
                Line {
                    label: "a".into(),
                    color: (1, 2, 3),
                    points: vec![(1.0, 1.0), (2.0, 4.0), (3.0, 2.0)],
                },
                Line {
                    label: "b".into(),
                    color: (4, 5, 6),
                    points: vec![(1.0, 2.0), (2.0, 3.0)],
                },
            ],
        };
        let svg = svg(&chart)?;
        assert!(
            svg.contains("Latency &lt;&amp;&gt;") && svg.contains("second of the run"),
            "{svg}"
        );
        let series = svg.split("<g class=\"series\">").nth(1).unwrap_or("");
        assert_eq!(series.matches("<polyline").count(), 2, "{series}");
        assert!(series.contains("stroke=\"#010203\""), "{series}");
        let mesh = svg.split("<g class=\"series\">").next().unwrap_or("");
        assert!(
            mesh.contains("<polyline") && mesh.contains("<text"),
            "axes and labels: {mesh}"
        );
        assert!(!svg.contains("<svg width"), "one outer element: {svg}");
        Ok(())
    }
}
