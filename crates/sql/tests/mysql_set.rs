//! Table-driven tests of MySQL `SET`: tracked changes, resets, charsets,
//! transaction characteristics, scopes and the pins of the other forms.

#![forbid(unsafe_code)]

use gatehouse_sql::mysql::{Dialect, MyEffect, PinReason, VarChange, classify, classify_with};

const D: Dialect = Dialect::DEFAULT;

fn set(name: &str, value: &str) -> VarChange {
    VarChange::Set {
        name: name.into(),
        value: value.into(),
    }
}

fn reset(name: &str) -> VarChange {
    VarChange::Reset { name: name.into() }
}

fn one(change: VarChange) -> MyEffect {
    MyEffect::Set(vec![change])
}

fn pin(r: PinReason) -> MyEffect {
    MyEffect::Pin(r)
}

#[test]
fn tracked_assignments() {
    let cases = [
        ("SET autocommit = 0", one(set("autocommit", "0"))),
        ("set AUTOCOMMIT=ON", one(set("autocommit", "ON"))),
        (
            "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'",
            one(set("sql_mode", "'STRICT_TRANS_TABLES'")),
        ),
        ("SET LOCAL sql_mode = ANSI", one(set("sql_mode", "ANSI"))),
        ("SET @@sql_mode = ''", one(set("sql_mode", "''"))),
        ("SET @@session.time_zone = '+00:00'", one(set("time_zone", "'+00:00'"))),
        ("SET @@local.time_zone := 'UTC'", one(set("time_zone", "'UTC'"))),
        ("SET @@SESSION.`wait_timeout` = 60", one(set("wait_timeout", "60"))),
        ("SET `unique_checks` = 0", one(set("unique_checks", "0"))),
        (
            "SET tx_isolation = 'READ-COMMITTED'",
            one(set("transaction_isolation", "'READ-COMMITTED'")),
        ),
        (
            "SET transaction_isolation = 'SERIALIZABLE'",
            one(set("transaction_isolation", "'SERIALIZABLE'")),
        ),
        ("SET tx_read_only = 1", one(set("transaction_read_only", "1"))),
        ("SET max_execution_time = 1000", one(set("max_execution_time", "1000"))),
        ("SET max_statement_time = 2.5", one(set("max_statement_time", "2.5"))),
        (
            "SET div_precision_increment = -1",
            one(set("div_precision_increment", "-1")),
        ),
        (
            "SET character_set_results = NULL",
            one(set("character_set_results", "NULL")),
        ),
        ("SET sql_select_limit = DEFAULT", one(reset("sql_select_limit"))),
        (
            "SET SESSION foreign_key_checks = default",
            one(reset("foreign_key_checks")),
        ),
        (
            "SET autocommit=1, sql_mode='TRADITIONAL', SESSION lc_time_names = 'fr_FR'",
            MyEffect::Set(vec![
                set("autocommit", "1"),
                set("sql_mode", "'TRADITIONAL'"),
                set("lc_time_names", "'fr_FR'"),
            ]),
        ),
        (
            "/*!40101 SET @@session.sql_safe_updates = 1 */",
            one(set("sql_safe_updates", "1")),
        ),
        (
            "/*!40101 SET NAMES utf8mb4 */",
            one(VarChange::Names {
                charset: "utf8mb4".into(),
                collation: None,
            }),
        ),
        (
            "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'",
            one(VarChange::Names {
                charset: "'utf8mb4'".into(),
                collation: Some("'utf8mb4_unicode_ci'".into()),
            }),
        ),
        (
            "SET NAMES DEFAULT",
            one(VarChange::Names {
                charset: "DEFAULT".into(),
                collation: None,
            }),
        ),
        (
            "SET CHARACTER SET latin1",
            one(VarChange::CharacterSet {
                charset: "latin1".into(),
            }),
        ),
        (
            "SET CHARSET 'utf8mb4'",
            one(VarChange::CharacterSet {
                charset: "'utf8mb4'".into(),
            }),
        ),
        (
            "SET NAMES utf8, autocommit = 0",
            MyEffect::Set(vec![
                VarChange::Names {
                    charset: "utf8".into(),
                    collation: None,
                },
                set("autocommit", "0"),
            ]),
        ),
        (
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            one(set("transaction_isolation", "'READ-COMMITTED'")),
        ),
        (
            "SET LOCAL TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ",
            MyEffect::Set(vec![
                set("transaction_read_only", "ON"),
                set("transaction_isolation", "'REPEATABLE-READ'"),
            ]),
        ),
        (
            "SET SESSION TRANSACTION READ WRITE",
            one(set("transaction_read_only", "OFF")),
        ),
        (
            "SET GLOBAL max_connections = 10, SESSION autocommit = 1",
            one(set("autocommit", "1")),
        ),
        (
            "SET @@global.max_connections = 10, autocommit = 1",
            one(set("autocommit", "1")),
        ),
    ];
    for (sql, want) in cases {
        assert_eq!(classify(sql, D), want, "{sql}");
    }
}

#[test]
fn global_next_transaction_and_statement() {
    let cases = [
        ("SET GLOBAL max_connections = 1000", MyEffect::Global),
        ("SET @@global.sql_mode = CONCAT(@@sql_mode, ',X')", MyEffect::Global),
        ("SET PERSIST max_connections = 10", MyEffect::Global),
        ("SET @@persist_only.innodb_log_file_size = 1", MyEffect::Global),
        // The scope key word carries to the assignments after it.
        ("SET GLOBAL a = 1, b = 2", MyEffect::Global),
        ("SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE", MyEffect::Global),
        (
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            MyEffect::NextTransaction,
        ),
        ("set transaction read only", MyEffect::NextTransaction),
        (
            "SET STATEMENT max_statement_time = 1 FOR SELECT * FROM t",
            MyEffect::PLAIN,
        ),
        (
            "SET STATEMENT sql_mode = '' FOR SELECT @x",
            pin(PinReason::UserVariable),
        ),
        (
            "SET STATEMENT a = 1 FOR SET autocommit = 0",
            one(set("autocommit", "0")),
        ),
        ("SET STATEMENT a = 1", pin(PinReason::Unrecognized)),
    ];
    let nested = format!("{}SELECT 1", "SET STATEMENT a = 1 FOR ".repeat(4));
    assert_eq!(classify(&nested, D), MyEffect::PLAIN);
    let deep = format!("{}SELECT 1", "SET STATEMENT a = 1 FOR ".repeat(50));
    assert_eq!(classify(&deep, D), pin(PinReason::Unrecognized));
    for (sql, want) in cases {
        assert_eq!(classify(sql, D), want, "{sql}");
    }
}

#[test]
fn pinning_set_forms() {
    use PinReason::*;
    let cases = [
        ("SET @x = 1", UserVariable),
        ("SET @x := 1", UserVariable),
        ("SET autocommit = 1, @x = 2", UserVariable),
        ("SET @`a b` = 1", UserVariable),
        ("SET autocommit = @x", UserVariable),
        ("SET GLOBAL max_connections = @n", UserVariable),
        ("SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')", SetExpression),
        ("SET time_zone = (SELECT tz FROM cfg)", SetExpression),
        ("SET sql_select_limit = ?", SetExpression),
        ("SET wait_timeout = @@global.wait_timeout", SetExpression),
        ("SET sql_mode = 0", Unrecognized),
        ("SET profiling = 1", SetUntracked),
        ("SET session_track_schema = ON", SetUntracked),
        (
            "SET SESSION sort_buffer_size = 1, optimizer_trace = 'enabled=on'",
            SetUntracked,
        ),
        ("SET @@session.default.key_buffer_size = 1", SetUntracked),
        ("SET key_cache.key_buffer_size = 1", SetUntracked),
        ("SET RESOURCE GROUP rg", SetUntracked),
        ("SET autocommit", Unrecognized),
        ("SET autocommit = 1 garbage(", SetExpression),
        ("SET", Unrecognized),
        ("SET NAMES", Unrecognized),
        ("SET SESSION TRANSACTION ISOLATION LEVEL CHAOS", Unrecognized),
    ];
    for (sql, reason) in cases {
        assert_eq!(classify(sql, D), pin(reason), "{sql}");
    }
}

#[test]
fn extra_tracked_variables() {
    assert_eq!(
        classify_with("SET profiling = 1", D, &["PROFILING"]),
        one(set("profiling", "1"))
    );
    assert_eq!(
        classify_with("SET Profiling = DEFAULT", D, &["profiling"]),
        one(reset("profiling"))
    );
    assert_eq!(
        classify_with("SET x = 1", D, &["profiling"]),
        pin(PinReason::SetUntracked)
    );
    assert_eq!(
        classify_with("SET profiling = @p", D, &["profiling"]),
        pin(PinReason::UserVariable)
    );
}

#[test]
fn sql_mode_drives_dialect() {
    let MyEffect::Set(changes) = classify("SET sql_mode = 'ANSI_QUOTES,NO_BACKSLASH_ESCAPES'", D) else {
        panic!("not a set");
    };
    let [VarChange::Set { name, value }] = changes.as_slice() else {
        panic!("one change")
    };
    assert_eq!(name, "sql_mode");
    let d = Dialect::from_sql_mode(value);
    assert!(d.ansi_quotes && d.no_backslash_escapes);
}
