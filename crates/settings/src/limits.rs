//! The abuse limits' defaults, which the settings apply when a key is not
//! set (the limiters themselves are the core's).

/// Failed logins one source address may make per minute (and at once).
pub const DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_ADDRESS: u32 = 30;
/// Failed logins one user name may see per minute (and at once).
pub const DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_USER: u32 = 10;
