//! The reference for the process-wide sections: `[proxy]`, `[admin]` and
//! `[console]`.

use super::{Key, Section};

pub(super) const PROXY: Section = Section {
    name: "[proxy]",
    about: "Process-wide settings: client timeouts, message size, logging, threads and login-failure limits. \
            The section and each of its keys are optional. A reload applies every key but those that say a \
            change takes a restart; its answer lists those under `not_applied`.",
    keys: &[
        Key {
            name: "login_timeout",
            kind: "duration",
            default: Some("15s"),
            about: "Time a client has to finish TLS, startup and authentication; \
                    past it the connection is closed with an error (on PostgreSQL, SQLSTATE 08P01). \
                    A reload applies a new value to new logins.",
        },
        Key {
            name: "client_message_timeout",
            kind: "duration",
            default: Some("30s"),
            about: "Longest time a client may leave a message half sent; past it the session ends (on PostgreSQL, SQLSTATE 08P01). \
                    A reload applies a new value (a session-mode session keeps the one it started with).",
        },
        Key {
            name: "shutdown_timeout",
            kind: "duration",
            default: Some("10s"),
            about: "On SIGTERM or SIGINT, time given to open sessions to finish before the proxy exits. \
                    A reload applies a new value.",
        },
        Key {
            name: "park_idle_after",
            kind: "duration",
            default: Some("250ms"),
            about: "A plain-TCP client session idle without a backend connection for this long (up to twice this) parks: \
                    it gives up its task until the client sends something. `\"0s\"` never parks. \
                    A change takes a restart.",
        },
        Key {
            name: "max_message_bytes",
            kind: "integer",
            default: Some("67108864"),
            about: "Largest client message accepted, in bytes (the default is 64 MiB); \
                    a larger one ends the session. Between 1024 and 1073741822. \
                    A reload applies a new value (a session-mode session keeps the one it started with).",
        },
        Key {
            name: "log_filter",
            kind: "string",
            default: Some("info"),
            about: "The `tracing` filter for log lines, such as `\"info,gatehouse=debug\"`; \
                    the `RUST_LOG` environment variable overrides it. One that does not parse is an error; \
                    a reload applies a new one.",
        },
        Key {
            name: "log_format",
            kind: "string",
            default: Some("text"),
            about: "`\"text\"` (values with spaces quoted, colours only on a terminal) or `\"json\"` \
                    (one object a line with `timestamp`, `level`, `target`, `message` and every field). \
                    A change takes a restart.",
        },
        Key {
            name: "worker_threads",
            kind: "integer",
            default: Some("1"),
            about: "Runtime worker threads: 1 is a single event loop; more is a multi-thread runtime with \
                    that many; 0 is one per CPU. A change takes a restart.",
        },
        Key {
            name: "tenant_directory",
            kind: "string",
            default: None,
            about: "Path of a JSON-lines file of more tenants, one object a line with the `[[tenants]]` keys, \
                    read at start and on every reload; a tenant name already used is an error. No default: \
                    without it, only `[[tenants]]` are read.",
        },
        Key {
            name: "auth_failures_per_minute_per_address",
            kind: "integer",
            default: Some("30"),
            about: "Failed logins one source address (for IPv6, its /64) may make a minute, also the burst; \
                    over it, logins from there are refused before any password is checked. \
                    At least 1. A reload applies a new value: counting starts afresh, and addresses already \
                    over the old limit stay refused until their time is up.",
        },
        Key {
            name: "auth_failures_per_minute_per_user",
            kind: "integer",
            default: Some("10"),
            about: "Failed logins one user name (as sent, known or not) may see a minute, also the burst; \
                    over it, logins as that name are refused before any password is checked. \
                    At least 1. A reload applies a new value: counting starts afresh, and names already \
                    over the old limit stay refused until their time is up.",
        },
        Key {
            name: "upgrade_socket",
            kind: "string",
            default: None,
            about: "Path of a Unix socket (mode 0600, owner only) on which the running proxy hands its listening \
                    sockets to a successor started with `gatehouse upgrade --config <file>`: the successor \
                    accepts on the same sockets (no connection refused or lost in between), then the old process \
                    stops accepting, lets transactions in flight finish, closes idle sessions between \
                    transactions and exits. No default: without it there is no hand-over. A change takes a restart.",
        },
    ],
};

pub(super) const ADMIN: Section = Section {
    name: "[admin]",
    about: "The admin HTTP API: `/metrics`, the `/api/...` state, reload and operator commands, \
            the `/api/health` and `/api/ready` probes, and the live dashboard page at `/dashboard`. \
            Optional: without it there is no admin listener.",
    keys: &[
        Key {
            name: "listen",
            kind: "string",
            default: None,
            about: "Required. The `ip:port` the admin API listens on, such as `\"127.0.0.1:9930\"`. \
                    A change takes a restart.",
        },
        Key {
            name: "token_file",
            kind: "string",
            default: None,
            about: "Path of a file holding a bearer token (surrounding whitespace ignored; empty is an error): \
                    every request but `/api/health`, `/api/ready` and the dashboard page (`/dashboard`, \
                    which carries no data: its script asks for the token and sends it) must then send \
                    `Authorization: Bearer <token>`. No default: without it no token is asked for, \
                    so listen on a loopback address. A change takes a restart.",
        },
    ],
};

pub(super) const CONSOLE: Section = Section {
    name: "[console]",
    about: "The SQL admin console: a virtual database on every endpoint, answered by Gatehouse itself over the \
            endpoint's own protocol (psql, the mysql client, any driver's simple queries), like PgBouncer's \
            `pgbouncer` database. `SHOW HELP` on it lists the commands. Optional: without it nobody can use it.",
    keys: &[
        Key {
            name: "database",
            kind: "string",
            default: Some("gatehouse"),
            about: "The database name that reaches the console, 1 to 63 bytes. A tenant listed below that asks for \
                    it gets the console instead of a backend. Applied by a reload (new logins).",
        },
        Key {
            name: "admin_users",
            kind: "list of strings",
            default: Some("[]"),
            about: "Tenants that may run every console command: `SHOW ...`, `PAUSE`, `RESUME`, `DISABLE`, \
                    `ENABLE`, `DRAIN`, `UNDRAIN`, `SWITCHOVER`, `RELOAD`, `KILL` (PgBouncer's `admin_users`). Each \
                    must be a tenant. Applied by a reload (new logins).",
        },
        Key {
            name: "monitor_users",
            kind: "list of strings",
            default: Some("[]"),
            about: "Tenants that may run `SHOW` commands only; any other command is refused with \
                    permission denied (SQLSTATE 42501, MySQL error 1227), as PgBouncer's `stats_users`. Each \
                    must be a tenant, and not also in `admin_users`. Applied by a reload (new logins).",
        },
    ],
};
