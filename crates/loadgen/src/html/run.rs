//! One run as the report reads it: the JSON that `gatehouse-loadgen load
//! --json` (or `observe --json`, around sysbench or pgbench) writes, parsed
//! into plain values. Fields added after the first version (`round`,
//! `mean_ms`, `latency_histogram_us`, `watched`, process roles, `metrics`,
//! `tenants`) are optional, and so are the latency percentiles and maximum, of the
//! run and of each second (a tool that does not give one leaves it out:
//! absent, never 0); anything else missing is an error naming the field.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// What a watched process tree is: a database server or the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Proxy,
}

impl Role {
    /// `proxy` is the proxy; anything else (or nothing) is a server.
    fn parse(raw: Option<&str>) -> Option<Self> {
        raw.map(|r| if r == "proxy" { Role::Proxy } else { Role::Server })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Proxy => "proxy",
        }
    }
}

/// The run's summary, as `load` (or `observe`) computed it; a latency the
/// run does not know is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub requests_per_second: f64,
    pub failures: u64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

/// One watched process tree in one second.
#[derive(Debug, Clone, PartialEq)]
pub struct Proc {
    pub name: String,
    pub role: Role,
    pub cpu_cores: f64,
    pub rss_bytes: f64,
}

/// One second of the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    pub second: u64,
    pub users: u64,
    pub requests: u64,
    pub failures: u64,
    /// Percentiles of the second's successful requests (`None`: not known,
    /// as for a tool that reports only a mean or another percentile).
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Mean latency of the second, when written (pgbench's progress).
    pub mean_ms: Option<f64>,
    pub processes: Vec<Proc>,
    /// Each counted server's client connections (`None`: no answer).
    pub connections: Vec<(String, Option<f64>)>,
    /// Each sampled proxy metric (`None`: not sampled).
    pub metrics: Vec<(String, Option<f64>)>,
}

impl Second {
    /// Requests that succeeded (the ones the percentiles are of).
    pub fn successes(&self) -> u64 {
        self.requests.saturating_sub(self.failures)
    }
}

/// One tenant's requests in a run, and its successful requests' latencies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantRun {
    pub name: String,
    pub requests: u64,
    pub failures: u64,
    /// `[value_us, count]`.
    pub histogram: Vec<(u64, u64)>,
}

/// One run of `load` against one target.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// Where it was read from (a file name), for messages.
    pub source: String,
    pub target: String,
    pub engine: String,
    /// The round given in the file; the report numbers rounds without one
    /// by their order.
    pub round: Option<u64>,
    /// The plan's fields in the file's order, as text.
    pub plan: Vec<(String, String)>,
    pub duration_s: f64,
    pub summary: Summary,
    /// `[value_us, count]` of successful requests, when written.
    pub histogram: Option<Vec<(u64, u64)>>,
    /// Failures by code: count and first message.
    pub failures: BTreeMap<String, (u64, String)>,
    /// Watched process trees and their roles, as declared.
    pub watched: Vec<(String, Role)>,
    /// Servers whose client connections were counted.
    pub counted: Vec<String>,
    /// Proxy metrics sampled.
    pub metrics: Vec<String>,
    pub seconds: Vec<Second>,
    /// Each tenant's, when the run had tenants.
    pub tenants: Vec<TenantRun>,
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value> {
    v.get(key).with_context(|| format!("missing field {key:?}"))
}

fn num(v: &Value, key: &str) -> Result<f64> {
    field(v, key)?
        .as_f64()
        .with_context(|| format!("field {key:?} is not a number"))
}

fn count(v: &Value, key: &str) -> Result<u64> {
    let n = num(v, key)?;
    if n < 0.0 {
        bail!("field {key:?} is negative");
    }
    Ok(n.round() as u64)
}

fn text(v: &Value, key: &str) -> Result<String> {
    field(v, key)?
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("field {key:?} is not a string"))
}

fn opt_num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A plan value as shown: strings as they are, null as `–`, anything else
/// as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "–".to_owned(),
        other => other.to_string(),
    }
}

fn names(v: &Value, key: &str) -> Vec<String> {
    array(v, key)
        .iter()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect()
}

impl Run {
    /// Parses one run's JSON; `source` names it in errors.
    pub fn parse(v: &Value, source: &str) -> Result<Self> {
        Self::parse_fields(v, source).with_context(|| format!("{source}: not a load run report"))
    }

    fn parse_fields(v: &Value, source: &str) -> Result<Self> {
        let plan_v = field(v, "plan")?;
        let plan = plan_v
            .as_object()
            .context("field \"plan\" is not an object")?
            .iter()
            .map(|(k, val)| (k.clone(), shown(val)))
            .collect();
        let s = field(v, "summary")?;
        let summary = Summary {
            requests: count(s, "requests")?,
            requests_per_second: num(s, "requests_per_second")?,
            failures: count(s, "failures")?,
            p50_ms: opt_num(s, "p50_ms"),
            p90_ms: opt_num(s, "p90_ms"),
            p99_ms: opt_num(s, "p99_ms"),
            max_ms: opt_num(s, "max_ms"),
            mean_ms: opt_num(s, "mean_ms"),
        };
        let histogram = match v.get("latency_histogram_us") {
            None | Some(Value::Null) => None,
            Some(h) => Some(parse_histogram(h)?),
        };
        let mut failures = BTreeMap::new();
        if let Some(map) = v.get("failures").and_then(Value::as_object) {
            for (code, f) in map {
                let first = f.get("first").and_then(Value::as_str).unwrap_or("").to_owned();
                failures.insert(code.clone(), (count(f, "count")?, first));
            }
        }
        let watched: Vec<(String, Role)> = array(v, "watched")
            .iter()
            .filter_map(|w| {
                let name = w.get("name")?.as_str()?.to_owned();
                let role = Role::parse(w.get("role").and_then(Value::as_str)).unwrap_or(Role::Server);
                Some((name, role))
            })
            .collect();
        let mut seconds = Vec::new();
        for (i, sec) in array(v, "seconds").iter().enumerate() {
            seconds.push(parse_second(sec, i, &watched).with_context(|| format!("second {}", i + 1))?);
        }
        let tenants = array(v, "tenants")
            .iter()
            .map(|t| {
                let name = text(t, "name")?;
                Ok(TenantRun {
                    requests: count(t, "requests")?,
                    failures: count(t, "failures")?,
                    histogram: parse_histogram(field(t, "latency_histogram_us")?)
                        .with_context(|| format!("tenant {name}"))?,
                    name,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Run {
            source: source.to_owned(),
            target: text(v, "target")?,
            engine: v.get("engine").and_then(Value::as_str).unwrap_or("").to_owned(),
            round: v.get("round").and_then(Value::as_u64),
            plan,
            duration_s: num(plan_v, "duration_s")?,
            summary,
            histogram,
            failures,
            counted: names(v, "counted"),
            metrics: names(v, "metrics"),
            watched,
            seconds,
            tenants,
        })
    }
}

fn parse_histogram(h: &Value) -> Result<Vec<(u64, u64)>> {
    let rows = h.as_array().context("latency_histogram_us is not an array")?;
    rows.iter()
        .map(|row| {
            let pair = row.as_array().filter(|p| p.len() == 2);
            let n = |i: usize| pair.and_then(|p| p[i].as_f64()).filter(|x| *x >= 0.0);
            match (n(0), n(1)) {
                (Some(value), Some(count)) => Ok((value.round() as u64, count.round() as u64)),
                _ => bail!("latency_histogram_us: {row} is not [value_us, count]"),
            }
        })
        .collect()
}

/// A process's role: its own in the second, else the one declared in
/// `watched`, else server.
fn role_of(p: &Value, name: &str, watched: &[(String, Role)]) -> Role {
    Role::parse(p.get("role").and_then(Value::as_str))
        .or_else(|| watched.iter().find(|(n, _)| n == name).map(|(_, r)| *r))
        .unwrap_or(Role::Server)
}

fn parse_second(sec: &Value, i: usize, watched: &[(String, Role)]) -> Result<Second> {
    let processes = array(sec, "processes")
        .iter()
        .map(|p| {
            let name = text(p, "name")?;
            Ok(Proc {
                role: role_of(p, &name, watched),
                cpu_cores: opt_num(p, "cpu_cores").unwrap_or(0.0),
                rss_bytes: opt_num(p, "rss_bytes").unwrap_or(0.0),
                name,
            })
        })
        .collect::<Result<_>>()?;
    let named = |key: &str, value: &str| -> Result<Vec<(String, Option<f64>)>> {
        array(sec, key)
            .iter()
            .map(|c| Ok((text(c, "name")?, opt_num(c, value))))
            .collect()
    };
    Ok(Second {
        second: sec.get("second").and_then(Value::as_u64).unwrap_or(i as u64 + 1),
        users: opt_num(sec, "users").unwrap_or(0.0) as u64,
        requests: count(sec, "requests")?,
        failures: count(sec, "failures")?,
        p50_ms: opt_num(sec, "p50_ms"),
        p99_ms: opt_num(sec, "p99_ms"),
        mean_ms: opt_num(sec, "mean_ms"),
        processes,
        connections: named("connections", "count")?,
        metrics: named("metrics", "value")?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A run as `load` writes it today (no round, histogram, roles or
    /// metrics).
    pub fn today() -> Value {
        json!({
            "target": "direct", "engine": "postgres",
            "plan": {"users": 4, "spawn_rate": 10.0, "duration_s": 2.0, "think_ms": 0.0,
                     "connect_each": true, "sql": "SELECT 1", "timeout_s": 10.0},
            "summary": {"requests": 100, "requests_per_second": 50.0, "failures": 2,
                        "p50_ms": 1.0, "p90_ms": 2.0, "p99_ms": 3.0, "max_ms": 4.0},
            "failures": {"53300": {"count": 2, "first": "too many <clients>"}},
            "counted": ["pg"],
            "seconds": [
                {"second": 1, "users": 2, "requests": 40, "failures": 2, "p50_ms": 1.0, "p90_ms": 2.0,
                 "p99_ms": 3.0, "max_ms": 4.0,
                 "processes": [{"name": "postgres", "cpu_cores": 0.5, "rss_bytes": 1000, "processes": 3}],
                 "connections": [{"name": "pg", "count": 4}]},
                {"second": 2, "users": 4, "requests": 60, "failures": 0, "p50_ms": 1.0, "p90_ms": 2.0,
                 "p99_ms": 3.0, "max_ms": 4.0,
                 "processes": [{"name": "postgres", "cpu_cores": 0.7, "rss_bytes": 2000, "processes": 5}],
                 "connections": [{"name": "pg", "count": null}]}
            ]
        })
    }

    #[test]
    fn a_run_written_today_parses_without_the_new_fields() -> Result<()> {
        let run = Run::parse(&today(), "a.json")?;
        assert_eq!(
            (run.target.as_str(), run.round, run.histogram.as_ref()),
            ("direct", None, None)
        );
        assert_eq!(run.summary.mean_ms, None);
        assert_eq!(run.failures["53300"], (2, "too many <clients>".to_owned()));
        assert_eq!(run.seconds[0].processes[0].role, Role::Server);
        assert_eq!(run.seconds[1].connections, [("pg".to_owned(), None)]);
        assert!(run.plan.iter().any(|(k, v)| k == "sql" && v == "SELECT 1"));
        Ok(())
    }

    #[test]
    fn new_fields_are_read_and_roles_come_from_the_second_or_watched() -> Result<()> {
        let mut v = today();
        v["round"] = json!(3);
        v["summary"]["mean_ms"] = json!(1.5);
        v["latency_histogram_us"] = json!([[1000, 5], [2000, 1]]);
        v["watched"] = json!([{"name": "gh", "role": "proxy"}, {"name": "postgres", "role": "server"}]);
        v["metrics"] = json!(["gatehouse_pool_size"]);
        v["seconds"][0]["processes"] = json!([
            {"name": "gh", "cpu_cores": 0.1, "rss_bytes": 5, "processes": 1},
            {"name": "other", "role": "proxy", "cpu_cores": 0.1, "rss_bytes": 5, "processes": 1}
        ]);
        v["seconds"][0]["metrics"] = json!([{"name": "gatehouse_pool_size", "value": 7.0}]);
        let run = Run::parse(&v, "b.json")?;
        assert_eq!(run.round, Some(3));
        assert_eq!(run.summary.mean_ms, Some(1.5));
        assert_eq!(run.histogram, Some(vec![(1000, 5), (2000, 1)]));
        let roles: Vec<Role> = run.seconds[0].processes.iter().map(|p| p.role).collect();
        assert_eq!(roles, [Role::Proxy, Role::Proxy]);
        assert_eq!(run.seconds[1].processes[0].role, Role::Server);
        assert_eq!(run.seconds[0].metrics, [("gatehouse_pool_size".to_owned(), Some(7.0))]);
        assert!(run.tenants.is_empty());
        v["tenants"] = json!([{"name": "t000", "requests": 3, "failures": 1, "latency_histogram_us": [[900, 2]]}]);
        let run = Run::parse(&v, "b.json")?;
        let expected = TenantRun {
            name: "t000".to_owned(),
            requests: 3,
            failures: 1,
            histogram: vec![(900, 2)],
        };
        assert_eq!(run.tenants, [expected]);
        v["tenants"][0]["latency_histogram_us"] = json!([[1]]);
        assert!(Run::parse(&v, "b.json").is_err());
        Ok(())
    }

    #[test]
    fn percentiles_a_run_does_not_know_are_none_not_zero() -> Result<()> {
        let mut v = today();
        for key in ["p50_ms", "p90_ms", "p99_ms", "max_ms"] {
            v["summary"].as_object_mut().map(|o| o.remove(key));
        }
        v["seconds"][0].as_object_mut().map(|o| o.remove("p50_ms"));
        v["seconds"][0]["p99_ms"] = Value::Null;
        v["seconds"][1]["mean_ms"] = json!(2.5);
        let run = Run::parse(&v, "e.json")?;
        let s = &run.summary;
        assert_eq!((s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms), (None, None, None, None));
        assert_eq!((run.seconds[0].p50_ms, run.seconds[0].p99_ms), (None, None));
        assert_eq!((run.seconds[1].p99_ms, run.seconds[1].mean_ms), (Some(3.0), Some(2.5)));
        assert_eq!(run.seconds[0].mean_ms, None);
        Ok(())
    }

    #[test]
    fn a_file_that_is_not_a_run_is_an_error_naming_the_field() {
        let mut v = today();
        v.as_object_mut().map(|o| o.remove("summary"));
        let err = Run::parse(&v, "c.json")
            .err()
            .map_or_else(String::new, |e| format!("{e:#}"));
        assert!(err.contains("c.json") && err.contains("summary"), "{err}");
        v = today();
        v["latency_histogram_us"] = json!([[1, 2, 3]]);
        assert!(Run::parse(&v, "d.json").is_err());
    }
}
