//! Property tests of MySQL/MariaDB read/write routing: writes decorated
//! with comments, whitespace, case changes and decoy strings are never
//! routed to a replica, decorated reads stay reads, and no input panics.

#![forbid(unsafe_code)]

#[path = "route_support/decorate.rs"]
mod decorate;

use decorate::{Decorations, decorate};
use gatehouse_sql::Route;
use gatehouse_sql::mysql::{Dialect, route, route_with};
use proptest::prelude::*;

const ANSI: Dialect = Dialect {
    ansi_quotes: true,
    no_backslash_escapes: false,
};
const NO_BACKSLASH: Dialect = Dialect {
    ansi_quotes: false,
    no_backslash_escapes: true,
};

/// Statements that must go to the writer; `{s}` marks a decoy string.
const WRITES: [&str; 46] = [
    "INSERT INTO t ( a ) VALUES ( {s} )",
    "REPLACE INTO t VALUES ( 1 , {s} )",
    "UPDATE t SET a = {s} WHERE id = 1",
    "DELETE FROM t WHERE a = {s}",
    "INSERT INTO t ( a ) VALUES ( 1 ) ON DUPLICATE KEY UPDATE a = {s}",
    "CREATE TABLE t ( a TEXT )",
    "ALTER TABLE t ADD COLUMN b INT",
    "DROP TABLE t",
    "TRUNCATE TABLE t",
    "SELECT * FROM t WHERE a = {s} FOR UPDATE",
    "SELECT * FROM t FOR SHARE SKIP LOCKED",
    "SELECT * FROM t WHERE b = {s} LOCK IN SHARE MODE",
    "SELECT * FROM t FOR UPDATE NOWAIT",
    "( SELECT * FROM t WHERE a = {s} FOR UPDATE )",
    "SELECT GET_LOCK ( {s} , 10 )",
    "SELECT RELEASE_LOCK ( {s} )",
    "SELECT IS_FREE_LOCK ( {s} )",
    "SELECT LAST_INSERT_ID ( )",
    "SELECT ROW_COUNT ( )",
    "SELECT FOUND_ROWS ( )",
    "SELECT SQL_CALC_FOUND_ROWS * FROM t WHERE a = {s}",
    "SELECT UUID_SHORT ( )",
    "SELECT NEXTVAL ( s )",
    "SELECT NEXT VALUE FOR s",
    "SELECT LASTVAL ( s )",
    "SELECT SETVAL ( s , 1 )",
    "SELECT PREVIOUS VALUE FOR s",
    "SELECT @x := {s}",
    "SELECT @x",
    "SELECT a FROM t WHERE b = @v",
    "SELECT a INTO @v FROM t WHERE b = {s}",
    "SELECT a FROM t INTO OUTFILE {s}",
    "SELECT @@read_only",
    "SELECT @@global.innodb_read_only",
    "SELECT my_fn ( {s} )",
    "SELECT app.f ( 1 )",
    "SELECT `nextval` ( s )",
    "WITH x AS ( SELECT 1 ) DELETE FROM t",
    "EXPLAIN ANALYZE UPDATE t SET a = {s}",
    "SELECT 1 ; DELETE FROM t",
    "SHOW WARNINGS",
    "SHOW MASTER STATUS",
    "LOCK TABLES t WRITE",
    "CALL p ( {s} )",
    "SET NAMES utf8mb4",
    "START TRANSACTION READ ONLY ; DELETE FROM t",
];

/// Reads that must stay reads however they are decorated.
const READS: [&str; 8] = [
    "SELECT a , {s} FROM t WHERE b = {s}",
    "SELECT COUNT ( * ) FROM t WHERE c = {s} LIMIT 5",
    "SELECT LOWER ( a ) , NOW ( ) , @@session.sql_mode FROM t",
    "WITH x AS ( SELECT {s} AS a ) SELECT a FROM x",
    "( SELECT 1 ) UNION ( SELECT 2 )",
    "SHOW FULL COLUMNS FROM t LIKE {s}",
    "DESCRIBE t",
    "EXPLAIN SELECT * FROM t WHERE a = {s}",
];

/// Decoy strings holding key words, quotes and comment markers.
const DECOYS: [&str; 12] = [
    "'FOR UPDATE'",
    "'SELECT 1'",
    "''",
    "'it''s; SELECT'",
    "'a\\' SELECT 1'",
    "\"LOCK IN SHARE MODE\"",
    "'/* SELECT'",
    "'-- x'",
    "'# x'",
    "'GET_LOCK('",
    "_utf8mb4'@x'",
    "X'4142'",
];

/// Token separators: whitespace and comments hiding decoy key words.
const SEPARATORS: [&str; 8] = [
    " ",
    "\n",
    "\t ",
    " /* SELECT 1 */ ",
    " -- select 1; \n",
    " # FOR UPDATE\n",
    "/**/",
    " /*+ NO_RANGE_OPTIMIZATION(t) */ ",
];

const DECORATIONS: Decorations = Decorations {
    separators: &SEPARATORS,
    decoys: &DECOYS,
    quotes: ['"', '\'', '`'],
};

/// Strings biased towards what the tokenizer and router look at.
fn sqlish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("'"),
        Just("\""),
        Just("`"),
        Just("\\"),
        Just(";"),
        Just("-- "),
        Just("#"),
        Just("/*"),
        Just("/*!40101 "),
        Just("*/"),
        Just("("),
        Just(")"),
        Just("."),
        Just("@"),
        Just("@@session."),
        Just(":="),
        Just(" "),
        Just("select "),
        Just("with x"),
        Just(" as "),
        Just("for update"),
        Just("start transaction read only"),
        Just("explain "),
        Just("next value for"),
        Just("é"),
    ];
    prop::collection::vec(atoms, 0..32).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn decorated_writes_never_route_to_a_replica(
        t in 0..WRITES.len(),
        seps in prop::collection::vec(any::<usize>(), 1..8),
        decoys in prop::collection::vec(any::<usize>(), 1..4),
        case in any::<u64>(),
        lead in 0..SEPARATORS.len(),
    ) {
        let sql = format!("{}{}", SEPARATORS[lead], decorate(&DECORATIONS, WRITES[t], &seps, &decoys, case));
        let got = route(&sql, Dialect::DEFAULT);
        prop_assert!(matches!(got, Route::Write(_)), "{got:?} for {sql:?}");
    }

    #[test]
    fn decorated_reads_stay_reads(
        t in 0..READS.len(),
        seps in prop::collection::vec(any::<usize>(), 1..8),
        decoys in prop::collection::vec(any::<usize>(), 1..4),
        case in any::<u64>(),
    ) {
        let sql = decorate(&DECORATIONS, READS[t], &seps, &decoys, case);
        prop_assert_eq!(route(&sql, Dialect::DEFAULT), Route::Read, "{:?}", sql);
    }

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        for d in [Dialect::DEFAULT, ANSI, NO_BACKSLASH] {
            let _ = route(&s, d);
            let _ = route_with(&s, d, &["f", "db.f", ""]);
        }
    }

    #[test]
    fn sqlish_strings_never_panic(s in sqlish()) {
        for d in [Dialect::DEFAULT, ANSI, NO_BACKSLASH] {
            let _ = route(&s, d);
        }
    }
}
