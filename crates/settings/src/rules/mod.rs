//! Query rules, engine-agnostic: the compiled, ordered rule set a
//! configuration's `[[rules]]` become ([`compile`]), the per-session
//! candidate list filtered once at login ([`Rules::for_session`]), the
//! per-statement evaluation ([`SessionRules::evaluate`], in `matcher`), and
//! the hit counters the admin API shows and a reload carries over. The
//! statement's digest and kind are read by its engine, in its dialect
//! ([`Reader`]): the rules themselves know no engine.
//!
//! A rule matches a statement when every match field it gives matches (a
//! rule without match fields matches every statement):
//! * session-fixed fields, checked once at login: `tenants`, `databases`,
//!   `endpoints`, `client_cidrs` (an IPv4-mapped IPv6 client address also
//!   matches as its IPv4 address; a session without an IP address, over a
//!   Unix socket, matches no `client_cidrs`);
//! * per-statement fields, cheapest first: `kinds` (the first key word,
//!   see `gatehouse_sql::statement_kind`), `digest` / `digest_id` (exact digest text or
//!   id), `query_regex` (on the statement text), `digest_regex` (on the
//!   digest text). The digest is computed only when a candidate rule needs
//!   it, at most once per distinct text.
//!
//! Rules are evaluated in order. A matching rule counts a hit and applies
//! its actions: for `route` and `statement_timeout` the first matching rule
//! that sets one wins; `log` is the OR of the matching rules; rewrites
//! compose (a later rule's match fields and rewrite see the text as the
//! earlier rules rewrote it); `block` stops evaluation at once. Evaluation
//! stops after the first matching rule whose `continue` is false.

mod compile;
mod log;
mod matcher;
pub mod raw;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ipnet::IpNet;
use regex::Regex;

/// Where a query rule sends a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteTo {
    /// The session's cluster's writer.
    Writer,
    /// The least busy replica of the session's cluster within the
    /// endpoint's lag bound, else the writer (as a split endpoint falls back).
    Replica,
    /// One backend (`host:port`) of the session's cluster, whatever its
    /// role, while it is up and not draining (else the lease waits for it,
    /// as for a writer during a failover).
    Backend(Arc<str>),
    /// The writer of another cluster of the same engine: the router asks
    /// that cluster's state (the core's topology chooses on it).
    Cluster(Arc<str>),
}

pub use compile::{
    ClusterFacts, EndpointFacts, MAX_RULE_NAME_LEN, MAX_RULES, REGEX_SIZE_LIMIT, RuleError, Topology, compile,
};
pub use log::{HitLog, LOGGED_HITS_KEPT, LOGGED_TEXT_LIMIT, LoggedHit};

/// A configuration's query rules, compiled, in order. Shared as
/// `Arc<Rules>` by the settings and by the sessions filtered from it.
#[derive(Debug, Default)]
pub struct Rules {
    rules: Vec<Rule>,
    /// Every rule's `query_regex` in one set, so a statement is scanned
    /// once for all of them, not once per rule (`matcher`); `None` when no
    /// rule has one, or when the set would pass the size limit (each rule
    /// then matches on its own).
    query_set: Option<QuerySet>,
    /// The statements `log = true` rules matched lately.
    logged: HitLog,
}

/// The `query_regex`es of a rule set as one [`regex::RegexSet`].
#[derive(Debug)]
struct QuerySet {
    set: regex::RegexSet,
    /// For each rule, its pattern's index in `set`.
    slot: Vec<Option<usize>>,
}

impl QuerySet {
    /// One set over `rules`' text regexes, if it compiles within the limit.
    fn of(rules: &[Rule]) -> Option<Self> {
        let mut slot = Vec::with_capacity(rules.len());
        let mut patterns = Vec::new();
        for r in rules {
            slot.push(r.query_regex.as_ref().map(|re| {
                patterns.push(re.as_str());
                patterns.len() - 1
            }));
        }
        if patterns.is_empty() {
            return None;
        }
        let set = regex::RegexSetBuilder::new(patterns)
            .size_limit(REGEX_SIZE_LIMIT.saturating_mul(4))
            .dfa_size_limit(REGEX_SIZE_LIMIT.saturating_mul(4))
            .build()
            .ok()?;
        Some(Self { set, slot })
    }
}

impl Rules {
    /// The compiled set, with its text regexes gathered into one set.
    fn new(rules: Vec<Rule>) -> Self {
        let query_set = QuerySet::of(&rules);
        Self {
            rules,
            query_set,
            logged: HitLog::default(),
        }
    }
}

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    name: Arc<str>,
    // Session-fixed match fields.
    tenants: Option<Vec<String>>,
    databases: Option<Vec<String>>,
    endpoints: Option<Vec<String>>,
    client_cidrs: Option<Vec<IpNet>>,
    // Per-statement match fields.
    /// Lower-case key words.
    kinds: Option<Vec<String>>,
    digest: Option<DigestMatch>,
    digest_regex: Option<Regex>,
    query_regex: Option<Regex>,
    // Actions.
    block: Option<Arc<str>>,
    route: Option<RouteTo>,
    rewrite: Option<Rewrite>,
    statement_timeout: Option<Duration>,
    log: bool,
    /// `continue`: after a match, go on to later rules.
    goes_on: bool,
    hits: AtomicU64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DigestMatch {
    Text(String),
    Id(u64),
}

#[derive(Debug)]
struct Rewrite {
    pattern: Regex,
    replacement: String,
}

/// What a session is, for the session-fixed match fields.
#[derive(Debug, Clone, Copy)]
pub struct SessionFacts<'a> {
    pub tenant: &'a str,
    pub database: &'a str,
    pub endpoint: &'a str,
    /// `None` for a client without an IP address (a Unix socket).
    pub client: Option<IpAddr>,
}

/// The rules that can apply to one session, in order: cheap to clone.
#[derive(Debug, Clone)]
pub struct SessionRules {
    rules: Arc<Rules>,
    candidates: Arc<[usize]>,
}

/// How the session's engine reads a statement for the rules, in its
/// dialect: its digest (`gatehouse_sql::digest`,
/// `gatehouse_sql::mysql::digest`), computed only when a rule needs it, and
/// where its kind is (`gatehouse_sql::statement_kind_at`,
/// `gatehouse_sql::mysql::statement_kind_at`).
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    pub digest: &'a dyn Fn(&str) -> gatehouse_sql::Digest,
    pub kind: &'a dyn Fn(&str) -> Option<std::ops::Range<usize>>,
}

/// What the matching rules decided for one statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The message the client sees; the engine sends 42501 (PostgreSQL) /
    /// 1142 (MySQL) and does not run the statement.
    pub block: Option<Arc<str>>,
    pub route: Option<RouteTo>,
    /// The text after every applied rewrite; `None` when no rewrite
    /// changed it.
    pub rewritten: Option<String>,
    pub statement_timeout: Option<Duration>,
    /// Whether to log the statement (a matching rule has `log = true`).
    pub log: bool,
    /// Names of the rules that matched, in order (for logging).
    pub matched: Vec<Arc<str>>,
}

/// One rule's hit counter and definition, for the admin API.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuleCounter {
    pub name: String,
    pub hits: u64,
    /// The rule as configured, in TOML inline-table form without its name.
    pub definition: String,
}

/// How a reloaded rule set differs from the running one, by rule name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesDiff {
    pub added: Vec<Arc<str>>,
    pub removed: Vec<Arc<str>>,
    /// In both, with a different definition.
    pub changed: Vec<Arc<str>>,
    /// The rules in both are in another order.
    pub reordered: bool,
}

impl RulesDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty() && !self.reordered
    }
}

impl Rules {
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules that can apply to one session, filtered once at login by
    /// the session-fixed fields (tenant, database, endpoint, client
    /// address). `None` when no rule can apply: the session then pays
    /// nothing per statement.
    pub fn for_session(self: &Arc<Self>, s: &SessionFacts<'_>) -> Option<SessionRules> {
        if self.rules.is_empty() {
            return None;
        }
        let candidates: Vec<usize> = (0..self.rules.len()).filter(|&i| self.rules[i].applies_to(s)).collect();
        if candidates.is_empty() {
            return None;
        }
        Some(SessionRules {
            rules: self.clone(),
            candidates: candidates.into(),
        })
    }

    /// Hit counters for the admin API, in rule order, each with the rule's
    /// definition.
    pub fn counters(&self) -> Vec<RuleCounter> {
        self.rules
            .iter()
            .map(|r| RuleCounter {
                name: r.name.to_string(),
                hits: r.hits.load(Ordering::Relaxed),
                definition: r.to_string(),
            })
            .collect()
    }

    /// The statements `log = true` rules matched lately.
    pub fn logged(&self) -> &HitLog {
        &self.logged
    }

    /// Zeroes every rule's hits and forgets the logged hits.
    pub fn reset_counters(&self) {
        for r in &self.rules {
            r.hits.store(0, Ordering::Relaxed);
        }
        self.logged.clear();
    }

    /// Takes the hit count of every rule of `old` that this set has too,
    /// under the same name with an identical definition (on a reload: the
    /// new rules are `self`, the running ones `old`). Idempotent.
    pub fn carry_counters_from(&self, old: &Rules) {
        self.logged.carry_from(&old.logged);
        if self.rules.is_empty() || old.rules.is_empty() {
            return;
        }
        let by_name: HashMap<&str, &Rule> = old.rules.iter().map(|r| (&*r.name, r)).collect();
        for r in &self.rules {
            if let Some(o) = by_name.get(&*r.name)
                && o.same_definition(r)
            {
                r.hits.store(o.hits.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
    }

    /// How this (reloaded) rule set differs from `old` (the running one).
    pub fn diff(&self, old: &Rules) -> RulesDiff {
        let olds: HashMap<&str, &Rule> = old.rules.iter().map(|r| (&*r.name, r)).collect();
        let news: HashMap<&str, &Rule> = self.rules.iter().map(|r| (&*r.name, r)).collect();
        let mut d = RulesDiff::default();
        for r in &self.rules {
            match olds.get(&*r.name) {
                None => d.added.push(r.name.clone()),
                Some(o) if !o.same_definition(r) => d.changed.push(r.name.clone()),
                Some(_) => {}
            }
        }
        d.removed = old
            .rules
            .iter()
            .filter(|r| !news.contains_key(&*r.name))
            .map(|r| r.name.clone())
            .collect();
        let kept_new = self
            .rules
            .iter()
            .filter(|r| olds.contains_key(&*r.name))
            .map(|r| &r.name);
        let kept_old = old
            .rules
            .iter()
            .filter(|r| news.contains_key(&*r.name))
            .map(|r| &r.name);
        d.reordered = !kept_new.eq(kept_old);
        d
    }
}

impl SessionRules {
    /// Whether these candidates were filtered from `rules` (a session can
    /// tell that a reload replaced the rule set it logged in with).
    pub fn is_from(&self, rules: &Arc<Rules>) -> bool {
        Arc::ptr_eq(&self.rules, rules)
    }

    /// How many rules can apply to the session.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Always false: a session without candidates has no `SessionRules`.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }
}

impl Rule {
    /// Whether the session-fixed fields let this rule apply to a session.
    fn applies_to(&self, s: &SessionFacts<'_>) -> bool {
        fn listed(list: &Option<Vec<String>>, value: &str) -> bool {
            list.as_ref().is_none_or(|l| l.iter().any(|x| x == value))
        }
        listed(&self.tenants, s.tenant)
            && listed(&self.databases, s.database)
            && listed(&self.endpoints, s.endpoint)
            && self
                .client_cidrs
                .as_ref()
                .is_none_or(|nets| s.client.is_some_and(|ip| in_any(nets, ip)))
    }

    /// Same match fields and actions (the name aside).
    fn same_definition(&self, o: &Rule) -> bool {
        fn same_regex(a: &Option<Regex>, b: &Option<Regex>) -> bool {
            a.as_ref().map(Regex::as_str) == b.as_ref().map(Regex::as_str)
        }
        fn rewrite(r: &Rule) -> Option<(&str, &str)> {
            r.rewrite.as_ref().map(|w| (w.pattern.as_str(), w.replacement.as_str()))
        }
        self.tenants == o.tenants
            && self.databases == o.databases
            && self.endpoints == o.endpoints
            && self.client_cidrs == o.client_cidrs
            && self.kinds == o.kinds
            && self.digest == o.digest
            && same_regex(&self.digest_regex, &o.digest_regex)
            && same_regex(&self.query_regex, &o.query_regex)
            && self.block == o.block
            && self.route == o.route
            && rewrite(self) == rewrite(o)
            && self.statement_timeout == o.statement_timeout
            && self.log == o.log
            && self.goes_on == o.goes_on
    }
}

fn in_any(nets: &[IpNet], ip: IpAddr) -> bool {
    let mapped = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    nets.iter()
        .any(|n| n.contains(&ip) || mapped.is_some_and(|m| n.contains(&m)))
}

/// The definition, TOML-like: `{ kinds = ["delete"], block = "..." }`.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let mut list = |key: &str, l: &Option<Vec<String>>| {
            if let Some(l) = l {
                parts.push(format!("{key} = {l:?}"));
            }
        };
        list("tenants", &self.tenants);
        list("databases", &self.databases);
        list("endpoints", &self.endpoints);
        if let Some(nets) = &self.client_cidrs {
            let nets: Vec<String> = nets.iter().map(IpNet::to_string).collect();
            parts.push(format!("client_cidrs = {nets:?}"));
        }
        if let Some(k) = &self.kinds {
            parts.push(format!("kinds = {k:?}"));
        }
        match &self.digest {
            Some(DigestMatch::Text(t)) => parts.push(format!("digest = {t:?}")),
            Some(DigestMatch::Id(id)) => parts.push(format!("digest_id = \"{id:016x}\"")),
            None => {}
        }
        if let Some(re) = &self.digest_regex {
            parts.push(format!("digest_regex = {:?}", re.as_str()));
        }
        if let Some(re) = &self.query_regex {
            parts.push(format!("query_regex = {:?}", re.as_str()));
        }
        if let Some(b) = &self.block {
            parts.push(format!("block = {:?}", &**b));
        }
        match &self.route {
            Some(RouteTo::Writer) => parts.push("route = \"writer\"".into()),
            Some(RouteTo::Replica) => parts.push("route = \"replica\"".into()),
            Some(RouteTo::Backend(b)) => parts.push(format!("route = {{ backend = {:?} }}", &**b)),
            Some(RouteTo::Cluster(c)) => parts.push(format!("route = {{ cluster = {:?} }}", &**c)),
            None => {}
        }
        if let Some(w) = &self.rewrite {
            parts.push(format!(
                "rewrite = {{ pattern = {:?}, replacement = {:?} }}",
                w.pattern.as_str(),
                w.replacement
            ));
        }
        if let Some(t) = self.statement_timeout {
            parts.push(format!("statement_timeout = \"{}\"", humantime::format_duration(t)));
        }
        if self.log {
            parts.push("log = true".into());
        }
        if self.goes_on {
            parts.push("continue = true".into());
        }
        write!(f, "{{ {} }}", parts.join(", "))
    }
}
