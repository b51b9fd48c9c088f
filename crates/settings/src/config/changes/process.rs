//! What a reload changes in the process-wide sections, `[proxy]`, `[admin]`
//! and `[console]`, key by key, and whether the reload applies each one or
//! it needs a restart. Applied: the client timeouts and the message size
//! (read from the settings now at each login, each transaction's relay,
//! each session-mode session's start; a session-mode session keeps the
//! ones it started with), the shutdown timeout (read when shutdown starts),
//! the log filter (the reloader hands it to the logger), the tenant
//! directory (read again on every reload), the failed-login limits (the
//! cores take them, [`crate::limits`]), and the console's names (read at
//! each login). A restart: the runtime's threads, parking, the log format
//! and the admin listener and token, all set up once at start.

use super::value_change;
use crate::config::Settings;

/// Whether a reload applies a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Reload,
    Restart,
}

/// One changed key.
#[derive(Debug, Clone)]
pub struct Change {
    /// `section.key`, as written in the file: `proxy.login_timeout`.
    pub key: &'static str,
    pub takes: Takes,
    /// What changed, for a reload's answer: `proxy.login_timeout: 15s ->
    /// 2s (new logins)`; for a secret, only that it changed.
    pub detail: String,
}

struct Changes(Vec<Change>);

impl Changes {
    fn value<T: PartialEq + std::fmt::Debug>(&mut self, key: &'static str, takes: Takes, old: &T, new: &T, to: &str) {
        if let Some(detail) = value_change(key, old, new) {
            let detail = if to.is_empty() {
                detail
            } else {
                format!("{detail} ({to})")
            };
            self.0.push(Change { key, takes, detail });
        }
    }
}

/// Every `[proxy]`, `[admin]` and `[console]` key whose value differs
/// between `old` and `new` (see the module comment for which apply).
pub fn process_changes(old: &Settings, new: &Settings) -> Vec<Change> {
    use Takes::{Reload, Restart};
    let (o, n) = (&old.proxy, &new.proxy);
    let mut c = Changes(Vec::new());
    c.value(
        "proxy.login_timeout",
        Reload,
        &o.login_timeout,
        &n.login_timeout,
        "new logins",
    );
    c.value(
        "proxy.client_message_timeout",
        Reload,
        &o.client_message_timeout,
        &n.client_message_timeout,
        "pooled sessions now, session-mode sessions from their start",
    );
    c.value(
        "proxy.shutdown_timeout",
        Reload,
        &o.shutdown_timeout,
        &n.shutdown_timeout,
        "",
    );
    c.value(
        "proxy.park_idle_after",
        Restart,
        &o.park_idle_after,
        &n.park_idle_after,
        "",
    );
    c.value(
        "proxy.max_message_bytes",
        Reload,
        &o.max_message_bytes,
        &n.max_message_bytes,
        "pooled sessions now, session-mode sessions from their start",
    );
    c.value("proxy.log_filter", Reload, &o.log_filter, &n.log_filter, "");
    c.value("proxy.log_format", Restart, &o.log_format, &n.log_format, "");
    c.value(
        "proxy.worker_threads",
        Restart,
        &o.worker_threads,
        &n.worker_threads,
        "",
    );
    c.value(
        "proxy.tenant_directory",
        Reload,
        &o.tenant_directory,
        &n.tenant_directory,
        "its tenants read",
    );
    c.value(
        "proxy.auth_failures_per_minute_per_address",
        Reload,
        &o.auth_failures_per_minute_per_address,
        &n.auth_failures_per_minute_per_address,
        "counting afresh",
    );
    c.value(
        "proxy.auth_failures_per_minute_per_user",
        Reload,
        &o.auth_failures_per_minute_per_user,
        &n.auth_failures_per_minute_per_user,
        "counting afresh",
    );
    c.value(
        "proxy.upgrade_socket",
        Restart,
        &o.upgrade_socket,
        &n.upgrade_socket,
        "",
    );
    let listen = |s: &Settings| s.admin.as_ref().map(|a| a.listen);
    c.value("admin.listen", Restart, &listen(old), &listen(new), "");
    if admin_token(old) != admin_token(new) {
        c.0.push(Change {
            key: "admin.token_file",
            takes: Restart,
            detail: "admin.token_file: the token changed".to_owned(),
        });
    }
    let (o, n) = (&old.console, &new.console);
    c.value("console.database", Reload, &o.database, &n.database, "new logins");
    c.value(
        "console.admin_users",
        Reload,
        &o.admin_users,
        &n.admin_users,
        "new logins",
    );
    c.value(
        "console.monitor_users",
        Reload,
        &o.monitor_users,
        &n.monitor_users,
        "new logins",
    );
    c.0
}

fn admin_token(s: &Settings) -> Option<&str> {
    s.admin.as_ref()?.token.as_ref().map(|t| t.as_str())
}
