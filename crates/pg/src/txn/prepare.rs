//! Prepared statements on the transaction-mode data path: a client Parse
//! becomes a proxy-named statement (or a synthetic ParseComplete when the
//! backend already has it); Bind/Describe names are resolved, preparing on
//! demand; the least recently used statements are closed over the cap.

use std::sync::Arc;

use bytes::BytesMut;
use gatehouse_proto_pg::{extended, messages};

use super::super::statements::{MAX_PREPARED_PER_CONNECTION, Statement};
use super::TxSession;
use crate::pending::Pending;

impl TxSession {
    pub(super) fn client_parse(&mut self, name: String, stmt: Arc<Statement>, msg: &[u8]) {
        if name.is_empty() {
            let generation = self.registry.set_unnamed(stmt);
            if let Some(l) = self.lease.as_mut() {
                l.conn().unnamed_owner = Some((self.session_id, generation));
            }
            self.to_backend.extend_from_slice(msg);
            self.queue.push(
                Pending::Parse {
                    proxy: Arc::from(""),
                    client: None,
                },
                &mut self.to_client,
            );
            return;
        }
        if self.registry.contains(&name) {
            let mut err = BytesMut::new();
            messages::put_error(
                &mut err,
                "ERROR",
                "42P05",
                &format!("prepared statement \"{name}\" already exists"),
            );
            self.queue.push(Pending::Synthetic(err.freeze()), &mut self.to_client);
            self.client_skip = true;
            return;
        }
        self.registry.insert(&name, stmt.clone());
        let Some(lease) = self.lease.as_mut() else { return };
        let conn = lease.conn();
        conn.tick += 1;
        if let Some(used) = conn.prepared.get_mut(&stmt.proxy) {
            *used = conn.tick;
            let mut done = BytesMut::new();
            messages::put_message(&mut done, b'1', |_| {});
            self.queue.push(Pending::Synthetic(done.freeze()), &mut self.to_client);
            return;
        }
        conn.prepared.insert(stmt.proxy.clone(), conn.tick);
        extended::put_parse(&mut self.to_backend, &stmt.proxy, &stmt.query, &stmt.param_types);
        self.queue.push(
            Pending::Parse {
                proxy: stmt.proxy.clone(),
                client: Some(Arc::from(name)),
            },
            &mut self.to_client,
        );
        self.evict();
    }

    pub(super) fn resolve_if_statement(&mut self, kind: u8, name: &str) -> Option<Arc<str>> {
        if kind == b'S' { self.resolve(name) } else { None }
    }

    /// The backend name for a client statement, prepared on the current
    /// connection first if it lacks it; `None` to pass the name unchanged
    /// (unknown names then fail on the backend exactly as they would directly).
    pub(super) fn resolve(&mut self, name: &str) -> Option<Arc<str>> {
        let sid = self.session_id;
        let lease = self.lease.as_mut()?;
        let conn = lease.conn();
        if name.is_empty() {
            match self.registry.unnamed() {
                Some((generation, stmt)) if conn.unnamed_owner != Some((sid, *generation)) => {
                    extended::put_parse(&mut self.to_backend, "", &stmt.query, &stmt.param_types);
                    conn.unnamed_owner = Some((sid, *generation));
                    self.queue
                        .push(Pending::InjectedParse(Arc::from("")), &mut self.to_client);
                }
                None if conn.unnamed_owner.is_some_and(|(owner, _)| owner != sid) => {
                    // Another client's unnamed statement is here: drop it so
                    // this client gets "does not exist", as it would directly.
                    extended::put_target(&mut self.to_backend, b'C', b'S', "");
                    conn.unnamed_owner = None;
                    self.queue
                        .push(Pending::InjectedClose(Arc::from("")), &mut self.to_client);
                }
                _ => {}
            }
            return None;
        }
        let stmt = self.registry.get(name)?.clone();
        conn.tick += 1;
        if let Some(used) = conn.prepared.get_mut(&stmt.proxy) {
            *used = conn.tick;
        } else {
            conn.prepared.insert(stmt.proxy.clone(), conn.tick);
            extended::put_parse(&mut self.to_backend, &stmt.proxy, &stmt.query, &stmt.param_types);
            self.queue
                .push(Pending::InjectedParse(stmt.proxy.clone()), &mut self.to_client);
            self.evict();
        }
        Some(stmt.proxy.clone())
    }

    /// Closes the least recently used backend statements over the cap.
    fn evict(&mut self) {
        let Some(lease) = self.lease.as_mut() else { return };
        let conn = lease.conn();
        while conn.prepared.len() > MAX_PREPARED_PER_CONNECTION {
            let Some(oldest) = conn.prepared.iter().min_by_key(|(_, t)| **t).map(|(n, _)| n.clone()) else {
                break;
            };
            conn.prepared.remove(&oldest);
            extended::put_target(&mut self.to_backend, b'C', b'S', &oldest);
            // (`oldest` moves into the queue entry below.)
            self.queue.push(Pending::InjectedClose(oldest), &mut self.to_client);
        }
    }
}
