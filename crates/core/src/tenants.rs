//! The tenants clients authenticate as: a table swapped whole when the
//! configuration (and its tenant directory and secrets store) is reloaded,
//! so a lookup never sees half a reload. Sessions keep the `Arc<Tenant>`
//! they logged in with; the next login sees the new table.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::config::Tenant;

type Table = Arc<HashMap<String, Arc<Tenant>>>;

pub struct Tenants {
    table: RwLock<Table>,
}

impl Tenants {
    pub fn new(table: HashMap<String, Arc<Tenant>>) -> Self {
        Self {
            table: RwLock::new(Arc::new(table)),
        }
    }

    /// The tenant named `name`, if there is one now.
    pub fn get(&self, name: &str) -> Option<Arc<Tenant>> {
        self.table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Replaces the whole table.
    pub fn replace(&self, table: HashMap<String, Arc<Tenant>>) {
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
    }

    pub fn len(&self) -> usize {
        self.table.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
