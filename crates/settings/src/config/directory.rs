//! The tenant directory: a JSON-lines file with one tenant a line, for
//! deployments with thousands of tenants (and tooling that writes them),
//! read with the configuration and again on every reload. A line looks like
//! `{"name":"t1","databases":["t1"],"secret":"shared","token":true}`, with
//! the same fields as a `[[tenants]]` table (`connection_rate` and
//! `connection_burst` included). Problems are reported with the
//! file's line; a name already used is an error.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::model::{Secret, Tenant};
use super::validate::{Ctx, connection_rate, mysql_ed25519_key, mysql_native_hash, tenant_auth};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    name: String,
    databases: Vec<String>,
    secret: String,
    max_client_connections: Option<u32>,
    max_backend_connections: Option<u32>,
    scram_verifier: Option<String>,
    md5_hash: Option<String>,
    mysql_native_password: Option<String>,
    mysql_ed25519: Option<String>,
    #[serde(default)]
    token: bool,
    connection_rate: Option<u32>,
    connection_burst: Option<u32>,
}

/// Reads the directory named by `path` (relative to the configuration) into
/// `tenants`.
pub(super) fn load(
    cx: &mut Ctx,
    path: &Spanned<String>,
    secrets: &HashMap<String, Arc<Secret>>,
    tokens_configured: bool,
    tenants: &mut HashMap<String, Arc<Tenant>>,
) {
    let file = cx.base.join(path.get_ref());
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => return cx.at(path, format!("cannot read tenant directory {}: {e}", file.display())),
    };
    let shown = file.display().to_string();
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let problem = |message: String| super::Problem {
            line: None,
            message: format!("{shown}:{}: {message}", i + 1),
        };
        let line: Line = match serde_json::from_str(raw) {
            Ok(l) => l,
            Err(e) => {
                // serde_json's message can quote a value (a verifier): only
                // its category and column are shown.
                cx.problems.push(problem(format!(
                    "not a tenant object ({:?} at column {})",
                    e.classify(),
                    e.column()
                )));
                continue;
            }
        };
        let mut errors = Vec::new();
        if line.name.is_empty() || tenants.contains_key(&line.name) {
            errors.push(format!("tenant name \"{}\" is empty or already used", line.name));
        }
        if line.max_backend_connections == Some(0) {
            errors.push("max_backend_connections must be at least 1".into());
        }
        if line.databases.is_empty() {
            errors.push("a tenant needs at least one database".into());
        }
        if line.token && !tokens_configured {
            errors.push("\"token\": true needs a [tokens] section".into());
        }
        let secret = secrets.get(&line.secret).cloned();
        if secret.is_none() {
            errors.push(format!("unknown secret \"{}\"", line.secret));
        }
        let mysql_native = line
            .mysql_native_password
            .as_deref()
            .map(mysql_native_hash)
            .transpose()
            .map_err(|e| errors.push(e))
            .ok()
            .flatten();
        let mysql_ed25519 = line
            .mysql_ed25519
            .as_deref()
            .map(mysql_ed25519_key)
            .transpose()
            .map_err(|e| errors.push(e))
            .ok()
            .flatten();
        let auth = tenant_auth(
            line.scram_verifier.as_deref(),
            line.md5_hash.as_deref(),
            line.token || line.mysql_native_password.is_some() || line.mysql_ed25519.is_some(),
        )
        .map_err(|e| errors.push(e))
        .ok()
        .flatten();
        let connection_rate = connection_rate(line.connection_rate, line.connection_burst)
            .map_err(|e| errors.push(e))
            .ok()
            .flatten();
        match secret {
            Some(secret) if errors.is_empty() => {
                let tenant = Tenant {
                    name: line.name.clone(),
                    databases: line.databases,
                    max_client_connections: line.max_client_connections,
                    max_backend_connections: line.max_backend_connections,
                    secret,
                    auth,
                    mysql_native,
                    mysql_ed25519,
                    token: line.token,
                    connection_rate,
                };
                tenants.insert(line.name, Arc::new(tenant));
            }
            _ => cx.problems.extend(errors.into_iter().map(problem)),
        }
    }
}
