//! The reference for the query-control sections: `[digests]`, `[[rules]]`
//! and a rule's `route` and `rewrite`.

use super::{Key, Section};

pub(super) const DIGESTS: Section = Section {
    name: "[digests]",
    about: "Per-digest statistics, shown by `GET /api/digests` (a digest is a statement with its literals taken \
            out). Optional.",
    keys: &[
        Key {
            name: "enabled",
            kind: "boolean",
            default: Some("false"),
            about: "Whether per-digest statistics are kept.",
        },
        Key {
            name: "max_digests",
            kind: "integer",
            default: Some("2000"),
            about: "How many digests the statistics keep (the most frequent). Between 1 and 100000.",
        },
    ],
};

pub(super) const RULES: Section = Section {
    name: "[[rules]]",
    about: "Query rules, evaluated top to bottom for every statement on every endpoint. A rule matches when every \
            match field it gives matches (a list given must not be empty); it needs at least one action. The first \
            matching rule ends the evaluation unless it has `continue = true`. At most 10000 rules; regexes use \
            the Rust `regex` syntax and are limited to 1 MiB compiled.",
    keys: &[
        Key {
            name: "name",
            kind: "string",
            default: None,
            about: "Required. The rule's name, unique, 1 to 64 characters of `A-Z a-z 0-9 _ . -`; \
                    `GET /api/rules` lists the rules by it with their hits.",
        },
        Key {
            name: "tenants",
            kind: "list of strings",
            default: None,
            about: "Match field: the tenants (user names) whose statements match. No default: any tenant.",
        },
        Key {
            name: "databases",
            kind: "list of strings",
            default: None,
            about: "Match field: the databases whose statements match. No default: any database.",
        },
        Key {
            name: "endpoints",
            kind: "list of strings",
            default: None,
            about: "Match field: the names of the endpoints whose statements match; each must be a configured \
                    endpoint. No default: every endpoint.",
        },
        Key {
            name: "client_cidrs",
            kind: "list of strings",
            default: None,
            about: "Match field: client addresses, as CIDR blocks (`\"10.0.0.0/8\"`) or bare addresses. \
                    No default: any client.",
        },
        Key {
            name: "kinds",
            kind: "list of strings",
            default: None,
            about: "Match field: the statement's first key word in lower case (after spaces, `(` and comments), \
                    such as `\"select\"` or `\"delete\"`; `WITH ... SELECT` is `\"with\"`. No default: any kind.",
        },
        Key {
            name: "digest",
            kind: "string",
            default: None,
            about: "Match field: the exact digest text. Not with `digest_id`.",
        },
        Key {
            name: "digest_id",
            kind: "string",
            default: None,
            about: "Match field: the digest's id, 16 hex digits, as `GET /api/digests` shows it. Not with `digest`.",
        },
        Key {
            name: "digest_regex",
            kind: "string",
            default: None,
            about: "Match field: a regex the digest text must match.",
        },
        Key {
            name: "query_regex",
            kind: "string",
            default: None,
            about: "Match field: a regex the statement text must match.",
        },
        Key {
            name: "block",
            kind: "string",
            default: None,
            about: "Action: refuse the statement with this message (SQLSTATE 42501, MySQL 1142). \
                    Not with `route`, `rewrite` or `statement_timeout`.",
        },
        Key {
            name: "route",
            kind: "string or table",
            default: None,
            about: "Action: where the transaction the statement starts is served: `\"writer\"`, `\"replica\"` \
                    (the least busy replica within the endpoint's `max_replica_lag`, else the writer), or a table described below. Inside an open \
                    transaction the connection stays. The first matching rule's route wins.",
        },
        Key {
            name: "rewrite",
            kind: "table",
            default: None,
            about: "Action: replace every match of a regex in the statement, in the section below; \
                    the rewrites of several matching rules compose.",
        },
        Key {
            name: "statement_timeout",
            kind: "duration",
            default: None,
            about: "Action: cancel the statement when it runs longer than this, as a client's cancel request \
                    would (SQLSTATE 57014, MySQL 1317). More than 0. The first matching rule's timeout wins.",
        },
        Key {
            name: "log",
            kind: "boolean",
            default: Some("false"),
            about: "Action: record the statements the rule matches, shown by `GET /api/rules/log` \
                    (the last 256).",
        },
        Key {
            name: "continue",
            kind: "boolean",
            default: Some("false"),
            about: "Whether evaluation goes on to later rules after this one matches (a `block` stops it anyway).",
        },
    ],
};

pub(super) const ROUTE: Section = Section {
    name: "[[rules]] route",
    about: "A rule's `route` written as a table, with exactly one of these keys; it may instead be the string \
            `\"writer\"` or `\"replica\"`.",
    keys: &[
        Key {
            name: "backend",
            kind: "string",
            default: None,
            about: "The `host:port` of a backend of the cluster of every endpoint the rule applies to; it serves \
                    the transaction while up and not draining, whatever its role.",
        },
        Key {
            name: "cluster",
            kind: "string",
            default: None,
            about: "The name of a cluster of the same engine; its writer serves the transaction from that \
                    cluster's own pool.",
        },
    ],
};

pub(super) const REWRITE: Section = Section {
    name: "[[rules]] rewrite",
    about: "A rule's `rewrite = { pattern = \"...\", replacement = \"...\" }`.",
    keys: &[
        Key {
            name: "pattern",
            kind: "string",
            default: None,
            about: "Required. The regex whose every match in the statement text is replaced.",
        },
        Key {
            name: "replacement",
            kind: "string",
            default: None,
            about: "Required. The replacement text: `$1` or `${name}` insert a group of the pattern \
                    (a group it does not have is an error), `$$` a `$`.",
        },
    ],
};
