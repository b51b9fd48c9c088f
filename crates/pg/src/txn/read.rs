//! A transaction-pooled session's reads from its client: the first read
//! of a transaction reserves a small buffer (kept while the session waits
//! to park), a larger message grows it.

use std::time::Duration;

use bytes::BytesMut;
use gatehouse_core::engine::stream::ClientStream;
use tokio::io::AsyncReadExt;

/// What a transaction's first read of its client reserves
/// ([`read_client`]): a larger message is read on into 8 KiB more.
const FIRST_READ: usize = 1024;

/// The client read buffer a session that will park keeps between
/// transactions: the first read's, not one a larger message grew (an
/// 8 KiB buffer kept by every session not yet parked showed as a KiB more
/// per idle client after a burst of logins).
pub(super) const KEPT_READ_BUFFER_LIMIT: usize = FIRST_READ;

/// Reads from the client, with a deadline while a message is incomplete.
/// Waits for client data first (so an idle client needs no buffer), then
/// reads it; both steps are cancel-safe.
pub(super) async fn read_client(
    client: &mut ClientStream,
    buf: &mut BytesMut,
    deadline: Option<Duration>,
) -> Option<std::io::Result<usize>> {
    let read = async {
        client.readable().await?;
        if buf.is_empty() {
            // A transaction's first read: most messages are small, and a
            // session keeps this buffer while it waits to park. A kept
            // buffer whose front earlier messages were split off is taken
            // back whole here, in place (no allocation).
            buf.reserve(FIRST_READ);
        } else if buf.capacity() - buf.len() < 1024 {
            // The rest of a larger message.
            buf.reserve(8192);
        }
        client.read_buf(buf).await
    };
    match deadline {
        Some(d) => tokio::time::timeout(d, read).await.ok(),
        None => Some(read.await),
    }
}
