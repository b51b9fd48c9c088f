//! Logging, set up once at start ([`init`]): the filter (`log_filter`, or
//! `RUST_LOG` when it is set, which then wins at reloads too), the format
//! (`log_format`: `text` lines, or `json` objects one a line), colours only
//! when the output is a terminal, and in text every value that holds a
//! space, a quote or an `=` quoted, so a line splits into fields the same
//! way whatever it carries. [`LogControl`] is what a reload changes the
//! filter through.

use std::io::IsTerminal;

use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, fmt, reload};

use crate::config::LogFormat;

pub use gatehouse_settings::logging::{FilterError, parse_filter};

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error("the log filter could not be changed: {0}")]
    Reload(String),
    #[error("logging was set up already")]
    AlreadySet,
}

/// Changes the running filter (reloads).
pub struct LogControl {
    handle: reload::Handle<EnvFilter, Registry>,
    /// `RUST_LOG` chose the filter at start, and keeps it.
    from_env: bool,
}

impl LogControl {
    /// Applies `filter`; `Ok(false)` when `RUST_LOG` governs instead.
    pub fn set_filter(&self, filter: &str) -> Result<bool, LoggingError> {
        if self.from_env {
            return Ok(false);
        }
        let parsed = parse_filter(filter)?;
        self.handle
            .reload(parsed)
            .map_err(|e| LoggingError::Reload(e.to_string()))?;
        Ok(true)
    }
}

/// Installs the process's logger: `RUST_LOG` if set, else `filter`, in
/// `format`, to standard output.
pub fn init(format: LogFormat, filter: &str) -> Result<LogControl, LoggingError> {
    let env = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    let parsed = parse_filter(env.as_deref().unwrap_or(filter))?;
    let (filter_layer, handle) = reload::Layer::new(parsed);
    let registry = Registry::default().with(filter_layer);
    let installed = match format {
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_ansi(false))
            .try_init(),
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_ansi(std::io::stdout().is_terminal())
                    .fmt_fields(fmt::format::debug_fn(write_field).delimited(" ")),
            )
            .try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadySet)?;
    Ok(LogControl {
        handle,
        from_env: env.is_some(),
    })
}

/// One field of a text line: the message bare, anything else `name=value`,
/// the value quoted (and escaped) when [`needs_quotes`].
fn write_field(w: &mut Writer<'_>, field: &tracing::field::Field, value: &dyn std::fmt::Debug) -> std::fmt::Result {
    if field.name() == "message" {
        return write!(w, "{value:?}");
    }
    let text = format!("{value:?}");
    if needs_quotes(&text) {
        write!(w, "{}={text:?}", field.name())
    } else {
        write!(w, "{}={text}", field.name())
    }
}

/// Whether a field's text needs quotes to stay one field: empty, or with
/// white space, a quote, an `=` or a control character, and not already a
/// quoted string (a `?`-recorded `String`).
pub fn needs_quotes(text: &str) -> bool {
    let quoted = text.len() >= 2 && text.starts_with('"') && text.ends_with('"');
    !quoted
        && (text.is_empty()
            || text
                .chars()
                .any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_quotes_or_equals_are_quoted_others_are_not() {
        for plain in ["127.0.0.1:5432", "t001", "42", "\"already quoted\""] {
            assert!(!needs_quotes(plain), "{plain}");
        }
        for spaced in ["", "password authentication failed", "a=b", "say \"hi\"", "two\nlines"] {
            assert!(needs_quotes(spaced), "{spaced}");
        }
    }

    #[test]
    fn filters_are_checked_before_they_are_used() {
        assert!(parse_filter("info").is_ok());
        assert!(parse_filter("warn,gatehouse::reload=info").is_ok());
        let err = parse_filter("gatehouse=loud").map(|_| ()).map_err(|e| e.to_string());
        assert!(matches!(&err, Err(m) if m.contains("gatehouse=loud")), "{err:?}");
    }
}
