//! Tests for every pin reason.

#![forbid(unsafe_code)]

use gatehouse_sql::{Effect, PinReason, classify};

fn pin(r: PinReason) -> Effect {
    Effect::Pin(r)
}

#[test]
fn temp_tables() {
    for sql in [
        "CREATE TEMP TABLE t (a int)",
        "create temporary table t (a int)",
        "CREATE GLOBAL TEMPORARY TABLE t (a int)",
        "CREATE LOCAL TEMP TABLE t AS SELECT 1",
        "CREATE TEMP VIEW v AS SELECT 1",
        "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
        "CREATE TEMP SEQUENCE s",
        "CREATE TABLE pg_temp.t (a int)",
        "CREATE FUNCTION pg_temp.f() RETURNS int AS 'select 1' LANGUAGE sql",
        "SELECT * INTO TEMP t2 FROM t",
        "SELECT * INTO TEMPORARY TABLE t2 FROM t",
        "WITH x AS (SELECT 1) SELECT * INTO temp t2 FROM x",
        "SELECT 1 INTO pg_temp.t2",
        "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    ] {
        assert_eq!(classify(sql), pin(PinReason::TempTable), "{sql}");
    }
}

#[test]
fn advisory_locks() {
    for sql in [
        "SELECT pg_advisory_lock(1)",
        "select pg_advisory_lock_shared(1, 2)",
        "SELECT x FROM t WHERE pg_try_advisory_lock(id)",
        "SELECT pg_catalog.PG_TRY_ADVISORY_LOCK_SHARED(1)",
        "SELECT \"pg_advisory_lock\"(1)",
        "INSERT INTO t SELECT pg_advisory_lock(1)",
        "PREPARE p AS SELECT pg_advisory_lock($1)",
        "DO $$ BEGIN PERFORM pg_advisory_lock(1); END $$",
        "DO LANGUAGE plpgsql 'BEGIN PERFORM pg_advisory_lock(1); END'",
    ] {
        assert_eq!(classify(sql), pin(PinReason::AdvisoryLock), "{sql}");
    }
    for sql in [
        "SELECT pg_advisory_xact_lock(1)",
        "select pg_try_advisory_xact_lock_shared(1)",
        "SELECT 'pg_advisory_lock(1)'",
        "SELECT $$pg_advisory_lock(1)$$",
        "SELECT 1 /* pg_advisory_lock(1) */",
        "DO $$ BEGIN RAISE NOTICE '%', 1; END $$ -- pg_advisory_lock(1)",
    ] {
        assert_eq!(classify(sql), Effect::None, "{sql}");
    }
}

#[test]
fn listen_load_cursor() {
    assert_eq!(classify("LISTEN ch"), pin(PinReason::Listen));
    assert_eq!(classify("LOAD 'auto_explain'"), pin(PinReason::Load));
    assert_eq!(
        classify("DECLARE c CURSOR WITH HOLD FOR SELECT 1"),
        pin(PinReason::CursorWithHold)
    );
    assert_eq!(
        classify("declare c binary no scroll cursor with hold for select 1"),
        pin(PinReason::CursorWithHold)
    );
    assert_eq!(
        classify("DECLARE c CURSOR FOR WITH x AS (SELECT 1) SELECT * FROM x"),
        Effect::None
    );
}

#[test]
fn unrecognized() {
    for sql in [
        "FOO BAR",
        "'x'",
        "42",
        "\"select\" 1",
        "(",
        "START",
        "SET ROLE",
        "COPYX t",
    ] {
        assert_eq!(classify(sql), pin(PinReason::Unrecognized), "{sql}");
    }
}

#[test]
fn role_and_authorization_reasons() {
    assert_eq!(classify("SET ROLE r"), pin(PinReason::SetRole));
    assert_eq!(
        classify("SET SESSION AUTHORIZATION r"),
        pin(PinReason::SetSessionAuthorization)
    );
}

#[test]
fn labels_are_distinct() {
    let all = [
        PinReason::TempTable,
        PinReason::AdvisoryLock,
        PinReason::Listen,
        PinReason::CursorWithHold,
        PinReason::SetRole,
        PinReason::SetSessionAuthorization,
        PinReason::Load,
        PinReason::SetInBlock,
        PinReason::Unrecognized,
    ];
    let mut labels: Vec<_> = all.iter().map(|r| r.as_str()).collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), all.len());
}

#[test]
fn do_block_that_sets_or_resets_a_parameter_pins() {
    for stmt in [
        // brin's loop, from PostgreSQL's regression suite.
        "DO $x$\nDECLARE r record;\nBEGIN\n  FOR r IN SELECT 1 LOOP\n    SET enable_seqscan = 0;\n  END LOOP;\nEND;\n$x$",
        "DO $$ BEGIN SET work_mem = '1MB'; END $$",
        "DO LANGUAGE plpgsql $$ BEGIN IF true THEN RESET work_mem; END IF; END $$",
        "do 'begin perform 1; set local_thing.x = 1; end'",
        "DO $$ BEGIN EXECUTE 'SET work_mem = ''1MB'''; END $$",
        "DO $$ BEGIN EXECUTE format('set %I = %L', 'work_mem', '1MB'); END $$",
        "DO $$ BEGIN IF false THEN NULL; ELSE SET enable_seqscan = off; END IF; END $$",
    ] {
        assert_eq!(classify(stmt), pin(PinReason::SetInBlock), "{stmt}");
    }
}

#[test]
fn do_block_with_update_set_or_alter_set_does_not_pin() {
    for stmt in [
        "DO $$ BEGIN UPDATE t SET a = 1; END $$",
        "DO $$ BEGIN INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2; END $$",
        "DO $$ BEGIN ALTER TABLE t ALTER COLUMN a SET DEFAULT 1; END $$",
        "DO $$ BEGIN EXECUTE 'UPDATE t SET a = 1'; RAISE NOTICE 'set'; END $$",
        "DO $$ BEGIN PERFORM 1; END $$",
    ] {
        assert_eq!(classify(stmt), Effect::None, "{stmt}");
    }
}
