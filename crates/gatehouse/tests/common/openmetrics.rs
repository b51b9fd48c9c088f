//! A strict reader of the OpenMetrics 1.0 text format, for the tests that
//! scrape `/metrics` (PostgreSQL's and MySQL's test binaries include it;
//! each uses most of it).
//! Every line is held to the specification's grammar: only `# HELP`,
//! `# TYPE`, `# UNIT` and one final `# EOF` as comment lines, no blank
//! line; metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names
//! `[a-zA-Z_][a-zA-Z0-9_]*` (each once per sample), label values and help
//! texts with no escape but `\\`, `\"` and `\n`, numbers as the format
//! writes them. And to its rules: a family's descriptors come once each,
//! before its samples, and its samples together; a sample's name is its
//! family's plus the suffixes its type allows (a counter's `_total`); no
//! two samples alike; counters never negative; a unit is the name's
//! suffix; a histogram's buckets per label set have `le` ascending and
//! ending at `+Inf`, cumulative counts that never go down, and a `_count`
//! equal to the `+Inf` bucket, and a `_sum`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};

/// The content type `/metrics` answers with (prometheus-client writes
/// OpenMetrics 1.0 text).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /metrics` from the admin API at `admin`, its content type checked
/// and its text read strictly.
pub fn scrape(admin: SocketAddr, token: Option<&str>) -> Result<Exposition> {
    let r = gatehouse_testkit::http::request(admin, "GET", "/metrics", token)?;
    ensure!(r.status == 200, "/metrics: {} {}", r.status, r.body);
    ensure!(
        r.content_type.as_deref() == Some(CONTENT_TYPE),
        "/metrics content type {:?}",
        r.content_type
    );
    parse(&r.body).map_err(|e| anyhow!("/metrics is not valid OpenMetrics text: {e}\n{}", r.body))
}

/// Scrapes until `done` holds (a session counts its last exchange just
/// after writing the answer, so a client may look before it does), for
/// 10 s at most; then the last scrape, whether `done` holds or not (the
/// caller's exact checks say what is wrong).
pub async fn settled(admin: SocketAddr, token: Option<&str>, done: impl Fn(&Exposition) -> bool) -> Result<Exposition> {
    for _ in 0..500 {
        let e = scrape(admin, token)?;
        if done(&e) {
            return Ok(e);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    scrape(admin, token).context("the last scrape")
}

/// A metric family's descriptors.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub kind: String,
    pub help: Option<String>,
    pub unit: Option<String>,
}

/// One sample line.
#[derive(Debug, Clone)]
pub struct Sample {
    pub family: String,
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// A whole exposition, checked.
#[derive(Debug, Default)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// The sum of the samples named `name` whose labels include every one
    /// of `labels`; `None` when none does.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let matching: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.name == name && has_labels(s, labels))
            .map(|s| s.value)
            .collect();
        (!matching.is_empty()).then(|| matching.iter().sum())
    }

    /// [`Self::sum`], 0 when no sample matches.
    pub fn total(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.sum(name, labels).unwrap_or(0.0)
    }

    /// How much [`Self::total`] grew since `before`.
    pub fn grew(&self, before: &Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.total(name, labels) - before.total(name, labels)
    }

    /// The names of all samples.
    pub fn sample_names(&self) -> BTreeSet<&str> {
        self.samples.iter().map(|s| s.name.as_str()).collect()
    }

    /// The samples named `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }
}

fn has_labels(s: &Sample, labels: &[(&str, &str)]) -> bool {
    labels
        .iter()
        .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
}

/// The suffixes a sample of a family of `kind` may add to its name.
fn suffixes(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "counter" => &["_total", "_created"],
        "gauge" | "unknown" => &[""],
        "histogram" => &["_bucket", "_count", "_sum", "_created"],
        "info" => &["_info"],
        _ => return None,
    })
}

const TYPES: &[&str] = &[
    "counter",
    "gauge",
    "histogram",
    "gaugehistogram",
    "summary",
    "info",
    "stateset",
    "unknown",
];

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Unescapes an escaped string (`\\`, `\"`, `\n` only; no raw `"` or
/// newline), up to the end of `s`.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                Some('n') => out.push('\n'),
                other => return Err(format!("invalid escape \\{other:?} in {s:?}")),
            },
            '"' | '\n' => return Err(format!("unescaped {c:?} in {s:?}")),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// A number as the format allows: a real, `+Inf`/`-Inf` (any case, or
/// `infinity`), `NaN`.
fn number(s: &str) -> Result<f64, String> {
    let lower = s.to_ascii_lowercase();
    match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" if lower.len() - lower.trim_start_matches(['+', '-']).len() <= 1 => {
            return Ok(if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            });
        }
        "nan" if lower == "nan" => return Ok(f64::NAN),
        _ => {}
    }
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (body, None),
    };
    let digits = |d: &str| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((i, f)) => (digits(i) || i.is_empty()) && (digits(f) || f.is_empty()) && !(i.is_empty() && f.is_empty()),
        None => digits(mantissa),
    };
    if !mantissa_ok || exponent.is_some_and(|e| !digits(e)) {
        return Err(format!("not a number: {s:?}"));
    }
    s.parse().map_err(|e| format!("not a number: {s:?}: {e}"))
}

/// Labels between `{` and `}` (`s` without the braces).
fn labels(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"").ok_or_else(|| format!("bad label in {{{s}}}"))?;
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?} in {{{s}}}"));
        }
        // The value ends at the first `"` not escaped.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end.ok_or_else(|| format!("unterminated label value in {{{s}}}"))?;
        let value = unescape(&after[..end])?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("label {name} twice in {{{s}}}"));
        }
        out.push((name.to_owned(), value));
        rest = &after[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            if r.is_empty() {
                return Err(format!("trailing comma in {{{s}}}"));
            }
            rest = r;
        } else if !rest.is_empty() {
            return Err(format!("expected , after a label in {{{s}}}"));
        }
    }
    Ok(out)
}

/// A sample line's parts: name, labels, value.
type SampleParts = (String, Vec<(String, String)>, f64);

/// One sample line: name, labels, value (an optional timestamp after it).
fn sample_line(line: &str) -> Result<SampleParts, String> {
    let name_end = line.find(['{', ' ']).ok_or_else(|| format!("no value: {line:?}"))?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("bad metric name {name:?}"));
    }
    let (labels, rest) = if line[name_end..].starts_with('{') {
        // The label set ends at the `}` after the last label's closing quote.
        let inner = &line[name_end + 1..];
        let close = closing_brace(inner).ok_or_else(|| format!("unterminated labels: {line:?}"))?;
        (labels(&inner[..close])?, &inner[close + 1..])
    } else {
        (Vec::new(), &line[name_end..])
    };
    let rest = rest
        .strip_prefix(' ')
        .ok_or_else(|| format!("no space before the value: {line:?}"))?;
    let mut parts = rest.split(' ');
    let value = number(parts.next().unwrap_or_default())?;
    if let Some(ts) = parts.next() {
        number(ts)?;
    }
    if parts.next().is_some() {
        return Err(format!(
            "unexpected text after the value (exemplars are not expected): {line:?}"
        ));
    }
    Ok((name.to_owned(), labels, value))
}

/// The index of the `}` closing a label set, skipping quoted values.
fn closing_brace(s: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// Parses and checks `text`; the first problem found, with its line.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let body = text
        .strip_suffix("# EOF\n")
        .or_else(|| text.strip_suffix("# EOF"))
        .ok_or("the exposition does not end with # EOF")?;
    let mut out = Exposition::default();
    // The family whose lines these are, and whether it had samples yet.
    let mut current: Option<String> = None;
    let mut sampled = false;
    let mut descriptors: BTreeSet<(String, &str)> = BTreeSet::new();
    let mut families_seen = BTreeSet::new();
    let mut samples_seen = BTreeSet::new();
    for (i, line) in body.split_terminator('\n').enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", i + 1);
        if line.is_empty() {
            return Err(at("blank line".into()));
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut parts = comment.splitn(4, ' ');
            let (empty, what, name) = (parts.next(), parts.next(), parts.next());
            let rest = parts.next();
            let what = match (empty, what) {
                (Some(""), Some(w @ ("HELP" | "TYPE" | "UNIT"))) => w,
                _ => return Err(at("a comment other than HELP, TYPE, UNIT or a final EOF".into())),
            };
            let name = name
                .filter(|n| is_metric_name(n))
                .ok_or_else(|| at("bad metric name".into()))?;
            if current.as_deref() != Some(name) {
                if !families_seen.insert(name.to_owned()) {
                    return Err(at(format!("family {name} again, after other families")));
                }
                current = Some(name.to_owned());
                sampled = false;
            } else if sampled {
                return Err(at("a descriptor after the family's samples".into()));
            }
            if !descriptors.insert((name.to_owned(), what)) {
                return Err(at(format!("a second {what} for {name}")));
            }
            let family = out.families.entry(name.to_owned()).or_insert_with(|| Family {
                name: name.to_owned(),
                kind: "unknown".into(),
                help: None,
                unit: None,
            });
            let rest = rest.unwrap_or_default();
            match what {
                "HELP" => family.help = Some(unescape(rest).map_err(at)?),
                "TYPE" if TYPES.contains(&rest) => family.kind = rest.to_owned(),
                "TYPE" => return Err(at(format!("unknown type {rest:?}"))),
                _ => {
                    if !rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                        return Err(at("bad unit".into()));
                    }
                    if !rest.is_empty() && !name.ends_with(&format!("_{rest}")) {
                        return Err(at(format!("unit {rest} is not the suffix of {name}")));
                    }
                    family.unit = Some(rest.to_owned());
                }
            }
            continue;
        }
        let (name, labels, value) = sample_line(line).map_err(at)?;
        let family = current
            .as_deref()
            .and_then(|f| out.families.get(f))
            .filter(|f| descriptors.contains(&(f.name.clone(), "TYPE")))
            .ok_or_else(|| at("a sample with no # TYPE before it".into()))?;
        let allowed =
            suffixes(&family.kind).ok_or_else(|| at(format!("family type {} is not expected here", family.kind)))?;
        let suffix = name
            .strip_prefix(family.name.as_str())
            .filter(|s| allowed.contains(s))
            .ok_or_else(|| {
                at(format!(
                    "{name} is not a sample name of {} {}",
                    family.kind, family.name
                ))
            })?;
        if family.kind == "counter" && family.name.ends_with("_total") {
            return Err(at("a counter family named with _total".into()));
        }
        if (family.kind == "counter" || family.kind == "histogram") && (value.is_nan() || value < 0.0) {
            return Err(at("a negative or NaN count".into()));
        }
        let le = labels.iter().any(|(k, _)| k == "le");
        if le != (family.kind == "histogram" && suffix == "_bucket") {
            return Err(at("le only on histogram buckets, and always there".into()));
        }
        let key = format!("{name}{labels:?}");
        if !samples_seen.insert(key) {
            return Err(at("the same sample twice".into()));
        }
        sampled = true;
        out.samples.push(Sample {
            family: family.name.clone(),
            name,
            labels,
            value,
        });
    }
    check_histograms(&out)?;
    Ok(out)
}

/// Each histogram's label sets: `le` ascending, ending `+Inf`, cumulative
/// counts never going down, `_count` equal to the `+Inf` bucket, a `_sum`.
fn check_histograms(e: &Exposition) -> Result<(), String> {
    for f in e.families.values().filter(|f| f.kind == "histogram") {
        // Label set (without le) → (buckets in order, count, sum).
        type Series = (Vec<(f64, f64)>, Option<f64>, Option<f64>);
        let mut series: BTreeMap<String, Series> = BTreeMap::new();
        for s in e.samples.iter().filter(|s| s.family == f.name) {
            let others: Vec<_> = s.labels.iter().filter(|(k, _)| k != "le").collect();
            let entry = series.entry(format!("{others:?}")).or_default();
            match &s.name[f.name.len()..] {
                "_bucket" => {
                    let le = s.labels.iter().find(|(k, _)| k == "le").map(|(_, v)| v.as_str());
                    let le = number(le.unwrap_or_default())?;
                    if s.value.fract() != 0.0 {
                        return Err(format!("{}: a bucket count that is not whole: {}", f.name, s.value));
                    }
                    entry.0.push((le, s.value));
                }
                "_count" => entry.1 = Some(s.value),
                "_sum" => entry.2 = Some(s.value),
                _ => {}
            }
        }
        for (labels, (buckets, count, sum)) in series {
            let at = format!("{} {labels}", f.name);
            if !buckets.windows(2).all(|w| w[0].0 < w[1].0) {
                return Err(format!("{at}: le not ascending: {buckets:?}"));
            }
            if !buckets.windows(2).all(|w| w[0].1 <= w[1].1) {
                return Err(format!("{at}: cumulative counts go down: {buckets:?}"));
            }
            let inf = match buckets.last() {
                Some((le, n)) if *le == f64::INFINITY => *n,
                _ => return Err(format!("{at}: no +Inf bucket last")),
            };
            if count != Some(inf) {
                return Err(format!("{at}: _count {count:?} is not the +Inf bucket {inf}"));
            }
            if sum.is_none_or(|s| s.is_nan() || s < 0.0) {
                return Err(format!("{at}: no _sum, or a negative one: {sum:?}"));
            }
        }
    }
    Ok(())
}

/// The reader refuses what the format refuses.
pub fn refuses_what_the_format_refuses() -> Result<(), String> {
    let good = "# HELP a_seconds A.\n# TYPE a_seconds histogram\n# UNIT a_seconds seconds\n\
                a_seconds_sum 1.5\na_seconds_count 2\na_seconds_bucket{le=\"0.1\"} 1\na_seconds_bucket{le=\"0.5\"} 1\n\
                a_seconds_bucket{le=\"+Inf\"} 2\n\
                # TYPE b counter\nb_total{x=\"q\\\"\\\\\\n\"} 3\n# EOF\n";
    parse(good)?;
    let bad = [
        ("no EOF", good.trim_end_matches("# EOF\n").to_owned()),
        ("blank line", good.replace("# TYPE b", "\n# TYPE b")),
        ("counter without _total", good.replace("b_total{", "b{")),
        ("bad escape", good.replace("\\\\\\n", "\\t")),
        (
            "count is not +Inf",
            good.replace("a_seconds_count 2", "a_seconds_count 3"),
        ),
        ("le descending", good.replace("le=\"0.5\"", "le=\"0.05\"")),
        ("counts going down", good.replace("le=\"0.5\"} 1", "le=\"0.5\"} 0")),
        ("no +Inf", good.replace("le=\"+Inf\"", "le=\"5\"")),
        (
            "unit not a suffix",
            good.replace("# UNIT a_seconds seconds", "# UNIT a_seconds bytes"),
        ),
        ("a plain comment", good.replace("# HELP a_seconds A.", "# a comment")),
        (
            "quote in help",
            good.replace("# HELP a_seconds A.", "# HELP a_seconds say \"x\"."),
        ),
        ("bad name", good.replace("b_total{", "9b_total{")),
        ("trailing comma", good.replace("\\n\"}", "\\n\",}")),
        (
            "duplicate sample",
            good.replace("# EOF", "b_total{x=\"q\\\"\\\\\\n\"} 3\n# EOF"),
        ),
        ("negative counter", good.replace("} 3\n", "} -3\n")),
        ("not a number", good.replace("} 3\n", "} 3x\n")),
        ("no TYPE", good.replace("# TYPE b counter\n", "")),
    ];
    for (what, text) in bad {
        if parse(&text).is_ok() {
            return Err(format!("accepted an exposition with {what}:\n{text}"));
        }
    }
    Ok(())
}
