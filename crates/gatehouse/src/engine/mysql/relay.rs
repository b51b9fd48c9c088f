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
use crate::engine::stream::ClientStream;

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
) -> Result<Done, Relay> {
    let mut tracker = ResponseTracker::new(kind, false);
    let mut replied = None;
    let mut first = true;
    let mut next_seq = 0u8;
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
            done = step(&mut tracker, payload, replied)?;
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
        if split_packet {
            let p = conn
                .read_packet()
                .await
                .map_err(|e| Relay::Backend(e.to_string(), replied))?;
            first = false;
            let d = step(&mut tracker, &p.payload, replied)?;
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

/// Feeds one reply packet to the tracker: `Some` when the reply is complete.
fn step(tracker: &mut ResponseTracker, payload: &[u8], replied: Option<u8>) -> Result<Option<Done>, Relay> {
    match tracker
        .feed(payload)
        .map_err(|e| Relay::Backend(format!("unexpected reply: {e}"), replied))?
    {
        Step::Done(d) => Ok(Some(d)),
        Step::More => Ok(None),
        Step::LocalInfile | Step::AuthContinue => Err(Relay::Backend(
            "the server asked for a client exchange the proxy does not relay".into(),
            replied,
        )),
    }
}
