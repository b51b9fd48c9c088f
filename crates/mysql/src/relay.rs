//! Relaying the backend's reply to one command to the client, packet by
//! packet from the connection's read buffer, with the response tracker
//! saying where the reply ends.

use bytes::{Buf, BytesMut};
use gatehouse_proto_mysql::frame;
use gatehouse_proto_mysql::packets::OK_HEADER;
use gatehouse_proto_mysql::response::{Done, ResponseKind, ResponseTracker, Step};
use tokio::io::AsyncWriteExt;

use super::backend::MyConn;
use super::io::{fill, put_packet};
use gatehouse_core::engine::stream::ClientStream;

/// Why relaying a reply stopped.
pub enum Relay {
    /// Writing to the client failed.
    Client(String),
    /// The backend failed; if part of the reply reached the client, the
    /// sequence id that follows it (an error ending the reply must carry it,
    /// or the client's driver reports its packets out of sync instead).
    Backend(String, Option<u8>),
}

/// Relays the reply to one command from `conn` to the client until it is
/// complete. Whole packets are passed on as read, straight from the
/// connection's read buffer (one write per read, no copy); only a
/// PREPARE_OK's statement id is rewritten, in place. A logical packet of
/// 16 MiB or more (split on the wire) is reassembled and framed again.
pub async fn relay(
    conn: &mut MyConn,
    stream: &mut ClientStream,
    kind: ResponseKind,
    client_id: Option<u32>,
    mut capture: Option<&mut BytesMut>,
    local_files: bool,
) -> Result<Done, Relay> {
    let mut tracker = ResponseTracker::new(kind, false);
    let mut replied = None;
    let mut first = true;
    let mut next_seq = 0u8;
    let mut infile_request = false;
    loop {
        let mut offset = 0;
        let mut done = None;
        let mut split_packet = false;
        while done.is_none() {
            let Some((len, seq)) = frame::peek_header(&conn.rbuf[offset..]) else {
                break;
            };
            if len >= frame::MAX_PACKET_PAYLOAD {
                split_packet = offset == 0;
                break;
            }
            let end = offset + frame::HEADER_LEN + len;
            if conn.rbuf.len() < end {
                break;
            }
            let payload = &mut conn.rbuf[offset + frame::HEADER_LEN..end];
            // The tracker reads the server's statement id; the client gets its own.
            let infile = match step(&mut tracker, payload, replied)? {
                Stepped::Done(d) => {
                    done = Some(d);
                    false
                }
                Stepped::More => false,
                Stepped::LocalInfile => true,
            };
            if let Some(id) = client_id
                && first
                && kind == ResponseKind::StmtPrepare
                && payload.first() == Some(&OK_HEADER)
            {
                let _ = gatehouse_proto_mysql::prepare::rewrite_prepare_ok_id(payload, id);
            }
            first = false;
            offset = end;
            next_seq = seq.wrapping_add(1);
            if infile && !local_files {
                // A client that did not offer CLIENT_LOCAL_FILES is never
                // asked (the request is always a reply's first packet): the
                // server gets an empty file and answers with its error,
                // which reaches the client as the reply's first packet.
                conn.rbuf.advance(end);
                conn.stream
                    .write_all(&[0, 0, 0, seq.wrapping_add(1)])
                    .await
                    .map_err(|e| Relay::Backend(e.to_string(), None))?;
                let p = conn
                    .read_packet()
                    .await
                    .map_err(|e| Relay::Backend(e.to_string(), None))?;
                let Stepped::Done(d) = step(&mut tracker, &p.payload, None)? else {
                    return Err(Relay::Backend(
                        "a reply to an empty LOCAL INFILE that does not end".into(),
                        None,
                    ));
                };
                let mut out = BytesMut::with_capacity(p.payload.len() + frame::HEADER_LEN);
                put_packet(&mut out, 1, &p.payload);
                stream.write_all(&out).await.map_err(|e| Relay::Client(e.to_string()))?;
                if let Some(c) = capture.as_deref_mut() {
                    c.extend_from_slice(&out);
                }
                return Ok(d);
            }
            if infile {
                // The request goes to the client, whose file comes back.
                infile_request = true;
                break;
            }
        }
        if offset > 0 {
            stream
                .write_all(&conn.rbuf[..offset])
                .await
                .map_err(|e| Relay::Client(e.to_string()))?;
            if let Some(c) = capture.as_deref_mut() {
                c.extend_from_slice(&conn.rbuf[..offset]);
            }
            conn.rbuf.advance(offset);
            replied = Some(next_seq);
        }
        if let Some(d) = done {
            return Ok(d);
        }
        if std::mem::take(&mut infile_request) {
            if !conn.rbuf.is_empty() {
                return Err(Relay::Backend(
                    "data after the server's LOCAL INFILE request".into(),
                    replied,
                ));
            }
            relay_local_file(conn, stream).await?;
            continue;
        }
        if split_packet {
            let p = conn
                .read_packet()
                .await
                .map_err(|e| Relay::Backend(e.to_string(), replied))?;
            first = false;
            let d = match step(&mut tracker, &p.payload, replied)? {
                Stepped::Done(d) => Some(d),
                Stepped::More => None,
                Stepped::LocalInfile => {
                    return Err(Relay::Backend(
                        "a LOCAL INFILE request split over packets".into(),
                        replied,
                    ));
                }
            };
            let mut out = BytesMut::with_capacity(p.payload.len() + 64);
            let next = put_packet(&mut out, p.seq, &p.payload);
            stream.write_all(&out).await.map_err(|e| Relay::Client(e.to_string()))?;
            if let Some(c) = capture.as_deref_mut() {
                c.extend_from_slice(&out);
            }
            replied = Some(next);
            if let Some(d) = d {
                return Ok(d);
            }
            continue;
        }
        fill(&mut conn.stream, &mut conn.rbuf)
            .await
            .map_err(|e| Relay::Backend(e.to_string(), replied))?;
    }
}

/// What one reply packet told the tracker.
enum Stepped {
    More,
    /// The server asks the client for a file (`LOAD DATA LOCAL INFILE`).
    LocalInfile,
    Done(Done),
}

/// Feeds one reply packet to the tracker.
fn step(tracker: &mut ResponseTracker, payload: &[u8], replied: Option<u8>) -> Result<Stepped, Relay> {
    match tracker
        .feed(payload)
        .map_err(|e| Relay::Backend(format!("unexpected reply: {e}"), replied))?
    {
        Step::Done(d) => Ok(Stepped::Done(d)),
        Step::More => Ok(Stepped::More),
        Step::LocalInfile => Ok(Stepped::LocalInfile),
        Step::AuthContinue => Err(Relay::Backend(
            "the server asked for a client exchange the proxy does not relay".into(),
            replied,
        )),
    }
}

/// Passes the client's answer to a LOCAL INFILE request on to the server
/// as it arrives: the file's contents in packets, then an empty packet
/// (MySQL "LOCAL INFILE Request"; an empty packet right after one of the
/// largest size continues that packet and does not end the file). The
/// client says nothing else until the server's OK or ERR, so a byte past
/// the end is a protocol violation.
async fn relay_local_file(conn: &mut MyConn, stream: &mut ClientStream) -> Result<(), Relay> {
    let mut buf = BytesMut::with_capacity(super::io::READ_BUFFER);
    // Payload bytes of the current packet not yet passed on; whether the
    // last header was of the largest size.
    let mut remaining = 0usize;
    let mut continued = false;
    loop {
        fill(stream, &mut buf)
            .await
            .map_err(|e| Relay::Client(format!("reading the client's LOCAL INFILE data: {e}")))?;
        let mut at = 0;
        let mut ended = false;
        while at < buf.len() {
            if remaining > 0 {
                let take = remaining.min(buf.len() - at);
                at += take;
                remaining -= take;
                continue;
            }
            let Some((len, _)) = frame::peek_header(&buf[at..]) else {
                break;
            };
            at += frame::HEADER_LEN;
            if len == 0 && !continued {
                ended = true;
                break;
            }
            continued = len >= frame::MAX_PACKET_PAYLOAD;
            remaining = len;
        }
        conn.stream
            .write_all(&buf[..at])
            .await
            .map_err(|e| Relay::Backend(e.to_string(), None))?;
        buf.advance(at);
        if ended {
            if !buf.is_empty() {
                return Err(Relay::Client("data after the end of the LOCAL INFILE contents".into()));
            }
            return Ok(());
        }
    }
}
