//! [`SecretValue`]: a decrypted password that cannot be printed by accident
//! and is wiped from memory when dropped.

use std::fmt;

use zeroize::Zeroizing;

/// A plaintext secret (a backend password).
///
/// `Debug` and `Display` both print `<redacted>`; [`SecretValue::expose`] is
/// the only way to read it. The heap buffer is zeroed on drop. There is
/// deliberately no `Serialize` (nor `PartialEq`, which would invite
/// non-constant-time comparisons in callers).
#[derive(Clone)]
pub struct SecretValue(Zeroizing<String>);

impl SecretValue {
    /// Take ownership of `value`; its buffer is wiped when this is dropped.
    pub fn new(value: String) -> Self {
        Self(Zeroizing::new(value))
    }

    /// The plaintext. Keep the borrow short and never log it.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }
}

impl From<String> for SecretValue {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl From<Zeroizing<String>> for SecretValue {
    fn from(value: Zeroizing<String>) -> Self {
        Self(value)
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_never_shows_the_value() {
        let v = SecretValue::new("hunter2-plaintext".to_owned());
        for shown in [format!("{v}"), format!("{v:?}"), format!("{v:#?}"), format!("{v:>30}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("<redacted>"), "{shown}");
        }
        assert_eq!(v.expose(), "hunter2-plaintext");
        let wrapped = Some(v.clone());
        assert!(!format!("{wrapped:?}").contains("hunter2"));
    }
}
