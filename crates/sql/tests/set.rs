//! Tests for SET / RESET / set_config classification.

#![forbid(unsafe_code)]

use gatehouse_sql::{Effect, PinReason, Scope, classify};

fn set(name: &str, value: &str) -> Effect {
    Effect::Set {
        name: name.into(),
        value: value.into(),
        scope: Scope::Session,
    }
}

fn local(name: &str, value: &str) -> Effect {
    Effect::Set {
        name: name.into(),
        value: value.into(),
        scope: Scope::Local,
    }
}

fn reset(name: &str) -> Effect {
    Effect::Reset { name: name.into() }
}

const MALFORMED: Effect = Effect::Pin(PinReason::Unrecognized);

#[test]
fn generic_set() {
    assert_eq!(
        classify("SET search_path = a, \"B\", public"),
        set("search_path", "a, \"B\", public")
    );
    assert_eq!(classify("set Work_Mem to '64MB'"), set("work_mem", "'64MB'"));
    assert_eq!(
        classify("SET SESSION statement_timeout = 0"),
        set("statement_timeout", "0")
    );
    assert_eq!(
        classify("SET LOCAL lock_timeout TO '1s'"),
        local("lock_timeout", "'1s'")
    );
    assert_eq!(classify("SET \"MyApp\".User_Id = -5"), set("MyApp.user_id", "-5"));
    assert_eq!(
        classify("SET datestyle TO iso, mdy /* c */"),
        set("datestyle", "iso, mdy")
    );
    assert_eq!(classify("SET x.y = E'a\\'b'"), set("x.y", "E'a\\'b'"));
    assert_eq!(classify("SET x.y = $$a$$"), set("x.y", "$$a$$"));
    assert_eq!(classify("SET enable_seqscan = off"), set("enable_seqscan", "off"));
    assert_eq!(classify("SET local = 1"), set("local", "1"));
}

#[test]
fn set_default_is_reset() {
    assert_eq!(classify("SET search_path = DEFAULT"), reset("search_path"));
    assert_eq!(classify("SET search_path TO default"), reset("search_path"));
    assert_eq!(classify("SET TIME ZONE LOCAL"), reset("timezone"));
    assert_eq!(classify("SET TIME ZONE DEFAULT"), reset("timezone"));
    assert_eq!(classify("SET NAMES DEFAULT"), reset("client_encoding"));
    assert_eq!(classify("SET NAMES"), reset("client_encoding"));
    assert_eq!(
        classify("SET SESSION AUTHORIZATION DEFAULT"),
        reset("session_authorization")
    );
    assert_eq!(classify("SET role TO DEFAULT"), reset("role"));
    assert_eq!(
        classify("SET LOCAL search_path TO DEFAULT"),
        local("search_path", "DEFAULT")
    );
}

#[test]
fn special_forms() {
    assert_eq!(classify("SET TIME ZONE 'PST8PDT'"), set("timezone", "'PST8PDT'"));
    assert_eq!(classify("set time zone -7"), set("timezone", "-7"));
    assert_eq!(classify("SET LOCAL TIME ZONE 'UTC'"), local("timezone", "'UTC'"));
    assert_eq!(classify("SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE"), MALFORMED);
    assert_eq!(classify("SET NAMES 'UTF8'"), set("client_encoding", "'UTF8'"));
    assert_eq!(classify("SET SCHEMA 'app'"), set("search_path", "'app'"));
    assert_eq!(classify("SET XML OPTION DOCUMENT"), set("xmloption", "DOCUMENT"));
    assert_eq!(
        classify("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
        set("default_transaction_isolation", "'repeatable read'")
    );
    assert_eq!(
        classify("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"),
        set("default_transaction_read_only", "on")
    );
    assert_eq!(
        classify("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY, DEFERRABLE"),
        MALFORMED
    );
}

#[test]
fn role_and_authorization() {
    assert_eq!(classify("SET ROLE admin"), Effect::Pin(PinReason::SetRole));
    assert_eq!(classify("SET SESSION ROLE 'admin'"), Effect::Pin(PinReason::SetRole));
    assert_eq!(classify("SET ROLE NONE"), Effect::Pin(PinReason::SetRole));
    assert_eq!(classify("SET role = admin"), Effect::Pin(PinReason::SetRole));
    assert_eq!(classify("SET LOCAL ROLE admin"), local("role", "admin"));
    assert_eq!(classify("RESET ROLE"), reset("role"));
    assert_eq!(
        classify("SET SESSION AUTHORIZATION bob"),
        Effect::Pin(PinReason::SetSessionAuthorization)
    );
    assert_eq!(
        classify("SET SESSION SESSION AUTHORIZATION 'bob'"),
        Effect::Pin(PinReason::SetSessionAuthorization)
    );
    assert_eq!(
        classify("SET LOCAL SESSION AUTHORIZATION bob"),
        local("session_authorization", "bob")
    );
    assert_eq!(classify("RESET SESSION AUTHORIZATION"), reset("session_authorization"));
}

#[test]
fn reset_forms() {
    assert_eq!(classify("RESET search_path"), reset("search_path"));
    assert_eq!(classify("reset \"MyApp\".X"), reset("MyApp.x"));
    assert_eq!(classify("RESET TIME ZONE"), reset("timezone"));
    assert_eq!(
        classify("RESET TRANSACTION ISOLATION LEVEL"),
        reset("transaction_isolation")
    );
    assert_eq!(classify("RESET ALL"), Effect::ResetAll);
    assert_eq!(classify("RESET"), MALFORMED);
    assert_eq!(classify("RESET a b"), MALFORMED);
}

#[test]
fn malformed_set_pins() {
    for sql in [
        "SET",
        "SET x",
        "SET x =",
        "SET x = 1 2",
        "SET x = f(1)",
        "SET x = $1",
        "SET x FROM CURRENT",
        "SET x = 1,",
        "SET standard_conforming_strings = off",
        "SET LOCAL standard_conforming_strings TO 'off'",
    ] {
        assert_eq!(classify(sql), MALFORMED, "{sql}");
    }
    assert_eq!(
        classify("SET standard_conforming_strings = on"),
        set("standard_conforming_strings", "on")
    );
}

#[test]
fn set_config_with_literals() {
    assert_eq!(
        classify("SELECT set_config('search_path', 'a, b', false)"),
        set("search_path", "'a, b'")
    );
    assert_eq!(
        classify("select SET_CONFIG('App.X', 'it''s', true)"),
        local("app.x", "'it''s'")
    );
    assert_eq!(
        classify("SELECT pg_catalog.set_config('a.b', $$v$$, 'f') AS r"),
        set("a.b", "'v'")
    );
    assert_eq!(classify("(SELECT set_config('a.b', '', false))"), set("a.b", "''"));
    assert_eq!(
        classify("SELECT set_config('role', 'x', false)"),
        Effect::Pin(PinReason::SetRole)
    );
}

/// Any other `set_config` use may change a setting we cannot see, so it pins
/// as unrecognized.
#[test]
fn set_config_otherwise_pins() {
    for sql in [
        "SELECT set_config(name_col, 'v', false) FROM t",
        "SELECT set_config('a.b', 'v' || 'w', false)",
        "SELECT set_config('a.b', 'v', is_local)",
        "SELECT set_config('a.b', 'v', false), 1",
        "SELECT set_config('a.b', E'\\n', false)",
        "SELECT set_config('bad name', 'v', false)",
        "UPDATE t SET a = set_config('a.b', 'v', false)",
        "DO $$ BEGIN PERFORM set_config('a.b', 'v', false); END $$",
    ] {
        assert_eq!(classify(sql), MALFORMED, "{sql}");
    }
}
