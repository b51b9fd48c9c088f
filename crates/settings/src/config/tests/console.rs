//! Unit tests for `[console]`: defaults, roles, and every problem with its line.

use std::path::Path;

use super::{good, problems};
use crate::config::parse;
use crate::console::Role;

#[test]
fn the_console_has_its_default_database_and_nobody_without_the_section() {
    let s = parse(&good(), Path::new(".")).unwrap();
    assert_eq!(s.console.database, "gatehouse");
    assert!(s.console.admin_users.is_empty() && s.console.monitor_users.is_empty());
    assert_eq!(s.console.role_of("app"), None);
}

#[test]
fn listed_tenants_get_their_role() {
    let text = format!("{}\n[console]\ndatabase = \"admin\"\nadmin_users = [\"app\"]\n", good());
    let s = parse(&text, Path::new(".")).unwrap();
    assert_eq!(s.console.database, "admin");
    assert_eq!(s.console.role_of("app"), Some(Role::Admin));
    let text = format!("{}\n[console]\nmonitor_users = [\"app\"]\n", good());
    let s = parse(&text, Path::new(".")).unwrap();
    assert_eq!(s.console.role_of("app"), Some(Role::Monitor));
}

#[test]
fn unknown_tenants_duplicates_both_roles_and_bad_names_are_refused_with_their_line() {
    for (console, wanted) in [
        ("admin_users = [\"nobody\"]", "which is no tenant"),
        ("admin_users = [\"app\", \"app\"]", "twice"),
        ("admin_users = [\"app\"]\nmonitor_users = [\"app\"]", "in both"),
        ("database = \"\"", "1 to 63 bytes"),
        ("wheel_users = [\"app\"]", "unknown field"),
    ] {
        let text = format!("{}\n[console]\n{console}\n", good());
        let p = problems(&text);
        assert!(
            p.iter().any(|p| p.message.contains(wanted) && p.line.is_some()),
            "{console}: {p:?}"
        );
    }
}
