//! The reference for `[[clusters]]` and a cluster's `pool`.

use super::{Key, Section};

pub(super) const CLUSTERS: Section = Section {
    name: "[[clusters]]",
    about: "One replicated database: its backends, how they are probed, failover waits, and its pools. \
            Repeat the table for each cluster.",
    keys: &[
        Key {
            name: "name",
            kind: "string",
            default: None,
            about: "Required. The cluster's name, unique and not empty; endpoints and rules refer to it.",
        },
        Key {
            name: "engine",
            kind: "string",
            default: None,
            about: "Required. The wire protocol of the backends: `\"postgres\"` (or `\"postgresql\"`) \
                    or `\"mysql\"` (or `\"mariadb\"`).",
        },
        Key {
            name: "backends",
            kind: "list of strings",
            default: None,
            about: "Required. The `host:port` of each backend, at least one. With `monitor_secret`, \
                    which one is the writer is discovered by probing, not taken from the order.",
        },
        Key {
            name: "monitor_secret",
            kind: "string",
            default: None,
            about: "Name of the secret the health probes log in with (they read role, `max_connections`, \
                    replication position and lag). No default: without it nothing is probed, the first backend \
                    is taken as the writer and the others as readers.",
        },
        Key {
            name: "health_check_interval",
            kind: "duration",
            default: Some("1s"),
            about: "Time between probe rounds (a round also runs at once when a session could not connect). \
                    Probes run only with `monitor_secret`.",
        },
        Key {
            name: "health_check_timeout",
            kind: "duration",
            default: Some("1s"),
            about: "A probe that has not answered within this counts as failed, so a hung server is noticed \
                    although its connection stays open.",
        },
        Key {
            name: "health_check_failures",
            kind: "integer",
            default: Some("2"),
            about: "Consecutive failed probes before a backend is marked down. At least 1.",
        },
        Key {
            name: "health_check_successes",
            kind: "integer",
            default: Some("2"),
            about: "Consecutive good probes before a backend marked down is marked up again. At least 1.",
        },
        Key {
            name: "failover_hold",
            kind: "duration",
            default: Some("30s"),
            about: "How long a transaction or a login waits for a writer (or for any backend its endpoint may use, \
                    or for a paused cluster or endpoint to resume) before it gets an error \
                    (SQLSTATE 53300, MySQL 1040).",
        },
        Key {
            name: "switchover_command",
            kind: "string",
            default: None,
            about: "The command the admin API's switchover runs through `sh -c` to promote a backend, \
                    with `{target}` replaced by its `host:port`. No default: without it a switchover is refused.",
        },
        Key {
            name: "weights",
            kind: "table of integers",
            default: None,
            about: "Read-only balancing weight by backend address, such as `{ \"10.0.0.2:5432\" = 2 }`: \
                    a backend of weight 2 takes twice the leases of one of weight 1. Each key must be one of \
                    the cluster's backends and each weight at least 1; a backend not listed weighs 1.",
        },
        Key {
            name: "connect_timeout",
            kind: "duration",
            default: Some("5s"),
            about: "Time allowed to open a new backend connection for a pool.",
        },
        Key {
            name: "backend_tls",
            kind: "string",
            default: Some("prefer"),
            about: "TLS toward the backends (pools, probes, cancels), with libpq's `sslmode` names: \
                    `\"disable\"`; `\"prefer\"` (TLS when the server offers it, else plain, and plain again after \
                    a failed handshake, logged at WARN once a minute per server; the certificate \
                    is not verified); `\"require\"` (TLS or no connection; not verified); `\"verify-ca\"` \
                    (the chain must lead to `backend_tls_ca`); `\"verify-full\"` (and the certificate must \
                    name the backend's host, or `backend_tls_server_name`). PostgreSQL: SSLRequest, then \
                    the handshake; MySQL: the SSL request after the greeting, so `caching_sha2_password` \
                    needs no RSA key exchange and `mysql_clear_password` is allowed. A refused handshake \
                    is logged with its reason; the client is told only that the server could not be reached.",
        },
        Key {
            name: "backend_tls_ca",
            kind: "string",
            default: None,
            about: "PEM file of the CA certificates the servers' chains are verified against. Required by \
                    `\"verify-ca\"` and `\"verify-full\"`. Relative to the configuration file.",
        },
        Key {
            name: "backend_tls_cert",
            kind: "string",
            default: None,
            about: "PEM certificate chain the proxy presents to the servers (mutual TLS), with \
                    `backend_tls_key`. Relative to the configuration file.",
        },
        Key {
            name: "backend_tls_key",
            kind: "string",
            default: None,
            about: "PEM private key of `backend_tls_cert`.",
        },
        Key {
            name: "backend_tls_server_name",
            kind: "string",
            default: None,
            about: "The name `\"verify-full\"` checks the certificate for, and sends as SNI, instead of the \
                    backend's host (for servers reached by an address their certificate does not name).",
        },
        Key {
            name: "backend_tls_negotiation",
            kind: "string",
            default: Some("postgres"),
            about: "How a PostgreSQL connection asks for TLS, with libpq's `sslnegotiation` names: \
                    `\"postgres\"` (an SSLRequest, then the handshake) or `\"direct\"` (the handshake \
                    straight after the TCP connection, with ALPN `postgresql`: one round trip less; \
                    PostgreSQL 17 and later, and only with `backend_tls` = `\"require\"` or a verifying \
                    mode, so a server without it is never asked again in plain text). PostgreSQL \
                    clusters only.",
        },
        Key {
            name: "pool",
            kind: "table",
            default: None,
            about: "The cluster's pool settings, in the section below; each has its own default.",
        },
    ],
};

pub(super) const POOL: Section = Section {
    name: "[[clusters]] pool",
    about: "A cluster's pool settings, written `pool = { size = 20, ... }` in the cluster (or as a \
            `[clusters.pool]` table after it). Backend connections are pooled per (backend, backend user, \
            database); the limits on a server's share apply to all pools on that server together.",
    keys: &[
        Key {
            name: "size",
            kind: "integer",
            default: Some("20"),
            about: "Most backend connections in each pool, that is per (backend, backend user, database). \
                    At least 1.",
        },
        Key {
            name: "borrow_timeout",
            kind: "duration",
            default: Some("5s"),
            about: "How long a client waits (first come, first served) for a backend connection; \
                    then it gets an error naming the limit (on PostgreSQL, SQLSTATE 53300).",
        },
        Key {
            name: "max_connections_percent",
            kind: "integer",
            default: Some("90"),
            about: "Share, in percent, of each server's own `max_connections` that all pools on that server \
                    may use together; it applies once a probe has read `max_connections` (so only with \
                    `monitor_secret`). Between 1 and 100.",
        },
        Key {
            name: "max_idle_percent",
            kind: "integer",
            default: Some("50"),
            about: "Share, in percent, of each server's own `max_connections` that may sit idle in the pools \
                    on that server; like `max_connections_percent`, it applies once a probe has read \
                    `max_connections`. Between 1 and 100.",
        },
        Key {
            name: "init_query",
            kind: "string",
            default: None,
            about: "A statement run on every new backend connection. No default: nothing is run.",
        },
        Key {
            name: "server_lifetime",
            kind: "duration",
            default: None,
            about: "Backend connections older than this are closed instead of reused. \
                    No default: connections are not closed for their age.",
        },
        Key {
            name: "server_idle_timeout",
            kind: "duration",
            default: Some("10m"),
            about: "Backend connections idle in the pool for this long are closed.",
        },
    ],
};
