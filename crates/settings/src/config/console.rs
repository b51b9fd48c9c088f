//! `[console]`: the SQL admin console's database name and who may use it
//! (`admin_users` run every command, `monitor_users` only `SHOW`), checked
//! against the tenants (a name that is no tenant could never log in).

use std::collections::HashMap;
use std::sync::Arc;

use toml::Spanned;

use super::model::{ConsoleSettings, Tenant};
use super::raw::RawConsole;
use super::validate::Ctx;

/// The console's database when `[console] database` is not set.
pub const DEFAULT_CONSOLE_DATABASE: &str = "gatehouse";

/// Longest database name a client can send: PostgreSQL's NAMEDATALEN - 1
/// (src/include/pg_config_manual.h), also within MySQL's 64.
const MAX_DATABASE_NAME: usize = 63;

pub(super) fn console(
    cx: &mut Ctx,
    raw: Option<&Spanned<RawConsole>>,
    tenants: &HashMap<String, Arc<Tenant>>,
) -> ConsoleSettings {
    let mut out = ConsoleSettings {
        database: DEFAULT_CONSOLE_DATABASE.to_owned(),
        admin_users: Vec::new(),
        monitor_users: Vec::new(),
    };
    let Some(raw) = raw.map(Spanned::get_ref) else {
        return out;
    };
    if let Some(d) = &raw.database {
        let name = d.get_ref();
        if name.is_empty() || name.len() > MAX_DATABASE_NAME {
            cx.at(
                d,
                format!("console.database must be 1 to {MAX_DATABASE_NAME} bytes long"),
            );
        } else {
            name.clone_into(&mut out.database);
        }
    }
    for (key, users, into) in [
        ("admin_users", &raw.admin_users, &mut out.admin_users),
        ("monitor_users", &raw.monitor_users, &mut out.monitor_users),
    ] {
        for u in users {
            let name = u.get_ref();
            if !tenants.contains_key(name) {
                cx.at(u, format!("console.{key} names \"{name}\", which is no tenant"));
            } else if into.contains(name) {
                cx.at(u, format!("console.{key} names \"{name}\" twice"));
            } else {
                into.push(name.clone());
            }
        }
    }
    if let Some(both) = out.admin_users.iter().find(|u| out.monitor_users.contains(u)) {
        let both = both.clone();
        if let Some(at) = raw.monitor_users.iter().find(|u| *u.get_ref() == both) {
            cx.at(
                at,
                format!("\"{both}\" is in both console.admin_users and console.monitor_users"),
            );
        }
    }
    out
}
