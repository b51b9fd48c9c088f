//! The reference for `[[endpoints]]` and an endpoint's `tls`.

use super::{Key, Section};

pub(super) const ENDPOINTS: Section = Section {
    name: "[[endpoints]]",
    about: "What clients connect to: a listen address on one cluster, with the role that decides which of its \
            backends serve each transaction. A configuration needs at least one endpoint. A reload applies \
            endpoints added, removed and changed: clients that connect from then on get the new settings, \
            sessions already connected keep theirs (but for `max_client_connections`).",
    keys: &[
        Key {
            name: "name",
            kind: "string",
            default: None,
            about: "Required. The endpoint's name, unique and not empty; rules refer to it, and a token's `aud` \
                    must be it.",
        },
        Key {
            name: "listen",
            kind: "string",
            default: None,
            about: "Required. The `ip:port` clients connect to; no two endpoints may listen on the same one \
                    (port 0 picks a free port).",
        },
        Key {
            name: "cluster",
            kind: "string",
            default: None,
            about: "Required. The name of the `[[clusters]]` entry the endpoint serves; its engine is the \
                    protocol clients speak.",
        },
        Key {
            name: "role",
            kind: "string",
            default: None,
            about: "Required. `\"read_write\"`: every transaction goes to the writer. `\"read_only\"`: each goes \
                    to the up replica with the fewest leases for its weight, else as `reader_fallback` says. `\"split\"`: a \
                    transaction known to be read-only goes to a replica, everything else to the writer.",
        },
        Key {
            name: "pool_mode",
            kind: "string",
            default: Some("transaction"),
            about: "How long a client holds a backend connection: `\"transaction\"` (from the first message of a \
                    transaction to its end; sessions that create state that cannot move are pinned), \
                    `\"session\"` (the whole session, reset when it ends) or `\"statement\"` (one statement; transaction \
                    blocks are refused).",
        },
        Key {
            name: "max_replica_lag",
            kind: "duration",
            default: None,
            about: "`read_only` and `split` endpoints only: replicas further behind than this are skipped \
                    (for rules' `route = \"replica\"` too). No default: lag does not exclude a replica.",
        },
        Key {
            name: "reader_fallback",
            kind: "string",
            default: Some("writer"),
            about: "`read_only` endpoints only: when no replica can serve, `\"writer\"` sends reads to the writer; \
                    `\"error\"` makes them wait for a replica up to the cluster's `failover_hold`, then fail.",
        },
        Key {
            name: "writer_reads",
            kind: "boolean",
            default: Some("false"),
            about: "`read_only` and `split` endpoints only: the writer is also a reader. A read goes to whichever of \
                    the replicas and the writer has the fewest leases for its weight (routed as \
                    `writer_as_reader` when it is the writer), so an idle writer's CPU serves reads too, as \
                    ProxySQL's `writer_is_also_reader` does.",
        },
        Key {
            name: "read_your_writes",
            kind: "boolean",
            default: Some("true"),
            about: "`split` endpoints only: after a client's transaction that may have written, its reads go \
                    only to a replica that has replayed that write (as of its last probe), else to the writer.",
        },
        Key {
            name: "read_only_functions",
            kind: "list of strings",
            default: Some("[]"),
            about: "`split` endpoints only: user-defined functions free of side effects, such as \
                    `[\"f\", \"schema.g\"]`; a statement calling any other user-defined function goes to the writer.",
        },
        Key {
            name: "max_client_connections",
            kind: "integer",
            default: Some("10000"),
            about: "Most client connections open on the endpoint at once; more are refused (on PostgreSQL, SQLSTATE 53300). \
                    A reload applies a new value to clients already connected too.",
        },
        Key {
            name: "idle_client_timeout",
            kind: "duration",
            default: None,
            about: "Clients idle outside a transaction for longer than this are disconnected (on PostgreSQL, SQLSTATE 57P05). \
                    No default: idle clients stay.",
        },
        Key {
            name: "pinning_filter",
            kind: "list of strings",
            default: Some("[]"),
            about: "Parameters whose `SET` does not pin the session, compared without case. PostgreSQL: the value \
                    stays on whichever backend connection it was set on. MySQL: the variable is replayed on \
                    the next connection like the built-in tracked ones.",
        },
        Key {
            name: "require_tls",
            kind: "boolean",
            default: Some("false"),
            about: "Refuse clients that do not use TLS (on PostgreSQL, SQLSTATE 28000). Needs `tls`.",
        },
        Key {
            name: "tls",
            kind: "table",
            default: None,
            about: "The certificate and key TLS is offered with, in the section below. \
                    No default: without it, TLS is not offered.",
        },
        Key {
            name: "client_auth",
            kind: "string",
            default: Some("scram"),
            about: "`\"scram\"`: clients prove the password in a challenge exchange (SCRAM-SHA-256, or md5 for \
                    tenants with `md5_hash`; on MySQL endpoints, the authentication plugin's exchange). `\"password\"`: clients send the \
                    password itself, checked as a signed token or against the tenant's verifier; it needs \
                    `tls` unless `allow_plaintext_tokens = true`.",
        },
        Key {
            name: "allow_plaintext_tokens",
            kind: "boolean",
            default: Some("false"),
            about: "Let a `client_auth = \"password\"` endpoint take passwords and tokens over plain TCP. \
                    For local testing only.",
        },
        Key {
            name: "mysql_default_auth",
            kind: "string",
            default: Some("mysql_native_password"),
            about: "Endpoints of MySQL clusters only: the authentication plugin the greeting proposes, \
                    `\"mysql_native_password\"`, `\"caching_sha2_password\"` or `\"client_ed25519\"` \
                    (or `\"ed25519\"`; every client is then switched to it, so tenants need `mysql_ed25519`).",
        },
        Key {
            name: "mysql_rsa_key",
            kind: "string",
            default: None,
            about: "Endpoints of MySQL clusters only: path of a PEM RSA private key (PKCS#8 or PKCS#1, 2048 bits \
                    or more) for `caching_sha2_password` full authentication over plain TCP. No default: without \
                    it, such clients are switched to `mysql_native_password`. A reload reads the file again: a \
                    new key (at the same path or another) serves new connections.",
        },
    ],
};

pub(super) const TLS: Section = Section {
    name: "[[endpoints]] tls",
    about: "An endpoint's TLS certificate and key, written `tls = { cert = \"...\", key = \"...\" }` in the \
            endpoint (or as an `[endpoints.tls]` table after it). A reload reads both files again: a new \
            certificate or key, at the same paths or others, serves the handshakes from then on (sessions \
            already connected keep theirs), and the reload's answer names it; one that does not load refuses \
            the whole reload.",
    keys: &[
        Key {
            name: "cert",
            kind: "string",
            default: None,
            about: "Required. Path of the PEM certificate chain, leaf first.",
        },
        Key {
            name: "key",
            kind: "string",
            default: None,
            about: "Required. Path of the PEM private key (PKCS#8, PKCS#1 or SEC1).",
        },
    ],
};
