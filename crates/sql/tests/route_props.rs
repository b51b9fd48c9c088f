//! Property tests of PostgreSQL read/write routing: writes decorated with
//! comments, whitespace, case changes and decoy strings are never routed
//! to a replica, decorated reads stay reads, and no input panics.

#![forbid(unsafe_code)]

#[path = "route_support/decorate.rs"]
mod decorate;

use decorate::{Decorations, decorate};
use gatehouse_sql::{Route, route, route_with};
use proptest::prelude::*;

/// Statements that must go to the writer; `{s}` marks a decoy string.
const WRITES: [&str; 44] = [
    "INSERT INTO t ( a , b ) VALUES ( 1 , {s} )",
    "UPDATE t SET a = {s} WHERE id = 1",
    "DELETE FROM t WHERE note = {s}",
    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = {s}",
    "CREATE TABLE t ( a text DEFAULT {s} )",
    "ALTER TABLE t ADD COLUMN c int DEFAULT {s}",
    "DROP TABLE t",
    "TRUNCATE t",
    "SELECT * FROM t WHERE a = {s} FOR UPDATE",
    "SELECT * FROM t FOR NO KEY UPDATE SKIP LOCKED",
    "SELECT * FROM t WHERE b = {s} FOR SHARE NOWAIT",
    "SELECT * FROM t FOR KEY SHARE OF t",
    "( SELECT * FROM t WHERE a = {s} FOR UPDATE )",
    "SELECT a FROM t WHERE b IN ( SELECT c FROM u FOR UPDATE )",
    "SELECT nextval ( {s} )",
    "SELECT pg_catalog.nextval ( {s} )",
    "SELECT \"nextval\" ( {s} )",
    "SELECT setval ( {s} , 1 )",
    "SELECT currval ( {s} )",
    "SELECT lastval ( )",
    "SELECT pg_advisory_lock ( 1 )",
    "SELECT pg_try_advisory_xact_lock ( 1 , 2 )",
    "SELECT pg_notify ( {s} , {s} )",
    "SELECT set_config ( {s} , {s} , false )",
    "SELECT txid_current ( )",
    "SELECT pg_current_wal_lsn ( )",
    "SELECT dblink_exec ( {s} )",
    "SELECT my_func ( {s} )",
    "SELECT a , app.f ( 1 ) FROM t",
    "VALUES ( nextval ( {s} ) )",
    "WITH x AS ( DELETE FROM t RETURNING * ) SELECT * FROM x",
    "WITH x AS ( INSERT INTO t VALUES ( {s} ) RETURNING id ) SELECT id FROM x",
    "WITH x AS MATERIALIZED ( UPDATE t SET a = {s} RETURNING a ) SELECT a FROM x",
    "WITH x AS ( SELECT 1 ) UPDATE t SET a = {s}",
    "SELECT * INTO new_t FROM t WHERE a = {s}",
    "EXPLAIN ANALYZE DELETE FROM t WHERE a = {s}",
    "SELECT 1 ; DELETE FROM t",
    "SELECT {s} ; SELECT 2",
    "TABLE t ; DROP TABLE t",
    "LOCK TABLE t",
    "COPY t FROM STDIN",
    "CALL p ( {s} )",
    "SET search_path = {s}",
    "BEGIN READ ONLY ; DELETE FROM t",
];

/// Reads that must stay reads however they are decorated.
const READS: [&str; 8] = [
    "SELECT a , {s} FROM t WHERE b = {s}",
    "SELECT count ( * ) FROM t WHERE c = {s} ORDER BY 1 LIMIT 5",
    "SELECT lower ( a ) , now ( ) FROM t",
    "WITH x AS ( SELECT {s} AS a ) SELECT a FROM x",
    "VALUES ( 1 , {s} )",
    "( SELECT 1 ) UNION ( SELECT 2 )",
    "SELECT * FROM generate_series ( 1 , 3 ) AS g ( i )",
    "EXPLAIN SELECT * FROM t WHERE a = {s}",
];

/// Decoy string constants holding key words, quotes and comment markers.
const DECOYS: [&str; 12] = [
    "'FOR UPDATE'",
    "'SELECT 1'",
    "''",
    "'it''s; SELECT'",
    "E'\\' SELECT 1'",
    "$$ SELECT 1 $$",
    "$q$ ; SELECT 1 $q$",
    "'/* SELECT'",
    "'-- x'",
    "'nextval('",
    "U&'d\\0061ta'",
    "'$$'",
];

/// Token separators: whitespace and comments hiding decoy key words.
const SEPARATORS: [&str; 8] = [
    " ",
    "\n",
    "\t ",
    "   ",
    " /* SELECT 1 */ ",
    " /* a /* nested FOR UPDATE */ b */ ",
    " -- select 1; \n",
    "/**/",
];

const DECORATIONS: Decorations = Decorations {
    separators: &SEPARATORS,
    decoys: &DECOYS,
    quotes: ['"', '\'', '$'],
};

/// Strings biased towards what the tokenizer and router look at.
fn sqlish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("'"),
        Just("\""),
        Just("$$"),
        Just("$t$"),
        Just("E'"),
        Just("\\"),
        Just(";"),
        Just("--"),
        Just("/*"),
        Just("*/"),
        Just("("),
        Just(")"),
        Just("."),
        Just(":"),
        Just(","),
        Just(" "),
        Just("select "),
        Just("with x"),
        Just(" as "),
        Just("for update"),
        Just("begin read only"),
        Just("explain "),
        Just("nextval"),
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
        let got = route(&sql);
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
        prop_assert_eq!(route(&sql), Route::Read, "{:?}", sql);
    }

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        let _ = route(&s);
        let _ = route_with(&s, &["f", "s.f", ""]);
    }

    #[test]
    fn sqlish_strings_never_panic(s in sqlish()) {
        let _ = route(&s);
        let _ = route_with(&s, &["x"]);
    }
}
