//! The seeds of the PostgreSQL codec's targets: frames, startup packets,
//! message sequences, the SCRAM server and the backend startup.

use gatehouse_proto_pg::auth::md5::md5_stored;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_proto_pg::extended::{put_bind, put_parse, put_target};
use gatehouse_proto_pg::messages::{
    put_auth_cleartext, put_auth_md5, put_auth_ok, put_auth_sasl, put_auth_sasl_data, put_backend_key, put_error,
    put_message, put_parameter_status, put_password, put_query, put_ready, put_sasl_initial,
};
use gatehouse_proto_pg::results::put_data_row;
use gatehouse_proto_pg::startup::{SSL_REQUEST_CODE, cancel_request, startup_message};
use postgres_protocol::authentication::md5_hash;

use super::{Seed, cat, chunk, encoded as pg};

pub(super) fn pg_seeds() -> Vec<Seed> {
    let limits = |hold: u16, max: u32| cat(&[&hold.to_le_bytes(), &max.to_le_bytes()]);
    let query = pg(|b| put_query(b, "select 1"));
    let sync = pg(|b| put_message(b, b'S', |_| {}));
    let row = pg(|b| put_data_row(b, &[Some("a"), None, Some("")]));
    let error = pg(|b| put_error(b, "FATAL", "28P01", "password authentication failed"));
    let mut with_option = startup_message([("user", "alice"), ("_pq_.compression", "on")]);
    with_option[4..8].copy_from_slice(&((3u32 << 16) | 2).to_be_bytes());
    let mut ssl = 8u32.to_be_bytes().to_vec();
    ssl.extend_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    let verifier = ScramVerifier::from_password("pencil", b"0123456789abcdef", 4096);
    let salt = [1, 2, 3, 4];
    let md5_response = md5_hash(b"alice", b"s3cret", salt);
    vec![
        ("pg_frame", "two-messages", cat(&[&limits(1024, 1 << 20), &query, &sync])),
        ("pg_frame", "streamed-row", cat(&[&limits(4, 1 << 20), &row[..7]])),
        ("pg_frame", "bad-length", cat(&[&limits(16, 100), &[b'Q', 0, 0, 0, 3]])),
        ("pg_startup", "startup", startup_message([("user", "alice"), ("database", "db1")])),
        ("pg_startup", "protocol-option", with_option),
        ("pg_startup", "ssl-request", ssl),
        ("pg_startup", "cancel", cancel_request(7, 9).to_vec()),
        ("pg_messages", "error", error.clone()),
        ("pg_messages", "parameter-status", pg(|b| put_parameter_status(b, "TimeZone", "UTC"))),
        ("pg_messages", "backend-key", pg(|b| put_backend_key(b, 42, 7))),
        ("pg_messages", "ready", pg(|b| put_ready(b, b'T'))),
        ("pg_messages", "data-row", row),
        ("pg_messages", "auth-sasl", pg(|b| put_auth_sasl(b, &["SCRAM-SHA-256"]))),
        (
            "pg_messages",
            "sasl-initial",
            pg(|b| put_sasl_initial(b, "SCRAM-SHA-256", b"n,,n=,r=abc")),
        ),
        ("pg_messages", "password", pg(|b| put_password(b, b"secret", true))),
        ("pg_messages", "parse", pg(|b| put_parse(b, "s1", "SELECT $1", &[0, 1, 0, 0, 0, 23]))),
        ("pg_messages", "bind", pg(|b| put_bind(b, "", "s1", &[0, 0, 0, 0, 0, 0]))),
        ("pg_messages", "describe", pg(|b| put_target(b, b'D', b'S', "s1"))),
        (
            "pg_scram_server",
            "made-up",
            cat(&[
                &[0, 0],
                &chunk(b"n,,n=,r=rOprNGfwEbeRWgbNEkqO"),
                b"c=biws,r=rOprNGfwEbeRWgbNEkqOWlpaWlpaWlpaWlpaWlpaWlpaWlpa,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            ]),
        ),
        ("pg_scram_server", "genuine", cat(&[&[1, 0x20], &chunk(b"pencil"), &[0, 0, 0]])),
        ("pg_scram_server", "wrong-password", cat(&[&[1, 0x21], &chunk(b"pencil"), &[0, 0, 0]])),
        ("pg_scram_server", "channel-binding-y", cat(&[&[1, 0x02], &chunk(b"pencil"), &[0, 0, 0]])),
        ("pg_scram_server", "tampered", cat(&[&[1, 0x00], &chunk(b"pencil"), &[1, 40, 0, 7]])),
        ("pg_scram_server", "verifier", cat(&[&[2], verifier.to_string().as_bytes()])),
        (
            "pg_scram_server",
            "md5",
            cat(&[&[3], &chunk(b"alice"), &chunk(b"s3cret"), &salt, md5_response.as_bytes()]),
        ),
        (
            "pg_scram_server",
            "md5-stored",
            cat(&[&[3], &chunk(b"alice"), &chunk(b"s3cret"), &salt, md5_stored("alice", "s3cret").as_bytes()]),
        ),
        (
            "pg_backend_startup",
            "md5",
            cat(&[
                &[0],
                &pg(|b| put_auth_md5(b, salt)),
                &pg(put_auth_ok),
                &pg(|b| put_parameter_status(b, "server_version", "15")),
                &pg(|b| put_backend_key(b, 10, 20)),
                &pg(|b| put_ready(b, b'I')),
            ]),
        ),
        (
            "pg_backend_startup",
            "cleartext",
            cat(&[&[0], &pg(put_auth_cleartext), &pg(put_auth_ok), &pg(|b| put_ready(b, b'I'))]),
        ),
        (
            "pg_backend_startup",
            "scram",
            cat(&[
                &[0],
                &pg(|b| put_auth_sasl(b, &["SCRAM-SHA-256"])),
                &pg(|b| put_auth_sasl_data(b, false, b"r=abc,s=c2FsdA==,i=4096")),
            ]),
        ),
        ("pg_backend_startup", "refused", cat(&[&[1], &error])),
    ]
}
