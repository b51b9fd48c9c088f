//! Compiles the configuration's `[[rules]]` ([`RawRule`]) into [`Rules`]:
//! checks every key against the topology it will run in (endpoints,
//! clusters, backends), builds the regexes under a size limit, and reports
//! every problem with the span of the key it is about and the rule's name.

use std::collections::HashSet;
use std::net::IpAddr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use ipnet::IpNet;
use regex::{Regex, RegexBuilder};
use toml::Spanned;

use super::raw::{RawRoute, RawRule};
use super::{DigestMatch, Rewrite, RouteTo, Rule, Rules};
use crate::kind::EngineKind;

/// Most `[[rules]]` a configuration may have.
pub const MAX_RULES: usize = 10_000;
/// Longest rule name.
pub const MAX_RULE_NAME_LEN: usize = 64;
/// Cap, in bytes, on a rule regex's compiled program and on its lazy DFA
/// cache, so that a hostile configuration cannot make the proxy use
/// unbounded memory.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// One problem with a rule: the message names the rule and its key; the
/// span is that of the key's value in the configuration text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RuleError {
    pub span: Range<usize>,
    pub message: String,
}

/// What rules are checked against: the configured endpoints and clusters.
#[derive(Debug, Clone, Default)]
pub struct Topology<'a> {
    pub endpoints: Vec<EndpointFacts<'a>>,
    pub clusters: Vec<ClusterFacts<'a>>,
}

#[derive(Debug, Clone, Copy)]
pub struct EndpointFacts<'a> {
    pub name: &'a str,
    /// The name of the endpoint's cluster.
    pub cluster: &'a str,
}

#[derive(Debug, Clone, Copy)]
pub struct ClusterFacts<'a> {
    pub name: &'a str,
    pub engine: EngineKind,
    /// `host:port` of each backend.
    pub backends: &'a [String],
}

impl<'a> Topology<'a> {
    fn cluster(&self, name: &str) -> Option<&ClusterFacts<'a>> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

/// Compiles `raw` in order; every problem is listed, not only the first.
pub fn compile(raw: &[RawRule], topology: &Topology<'_>) -> Result<Rules, Vec<RuleError>> {
    let mut errors = Vec::new();
    if let Some(extra) = raw.get(MAX_RULES) {
        errors.push(RuleError {
            span: extra.name.span(),
            message: format!("too many [[rules]]: at most {MAX_RULES}"),
        });
        return Err(errors);
    }
    let mut names = HashSet::new();
    let mut rules = Vec::with_capacity(raw.len());
    for r in raw {
        let mut cx = RuleCx {
            rule: r.name.get_ref(),
            errors: &mut errors,
        };
        let name = r.name.get_ref();
        if name.is_empty()
            || name.len() > MAX_RULE_NAME_LEN
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            cx.at(
                &r.name,
                format!("name must be 1 to {MAX_RULE_NAME_LEN} characters of A-Z a-z 0-9 _ . -"),
            );
        } else if !names.insert(name.as_str()) {
            cx.at(&r.name, "duplicate rule name");
        }
        if let Some(rule) = compile_one(&mut cx, r, topology) {
            rules.push(rule);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Rules::new(rules))
}

/// Collects the problems of one rule.
struct RuleCx<'a> {
    rule: &'a str,
    errors: &'a mut Vec<RuleError>,
}

impl RuleCx<'_> {
    fn at<T>(&mut self, spanned: &Spanned<T>, message: impl AsRef<str>) {
        self.errors.push(RuleError {
            span: spanned.span(),
            message: format!("rule \"{}\": {}", self.rule, message.as_ref()),
        });
    }
}

/// One rule, or `None` when it has a problem (recorded in `cx`).
fn compile_one(cx: &mut RuleCx<'_>, r: &RawRule, topology: &Topology<'_>) -> Option<Rule> {
    let before = cx.errors.len();
    let tenants = list(cx, &r.tenants, "tenants");
    let databases = list(cx, &r.databases, "databases");
    let endpoints = list(cx, &r.endpoints, "endpoints");
    if let (Some(raw), Some(names)) = (&r.endpoints, &endpoints) {
        for n in names {
            if !topology.endpoints.iter().any(|e| e.name == n) {
                cx.at(raw, format!("endpoints: unknown endpoint \"{n}\""));
            }
        }
    }
    let client_cidrs = list(cx, &r.client_cidrs, "client_cidrs").map(|nets| {
        nets.iter()
            .filter_map(|n| match parse_net(n) {
                Some(net) => Some(net),
                None => {
                    if let Some(raw) = &r.client_cidrs {
                        cx.at(
                            raw,
                            format!("client_cidrs: \"{n}\" is not an address or a CIDR block (10.0.0.0/8, ::1/128)"),
                        );
                    }
                    None
                }
            })
            .collect::<Vec<_>>()
    });
    let kinds = list(cx, &r.kinds, "kinds");
    if let (Some(raw), Some(kinds)) = (&r.kinds, &kinds) {
        for k in kinds {
            let word = k.starts_with(|c: char| c.is_ascii_lowercase())
                && k.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !word {
                cx.at(
                    raw,
                    format!("kinds: \"{k}\" must be a lower-case key word, such as \"select\" or \"delete\""),
                );
            }
        }
    }
    let digest = digest_match(cx, r);
    let digest_regex = r
        .digest_regex
        .as_ref()
        .and_then(|p| regex(cx, p, p.get_ref(), "digest_regex"));
    let query_regex = r
        .query_regex
        .as_ref()
        .and_then(|p| regex(cx, p, p.get_ref(), "query_regex"));
    let block = r.block.as_ref().map(|b| {
        if b.get_ref().trim().is_empty() {
            cx.at(b, "block needs the message the client sees");
        }
        Arc::<str>::from(b.get_ref().as_str())
    });
    let route = r
        .route
        .as_ref()
        .and_then(|route| route_to(cx, route, endpoints.as_deref(), topology));
    let rewrite = r.rewrite.as_ref().and_then(|w| {
        let raw = w.get_ref();
        let pattern = regex(cx, w, &raw.pattern, "rewrite pattern")?;
        if let Err(e) = check_replacement(&pattern, &raw.replacement) {
            cx.at(w, format!("rewrite replacement: {e}"));
        }
        Some(Rewrite {
            pattern,
            replacement: raw.replacement.clone(),
        })
    });
    let statement_timeout = r.statement_timeout.as_ref().map(|t| {
        let d = **t.get_ref();
        if d.is_zero() {
            cx.at(t, "statement_timeout must be more than 0");
        }
        d
    });
    let log = r.log.unwrap_or(false);
    if let Some(b) = &r.block {
        let others: Vec<&str> = [
            (r.route.is_some(), "route"),
            (r.rewrite.is_some(), "rewrite"),
            (r.statement_timeout.is_some(), "statement_timeout"),
        ]
        .into_iter()
        .filter_map(|(set, key)| set.then_some(key))
        .collect();
        if !others.is_empty() {
            cx.at(
                b,
                format!(
                    "block cannot be combined with {} (a blocked statement never runs)",
                    others.join(", ")
                ),
            );
        }
    }
    if r.block.is_none() && r.route.is_none() && r.rewrite.is_none() && r.statement_timeout.is_none() && !log {
        cx.at(
            &r.name,
            "a rule needs an action: block, route, rewrite, statement_timeout or log = true",
        );
    }
    if cx.errors.len() > before {
        return None;
    }
    Some(Rule {
        name: Arc::from(r.name.get_ref().as_str()),
        tenants,
        databases,
        endpoints,
        client_cidrs,
        kinds,
        digest,
        digest_regex,
        query_regex,
        block,
        route,
        rewrite,
        statement_timeout,
        log,
        goes_on: r.continue_.unwrap_or(false),
        hits: AtomicU64::new(0),
    })
}

/// A match list: given, it must not be empty (leaving it out matches all).
fn list(cx: &mut RuleCx<'_>, raw: &Option<Spanned<Vec<String>>>, key: &str) -> Option<Vec<String>> {
    let l = raw.as_ref()?;
    if l.get_ref().is_empty() {
        cx.at(
            l,
            format!("{key} is empty, so the rule would match nothing (leave {key} out to match all)"),
        );
    }
    Some(l.get_ref().clone())
}

/// `10.0.0.0/8`, or a bare address as a /32 or /128.
fn parse_net(text: &str) -> Option<IpNet> {
    match text.parse::<IpNet>() {
        Ok(net) => Some(net.trunc()),
        Err(_) => text.parse::<IpAddr>().ok().map(IpNet::from),
    }
}

fn digest_match(cx: &mut RuleCx<'_>, r: &RawRule) -> Option<DigestMatch> {
    match (&r.digest, &r.digest_id) {
        (Some(_), Some(id)) => {
            cx.at(id, "give one of digest or digest_id, not both");
            None
        }
        (Some(text), None) => {
            if text.get_ref().is_empty() {
                cx.at(text, "digest must not be empty");
            }
            Some(DigestMatch::Text(text.get_ref().clone()))
        }
        (None, Some(id)) => {
            let hex = id.get_ref();
            let parsed = (hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u64::from_str_radix(hex, 16).ok())
                .flatten();
            if parsed.is_none() {
                cx.at(id, format!("digest_id \"{hex}\" must be 16 hex digits"));
            }
            parsed.map(DigestMatch::Id)
        }
        (None, None) => None,
    }
}

/// A regex of a rule, compiled under [`REGEX_SIZE_LIMIT`].
fn regex<T>(cx: &mut RuleCx<'_>, at: &Spanned<T>, pattern: &str, key: &str) -> Option<Regex> {
    match RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
    {
        Ok(re) => Some(re),
        Err(e) => {
            cx.at(at, format!("{key} does not compile: {e}"));
            None
        }
    }
}

/// Checks the `$1` / `$name` / `${name}` references of a replacement
/// against the groups of its pattern (a reference to a missing group
/// would silently become empty text; `$1a` refers to a group named "1a").
fn check_replacement(pattern: &Regex, replacement: &str) -> Result<(), String> {
    let mut rest = replacement;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            rest = after;
            continue;
        }
        let (name, after) = match rest.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) => (&braced[..end], &braced[end + 1..]),
                None => continue,
            },
            None => {
                let end = rest
                    .find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if name.is_empty() {
            continue;
        }
        rest = after;
        let known = match name.parse::<usize>() {
            Ok(i) => i < pattern.captures_len(),
            Err(_) => pattern.capture_names().flatten().any(|n| n == name),
        };
        if !known {
            return Err(format!(
                "refers to group \"{name}\", which the pattern does not have (write ${{1}}x for group 1 followed by x; $$ for a $)"
            ));
        }
    }
    Ok(())
}

/// A route, checked against every endpoint the rule can apply to (its
/// `endpoints`, or all of them).
fn route_to(
    cx: &mut RuleCx<'_>,
    raw: &Spanned<RawRoute>,
    endpoints: Option<&[String]>,
    topology: &Topology<'_>,
) -> Option<RouteTo> {
    let applies = |e: &&EndpointFacts<'_>| endpoints.is_none_or(|names| names.iter().any(|n| n == e.name));
    // The clusters the rule can run in, with an endpoint of each.
    let reached: Vec<(&EndpointFacts<'_>, &ClusterFacts<'_>)> = topology
        .endpoints
        .iter()
        .filter(applies)
        .filter_map(|e| Some((e, topology.cluster(e.cluster)?)))
        .collect();
    match raw.get_ref() {
        RawRoute::Role(role) => match role.as_str() {
            "writer" => Some(RouteTo::Writer),
            "replica" => Some(RouteTo::Replica),
            other => {
                cx.at(
                    raw,
                    format!(
                        "unknown route \"{other}\" (expected \"writer\", \"replica\", {{ backend = \"host:port\" }} or {{ cluster = \"name\" }})"
                    ),
                );
                None
            }
        },
        RawRoute::Backend(backend) => {
            if let Some((e, c)) = reached.iter().find(|(_, c)| !c.backends.contains(backend)) {
                cx.at(
                    raw,
                    format!(
                        "route backend \"{backend}\" is not a backend of cluster \"{}\" (of endpoint \"{}\"); limit the rule with endpoints",
                        c.name, e.name
                    ),
                );
                return None;
            }
            Some(RouteTo::Backend(Arc::from(backend.as_str())))
        }
        RawRoute::Cluster(name) => {
            let Some(target) = topology.cluster(name) else {
                cx.at(raw, format!("route: unknown cluster \"{name}\""));
                return None;
            };
            if let Some((e, c)) = reached.iter().find(|(_, c)| c.engine != target.engine) {
                cx.at(
                    raw,
                    format!(
                        "route cluster \"{name}\" is another engine than cluster \"{}\" (of endpoint \"{}\"); limit the rule with endpoints",
                        c.name, e.name
                    ),
                );
                return None;
            }
            Some(RouteTo::Cluster(Arc::from(name.as_str())))
        }
    }
}
