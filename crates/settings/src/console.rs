//! Who may use the SQL admin console: the roles `[console] admin_users`
//! and `monitor_users` give (the console itself is the core's).

/// What a console user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `SHOW` only (PgBouncer's `stats_users`).
    Monitor,
    /// Every command (PgBouncer's `admin_users`).
    Admin,
}
