//! A client's prepared statements under transaction pooling. The client's
//! names map to proxy-owned names derived from the query text and parameter
//! types, so identical statements from different clients share one backend
//! statement and names can never collide; the unnamed statement is tracked
//! by owner so a Bind never reaches another client's.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Backend statements kept per connection before the least recently used
/// one is closed.
pub const MAX_PREPARED_PER_CONNECTION: usize = 256;

/// What is needed to prepare a statement on any backend connection.
#[derive(Debug)]
pub struct Statement {
    /// The name on backends ("" for the unnamed statement).
    pub proxy: Arc<str>,
    pub query: Arc<str>,
    pub param_types: Bytes,
    /// Executing it may change tracked parameters (SET, RESET, set_config,
    /// DISCARD ALL): they are read back after the transaction it runs in.
    pub touches_tracked: bool,
    /// A query rule's statement timeout for it, if one matched its Parse.
    pub rule_timeout: Option<std::time::Duration>,
    /// Where a query rule routes an exchange that starts by binding it.
    pub rule_route: Option<gatehouse_core::topology::RouteTo>,
}

/// `gh_` + 128 bits of SHA-256 over the query and parameter types: fits
/// NAMEDATALEN (63) and cannot be a name a driver picks by accident.
pub fn proxy_name(query: &str, param_types: &[u8]) -> Arc<str> {
    let mut h = Sha256::new();
    h.update(query.as_bytes());
    h.update([0]);
    h.update(param_types);
    let digest = h.finalize();
    let mut name = String::with_capacity(35);
    name.push_str("gh_");
    for b in &digest[..16] {
        name.push_str(&format!("{b:02x}"));
    }
    Arc::from(name)
}

#[derive(Debug, Default)]
pub struct Registry {
    named: HashMap<String, Arc<Statement>>,
    /// The client's unnamed statement and its generation.
    unnamed: Option<(u64, Arc<Statement>)>,
    generation: u64,
}

impl Registry {
    pub fn get(&self, name: &str) -> Option<&Arc<Statement>> {
        self.named.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.named.contains_key(name)
    }

    pub fn insert(&mut self, name: &str, stmt: Arc<Statement>) {
        self.named.insert(name.to_owned(), stmt);
    }

    pub fn remove(&mut self, name: &str) {
        self.named.remove(name);
    }

    /// Forgets `name` if it still refers to `proxy` (its Parse failed).
    pub fn forget_failed(&mut self, name: &str, proxy: &str) {
        if self.named.get(name).is_some_and(|s| &*s.proxy == proxy) {
            self.named.remove(name);
        }
    }

    pub fn clear(&mut self) {
        self.named.clear();
        self.unnamed = None;
    }

    /// Records a new unnamed statement; returns its generation.
    pub fn set_unnamed(&mut self, stmt: Arc<Statement>) -> u64 {
        self.generation += 1;
        self.unnamed = Some((self.generation, stmt));
        self.generation
    }

    pub fn clear_unnamed(&mut self) {
        self.unnamed = None;
    }

    pub fn unnamed(&self) -> Option<&(u64, Arc<Statement>)> {
        self.unnamed.as_ref()
    }

    pub fn len(&self) -> usize {
        self.named.len()
    }

    pub fn is_empty(&self) -> bool {
        self.named.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_depend_on_text_and_types() {
        let a = proxy_name("SELECT $1", &[0, 1, 0, 0, 0, 23]);
        let b = proxy_name("SELECT $1", &[0, 1, 0, 0, 0, 25]);
        let c = proxy_name("SELECT $1", &[0, 1, 0, 0, 0, 23]);
        assert_ne!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.len(), 35);
        assert!(a.starts_with("gh_"));
    }
}
