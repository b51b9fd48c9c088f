//! The log filter setting (`log_filter`): checked when the settings are
//! read, applied by the binary's logging.

use tracing_subscriber::EnvFilter;

#[derive(Debug, thiserror::Error)]
#[error("invalid log filter {filter:?}: {reason}")]
pub struct FilterError {
    pub filter: String,
    pub reason: String,
}

/// `filter` as a `tracing` filter (`info`, `warn,gatehouse::reload=info`),
/// or why it is not one.
pub fn parse_filter(filter: &str) -> Result<EnvFilter, FilterError> {
    EnvFilter::builder().parse(filter).map_err(|e| FilterError {
        filter: filter.to_owned(),
        reason: e.to_string(),
    })
}
