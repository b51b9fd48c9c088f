//! Pools of warm backend connections, one per (backend, backend user,
//! database) so a connection is never shared across users or databases.
//! Borrowing returns a [`Lease`]: an RAII guard that gives the connection
//! back only through [`Lease::release`] (after the engine's reset) and
//! discards it if dropped any other way. Waiters are served first come, first
//! served (tokio's semaphore is fair) and give up after the borrow timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{ClusterSettings, Secret};
use crate::engine::Engine;
use crate::error::{Condition, ProxyError};

/// What a pool serves. The cluster is part of the key because two clusters
/// may list the same server with different pool settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub cluster: String,
    pub backend: String,
    pub user: String,
    pub database: String,
}

pub struct Pool<E: Engine> {
    key: PoolKey,
    secret: Arc<Secret>,
    engine: Arc<E>,
    size: u32,
    borrow_timeout: Duration,
    connect_timeout: Duration,
    permits: Arc<Semaphore>,
    idle: Mutex<Vec<E::Conn>>,
}

impl<E: Engine> Pool<E> {
    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Connections idle in the pool now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Connections lent out now.
    pub fn leased_count(&self) -> usize {
        self.size as usize - self.permits.available_permits()
    }

    /// Borrows a connection: an idle one if any, else a new one, waiting at
    /// most the borrow timeout for a free slot.
    pub async fn lease(self: &Arc<Self>) -> Result<Lease<E>, ProxyError> {
        let permit = match tokio::time::timeout(self.borrow_timeout, self.permits.clone().acquire_owned()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(ProxyError::new(Condition::Shutdown, "the pool is closed")),
            Err(_) => {
                return Err(ProxyError::new(
                    Condition::TooManyConnections,
                    format!(
                        "no backend connection became free within {:?} (pool limit of {} connections for user \"{}\" on database \"{}\")",
                        self.borrow_timeout, self.size, self.key.user, self.key.database
                    ),
                ));
            }
        };
        while let Some(mut conn) = self.pop_idle() {
            if self.engine.is_usable(&mut conn) {
                return Ok(Lease {
                    conn: Some(conn),
                    pool: self.clone(),
                    _permit: permit,
                });
            }
        }
        let conn = self
            .engine
            .connect(
                &self.key.backend,
                &self.secret,
                &self.key.database,
                self.connect_timeout,
            )
            .await?;
        Ok(Lease {
            conn: Some(conn),
            pool: self.clone(),
            _permit: permit,
        })
    }

    fn pop_idle(&self) -> Option<E::Conn> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    fn push_idle(&self, conn: E::Conn) {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
    }
}

/// A backend connection lent to one client. Dropping it discards the
/// connection; [`Lease::release`] resets it and returns it to the pool.
pub struct Lease<E: Engine> {
    conn: Option<E::Conn>,
    pool: Arc<Pool<E>>,
    _permit: OwnedSemaphorePermit,
}

impl<E: Engine> Lease<E> {
    pub fn conn(&mut self) -> &mut E::Conn {
        // The option is only emptied by `release`, which consumes the lease.
        match self.conn.as_mut() {
            Some(c) => c,
            None => unreachable!("lease used after release"),
        }
    }

    pub fn pool(&self) -> &Arc<Pool<E>> {
        &self.pool
    }

    /// Returns the connection to the pool as it is: for a connection whose
    /// session state the caller knows to be safe for the next client
    /// (transaction pooling, at a transaction boundary).
    pub fn recycle(mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.push_idle(conn);
        }
    }

    /// Resets the connection and returns it to the pool; a connection whose
    /// reset fails is closed instead.
    pub async fn release(mut self) {
        if let Some(mut conn) = self.conn.take() {
            match self.pool.engine.reset(&mut conn).await {
                Ok(()) => self.pool.push_idle(conn),
                Err(e) => tracing::debug!(error = %e, "backend connection discarded after failed reset"),
            }
        }
    }
}

/// All pools of one engine, created on first use.
pub struct Pools<E: Engine> {
    map: Mutex<HashMap<PoolKey, Arc<Pool<E>>>>,
}

impl<E: Engine> Default for Pools<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Engine> Pools<E> {
    pub fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The pool for `key`, created with the cluster's settings if new.
    pub fn get(&self, engine: &Arc<E>, cluster: &ClusterSettings, key: PoolKey, secret: &Arc<Secret>) -> Arc<Pool<E>> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key)
            .or_insert_with_key(|key| {
                Arc::new(Pool {
                    key: key.clone(),
                    secret: secret.clone(),
                    engine: engine.clone(),
                    size: cluster.pool_size,
                    borrow_timeout: cluster.borrow_timeout,
                    connect_timeout: cluster.connect_timeout,
                    permits: Arc::new(Semaphore::new(cluster.pool_size as usize)),
                    idle: Mutex::new(Vec::new()),
                })
            })
            .clone()
    }

    /// A snapshot of every pool, for reports and tests.
    pub fn all(&self) -> Vec<Arc<Pool<E>>> {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}
