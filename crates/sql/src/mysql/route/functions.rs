//! The MySQL/MariaDB router's name lists: key words that may precede `(`
//! without calling a function, the allow-list of built-in functions that
//! are safe on a replica, the deny-list that names *why* a known built-in
//! must run on the writer, and the system variables that differ between
//! the writer and a replica or between sessions. A name on neither
//! function list is a stored function (or a loadable UDF) and counts as a
//! write unless the operator lists it (`read_only_functions`).
//!
//! Function names are case-insensitive (MySQL Reference Manual §11.2.5
//! "Function Name Parsing and Resolution"). A quoted or db-qualified name
//! never reaches a built-in, so only the operator's list can make it a read.

use crate::route::WriteReason::{self, Locks, SessionBound, SideEffectFunction as Effect, WriterOnly};
use crate::route::functions::{sorted_contains, starts_with_ci};

/// True if the unquoted word `text` is a key word that may stand before `(`
/// without being a function call (`IN (`, `OVER (`, `USE INDEX (`, ...).
pub(super) fn is_keyword(text: &str) -> bool {
    sorted_contains(&KEYWORDS, text, true)
}

/// Why a call of `db.name` (or `name`; `quoted` if written in quotes) must
/// run on the writer, or `None` if it is safe on a replica.
pub(super) fn call_reason(db: Option<&str>, name: &str, quoted: bool, read_only: &[&str]) -> Option<WriteReason> {
    if let Some(&(_, reason)) = DENY.iter().find(|(n, _)| name.eq_ignore_ascii_case(n)) {
        return Some(reason);
    }
    let builtin = db.is_none() && !quoted;
    if builtin && (sorted_contains(&PURE, name, true) || starts_with_ci(name, "st_")) {
        return None;
    }
    let listed = read_only.iter().any(|entry| {
        let entry = entry.trim();
        match (entry.rsplit_once('.'), db) {
            (Some((d, n)), Some(db)) => db.eq_ignore_ascii_case(d) && name.eq_ignore_ascii_case(n),
            (None, None) => name.eq_ignore_ascii_case(entry),
            _ => false,
        }
    });
    match listed {
        true => None,
        false => Some(Effect),
    }
}

/// Why reading the system variable `name` (scope prefix removed) must run
/// on the writer, if it must. Other `@@` variables are reads: the proxy
/// replays tracked session settings on every backend connection.
pub(super) fn sysvar_reason(name: &str) -> Option<WriteReason> {
    let is = |list: &[&str]| list.iter().any(|n| name.eq_ignore_ascii_case(n));
    if is(&WRITER_VARS) {
        return Some(WriterOnly);
    }
    is(&SESSION_VARS).then_some(SessionBound)
}

/// Server role and identity: a replica answers for itself, and drivers
/// read these to find the writable server (Connector/J, MariaDB Connector
/// `@@innodb_read_only` on Aurora).
pub(super) const WRITER_VARS: [&str; 6] = [
    "read_only",
    "super_read_only",
    "innodb_read_only",
    "server_id",
    "server_uuid",
    "hostname",
];

/// Values that describe this session's previous statements or state.
const SESSION_VARS: [&str; 10] = [
    "last_insert_id",
    "identity",
    "insert_id",
    "warning_count",
    "error_count",
    "last_gtid",
    "in_transaction",
    "pseudo_thread_id",
    "rand_seed1",
    "rand_seed2",
];

/// Built-ins that are not safe on a replica, with the reason.
const DENY: [(&str, WriteReason); 22] = [
    // Locking functions (§14.14, MariaDB KB "GET_LOCK"): named locks live
    // on one server.
    ("get_lock", Locks),
    ("release_lock", Locks),
    ("release_all_locks", Locks),
    ("is_free_lock", Locks),
    ("is_used_lock", Locks),
    ("service_get_read_locks", Locks),
    ("service_get_write_locks", Locks),
    ("service_release_locks", Locks),
    // Information functions (§14.15) about this session's statements.
    ("last_insert_id", SessionBound),
    ("row_count", SessionBound),
    ("found_rows", SessionBound),
    ("connection_id", SessionBound),
    ("ps_current_thread_id", SessionBound),
    // MariaDB sequences (KB "Sequence Overview"): NEXTVAL/SETVAL change the
    // sequence, LASTVAL is this session's last NEXTVAL.
    ("nextval", Effect),
    ("setval", Effect),
    ("lastval", SessionBound),
    // UUID_SHORT advances a server-wide counter seeded from server_id;
    // LOAD_FILE reads a file on whichever host runs it.
    ("uuid_short", Effect),
    ("load_file", Effect),
    // Waits for replication positions.
    ("master_pos_wait", WriterOnly),
    ("source_pos_wait", WriterOnly),
    ("master_gtid_wait", WriterOnly),
    ("wait_for_executed_gtid_set", WriterOnly),
];

/// Key words that may stand before `(` in a query without calling a
/// function (MySQL Reference Manual §11.3 "Keywords and Reserved Words").
#[rustfmt::skip]
const KEYWORDS: [&str; 56] = [
    "all", "and", "any", "as", "between", "by", "case", "columns", "distinct", "distinctrow", "div", "else", "escape",
    "except", "exists", "following", "for", "from", "group", "having", "in", "index", "intersect", "is", "join",
    "key", "lateral", "like", "nested", "not", "of", "on", "or", "ordinality", "over", "partition", "path",
    "preceding", "range", "regexp", "rlike", "row", "rows", "select", "some", "sounds", "straight_join", "then",
    "union", "using", "values", "when", "where", "window", "with", "xor",
];

/// Built-in functions (MySQL Reference Manual §14 "Functions and
/// Operators", MariaDB KB "Built-in Functions"), type names used in
/// `CONVERT(x, type(n))`, and `ST_*` spatial functions (matched by prefix)
/// that read nothing but their arguments and the clock. `SLEEP` and
/// `BENCHMARK` are here: waiting has no effect on data and can happen on a
/// replica as well as on the writer.
#[rustfmt::skip]
const PURE: [&str; 302] = [
    "abs", "acos", "add_months", "adddate", "addtime", "aes_decrypt", "aes_encrypt", "against", "any_value", "ascii",
    "asin", "atan", "atan2", "avg", "benchmark", "bin", "bin_to_uuid", "binary", "bit_and", "bit_count", "bit_length",
    "bit_or", "bit_xor", "cast", "ceil", "ceiling", "char", "char_length", "character_length", "charset", "chr",
    "coalesce", "coercibility", "collation", "column_check", "column_exists", "column_get", "column_json",
    "column_list", "compress", "concat", "concat_ws", "conv", "convert", "convert_tz", "cos", "cot", "count", "crc32",
    "crc32c", "cume_dist", "curdate", "current_date", "current_role", "current_time", "current_timestamp",
    "current_user", "curtime", "database", "date", "date_add", "date_format", "date_sub", "datediff", "datetime",
    "day", "dayname", "dayofmonth", "dayofweek", "dayofyear", "decimal", "decode", "default", "degrees", "dense_rank",
    "elt", "exp", "export_set", "extract", "extractvalue", "field", "find_in_set", "first_value", "float", "floor",
    "format", "format_bytes", "format_pico_time", "from_base64", "from_days", "from_unixtime", "geometrycollection",
    "get_format", "greatest", "group_concat", "grouping", "gtid_subset", "gtid_subtract", "hex", "hour",
    "icu_version", "if", "ifnull", "inet6_aton", "inet6_ntoa", "inet_aton", "inet_ntoa", "insert", "instr",
    "interval", "is_ipv4", "is_ipv4_compat", "is_ipv4_mapped", "is_ipv6", "is_uuid", "isnull", "json_array",
    "json_array_append", "json_array_insert", "json_array_intersect", "json_arrayagg", "json_compact",
    "json_contains", "json_contains_path", "json_depth", "json_detailed", "json_equals", "json_exists",
    "json_extract", "json_insert", "json_key_value", "json_keys", "json_length", "json_loose", "json_merge",
    "json_merge_patch", "json_merge_preserve", "json_normalize", "json_object", "json_object_filter_keys",
    "json_object_to_array", "json_objectagg", "json_overlaps", "json_pretty", "json_query", "json_quote",
    "json_remove", "json_replace", "json_schema_valid", "json_schema_validation_report", "json_search", "json_set",
    "json_storage_free", "json_storage_size", "json_table", "json_type", "json_unquote", "json_valid", "json_value",
    "lag", "last_day", "last_value", "lcase", "lead", "least", "left", "length", "linestring", "ln", "localtime",
    "localtimestamp", "locate", "log", "log10", "log2", "lower", "lpad", "ltrim", "make_set", "makedate", "maketime",
    "match", "max", "md5", "median", "microsecond", "mid", "min", "minute", "mod", "month", "monthname",
    "multilinestring", "multipoint", "multipolygon", "name_const", "natural_sort_key", "now", "nth_value", "ntile",
    "nullif", "nvl", "nvl2", "oct", "octet_length", "ord", "percent_rank", "percentile_cont", "percentile_disc",
    "period_add", "period_diff", "pi", "point", "polygon", "position", "pow", "power", "quarter", "quote", "radians",
    "rand", "random_bytes", "rank", "regexp_instr", "regexp_like", "regexp_replace", "regexp_substr", "repeat",
    "replace", "reverse", "right", "round", "row_number", "rpad", "rtrim", "schema", "sec_to_time", "second",
    "session_user", "sformat", "sha", "sha1", "sha2", "sign", "sin", "sleep", "soundex", "space", "sqrt",
    "statement_digest", "statement_digest_text", "std", "stddev", "stddev_pop", "stddev_samp", "str_to_date",
    "strcmp", "subdate", "substr", "substring", "substring_index", "subtime", "sum", "sysdate", "system_user", "tan",
    "time", "time_format", "time_to_sec", "timediff", "timestamp", "timestampadd", "timestampdiff", "to_base64",
    "to_char", "to_days", "to_seconds", "trim", "truncate", "ucase", "uncompress", "uncompressed_length", "unhex",
    "unix_timestamp", "updatexml", "upper", "user", "utc_date", "utc_time", "utc_timestamp", "uuid", "uuid_to_bin",
    "var_pop", "var_samp", "variance", "version", "week", "weekday", "weekofyear", "weight_string", "year",
    "yearweek",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_lower_case_and_unique() {
        for list in [&PURE[..], &KEYWORDS[..]] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "unsorted or duplicate");
            assert!(list.iter().all(|n| !n.bytes().any(|b| b.is_ascii_uppercase())));
        }
        for (name, _) in DENY {
            assert!(!PURE.contains(&name), "{name} is also pure");
        }
    }

    #[test]
    fn lookup_ignores_case_but_not_quoting_or_qualification() {
        assert_eq!(call_reason(None, "Date_Format", false, &[]), None);
        assert_eq!(call_reason(None, "ST_Distance", false, &[]), None);
        assert_eq!(call_reason(None, "date_format", true, &[]), Some(Effect));
        assert_eq!(call_reason(Some("app"), "lower", false, &[]), Some(Effect));
        assert_eq!(call_reason(Some("App"), "F", false, &["app.f"]), None);
        assert_eq!(call_reason(None, "F", true, &["f"]), None);
        assert_eq!(call_reason(None, "f", false, &["app.f"]), Some(Effect));
        assert_eq!(call_reason(None, "GET_LOCK", false, &["get_lock"]), Some(Locks));
        assert_eq!(sysvar_reason("INNODB_READ_ONLY"), Some(WriterOnly));
        assert_eq!(sysvar_reason("warning_count"), Some(SessionBound));
        assert_eq!(sysvar_reason("max_allowed_packet"), None);
    }
}
