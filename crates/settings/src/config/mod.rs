//! Configuration: reading the TOML file ([`raw`]), checking it and resolving
//! it into the immutable [`Settings`] snapshot the proxy runs on
//! ([`validate`], [`model`]). Every problem is reported with its line.
//! [`reference`] documents every key the file accepts.

mod changes;
mod clusters;
mod console;
mod credentials;
mod directory;
pub mod model;
mod process;
pub mod raw;
pub mod reference;
mod rules;
mod stats;
pub mod validate;

use std::fmt;
use std::path::Path;

pub use changes::{
    Change, Takes, cluster_changes, credential_changes, endpoint_changes, process_changes, rules_changes,
};
pub use model::*;

/// One thing wrong with a configuration, with the line it is on when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: Option<usize>,
    pub message: String,
}

/// Everything wrong with a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match p.line {
                Some(line) => write!(f, "line {line}: {}", p.message)?,
                None => write!(f, "{}", p.message)?,
            }
        }
        Ok(())
    }
}

/// Parses and validates configuration text; relative paths (TLS files) are
/// taken from `base`.
pub fn parse(text: &str, base: &Path) -> Result<Settings, Problems> {
    let raw: raw::RawConfig = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        Problems(vec![Problem {
            line,
            message: e.message().to_owned(),
        }])
    })?;
    validate::validate(raw, text, base)
}

/// Reads, parses and validates a configuration file.
pub fn load(path: &Path) -> Result<Settings, Problems> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Problems(vec![Problem {
            line: None,
            message: format!("cannot read {}: {e}", path.display()),
        }])
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut settings = parse(&text, base)?;
    settings.source = Some(path.to_path_buf());
    Ok(settings)
}

#[cfg(test)]
mod tests;
