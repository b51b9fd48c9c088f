use super::parse::statements;
use super::*;

#[test]
fn keywords_are_read_in_any_case_and_names_keep_theirs() {
    assert_eq!(parse("show POOLS").unwrap(), Command::Show(Show::Pools));
    assert_eq!(
        parse("Pause Cluster Main").unwrap(),
        Command::Pause(Target::Cluster("Main".into()))
    );
    assert_eq!(
        parse("resume \"My Endpoint\"").unwrap(),
        Command::Resume(Target::Named("My Endpoint".into()))
    );
    assert_eq!(parse("PAUSE").unwrap(), Command::Pause(Target::All));
    assert_eq!(parse("disable endpoint e1").unwrap(), Command::Disable("e1".into()));
    assert_eq!(parse("KILL 42").unwrap(), Command::Kill(42));
    assert_eq!(parse("kill client 42").unwrap(), Command::Kill(42));
    assert_eq!(
        parse("drain c 127.0.0.1:5432").unwrap(),
        Command::Drain {
            cluster: "c".into(),
            backend: "127.0.0.1:5432".into()
        }
    );
    assert_eq!(parse("reload").unwrap(), Command::Reload);
}

#[test]
fn what_a_mysql_client_asks_on_connecting_is_a_variables_query() {
    assert_eq!(
        parse("select @@version_comment limit 1").unwrap(),
        Command::Variables(vec!["version_comment".into()])
    );
    assert_eq!(
        parse("SELECT @@session.max_allowed_packet, @@wait_timeout").unwrap(),
        Command::Variables(vec!["max_allowed_packet".into(), "wait_timeout".into()])
    );
    assert_eq!(parse("select * from t").unwrap_err().refusal, Refusal::Syntax);
}

#[test]
fn unknown_or_malformed_commands_are_syntax_errors() {
    for bad in [
        "",
        "SHOW",
        "SHOW NOTHING",
        "KILL",
        "KILL x",
        "DRAIN c",
        "DELETE FROM x",
        "RELOAD now",
        "PAUSE a b c",
        "resume 'open",
    ] {
        assert_eq!(parse(bad).unwrap_err().refusal, Refusal::Syntax, "{bad}");
    }
}

#[test]
fn statements_split_at_semicolons_outside_quotes() {
    assert_eq!(
        statements("SHOW POOLS; show clients;"),
        vec!["SHOW POOLS", "show clients"]
    );
    assert_eq!(statements("pause 'a;b'"), vec!["pause 'a;b'"]);
    assert!(statements(" ; ").is_empty());
}

struct Recorder;

impl Commands for Recorder {
    fn run<'a>(&'a self, _caller: &'a Caller, command: Command) -> Answer<'a> {
        Box::pin(async move { Ok(Reply::Done(command.verb(), String::new())) })
    }
}

fn caller(role: Role) -> Caller {
    Caller {
        tenant: "ops".into(),
        role,
        client_id: 1,
    }
}

#[tokio::test]
async fn a_monitor_may_show_but_not_change_anything() {
    let shown = execute(&Recorder, &caller(Role::Monitor), "SHOW POOLS").await;
    assert_eq!(shown, vec![Ok(Reply::Done("SHOW", String::new()))]);
    for write in [
        "PAUSE",
        "RESUME c",
        "RELOAD",
        "KILL 7",
        "DISABLE e",
        "ENABLE e",
        "DRAIN c b",
        "SWITCHOVER c b",
    ] {
        let out = execute(&Recorder, &caller(Role::Monitor), write).await;
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].as_ref().unwrap_err().refusal, Refusal::Denied, "{write}");
    }
    let out = execute(&Recorder, &caller(Role::Admin), "PAUSE; RESUME").await;
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(Result::is_ok));
}

#[tokio::test]
async fn a_failed_statement_stops_the_rest() {
    let out = execute(&Recorder, &caller(Role::Admin), "SHOW POOLS; bogus; RELOAD").await;
    assert_eq!(out.len(), 2);
    assert!(out[0].is_ok());
    assert_eq!(out[1].as_ref().unwrap_err().refusal, Refusal::Syntax);
}
