//! Secret-name rules: 1 to 63 characters of `[A-Za-z0-9_.-]`, and the check
//! for backend user names stored next to them.

use crate::error::{Result, SecretsError};

/// Longest accepted secret name, in bytes (all accepted characters are ASCII).
pub const MAX_NAME_LEN: usize = 63;

/// Accept `name` if it is 1..=63 characters of `[A-Za-z0-9_.-]`.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        // Cut what is echoed back so a pasted blob cannot flood a log line.
        Err(SecretsError::InvalidName {
            name: name.chars().take(MAX_NAME_LEN + 1).collect(),
        })
    }
}

/// A backend user must be non-empty and contain no control characters.
pub(crate) fn validate_user(name: &str, user: &str) -> Result<()> {
    if user.is_empty() || user.chars().any(char::is_control) {
        return Err(SecretsError::InvalidUser { name: name.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        for ok in ["a", "demo_backend", "tenant-1.primary", "A.B_C-9", &"x".repeat(63)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        let long = "x".repeat(64);
        for bad in [
            "",
            "with space",
            "slash/name",
            "ünicode",
            "quote\"",
            "new\nline",
            long.as_str(),
        ] {
            assert!(
                matches!(validate_name(bad), Err(SecretsError::InvalidName { .. })),
                "{bad:?}"
            );
        }
        let huge = "y".repeat(10_000);
        let msg = validate_name(&huge).unwrap_err().to_string();
        assert!(msg.len() < 200, "{msg}");
    }

    #[test]
    fn user_rules() {
        assert!(validate_user("s", "demo_owner").is_ok());
        assert!(validate_user("s", "").is_err());
        assert!(validate_user("s", "a\u{0}b").is_err());
    }
}
