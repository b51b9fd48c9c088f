//! What both engines' rule-matrix tests (`pg/rules_matrix.rs`,
//! `mysql/rules_matrix.rs`) put to their proxies: the rules of
//! `rules_matrix.toml` with the engine's names filled in, the statements
//! each match field's rule must block (with the message the client sees),
//! and the rules each test expects hits on. Each test adds its driver's
//! calls and its engine's own checks.

/// The statement whose digest the `digest_id` rule names.
pub const DIGEST_ID_OF: &str = "SELECT 6 AS m_digest_id";

/// One statement per match field, and the message its rule blocks it with.
pub const BLOCKED: [(&str, &str); 8] = [
    ("SELECT 1 AS m_tenant", "matched by tenant"),
    ("SELECT 1 AS m_database", "matched by database"),
    ("SELECT 1 AS m_endpoint", "matched by endpoint"),
    ("SELECT 1 AS m_client", "matched by client address"),
    ("INSERT INTO no_such_table VALUES ('m_kind')", "matched by kind"),
    ("SELECT 5 AS m_digest", "matched by digest"),
    ("SELECT 99 AS m_digest_id", "matched by digest id"),
    ("select 1 as M_QUERY", "matched by query text"),
];

/// The match-field rules, each hit at least once per protocol.
pub const MATCH_RULES: [&str; 8] = [
    "m-tenant",
    "m-database",
    "m-endpoint",
    "m-client",
    "m-kind",
    "m-digest",
    "m-digest-id",
    "m-query",
];

/// The action rules, each hit at least once per protocol.
pub const ACTION_RULES: [&str; 5] = ["a-writer", "a-replica", "a-backend", "a-cluster", "a-log"];

/// The engine's names for the placeholders of `rules_matrix.toml`.
pub struct Names<'a> {
    /// The read/write endpoint the cases run on.
    pub endpoint: &'a str,
    pub read_only: &'a str,
    pub split: &'a str,
    /// A replica's `host:port`, a backend of all three endpoints' cluster.
    pub replica: &'a str,
    /// Another cluster of the engine, whose connections show its init_query.
    pub other_cluster: &'a str,
    /// The digest id of [`DIGEST_ID_OF`], 16 hex digits.
    pub digest_id: &'a str,
}

/// The matrix rules with `names` filled in.
pub fn rules(names: &Names<'_>) -> String {
    include_str!("rules_matrix.toml")
        .replace("@EP@", names.endpoint)
        .replace("@RO@", names.read_only)
        .replace("@SPLIT@", names.split)
        .replace("@REPLICA@", names.replica)
        .replace("@OTHER@", names.other_cluster)
        .replace("@DIGEST_ID@", names.digest_id)
}
