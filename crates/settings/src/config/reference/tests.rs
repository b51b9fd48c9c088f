//! Tests holding the reference to the code: its keys to the ones serde
//! accepts (asked at run time, through serde's own error messages), its
//! required keys to the ones serde requires, its defaults to the
//! validator's, and `docs/CONFIG.md` to [`render_markdown`].

use std::collections::BTreeSet;
use std::path::Path;

use super::{Key, SECTIONS, Section, render_markdown, toml_value};
use crate::config::raw::RawConfig;
use crate::config::validate::*;

/// A key no section has.
const UNKNOWN: &str = "zz_not_a_key";

const KINDS: &[&str] = &[
    "duration",
    "string",
    "integer",
    "boolean",
    "list of strings",
    "table",
    "string or table",
    "table of integers",
];

fn section(name: &str) -> &'static Section {
    SECTIONS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no section {name} in the reference"))
}

fn key(section_name: &str, key_name: &str) -> &'static Key {
    section(section_name)
        .keys
        .iter()
        .find(|k| k.name == key_name)
        .unwrap_or_else(|| panic!("no key {key_name} in {section_name}"))
}

fn default_of(section_name: &str, key_name: &str) -> &'static str {
    key(section_name, key_name)
        .default
        .unwrap_or_else(|| panic!("{section_name} {key_name} has no documented default"))
}

fn duration_default(section_name: &str, key_name: &str) -> std::time::Duration {
    let text = default_of(section_name, key_name);
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{section_name} {key_name} default {text:?}: {e}"))
}

fn integer_default(section_name: &str, key_name: &str) -> u64 {
    let text = default_of(section_name, key_name);
    text.parse()
        .unwrap_or_else(|e| panic!("{section_name} {key_name} default {text:?}: {e}"))
}

/// `"[[clusters]] pool"` → `("[[clusters]]", Some("pool"))`.
fn split_name(name: &str) -> (&str, Option<&str>) {
    match name.split_once(' ') {
        Some((head, nested)) => (head, Some(nested)),
        None => (name, None),
    }
}

/// The top-level key of a section: `"[[clusters]] pool"` → `"clusters"`.
fn top_level_key(name: &str) -> &str {
    split_name(name).0.trim_matches(['[', ']'])
}

/// A TOML value of `kind` that serde accepts.
fn sample_value(kind: &str) -> &'static str {
    match kind {
        "string" => "\"x\"",
        "list of strings" => "[\"x\"]",
        "integer" => "1",
        "boolean" => "true",
        "duration" => "\"1s\"",
        other => panic!("no sample value for a required key of kind {other}"),
    }
}

/// `key = value` lines for the keys `names` of `section`, by their kinds.
fn assignments(section: &Section, names: &BTreeSet<String>) -> Vec<String> {
    names
        .iter()
        .map(|n| format!("{n} = {}", sample_value(key(section.name, n).kind)))
        .collect()
}

/// The keys the reference says are required.
fn documented_required(section: &Section) -> BTreeSet<String> {
    section
        .keys
        .iter()
        .filter(|k| k.about.starts_with("Required."))
        .map(|k| k.name.to_owned())
        .collect()
}

/// A configuration with one table of `section`, holding `lines`; a nested
/// section's parent gets its documented required keys.
fn section_text(section: &Section, lines: &[String]) -> String {
    match split_name(section.name) {
        (head, None) => format!("{head}\n{}\n", lines.join("\n")),
        (head, Some(nested)) => {
            let parent = self::section(head);
            let parent_lines = assignments(parent, &documented_required(parent));
            format!(
                "{head}\n{}\n{nested} = {{ {} }}\n",
                parent_lines.join("\n"),
                lines.join(", ")
            )
        }
    }
}

/// The error serde gives for `text`, or `None` if it is accepted.
fn serde_error(text: &str) -> Option<String> {
    toml::from_str::<RawConfig>(text).err().map(|e| e.message().to_owned())
}

/// The keys serde accepts in the table where `text` puts [`UNKNOWN`],
/// read from its error: "unknown field `zz_not_a_key`, expected one of
/// `a`, `b`, `c`", "... expected `a` or `b`", "... expected `a`" or
/// "... there are no fields".
fn accepted_keys(text: &str) -> BTreeSet<String> {
    let message = serde_error(text).unwrap_or_else(|| panic!("serde accepted {UNKNOWN} in:\n{text}"));
    let rest = message
        .strip_prefix(&format!("unknown field `{UNKNOWN}`, "))
        .unwrap_or_else(|| panic!("not an unknown-field error: {message:?}, for:\n{text}"));
    if rest == "there are no fields" {
        return BTreeSet::new();
    }
    let list = rest
        .strip_prefix("expected one of ")
        .or_else(|| rest.strip_prefix("expected "))
        .unwrap_or_else(|| panic!("cannot read the expected keys of {message:?}"));
    // "`a`, `b`", "`a` or `b`", "`a`": names at the odd places between backticks.
    let parts: Vec<&str> = list.split('`').collect();
    let mut keys = BTreeSet::new();
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 1 {
            keys.insert((*part).to_owned());
        } else if i != 0 && i != parts.len() - 1 {
            assert!(
                *part == ", " || *part == " or ",
                "unexpected separator {part:?} in {message:?}"
            );
        }
    }
    assert!(!keys.is_empty(), "no key names in {message:?}");
    keys
}

fn documented_keys(section: &Section) -> BTreeSet<String> {
    section.keys.iter().map(|k| k.name.to_owned()).collect()
}

/// What differs between the keys serde has (`by_serde`) and the ones the
/// reference has (`documented`), or `None` if they are the same.
fn set_difference(
    by_serde: &BTreeSet<String>,
    documented: &BTreeSet<String>,
    [serde_only, reference_only]: [&str; 2],
) -> Option<String> {
    let missing: Vec<&str> = by_serde.difference(documented).map(String::as_str).collect();
    let extra: Vec<&str> = documented.difference(by_serde).map(String::as_str).collect();
    (!missing.is_empty() || !extra.is_empty()).then(|| {
        format!(
            "{serde_only}: [{}]; {reference_only}: [{}]",
            missing.join(", "),
            extra.join(", ")
        )
    })
}

const ACCEPTED: [&str; 2] = ["missing from the reference", "in the reference but not accepted"];

#[test]
fn every_key_serde_accepts_is_in_the_reference_and_nothing_else() {
    let mut problems = Vec::new();
    for section in SECTIONS {
        let text = section_text(section, &[format!("{UNKNOWN} = \"x\"")]);
        if let Some(diff) = set_difference(&accepted_keys(&text), &documented_keys(section), ACCEPTED) {
            problems.push(format!("{}: {diff}", section.name));
        }
    }
    // The sections themselves: every top-level table serde accepts has one.
    let top: BTreeSet<String> = SECTIONS
        .iter()
        .filter(|s| split_name(s.name).1.is_none())
        .map(|s| top_level_key(s.name).to_owned())
        .collect();
    if let Some(diff) = set_difference(&accepted_keys(&format!("{UNKNOWN} = \"x\"\n")), &top, ACCEPTED) {
        problems.push(format!("top-level sections: {diff}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_nested_section_is_a_table_key_of_its_parent_and_every_table_key_has_one() {
    let names: BTreeSet<&str> = SECTIONS.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), SECTIONS.len(), "a section is listed twice");
    for section in SECTIONS {
        let keys = documented_keys(section);
        assert_eq!(
            keys.len(),
            section.keys.len(),
            "{}: a key is listed twice",
            section.name
        );
        for k in section.keys {
            if k.kind == "table" || k.kind == "string or table" {
                let nested = format!("{} {}", section.name, k.name);
                assert!(names.contains(nested.as_str()), "{nested} has no section");
            }
        }
        if let (head, Some(nested)) = split_name(section.name) {
            let parent = key(head, nested);
            assert!(
                parent.kind == "table" || parent.kind == "string or table",
                "{}: {head} {nested} is not a table",
                section.name
            );
        }
    }
}

#[test]
fn keys_serde_requires_are_the_ones_documented_as_required() {
    let mut problems = Vec::new();
    for section in SECTIONS {
        // Ask serde for one missing field at a time, giving each a value.
        let mut required = BTreeSet::new();
        let outcome = loop {
            let text = section_text(section, &assignments(section, &required));
            let Some(message) = serde_error(&text) else {
                break None;
            };
            match message
                .strip_prefix("missing field `")
                .and_then(|m| m.strip_suffix('`'))
            {
                Some(name) if required.insert(name.to_owned()) => {}
                _ => break Some(message),
            }
        };
        match (section.name, outcome) {
            (_, None) => {}
            // A route table needs one of its keys, either.
            ("[[rules]] route", Some(m)) if m == "route needs `backend` or `cluster`" => {}
            (name, Some(m)) => problems.push(format!("{name}: with its required keys, serde says {m:?}")),
        }
        if let Some(diff) = set_difference(
            &required,
            &documented_required(section),
            [
                "required but not documented as \"Required.\"",
                "documented as required but optional",
            ],
        ) {
            problems.push(format!("{} required keys: {diff}", section.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_key_has_a_known_type_and_a_meaning_in_plain_sentences() {
    for section in SECTIONS {
        assert!(section.about.ends_with('.'), "{}: about", section.name);
        for k in section.keys {
            let at = format!("{} {}", section.name, k.name);
            assert!(KINDS.contains(&k.kind), "{at}: unknown kind {:?}", k.kind);
            assert!(k.about.ends_with('.') && !k.about.contains('\n'), "{at}: about");
            assert!(
                k.default.is_none() || !k.about.starts_with("Required."),
                "{at}: required with a default"
            );
        }
    }
}

#[test]
fn the_committed_reference_is_the_generated_one() {
    let committed = include_str!("../../../../../docs/CONFIG.md");
    assert!(
        committed == render_markdown(),
        "docs/CONFIG.md is not the generated reference: run \
         `cargo run -p gatehouse -- config-reference > docs/CONFIG.md`"
    );
}

#[test]
fn documented_defaults_match_the_named_constants() {
    use crate::limits::{DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_ADDRESS, DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_USER};
    let durations = [
        ("[proxy]", "login_timeout", DEFAULT_LOGIN_TIMEOUT),
        ("[proxy]", "client_message_timeout", DEFAULT_CLIENT_MESSAGE_TIMEOUT),
        ("[proxy]", "shutdown_timeout", DEFAULT_SHUTDOWN_TIMEOUT),
        ("[proxy]", "park_idle_after", DEFAULT_PARK_IDLE_AFTER),
        ("[[clusters]]", "health_check_interval", DEFAULT_HEALTH_CHECK_INTERVAL),
        ("[[clusters]]", "health_check_timeout", DEFAULT_HEALTH_CHECK_TIMEOUT),
        ("[[clusters]]", "failover_hold", DEFAULT_FAILOVER_HOLD),
        ("[[clusters]]", "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        ("[[clusters]] pool", "borrow_timeout", DEFAULT_BORROW_TIMEOUT),
        ("[[clusters]] pool", "server_idle_timeout", DEFAULT_SERVER_IDLE_TIMEOUT),
        ("[tokens]", "leeway", gatehouse_token::DEFAULT_LEEWAY),
    ];
    for (section, key, constant) in durations {
        assert_eq!(duration_default(section, key), constant, "{section} {key}");
    }
    let integers = [
        ("[proxy]", "max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES),
        (
            "[proxy]",
            "auth_failures_per_minute_per_address",
            u64::from(DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_ADDRESS),
        ),
        (
            "[proxy]",
            "auth_failures_per_minute_per_user",
            u64::from(DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_USER),
        ),
        (
            "[[clusters]]",
            "health_check_failures",
            u64::from(DEFAULT_HEALTH_CHECK_FAILURES),
        ),
        (
            "[[clusters]]",
            "health_check_successes",
            u64::from(DEFAULT_HEALTH_CHECK_SUCCESSES),
        ),
        ("[[clusters]] pool", "size", u64::from(DEFAULT_POOL_SIZE)),
        (
            "[[clusters]] pool",
            "max_connections_percent",
            u64::from(DEFAULT_MAX_CONNECTIONS_PERCENT),
        ),
        (
            "[[clusters]] pool",
            "max_idle_percent",
            u64::from(DEFAULT_MAX_IDLE_PERCENT),
        ),
        (
            "[[endpoints]]",
            "max_client_connections",
            u64::from(DEFAULT_MAX_CLIENT_CONNECTIONS),
        ),
        ("[digests]", "max_digests", DEFAULT_MAX_DIGESTS as u64),
        (
            "[stats]",
            "tenant_series",
            crate::config::stats::DEFAULT_TENANT_SERIES as u64,
        ),
        ("[tokens]", "cache_capacity", gatehouse_token::DEFAULT_CACHE_CAPACITY),
    ];
    for (section, key, constant) in integers {
        assert_eq!(integer_default(section, key), constant, "{section} {key}");
    }
    // The documented ranges name the validator's limits.
    let limit = gatehouse_proto_pg::frame::PQ_LARGE_MESSAGE_LIMIT.to_string();
    assert!(key("[proxy]", "max_message_bytes").about.contains(&limit));
    assert!(
        key("[digests]", "max_digests")
            .about
            .contains(&MAX_MAX_DIGESTS.to_string())
    );
    assert!(
        key("[stats]", "tenant_series")
            .about
            .contains(&crate::config::stats::MAX_TENANT_SERIES.to_string())
    );
}

/// Where a key goes in [`config_with`], by its section.
#[derive(Default)]
struct Slots {
    proxy: String,
    cluster: String,
    pool: String,
    endpoint: String,
    tenant: String,
    digests: String,
    console: String,
    stats: String,
    rule: String,
}

/// A valid configuration using every section whose keys need no files,
/// with `slots` added to them.
fn config_with(engine: &str, role: &str, slots: &Slots) -> String {
    let Slots {
        proxy,
        cluster,
        pool,
        endpoint,
        tenant,
        digests,
        console,
        stats,
        rule,
    } = slots;
    format!(
        r#"
[proxy]
{proxy}

[[clusters]]
name = "c"
engine = "{engine}"
backends = ["127.0.0.1:1", "127.0.0.1:2"]
{cluster}

[clusters.pool]
{pool}

[[endpoints]]
name = "e"
listen = "127.0.0.1:0"
cluster = "c"
role = "{role}"
{endpoint}

[[secrets]]
name = "s"
user = "u"
password = "p"

[[tenants]]
name = "t"
databases = ["d"]
secret = "s"
mysql_native_password = "*0123456789ABCDEF0123456789ABCDEF01234567"
{tenant}

[digests]
{digests}

[console]
{console}
[stats]
{stats}

[[rules]]
name = "r"
block = "no"
{rule}
"#
    )
}

/// The validated settings of `text`, as `Debug` shows them, if valid.
fn settings_of(text: &str) -> Option<String> {
    crate::config::parse(text, Path::new("."))
        .ok()
        .map(|s| format!("{s:?}"))
}

/// Where two `Debug` texts first differ, with a little of each.
fn first_difference(with: &str, without: &str) -> String {
    let at = with
        .char_indices()
        .zip(without.chars())
        .find(|((_, a), b)| a != b)
        .map_or(with.len().min(without.len()), |((i, _), _)| i);
    let start = with[..at].rfind(", ").map_or(0, |i| i + 2);
    let excerpt = |text: &str| text[start..].chars().take(at - start + 30).collect::<String>();
    format!("with it `{}`, without it `{}`", excerpt(with), excerpt(without))
}

#[test]
fn every_documented_default_is_what_the_validator_applies_without_the_key() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for section in SECTIONS {
        for k in section.keys {
            let Some(default) = k.default else { continue };
            let line = format!("{} = {}", k.name, toml_value(k, default));
            let mut slots = Slots::default();
            let slot = match section.name {
                "[proxy]" => &mut slots.proxy,
                "[[clusters]]" => &mut slots.cluster,
                "[[clusters]] pool" => &mut slots.pool,
                "[[endpoints]]" => &mut slots.endpoint,
                "[[tenants]]" => &mut slots.tenant,
                "[digests]" => &mut slots.digests,
                "[console]" => &mut slots.console,
                "[stats]" => &mut slots.stats,
                "[[rules]]" => &mut slots.rule,
                // Needs key files; its defaults are the named constants
                // checked in `documented_defaults_match_the_named_constants`.
                "[tokens]" => continue,
                other => panic!("{other} {}: add the section to this test", k.name),
            };
            *slot = line.clone();
            // The first engine and endpoint role the key applies to.
            let applies = ["postgres", "mysql"]
                .into_iter()
                .flat_map(|engine| ["read_write", "read_only", "split"].map(|role| (engine, role)))
                .find_map(|(engine, role)| {
                    settings_of(&config_with(engine, role, &slots)).map(|with| (engine, role, with))
                });
            let Some((engine, role, with)) = applies else {
                problems.push(format!(
                    "{} `{line}` is refused for every engine and role",
                    section.name
                ));
                continue;
            };
            let without = settings_of(&config_with(engine, role, &Slots::default()))
                .unwrap_or_else(|| panic!("the base configuration ({engine}, {role}) is refused"));
            if with != without {
                problems.push(format!(
                    "{} `{line}` is not what the validator applies without it: {}",
                    section.name,
                    first_difference(&with, &without)
                ));
            }
            checked += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 30, "only {checked} defaults checked");
}
