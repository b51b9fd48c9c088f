//! The reference for the credential sections: `[[tenants]]`, `[[secrets]]`,
//! `[secrets_store]` and `[tokens]`.

use super::{Key, Section};

pub(super) const TENANTS: Section = Section {
    name: "[[tenants]]",
    about: "Who clients log in as: a name, the databases it may use, the backend credentials behind it, how its \
            password or token is checked, and its limits. More tenants can come from `[proxy] tenant_directory`.",
    keys: &[
        Key {
            name: "name",
            kind: "string",
            default: None,
            about: "Required. The user name clients log in with; unique and not empty.",
        },
        Key {
            name: "databases",
            kind: "list of strings",
            default: None,
            about: "Required. The only databases the tenant may use, at least one; any other is refused \
                    with the same answer whether it exists or not.",
        },
        Key {
            name: "secret",
            kind: "string",
            default: None,
            about: "Required. The name of the secret (from `[[secrets]]` or the secrets store) whose backend \
                    user and password the tenant's sessions use.",
        },
        Key {
            name: "max_client_connections",
            kind: "integer",
            default: None,
            about: "Most client connections the tenant may have open at once, checked after authentication; \
                    more are refused (on PostgreSQL, SQLSTATE 53300). No default: unlimited. A reload applies a new \
                    value at once, counting the connections already open.",
        },
        Key {
            name: "scram_verifier",
            kind: "string",
            default: None,
            about: "The SCRAM-SHA-256 verifier of the tenant's password, from \
                    `echo -n PASSWORD | gatehouse hash-password`. A tenant needs exactly one of `scram_verifier` \
                    and `md5_hash`, unless it has `token = true`, `mysql_native_password` or `mysql_ed25519`.",
        },
        Key {
            name: "md5_hash",
            kind: "string",
            default: None,
            about: "PostgreSQL's stored md5 form of the password, `\"md5\"` followed by 32 hex digits, from \
                    `gatehouse hash-password --md5 --user NAME`. Not with `scram_verifier`.",
        },
        Key {
            name: "mysql_native_password",
            kind: "string",
            default: None,
            about: "MySQL's stored form of the password, `\"*\"` followed by 40 hex digits (SHA1(SHA1(password))), \
                    from `gatehouse hash-password --mysql`: for MySQL clients using `mysql_native_password` \
                    or `caching_sha2_password`.",
        },
        Key {
            name: "mysql_ed25519",
            kind: "string",
            default: None,
            about: "MariaDB's stored Ed25519 public key of the password (base64, as in a MariaDB account's \
                    `authentication_string`), from `gatehouse hash-password --mysql-ed25519`: \
                    for clients using `client_ed25519`.",
        },
        Key {
            name: "token",
            kind: "boolean",
            default: Some("false"),
            about: "Whether the tenant may present a signed token as its password (on `client_auth = \
                    \"password\"` endpoints). Needs a `[tokens]` section.",
        },
        Key {
            name: "max_backend_connections",
            kind: "integer",
            default: None,
            about: "Most backend connections the tenant's sessions may hold at once, across its pools; more wait \
                    up to the pool's `borrow_timeout`, then fail (on PostgreSQL, SQLSTATE 53300). At least 1. \
                    No default: unlimited. A reload applies a changed value at once, to sessions already \
                    connected too, counting the connections held; a limit added or removed applies to sessions \
                    that log in from then on.",
        },
        Key {
            name: "connection_rate",
            kind: "integer",
            default: None,
            about: "New connections a second the tenant may open, on average, checked after authentication; \
                    over it they are refused (on PostgreSQL, SQLSTATE 53300). At least 1. No default: unlimited. \
                    A reload that changes it or `connection_burst` starts the tenant's count afresh.",
        },
        Key {
            name: "connection_burst",
            kind: "integer",
            default: None,
            about: "New connections the tenant may open at once under `connection_rate`, which it needs. \
                    At least 1. No default: the value of `connection_rate`.",
        },
    ],
};

pub(super) const SECRETS: Section = Section {
    name: "[[secrets]]",
    about: "Backend credentials, referred to by name from tenants (`secret`) and clusters (`monitor_secret`). \
            They can also be kept in the encrypted `[secrets_store]`.",
    keys: &[
        Key {
            name: "name",
            kind: "string",
            default: None,
            about: "Required. The secret's name, unique and not empty.",
        },
        Key {
            name: "user",
            kind: "string",
            default: None,
            about: "Required. The user name the proxy logs in to the backends with.",
        },
        Key {
            name: "password",
            kind: "string",
            default: None,
            about: "The backend password, written in the file. A secret needs exactly one of `password` \
                    and `password_env`.",
        },
        Key {
            name: "password_env",
            kind: "string",
            default: None,
            about: "The name of an environment variable holding the backend password; it must be set when the \
                    configuration is read.",
        },
    ],
};

pub(super) const SECRETS_STORE: Section = Section {
    name: "[secrets_store]",
    about: "An encrypted secrets file, managed with `gatehouse secrets`, whose secrets are decrypted at start \
            and on every reload and join the `[[secrets]]`; a name in both is an error. Optional.",
    keys: &[
        Key {
            name: "file",
            kind: "string",
            default: None,
            about: "Required. Path of the encrypted secrets file.",
        },
        Key {
            name: "key_file",
            kind: "string",
            default: None,
            about: "Path of a file holding the master key: 32 raw bytes, or 64 hex digits or the base64 of \
                    32 bytes (`gatehouse secrets keygen`). The section needs exactly one of `key_file` and \
                    `key_env`.",
        },
        Key {
            name: "key_env",
            kind: "string",
            default: None,
            about: "The name of an environment variable holding the master key, as 64 hex digits or the base64 \
                    of 32 bytes.",
        },
    ],
};

pub(super) const TOKENS: Section = Section {
    name: "[tokens]",
    about: "How signed tokens (JWT) that clients present as passwords are verified: signature, `exp`, `nbf`, \
            `iss`, `aud` (the endpoint's name), `sub` (the user name) and `db` (the database). Needed by tenants \
            with `token = true`. A reload reads the key files again and applies any change to the logins from \
            then on.",
    keys: &[
        Key {
            name: "issuer",
            kind: "string",
            default: None,
            about: "Required. The only `iss` accepted.",
        },
        Key {
            name: "jwks_file",
            kind: "string",
            default: None,
            about: "Path of a JWKS document with the verifying keys (RS256, ES256 or EdDSA; keys for other uses \
                    are skipped). The section needs `jwks_file`, `hs256_secret_file` or both.",
        },
        Key {
            name: "hs256_secret_file",
            kind: "string",
            default: None,
            about: "Path of a file holding an HS256 shared secret of at least 32 bytes (one trailing line end \
                    is dropped); it verifies only tokens without a `kid`.",
        },
        Key {
            name: "leeway",
            kind: "duration",
            default: Some("30s"),
            about: "Tolerance for clock skew on `exp` and `nbf`, in whole seconds.",
        },
        Key {
            name: "cache_capacity",
            kind: "integer",
            default: Some("10000"),
            about: "Most verified tokens kept in the cache (a cached token is not verified again until it \
                    expires); 0 disables the cache.",
        },
    ],
};
