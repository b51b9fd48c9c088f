//! What a reload changes in the tenants (the `[[tenants]]` and the tenant
//! directory), the backend secrets and `[tokens]`, all applied in place
//! by the cores (tokens are verified with the settings now):
//! one line each that names the tenants or secrets added, removed and
//! changed (the first few, with how many more), and for a changed tenant
//! what changed in it. Passwords and keys are named, never shown.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::{first_few, name_list, value_change};
use crate::config::{ConnectionRate, Secret, Settings, Tenant, TenantAuth};

/// `tenants: 12 -> 13 (added "dana"; changed "erin" (max_client_connections:
/// 2 -> 3))` and `secrets: …` lines; none when nothing changed.
pub fn credential_changes(old: &Settings, new: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(table_changes("tenants", &old.tenants, &new.tenants, tenant_changes));
    out.extend(table_changes("secrets", &old.secrets, &new.secrets, secret_changes));
    match (&old.tokens, &new.tokens) {
        (None, Some(_)) => out.push("tokens: [tokens] added".to_owned()),
        (Some(_), None) => out.push("tokens: [tokens] removed".to_owned()),
        (Some(o), Some(n)) if o.identity != n.identity => {
            out.push("tokens: [tokens] changed (issuer, leeway, cache or keys)".to_owned());
        }
        _ => {}
    }
    out
}

/// One line over a table of named things; `changes` says what differs in
/// one kept.
fn table_changes<T>(
    what: &str,
    old: &HashMap<String, Arc<T>>,
    new: &HashMap<String, Arc<T>>,
    changes: fn(&T, &T) -> Vec<String>,
) -> Option<String> {
    let names = |t: &HashMap<String, Arc<T>>| t.keys().cloned().collect::<BTreeSet<_>>();
    let (before, after) = (names(old), names(new));
    let added: Vec<&String> = after.difference(&before).collect();
    let removed: Vec<&String> = before.difference(&after).collect();
    let changed: Vec<String> = after
        .intersection(&before)
        .filter_map(|name| {
            let c = changes(old.get(name)?, new.get(name)?);
            (!c.is_empty()).then(|| format!("\"{name}\" ({})", c.join(", ")))
        })
        .collect();
    let mut parts = Vec::new();
    if !added.is_empty() {
        parts.push(format!("added {}", name_list(&added)));
    }
    if !removed.is_empty() {
        parts.push(format!("removed {}", name_list(&removed)));
    }
    if !changed.is_empty() {
        parts.push(format!("changed {}", first_few(changed)));
    }
    (!parts.is_empty()).then(|| format!("{what}: {} -> {} ({})", old.len(), new.len(), parts.join("; ")))
}

fn tenant_changes(o: &Tenant, n: &Tenant) -> Vec<String> {
    let rate = |t: &Tenant| t.connection_rate.map(Rate);
    let auth = |t: &Tenant| match &t.auth {
        Some(TenantAuth::Scram(v)) => Some(v.to_string()),
        Some(TenantAuth::Md5(h)) => Some(h.clone()),
        None => None,
    };
    let mut out: Vec<String> = [
        value_change("databases", &o.databases, &n.databases),
        value_change(
            "max_client_connections",
            &o.max_client_connections,
            &n.max_client_connections,
        ),
        value_change(
            "max_backend_connections",
            &o.max_backend_connections,
            &n.max_backend_connections,
        ),
        value_change("connection_rate", &rate(o), &rate(n)),
        value_change("secret", &o.secret.name, &n.secret.name),
        value_change("token", &o.token, &n.token),
    ]
    .into_iter()
    .flatten()
    .collect();
    if auth(o) != auth(n) || o.mysql_native != n.mysql_native || o.mysql_ed25519 != n.mysql_ed25519 {
        out.push("password".to_owned());
    }
    out
}

fn secret_changes(o: &Secret, n: &Secret) -> Vec<String> {
    let mut out: Vec<String> = value_change("user", &o.user, &n.user).into_iter().collect();
    if o.password.expose() != n.password.expose() {
        out.push("password".to_owned());
    }
    out
}

/// A connection rate as an answer shows it: `4/s, burst 8`.
#[derive(PartialEq)]
struct Rate(ConnectionRate);

impl std::fmt::Debug for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/s, burst {}", self.0.per_second, self.0.burst)
    }
}
