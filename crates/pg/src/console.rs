//! The admin console over PostgreSQL's protocol: after a console user's
//! login (database `[console] database`), the session is answered by the
//! proxy itself, never a backend. Simple queries only (psql, and
//! tokio-postgres' `simple_query`); each statement's [`Reply`] becomes a
//! RowDescription with DataRows and CommandComplete, or a NoticeResponse
//! and CommandComplete; a refused one an ErrorResponse with its SQLSTATE.
//! The extended protocol is answered with 0A000 up to its Sync.

use std::sync::Arc;

use bytes::BytesMut;
use gatehouse_proto_pg::frame::{Step, next_frame};
use gatehouse_proto_pg::{messages, results, sqlstate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::PgEngine;
use super::backend::PgCancelTarget;
use gatehouse_core::cancel::CancelKey;
use gatehouse_core::console::{Caller, Cell, ColumnType, ConsoleError, Refusal, Reply, Role};
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};

/// The longest statement the console reads (its commands are short).
const MAX_CONSOLE_MESSAGE: usize = 64 * 1024;

/// The server parameters a console client is told: enough for psql and
/// drivers to talk to it as to a PostgreSQL 15 server.
const PARAMETERS: [(&str, &str); 7] = [
    ("server_version", "15.0 (Gatehouse console)"),
    ("server_encoding", "UTF8"),
    ("client_encoding", "UTF8"),
    ("DateStyle", "ISO, MDY"),
    ("integer_datetimes", "on"),
    ("standard_conforming_strings", "on"),
    ("application_name", ""),
];

fn sqlstate_of(e: &ConsoleError) -> &'static str {
    match e.refusal {
        Refusal::Syntax => sqlstate::SYNTAX_ERROR,
        Refusal::Denied => sqlstate::INSUFFICIENT_PRIVILEGE,
        Refusal::NotFound => sqlstate::UNDEFINED_OBJECT,
        Refusal::Failed => sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
    }
}

fn oid_of(t: ColumnType) -> u32 {
    match t {
        ColumnType::Text => results::TEXT_OID,
        ColumnType::Integer => results::INT8_OID,
        ColumnType::Real => results::FLOAT8_OID,
    }
}

fn io(e: std::io::Error) -> ProxyError {
    ProxyError::new(Condition::ProtocolViolation, "console client connection failed").with_detail(e.to_string())
}

/// Serves a console session until the client leaves, is killed or the
/// proxy shuts down.
pub(super) async fn serve(
    core: &Arc<Core<PgEngine>>,
    stream: &mut ClientStream,
    cancel: &CancelKey<PgCancelTarget>,
    tenant: &str,
    role: Role,
) -> Result<(), ProxyError> {
    let Some(commands) = core.console() else {
        return Err(ProxyError::new(Condition::Shutdown, "the console is not available"));
    };
    let caller = Caller {
        tenant: tenant.to_owned(),
        role,
        client_id: cancel.id,
    };
    let mut out = BytesMut::new();
    messages::put_auth_ok(&mut out);
    for (name, value) in PARAMETERS {
        messages::put_parameter_status(&mut out, name, value);
    }
    messages::put_backend_key(&mut out, cancel.id, cancel.secret);
    messages::put_ready(&mut out, b'I');
    stream.write_all(&out).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut buf = BytesMut::new();
    let mut shutdown = core.shutdown.clone();
    // After an extended-protocol message, everything up to Sync is skipped.
    let mut skipping = false;
    loop {
        let (tag, len) = loop {
            match next_frame(&buf, MAX_CONSOLE_MESSAGE, MAX_CONSOLE_MESSAGE) {
                Ok(Step::Whole { tag, len }) => break (tag, len),
                Ok(Step::NeedMore) => {}
                Ok(Step::Stream { .. }) | Err(_) => {
                    return Err(ProxyError::new(
                        Condition::ProtocolViolation,
                        format!("console messages are limited to {MAX_CONSOLE_MESSAGE} bytes"),
                    ));
                }
            }
            buf.reserve(1024);
            tokio::select! {
                read = stream.read_buf(&mut buf) => match read {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(io(e)),
                },
                () = cancel.slot.terminated() => {
                    return Err(ProxyError::new(Condition::Terminated, "terminating connection due to administrator command"));
                }
                _ = shutdown.wait_for(|s| *s) => {
                    return Err(ProxyError::new(Condition::Shutdown, "the proxy is shutting down"));
                }
            }
        };
        let message = buf.split_to(len);
        let mut out = BytesMut::new();
        match tag {
            b'X' => return Ok(()),
            b'Q' => {
                let body = messages::body(&message);
                let text = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(body));
                answer(
                    &mut out,
                    &gatehouse_core::console::execute(commands.as_ref(), &caller, &text).await,
                );
                messages::put_ready(&mut out, b'I');
            }
            b'S' => {
                skipping = false;
                messages::put_ready(&mut out, b'I');
            }
            _ if skipping => continue,
            b'P' | b'B' | b'D' | b'E' | b'C' | b'H' | b'F' => {
                skipping = true;
                messages::put_error(
                    &mut out,
                    "ERROR",
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    "the console takes simple queries only (psql, or simple_query)",
                );
            }
            other => {
                return Err(ProxyError::new(
                    Condition::ProtocolViolation,
                    format!(
                        "unexpected message type {} on the console",
                        char::from(other).escape_default()
                    ),
                ));
            }
        }
        stream.write_all(&out).await.map_err(io)?;
        stream.flush().await.map_err(io)?;
    }
}

/// Writes each statement's answer (an empty query string has none).
fn answer(out: &mut BytesMut, answers: &[Result<Reply, ConsoleError>]) {
    if answers.is_empty() {
        results::put_empty_query(out);
    }
    for a in answers {
        match a {
            Ok(Reply::Rows(table, tag)) => {
                let columns: Vec<(&str, u32)> = table.columns.iter().map(|(n, t)| (*n, oid_of(*t))).collect();
                results::put_row_description(out, &columns);
                for row in &table.rows {
                    let texts: Vec<Option<String>> = row.iter().map(Cell::text).collect();
                    let values: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
                    results::put_data_row(out, &values);
                }
                let tag = if *tag == "SELECT" {
                    format!("SELECT {}", table.rows.len())
                } else {
                    (*tag).to_owned()
                };
                results::put_command_complete(out, &tag);
            }
            Ok(Reply::Done(tag, line)) => {
                results::put_notice(out, line);
                results::put_command_complete(out, tag);
            }
            Err(e) => messages::put_error(out, "ERROR", sqlstate_of(e), &e.message),
        }
    }
}
