//! Per-statement evaluation of a session's candidate rules: the
//! per-statement match fields (cheapest first, the digest computed lazily
//! and once per distinct text) and how the actions of the matching rules
//! combine into a [`Verdict`]. Nothing is allocated until a rule matches.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use gatehouse_sql::Digest;

use super::{DigestMatch, Reader, Rule, SessionRules, Verdict};

/// The statement as the rules see it so far: its text (rewritten by the
/// rules that matched), and its kind and digest, each computed once.
struct Current<'t> {
    text: Cow<'t, str>,
    kind: Option<Option<Range<usize>>>,
    digest: Option<Digest>,
    /// Which of the rule set's text regexes match the statement as the
    /// client sent it, scanned once when first needed; not used once a
    /// rewrite changed the text.
    query_hits: Option<regex::SetMatches>,
    rewritten: bool,
}

impl Current<'_> {
    fn kind(&mut self, at: &dyn Fn(&str) -> Option<Range<usize>>) -> Option<&str> {
        let text = &*self.text;
        let range = self.kind.get_or_insert_with(|| at(text));
        range.clone().and_then(|r| self.text.get(r))
    }

    /// Whether rule `i`'s text regex `re` matches: from the set's one scan
    /// while the text is the client's, else on its own.
    fn query_matches(&mut self, re: &regex::Regex, set: Option<&super::QuerySet>, i: usize) -> bool {
        match set.and_then(|q| Some((q, q.slot.get(i).copied().flatten()?))) {
            Some((q, at)) if !self.rewritten => {
                let text = &*self.text;
                self.query_hits.get_or_insert_with(|| q.set.matches(text)).matched(at)
            }
            _ => re.is_match(&self.text),
        }
    }

    fn digest(&mut self, compute: &dyn Fn(&str) -> Digest) -> &Digest {
        let text = &*self.text;
        self.digest.get_or_insert_with(|| compute(text))
    }

    /// Applies a rule's rewrite; the kind and digest are then computed
    /// again when needed. A rewrite that changes nothing changes nothing.
    fn rewrite(&mut self, rewrite: &super::Rewrite) {
        let replaced = match rewrite.pattern.replace_all(&self.text, rewrite.replacement.as_str()) {
            Cow::Owned(s) if s != *self.text => Some(s),
            _ => None,
        };
        if let Some(s) = replaced {
            self.text = Cow::Owned(s);
            self.kind = None;
            self.digest = None;
            self.rewritten = true;
        }
    }
}

impl SessionRules {
    /// Evaluates the statement `text` (one statement or a simple-query
    /// string) against the candidate rules in order, read by `reader` in
    /// the session's dialect: its digest is computed at most once per
    /// distinct text, and only if some candidate rule matches on `digest`,
    /// `digest_id` or `digest_regex` (after its cheaper fields matched); its
    /// kind only if a candidate has `kinds`. Returns `None` when no rule
    /// matched, without allocating.
    ///
    /// The kind of a simple-query string is the kind of its first
    /// statement: engines that want `kinds` rules to see every statement
    /// evaluate each one.
    pub fn evaluate(&self, text: &str, reader: &Reader<'_>) -> Option<Verdict> {
        let mut cur = Current {
            text: Cow::Borrowed(text),
            kind: None,
            digest: None,
            query_hits: None,
            rewritten: false,
        };
        let mut verdict: Option<Verdict> = None;
        for &i in self.candidates.iter() {
            let Some(rule) = self.rules.rules.get(i) else {
                continue;
            };
            if !rule.matches(&mut cur, reader, self.rules.query_set.as_ref(), i) {
                continue;
            }
            rule.hits.fetch_add(1, Ordering::Relaxed);
            let v = verdict.get_or_insert_with(|| Verdict {
                block: None,
                route: None,
                rewritten: None,
                statement_timeout: None,
                log: false,
                matched: Vec::new(),
            });
            v.matched.push(Arc::clone(&rule.name));
            v.log |= rule.log;
            if let Some(message) = &rule.block {
                v.block = Some(Arc::clone(message));
                break;
            }
            if v.route.is_none() {
                v.route.clone_from(&rule.route);
            }
            if v.statement_timeout.is_none() {
                v.statement_timeout = rule.statement_timeout;
            }
            if let Some(rewrite) = &rule.rewrite {
                cur.rewrite(rewrite);
            }
            if !rule.goes_on {
                break;
            }
        }
        let mut v = verdict?;
        if let Cow::Owned(s) = cur.text {
            v.rewritten = Some(s);
        }
        Some(v)
    }
}

impl Rule {
    /// Whether the per-statement fields match, cheapest first: kinds, then
    /// the exact digest (text or id), then the regexes (the statement's
    /// before the digest's, which may need the digest computed).
    fn matches(&self, cur: &mut Current<'_>, reader: &Reader<'_>, set: Option<&super::QuerySet>, i: usize) -> bool {
        if let Some(kinds) = &self.kinds {
            match cur.kind(reader.kind) {
                Some(k) if kinds.iter().any(|x| x.eq_ignore_ascii_case(k)) => {}
                _ => return false,
            }
        }
        match &self.digest {
            Some(DigestMatch::Id(id)) if cur.digest(reader.digest).id != *id => return false,
            Some(DigestMatch::Text(t)) if cur.digest(reader.digest).text != *t => return false,
            _ => {}
        }
        if let Some(re) = &self.query_regex
            && !cur.query_matches(re, set, i)
        {
            return false;
        }
        if let Some(re) = &self.digest_regex
            && !re.is_match(&cur.digest(reader.digest).text)
        {
            return false;
        }
        true
    }
}
