//! The admin console over MySQL's protocol: after a console user's login
//! (database `[console] database`), the session is answered by the proxy
//! itself, never a backend. COM_QUERY statements become text result sets
//! (or OK with the line of what was done, or ERR: 1064 for what is not a
//! console command, 1227 for a monitor's write command, 1094 for a `KILL`
//! of no client); COM_PING, COM_INIT_DB of the console's database and
//! COM_QUIT are answered as a server does; COM_PROCESS_KILL is `KILL`.
//! The mysql client's `select @@version_comment limit 1` is answered.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use gatehouse_proto_mysql::consts::{
    COM_INIT_DB, COM_PING, COM_PROCESS_KILL, COM_QUERY, COM_QUIT, SERVER_MORE_RESULTS_EXISTS, SERVER_STATUS_AUTOCOMMIT,
};
use gatehouse_proto_mysql::errors::{self, MyError};
use gatehouse_proto_mysql::packets::{OK_HEADER, OkPacket};
use tokio::io::AsyncWriteExt;

use super::MyEngine;
use super::backend::MyCancelTarget;
use super::errors::err_payload;
use super::io::{IoError, put_packet, read_packet};
use super::table::put_table;
use gatehouse_core::cancel::CancelKey;
use gatehouse_core::console::{Caller, ConsoleError, Refusal, Reply, Role};
use gatehouse_core::core::Core;
use gatehouse_core::engine::stream::ClientStream;
use gatehouse_core::error::{Condition, ProxyError};

/// The longest command packet the console reads (its commands are short).
const MAX_CONSOLE_PACKET: usize = 64 * 1024;

fn my_error(e: &ConsoleError, kill: bool) -> MyError {
    match e.refusal {
        Refusal::Syntax => errors::ER_PARSE_ERROR,
        Refusal::Denied => errors::ER_SPECIFIC_ACCESS_DENIED_ERROR,
        Refusal::NotFound if kill => errors::ER_NO_SUCH_THREAD,
        Refusal::NotFound | Refusal::Failed => errors::ER_UNKNOWN_ERROR,
    }
}

fn io(e: impl std::fmt::Display) -> ProxyError {
    ProxyError::new(Condition::ProtocolViolation, "console client connection failed").with_detail(e.to_string())
}

/// Who logged in to the console.
pub(super) struct ConsoleLogin<'a> {
    pub tenant: &'a str,
    pub role: Role,
    /// The client negotiated MariaDB's extended type information: column
    /// definitions carry it ([`results::put_column_definition`]).
    pub extended: bool,
}

/// Serves a console session (its login's OK not yet sent, `seq` next)
/// until the client leaves, is killed or the proxy shuts down.
pub(super) async fn serve(
    core: &Arc<Core<MyEngine>>,
    stream: &mut ClientStream,
    mut buf: BytesMut,
    seq: u8,
    cancel: &CancelKey<MyCancelTarget>,
    login: ConsoleLogin<'_>,
) -> Result<(), (u8, ProxyError)> {
    let ConsoleLogin { tenant, role, extended } = login;
    let Some(commands) = core.console() else {
        return Err((
            seq,
            ProxyError::new(Condition::Shutdown, "the console is not available"),
        ));
    };
    let database = core.settings().console.database.clone();
    let caller = Caller {
        tenant: tenant.to_owned(),
        role,
        client_id: cancel.id,
    };
    let mut out = BytesMut::new();
    put_packet(&mut out, seq, &ok(""));
    stream.write_all(&out).await.map_err(|e| (seq, io(e)))?;
    let mut shutdown = core.shutdown.clone();
    loop {
        let packet = tokio::select! {
            read = read_packet(stream, &mut buf, MAX_CONSOLE_PACKET) => match read {
                Ok(p) => p,
                Err(IoError::Closed) => return Ok(()),
                Err(e) => return Err((0, io(e))),
            },
            () = cancel.slot.terminated() => {
                return Err((0, ProxyError::new(Condition::Terminated, "Connection was killed")));
            }
            _ = shutdown.wait_for(|s| *s) => {
                return Err((0, ProxyError::new(Condition::Shutdown, "Server shutdown in progress")));
            }
        };
        let payload = &packet.payload;
        let mut out = BytesMut::new();
        let (command, body) = match payload.split_first() {
            Some((c, b)) => (*c, b),
            None => (0, &[][..]),
        };
        match command {
            COM_QUIT => return Ok(()),
            COM_PING => {
                put_packet(&mut out, 1, &ok(""));
            }
            COM_INIT_DB if body == database.as_bytes() => {
                put_packet(&mut out, 1, &ok(""));
            }
            COM_INIT_DB => {
                let msg = format!(
                    "Access denied for user '{tenant}' to database '{}': the console is database '{database}'",
                    String::from_utf8_lossy(body)
                );
                put_packet(&mut out, 1, &err_payload(errors::ER_DBACCESS_DENIED_ERROR, &msg));
            }
            COM_QUERY | COM_PROCESS_KILL => {
                let text = if command == COM_QUERY {
                    String::from_utf8_lossy(body).into_owned()
                } else {
                    format!("KILL {}", super::kill::process_kill_request(payload).id)
                };
                let kill = text.trim_start().to_ascii_lowercase().starts_with("kill");
                let answers = gatehouse_core::console::execute(commands.as_ref(), &caller, &text).await;
                answer(&mut out, &answers, kill, extended);
            }
            _ => {
                let msg = "Unknown command: the console takes COM_QUERY, COM_PING, COM_INIT_DB and COM_QUIT";
                put_packet(&mut out, 1, &err_payload(errors::ER_UNKNOWN_COM_ERROR, msg));
            }
        }
        stream.write_all(&out).await.map_err(|e| (0, io(e)))?;
        stream.flush().await.map_err(|e| (0, io(e)))?;
    }
}

fn ok(info: &str) -> BytesMut {
    ok_with(info, SERVER_STATUS_AUTOCOMMIT)
}

fn ok_with(info: &str, status: u16) -> BytesMut {
    let mut payload = BytesMut::new();
    OkPacket {
        status,
        info: Bytes::copy_from_slice(info.as_bytes()),
        ..OkPacket::default()
    }
    .encode(&mut payload, crate::caps::RELAY_CAPS, OK_HEADER);
    payload
}

/// Writes each statement's answer; all but the last say more results follow.
fn answer(out: &mut BytesMut, answers: &[Result<Reply, ConsoleError>], kill: bool, extended: bool) {
    let mut seq = 1u8;
    if answers.is_empty() {
        put_packet(out, seq, &err_payload(errors::ER_EMPTY_QUERY, "Query was empty"));
        return;
    }
    for (i, a) in answers.iter().enumerate() {
        let status = if i + 1 < answers.len() {
            SERVER_STATUS_AUTOCOMMIT | SERVER_MORE_RESULTS_EXISTS
        } else {
            SERVER_STATUS_AUTOCOMMIT
        };
        match a {
            Ok(Reply::Rows(table, _)) => seq = put_table(out, seq, table, status, extended),
            Ok(Reply::Done(_, line)) => seq = put_packet(out, seq, &ok_with(line, status)),
            Err(e) => {
                put_packet(out, seq, &err_payload(my_error(e, kill), &e.message));
                return;
            }
        }
    }
}
