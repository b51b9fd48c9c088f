//! The PostgreSQL router's name lists: key words that may precede `(`
//! without calling a function, the allow-list of built-in functions that
//! are safe on a hot standby, and the deny-list that names *why* a known
//! built-in must run on the writer. A name on neither list is a
//! user-defined function and counts as a write unless the operator lists it
//! (`read_only_functions`). Lists are sorted, lower case, and searched
//! without allocating.
//!
//! Assumption: a call to an allow-listed name, unqualified or qualified
//! with `pg_catalog`/`information_schema`, reaches the built-in (users do
//! not overload built-in names with side-effecting functions).

use super::WriteReason::{self, Locks, SessionBound, SideEffectFunction as Effect, WriterOnly};

/// A function name as written: an unquoted word (the server folds it to
/// lower case) or the inside of a quoted identifier (kept as is).
#[derive(Debug, Clone, Copy)]
pub(super) struct Name<'a> {
    pub(super) text: &'a str,
    pub(super) quoted: bool,
}

impl Name<'_> {
    /// True if the server resolves this name to `lower` (a lower-case name).
    pub(super) fn is(self, lower: &str) -> bool {
        match self.quoted {
            true => self.text == lower,
            false => eq_folded(self.text, lower),
        }
    }
}

/// True if `word` folded to ASCII lower case equals `lower` byte for byte.
fn eq_folded(word: &str, lower: &str) -> bool {
    word.len() == lower.len()
        && word
            .bytes()
            .zip(lower.bytes())
            .all(|(a, b)| a.to_ascii_lowercase() == b)
}

/// Binary search of a sorted lower-case `list` for `name`, folded to ASCII
/// lower case first if `fold`.
pub(crate) fn sorted_contains(list: &[&str], name: &str, fold: bool) -> bool {
    list.binary_search_by(|probe| {
        let name = name.bytes().map(|b| if fold { b.to_ascii_lowercase() } else { b });
        probe.bytes().cmp(name)
    })
    .is_ok()
}

/// True if `text` starts with `prefix` (lower case), ASCII case-insensitively.
pub(crate) fn starts_with_ci(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// True if the unquoted word `text` is a key word that may stand before `(`
/// without being a function call (`IN (`, `OVER (`, `AS (`, ...).
pub(super) fn is_keyword(text: &str) -> bool {
    sorted_contains(&KEYWORDS, text, true)
}

/// Why a call of `schema.name` (or `name`) must run on the writer, or
/// `None` if it is safe on a replica.
pub(super) fn call_reason(schema: Option<Name<'_>>, name: Name<'_>, read_only: &[&str]) -> Option<WriteReason> {
    if let Some(reason) = denied(name.text) {
        return Some(reason);
    }
    let builtin = schema.is_none_or(|s| s.is("pg_catalog") || s.is("information_schema"));
    let postgis = match name.quoted {
        true => name.text.starts_with("st_"),
        false => starts_with_ci(name.text, "st_"),
    };
    if builtin && (sorted_contains(&PURE, name.text, !name.quoted) || postgis) {
        return None;
    }
    let listed = read_only.iter().any(|entry| {
        let entry = entry.trim();
        match (entry.rsplit_once('.'), schema) {
            (Some((s, n)), Some(schema)) => schema.is(s) && name.is(n),
            (None, None) => name.is(entry),
            _ => false,
        }
    });
    match listed {
        true => None,
        false => Some(Effect),
    }
}

/// The deny-list, matched ASCII case-insensitively (also for quoted names,
/// which can only make more calls writes).
fn denied(name: &str) -> Option<WriteReason> {
    let exact = DENY.iter().find(|(n, _)| name.eq_ignore_ascii_case(n));
    let prefix = || DENY_PREFIX.iter().find(|(p, _)| starts_with_ci(name, p));
    exact.or_else(prefix).map(|&(_, reason)| reason)
}

/// Prefixes of function families that write, lock or touch the server.
const DENY_PREFIX: [(&str, WriteReason); 12] = [
    ("pg_advisory_", Locks),
    ("pg_try_advisory_", Locks),
    ("dblink", Effect),
    ("lo_", Effect),
    ("pg_stat_reset", Effect),
    ("pg_create_", Effect),
    ("pg_drop_", Effect),
    ("pg_replication_", Effect),
    ("pg_logical_", Effect),
    ("pg_backup_", WriterOnly),
    ("pg_current_wal_", WriterOnly),
    ("pg_current_xlog_", WriterOnly),
];

/// Built-ins that are not safe on a replica, with the reason.
const DENY: [(&str, WriteReason); 33] = [
    // Sequences (PostgreSQL docs §9.17): nextval/setval change the
    // sequence; currval/lastval report this session's last nextval.
    ("nextval", Effect),
    ("setval", Effect),
    ("currval", SessionBound),
    ("lastval", SessionBound),
    // Session state and notifications.
    ("set_config", Effect),
    ("pg_notify", Effect),
    ("pg_backend_pid", SessionBound),
    ("pg_my_temp_schema", SessionBound),
    ("pg_listening_channels", SessionBound),
    ("txid_current_if_assigned", SessionBound),
    ("pg_current_xact_id_if_assigned", SessionBound),
    // Server administration.
    ("pg_cancel_backend", Effect),
    ("pg_terminate_backend", Effect),
    ("pg_reload_conf", Effect),
    ("pg_rotate_logfile", Effect),
    ("pg_log_backend_memory_contexts", Effect),
    ("pg_import_system_collations", Effect),
    // Functions that run SQL text they are given.
    ("query_to_xml", Effect),
    ("query_to_xml_and_xmlschema", Effect),
    ("cursor_to_xml", Effect),
    ("ts_stat", Effect),
    // Assigning an xid, WAL control, and the server's role: these fail on
    // a standby or answer for the standby instead of the writer.
    ("txid_current", WriterOnly),
    ("pg_current_xact_id", WriterOnly),
    ("txid_current_snapshot", WriterOnly),
    ("pg_current_snapshot", WriterOnly),
    ("pg_switch_wal", WriterOnly),
    ("pg_switch_xlog", WriterOnly),
    ("pg_create_restore_point", WriterOnly),
    ("pg_start_backup", WriterOnly),
    ("pg_stop_backup", WriterOnly),
    ("pg_is_in_recovery", WriterOnly),
    ("pg_last_wal_receive_lsn", WriterOnly),
    ("pg_last_wal_replay_lsn", WriterOnly),
];

/// Key words that may stand before `(` in a query without calling a
/// function (PostgreSQL docs Appendix C; `CUBE`/`ROLLUP` are on [`PURE`]).
#[rustfmt::skip]
const KEYWORDS: [&str; 73] = [
    "all", "and", "any", "array", "as", "asymmetric", "between", "both", "by", "case", "columns", "default",
    "distinct", "else", "escape", "except", "exists", "fetch", "filter", "first", "following", "for", "from", "group",
    "groups", "having", "ilike", "in", "intersect", "is", "join", "key", "lateral", "leading", "like", "materialized",
    "nested", "next", "not", "offset", "on", "only", "operator", "or", "ordinality", "over", "overlaps", "passing",
    "placing", "preceding", "range", "repeatable", "returning", "row", "rows", "select", "sets", "similar", "some",
    "symmetric", "then", "to", "trailing", "union", "using", "value", "values", "when", "where", "window", "with",
    "within", "zone",
];

/// Built-in functions, type names used as casts or type modifiers, and
/// SQL-standard function-like syntax that read nothing but their
/// arguments, the catalogs or the clock (PostgreSQL docs §9 "Functions and
/// Operators"), plus pure functions of common extensions (pgcrypto,
/// uuid-ossp, unaccent, pg_trgm, fuzzystrmatch, hstore; PostGIS `st_*` is
/// matched by prefix). `pg_sleep*` is here: sleeping has no effect on data
/// and can wait on a replica as well as on the writer.
#[rustfmt::skip]
const PURE: [&str; 583] = [
    "_pg_char_max_length", "_pg_char_octet_length", "_pg_datetime_precision", "_pg_expandarray", "_pg_index_position",
    "_pg_interval_type", "_pg_numeric_precision", "_pg_numeric_precision_radix", "_pg_numeric_scale", "_pg_truetypid",
    "_pg_truetypmod", "abs", "acos", "acosd", "acosh", "age", "akeys", "any_value", "array_agg", "array_append",
    "array_cat", "array_dims", "array_fill", "array_length", "array_lower", "array_ndims", "array_position",
    "array_positions", "array_prepend", "array_remove", "array_replace", "array_reverse", "array_sample",
    "array_shuffle", "array_sort", "array_to_json", "array_to_string", "array_to_tsvector", "array_upper", "ascii",
    "asin", "asind", "asinh", "atan", "atan2", "atan2d", "atand", "atanh", "avals", "avg", "bernoulli", "bigint",
    "bit", "bit_and", "bit_count", "bit_length", "bit_or", "bit_xor", "bool", "bool_and", "bool_or", "boolean",
    "bound_box", "box", "bpchar", "btrim", "bytea", "cardinality", "casefold", "cast", "cbrt", "ceil", "ceiling",
    "char", "char_length", "character", "character_length", "chr", "cidr", "circle", "clock_timestamp", "coalesce",
    "col_description", "concat", "concat_ws", "convert", "convert_from", "convert_to", "corr", "cos", "cosd", "cosh",
    "cot", "cotd", "count", "covar_pop", "covar_samp", "crc32", "crc32c", "crypt", "cube", "cume_dist",
    "current_catalog", "current_database", "current_date", "current_query", "current_role", "current_schema",
    "current_schemas", "current_setting", "current_time", "current_timestamp", "current_user", "date", "date_add",
    "date_bin", "date_part", "date_subtract", "date_trunc", "datemultirange", "daterange", "dec", "decimal", "decode",
    "degrees", "dense_rank", "diameter", "digest", "div", "dmetaphone", "encode", "enum_first", "enum_last",
    "enum_range", "erf", "erfc", "every", "exp", "extract", "factorial", "first_value", "float", "float4", "float8",
    "floor", "format", "format_type", "gamma", "gcd", "gen_random_uuid", "gen_salt", "generate_series",
    "generate_subscripts", "get_bit", "get_byte", "greatest", "grouping", "has_any_column_privilege",
    "has_column_privilege", "has_database_privilege", "has_foreign_data_wrapper_privilege", "has_function_privilege",
    "has_language_privilege", "has_parameter_privilege", "has_schema_privilege", "has_sequence_privilege",
    "has_server_privilege", "has_table_privilege", "has_tablespace_privilege", "has_type_privilege", "hashtext",
    "height", "hmac", "host", "hostmask", "hstore", "hstore_to_json", "hstore_to_jsonb", "inet", "inet_client_addr",
    "inet_client_port", "inet_server_addr", "inet_server_port", "initcap", "int", "int2", "int4", "int4multirange",
    "int4range", "int8", "int8multirange", "int8range", "integer", "interval", "isempty", "isfinite", "json",
    "json_agg", "json_agg_strict", "json_array", "json_array_elements", "json_array_elements_text",
    "json_array_length", "json_arrayagg", "json_build_array", "json_build_object", "json_each", "json_each_text",
    "json_exists", "json_extract_path", "json_extract_path_text", "json_object", "json_object_agg",
    "json_object_agg_strict", "json_object_agg_unique", "json_object_agg_unique_strict", "json_object_keys",
    "json_objectagg", "json_populate_record", "json_populate_recordset", "json_query", "json_scalar",
    "json_serialize", "json_strip_nulls", "json_table", "json_to_record", "json_to_recordset", "json_typeof",
    "json_value", "jsonb", "jsonb_agg", "jsonb_agg_strict", "jsonb_array_elements", "jsonb_array_elements_text",
    "jsonb_array_length", "jsonb_build_array", "jsonb_build_object", "jsonb_each", "jsonb_each_text",
    "jsonb_extract_path", "jsonb_extract_path_text", "jsonb_insert", "jsonb_object", "jsonb_object_agg",
    "jsonb_object_agg_strict", "jsonb_object_agg_unique", "jsonb_object_agg_unique_strict", "jsonb_object_keys",
    "jsonb_path_exists", "jsonb_path_exists_tz", "jsonb_path_match", "jsonb_path_match_tz", "jsonb_path_query",
    "jsonb_path_query_array", "jsonb_path_query_array_tz", "jsonb_path_query_first", "jsonb_path_query_first_tz",
    "jsonb_path_query_tz", "jsonb_populate_record", "jsonb_populate_record_valid", "jsonb_populate_recordset",
    "jsonb_pretty", "jsonb_set", "jsonb_set_lax", "jsonb_strip_nulls", "jsonb_to_record", "jsonb_to_recordset",
    "jsonb_typeof", "justify_days", "justify_hours", "justify_interval", "lag", "last_value", "lcm", "lead", "least",
    "left", "length", "levenshtein", "levenshtein_less_equal", "lgamma", "line", "ln", "localtime", "localtimestamp",
    "log", "log10", "lower", "lower_inc", "lower_inf", "lpad", "lseg", "ltrim", "macaddr", "macaddr8", "make_date",
    "make_interval", "make_time", "make_timestamp", "make_timestamptz", "makeaclitem", "masklen", "max", "md5",
    "metaphone", "min", "min_scale", "mod", "mode", "money", "name", "netmask", "network", "normalize", "now",
    "npoints", "nth_value", "ntile", "nullif", "num_nonnulls", "num_nulls", "numeric", "nummultirange", "numrange",
    "obj_description", "octet_length", "oid", "overlay", "parse_ident", "path", "percent_rank", "percentile_cont",
    "percentile_disc", "pg_char_to_encoding", "pg_client_encoding", "pg_collation_is_visible",
    "pg_column_compression", "pg_column_is_updatable", "pg_column_size", "pg_conf_load_time",
    "pg_conversion_is_visible", "pg_database_size", "pg_describe_object", "pg_encoding_to_char",
    "pg_function_is_visible", "pg_get_constraintdef", "pg_get_expr", "pg_get_function_arguments",
    "pg_get_function_identity_arguments", "pg_get_function_result", "pg_get_functiondef", "pg_get_indexdef",
    "pg_get_keywords", "pg_get_partition_constraintdef", "pg_get_partkeydef", "pg_get_ruledef",
    "pg_get_serial_sequence", "pg_get_statisticsobjdef", "pg_get_triggerdef", "pg_get_userbyid", "pg_get_viewdef",
    "pg_has_role", "pg_identify_object", "pg_identify_object_as_address", "pg_index_column_has_property",
    "pg_index_has_property", "pg_indexam_has_property", "pg_indexes_size", "pg_input_error_info", "pg_input_is_valid",
    "pg_is_other_temp_schema", "pg_jit_available", "pg_opclass_is_visible", "pg_operator_is_visible",
    "pg_opfamily_is_visible", "pg_options_to_table", "pg_postmaster_start_time", "pg_relation_filenode",
    "pg_relation_filepath", "pg_relation_is_updatable", "pg_relation_size", "pg_size_bytes", "pg_size_pretty",
    "pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_statistics_obj_is_visible", "pg_table_is_visible",
    "pg_table_size", "pg_tablespace_databases", "pg_tablespace_location", "pg_tablespace_size",
    "pg_total_relation_size", "pg_ts_config_is_visible", "pg_ts_dict_is_visible", "pg_ts_parser_is_visible",
    "pg_ts_template_is_visible", "pg_type_is_visible", "pg_typeof", "phraseto_tsquery", "pi", "plainto_tsquery",
    "point", "polygon", "position", "pow", "power", "quote_ident", "quote_literal", "quote_nullable", "radians",
    "radius", "random", "random_normal", "range_agg", "range_intersect_agg", "range_merge", "rank", "real",
    "regclass", "regexp_count", "regexp_instr", "regexp_like", "regexp_match", "regexp_matches", "regexp_replace",
    "regexp_split_to_array", "regexp_split_to_table", "regexp_substr", "regnamespace", "regoper", "regoperator",
    "regproc", "regprocedure", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept", "regr_r2", "regr_slope",
    "regr_sxx", "regr_sxy", "regr_syy", "regrole", "regtype", "repeat", "replace", "reverse", "right", "rollup",
    "round", "row_number", "row_security_active", "row_to_json", "rpad", "rtrim", "scale", "session_user",
    "setweight", "sha224", "sha256", "sha384", "sha512", "shobj_description", "sign", "similarity", "sin", "sind",
    "sinh", "slope", "smallint", "soundex", "split_part", "sqrt", "starts_with", "statement_timestamp", "stddev",
    "stddev_pop", "stddev_samp", "strict_word_similarity", "string_agg", "string_to_array", "string_to_table",
    "strip", "strpos", "substr", "substring", "sum", "system", "system_user", "tan", "tand", "tanh", "text", "time",
    "timeofday", "timestamp", "timestamptz", "timetz", "timezone", "to_ascii", "to_bin", "to_char", "to_date",
    "to_hex", "to_json", "to_jsonb", "to_number", "to_oct", "to_regclass", "to_regcollation", "to_regnamespace",
    "to_regoper", "to_regoperator", "to_regproc", "to_regprocedure", "to_regrole", "to_regtype", "to_regtypemod",
    "to_timestamp", "to_tsquery", "to_tsvector", "transaction_timestamp", "translate", "treat", "trim", "trim_array",
    "trim_scale", "trunc", "ts_headline", "ts_rank", "ts_rank_cd", "tsmultirange", "tsquery", "tsrange",
    "tstzmultirange", "tstzrange", "tsvector", "unaccent", "unistr", "unnest", "upper", "upper_inc", "upper_inf",
    "uuid", "uuid_extract_timestamp", "uuid_extract_version", "uuid_generate_v1", "uuid_generate_v1mc",
    "uuid_generate_v4", "uuid_nil", "uuidv4", "uuidv7", "var_pop", "var_samp", "varbit", "varchar", "variance",
    "varying", "version", "websearch_to_tsquery", "width", "width_bucket", "word_similarity", "xml",
    "xml_is_well_formed", "xml_is_well_formed_content", "xml_is_well_formed_document", "xmlagg", "xmlattributes",
    "xmlcomment", "xmlconcat", "xmlelement", "xmlexists", "xmlforest", "xmlparse", "xmlpi", "xmlroot", "xmlserialize",
    "xmltable", "xmltext", "xpath", "xpath_exists",
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
        for (name, _) in DENY.iter().chain(DENY_PREFIX.iter()) {
            assert!(!PURE.iter().any(|p| starts_with_ci(p, name)), "{name} is also pure");
        }
    }

    #[test]
    fn lookup_folds_unquoted_names_only() {
        let word = |text| Name { text, quoted: false };
        let quoted = |text| Name { text, quoted: true };
        assert_eq!(call_reason(None, word("LOWER"), &[]), None);
        assert_eq!(call_reason(None, quoted("lower"), &[]), None);
        assert_eq!(call_reason(None, quoted("LOWER"), &[]), Some(Effect));
        assert_eq!(call_reason(Some(word("Pg_Catalog")), word("now"), &[]), None);
        assert_eq!(call_reason(Some(word("public")), word("now"), &[]), Some(Effect));
        assert_eq!(call_reason(None, word("PG_TRY_ADVISORY_LOCK"), &[]), Some(Locks));
        assert_eq!(call_reason(None, word("My_Fn"), &["my_fn"]), None);
        assert_eq!(call_reason(None, quoted("My_Fn"), &["my_fn"]), Some(Effect));
        assert_eq!(call_reason(Some(word("app")), word("f"), &["app.f"]), None);
        assert_eq!(call_reason(Some(word("app")), word("f"), &["f"]), Some(Effect));
        assert_eq!(call_reason(None, word("f"), &["app.f"]), Some(Effect));
        assert_eq!(call_reason(None, word("nextval"), &["nextval"]), Some(Effect));
    }
}
