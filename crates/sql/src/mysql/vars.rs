//! The session system variables the proxy tracks and replays instead of
//! pinning (MySQL Reference Manual §7.1.8 "Server System Variables";
//! MariaDB KB "Server System Variables"), with alias normalisation.

/// Tracked variables, sorted for binary search. Each has a session value
/// whose effect is fully restored by `SET SESSION name = <same text>`.
const TRACKED: [&str; 46] = [
    "auto_increment_increment",
    "auto_increment_offset",
    "autocommit",
    "big_tables",
    "block_encryption_mode",
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
    "completion_type",
    "default_storage_engine",
    "default_tmp_storage_engine",
    "div_precision_increment",
    "foreign_key_checks",
    "group_concat_max_len",
    "innodb_lock_wait_timeout",
    "interactive_timeout",
    "join_buffer_size",
    "lc_messages",
    "lc_time_names",
    "lock_wait_timeout",
    "long_query_time",
    "max_execution_time",
    "max_heap_table_size",
    "max_join_size",
    "max_sort_length",
    "max_statement_time",
    "net_read_timeout",
    "net_write_timeout",
    "optimizer_switch",
    "sort_buffer_size",
    "sql_auto_is_null",
    "sql_big_selects",
    "sql_buffer_result",
    "sql_mode",
    "sql_notes",
    "sql_quote_show_create",
    "sql_safe_updates",
    "sql_select_limit",
    "sql_warnings",
    "time_zone",
    "tmp_table_size",
    "transaction_isolation",
    "transaction_read_only",
    "unique_checks",
    "wait_timeout",
];

/// Longest tracked name plus slack; longer names are never tracked.
const MAX_NAME: usize = 40;

/// The canonical tracked name for `name` (any case), or `None` if the
/// variable is not tracked. `session_track_*` variables are deliberately
/// untracked: they change what the server reports to the proxy itself.
pub(crate) fn canonical(name: &str) -> Option<&'static str> {
    if name.len() > MAX_NAME {
        return None;
    }
    let mut buf = [0u8; MAX_NAME];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name.as_bytes());
    lower.make_ascii_lowercase();
    let lower: &[u8] = lower;
    match lower {
        b"tx_isolation" => return Some("transaction_isolation"),
        b"tx_read_only" => return Some("transaction_read_only"),
        _ => {}
    }
    TRACKED
        .binary_search_by(|t| t.as_bytes().cmp(lower))
        .ok()
        .map(|i| TRACKED[i])
}

#[cfg(test)]
mod tests {
    use super::{TRACKED, canonical};

    #[test]
    fn sorted_and_canonical() {
        assert!(TRACKED.windows(2).all(|w| w[0] < w[1]));
        assert!(TRACKED.iter().all(|t| t.len() <= super::MAX_NAME));
        assert_eq!(canonical("SQL_MODE"), Some("sql_mode"));
        assert_eq!(canonical("tx_isolation"), Some("transaction_isolation"));
        assert_eq!(canonical("Tx_Read_Only"), Some("transaction_read_only"));
        assert_eq!(canonical("session_track_gtids"), None);
        assert_eq!(canonical("max_connections"), None);
        assert_eq!(canonical(&"x".repeat(100)), None);
    }
}
