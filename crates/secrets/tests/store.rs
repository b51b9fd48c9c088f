//! Integration tests for `SecretsFile`: versions, rotation, persistence,
//! file mode, and that nothing secret ends up in the file, `Debug` or errors.

use gatehouse_secrets::{MasterKey, SecretsError, SecretsFile};

const OLD: &str = "old-Plaintext-pw-1";
const NEW: &str = "new-Plaintext-pw-2";
const NEWER: &str = "newer-Plaintext-pw-3";

fn key() -> MasterKey {
    MasterKey::from_bytes([0x42; 32])
}

fn envelopes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("password = \""))
        .map(|rest| rest.trim_end_matches('"').to_owned())
        .collect()
}

fn assert_clean(shown: &str, forbidden: &[&str]) {
    for f in forbidden {
        assert!(!f.is_empty());
        assert!(!shown.contains(f), "leaks {f:?}: {shown}");
    }
}

#[test]
fn set_creates_version_one_then_replaces() {
    let k = key();
    let mut store = SecretsFile::new();
    assert!(store.is_empty());
    assert_eq!(store.set(&k, "demo_backend", "demo_owner", OLD).unwrap(), 1);
    let e = store.entry("demo_backend").unwrap();
    assert_eq!((e.user(), e.version()), ("demo_owner", 1));
    assert!(e.updated() > 1_700_000_000, "updated = {}", e.updated());

    let (user, pw) = store.decrypt(&k, "demo_backend").unwrap();
    assert_eq!((user.as_str(), pw.expose()), ("demo_owner", OLD));

    assert_eq!(store.set(&k, "demo_backend", "other_owner", NEW).unwrap(), 2);
    let (user, pw) = store.decrypt(&k, "demo_backend").unwrap();
    assert_eq!((user.as_str(), pw.expose()), ("other_owner", NEW));
    assert_eq!(store.len(), 1);
}

#[test]
fn rotate_keeps_user_bumps_version_and_replaces_password() {
    let k = key();
    let mut store = SecretsFile::new();
    store.set(&k, "t1", "app", OLD).unwrap();
    store.set(&k, "t2", "app2", "unrelated").unwrap();
    assert_eq!(store.rotate(&k, "t1", NEW).unwrap(), 2);
    assert_eq!(store.rotate(&k, "t1", NEWER).unwrap(), 3);

    let (user, pw) = store.decrypt(&k, "t1").unwrap();
    assert_eq!(user, "app");
    assert_eq!(pw.expose(), NEWER);
    assert_ne!(pw.expose(), OLD);
    assert_eq!(store.entry("t1").unwrap().version(), 3);
    // The other secret is untouched.
    assert_eq!(store.entry("t2").unwrap().version(), 1);
    assert_eq!(store.decrypt(&k, "t2").unwrap().1.expose(), "unrelated");

    let all = store.decrypt_all(&k).unwrap();
    let current: Vec<_> = all
        .iter()
        .map(|d| (d.name.as_str(), d.password.expose(), d.version))
        .collect();
    assert_eq!(current, [("t1", NEWER, 3), ("t2", "unrelated", 1)]);
    assert!(all.iter().all(|d| d.password.expose() != OLD));
}

#[test]
fn rotate_and_remove_need_an_existing_secret() {
    let k = key();
    let mut store = SecretsFile::new();
    let err = store.rotate(&k, "ghost", NEW).unwrap_err();
    assert!(matches!(err, SecretsError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("ghost"));
    assert_clean(&format!("{err} {err:?}"), &[NEW]);
    assert!(store.is_empty());

    store.set(&k, "a", "u", OLD).unwrap();
    store.remove("a").unwrap();
    assert!(store.entry("a").is_none());
    assert!(matches!(store.remove("a"), Err(SecretsError::NotFound { .. })));
    assert!(matches!(store.decrypt(&k, "a"), Err(SecretsError::NotFound { .. })));
    // After removal a new `set` starts again at version 1.
    assert_eq!(store.set(&k, "a", "u", NEW).unwrap(), 1);
}

#[test]
fn set_validates_name_and_user() {
    let k = key();
    let mut store = SecretsFile::new();
    for bad in ["", "has space", "a/b", &"x".repeat(64)] {
        let err = store.set(&k, bad, "u", OLD).unwrap_err();
        assert!(matches!(err, SecretsError::InvalidName { .. }), "{bad:?}: {err:?}");
        assert_clean(&format!("{err} {err:?}"), &[OLD]);
    }
    let err = store.set(&k, "ok", "", OLD).unwrap_err();
    assert!(matches!(err, SecretsError::InvalidUser { .. }), "{err:?}");
    assert!(store.is_empty());
}

#[test]
fn save_load_roundtrip_and_file_contents() {
    let k = key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.toml");
    let mut store = SecretsFile::new();
    store.set(&k, "demo_backend", "demo_owner", OLD).unwrap();
    store.rotate(&k, "demo_backend", NEW).unwrap();
    store.set(&k, "tenant.b-2", "bob", NEWER).unwrap();
    store.save(&path).unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("format = 1"), "{text}");
    assert!(text.contains("[secrets.demo_backend]"), "{text}");
    assert!(text.contains("user = \"demo_owner\""), "{text}");
    assert!(text.contains("version = 2"), "{text}");
    assert_eq!(envelopes(&text).len(), 2, "{text}");
    assert!(envelopes(&text).iter().all(|e| e.starts_with("gh1:")));
    assert_clean(&text, &[OLD, NEW, NEWER]);

    let loaded = SecretsFile::load(&path).unwrap();
    assert_eq!(loaded, store);
    assert_eq!(loaded.names().collect::<Vec<_>>(), ["demo_backend", "tenant.b-2"]);
    assert_eq!(loaded.decrypt(&k, "demo_backend").unwrap().1.expose(), NEW);
    assert_eq!(loaded.decrypt(&k, "tenant.b-2").unwrap().1.expose(), NEWER);
    let e = loaded.entry("demo_backend").unwrap();
    assert_eq!((e.user(), e.version()), ("demo_owner", 2));
    assert_eq!(e.updated(), store.entry("demo_backend").unwrap().updated());

    // Saving again over the existing file works and leaves no temp files.
    loaded.save(&path).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secrets.toml"]);
}

#[test]
fn hand_written_file_loads() {
    let k = key();
    let mut store = SecretsFile::new();
    store.set(&k, "demo_backend", "demo_owner", OLD).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    store.save(&path).unwrap();
    let env = envelopes(&std::fs::read_to_string(&path).unwrap()).remove(0);

    let text = format!(
        "format = 1\n\n[secrets.demo_backend]\nuser = \"demo_owner\"\npassword = \"{env}\"\nversion = 3\nupdated = 1795456800\n"
    );
    std::fs::write(&path, text).unwrap();
    let loaded = SecretsFile::load(&path).unwrap();
    let e = loaded.entry("demo_backend").unwrap();
    assert_eq!((e.version(), e.updated()), (3, 1_795_456_800));
    assert_eq!(loaded.decrypt(&k, "demo_backend").unwrap().1.expose(), OLD);

    std::fs::write(&path, "format = 1\n").unwrap();
    assert!(SecretsFile::load(&path).unwrap().is_empty());
}

#[cfg(unix)]
#[test]
fn saved_file_is_mode_0600_even_over_a_world_readable_one() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.toml");
    std::fs::write(&path, "format = 1\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut store = SecretsFile::load(&path).unwrap();
    store.set(&key(), "a", "u", OLD).unwrap();
    store.save(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");

    let fresh = dir.path().join("fresh.toml");
    store.save(&fresh).unwrap();
    assert_eq!(std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn missing_file_load_vs_load_or_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.toml");
    let err = SecretsFile::load(&path).unwrap_err();
    assert!(matches!(err, SecretsError::FileMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("absent.toml"));
    assert!(SecretsFile::load_or_empty(&path).unwrap().is_empty());
}

#[test]
fn save_into_missing_directory_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/secrets.toml");
    let mut store = SecretsFile::new();
    store.set(&key(), "a", "u", OLD).unwrap();
    let err = store.save(&path).unwrap_err();
    assert!(matches!(err, SecretsError::FileWrite { .. }), "{err:?}");
    assert!(err.to_string().contains("secrets.toml"));
    assert_clean(&format!("{err} {err:?}"), &[OLD]);
}

fn load_text(text: &str) -> SecretsError {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).unwrap();
    SecretsFile::load(&path).unwrap_err()
}

fn sample_envelope() -> String {
    gatehouse_secrets::envelope::encrypt(&key(), "x", OLD).unwrap()
}

#[test]
fn bad_files_are_rejected_without_echoing_envelopes() {
    let env = sample_envelope();
    let body = &env[4..];

    let err = load_text("format = 2\n[secrets.a]\nfuture = true\n");
    assert!(
        matches!(err, SecretsError::UnsupportedFormat { found: 2, .. }),
        "{err:?}"
    );

    let err = load_text("[secrets.a]\nuser = \"u\"\n");
    assert!(matches!(err, SecretsError::FileParse { .. }), "{err:?}");
    assert!(err.to_string().contains("format"), "{err}");

    // An envelope in a field of the wrong type: serde would quote it.
    let text =
        format!("format = 1\n[secrets.a]\nuser = \"u\"\npassword = \"{env}\"\nversion = \"{env}\"\nupdated = 1\n");
    let err = load_text(&text);
    match &err {
        SecretsError::FileParse { line, .. } => assert_eq!(*line, 5, "{err}"),
        other => panic!("{other:?}"),
    }
    assert_clean(&format!("{err} {err:?}"), &[body, OLD]);

    // Unclosed string holding an envelope: the TOML parser's snippet is not used.
    let text = format!("format = 1\n[secrets.a]\nuser = \"u\"\npassword = \"{env}\nversion = 1\nupdated = 1\n");
    let err = load_text(&text);
    assert!(matches!(err, SecretsError::FileParse { .. }), "{err:?}");
    assert_clean(&format!("{err} {err:?}"), &[body, OLD]);

    let text = format!("format = 1\n[secrets.a]\nuser = \"u\"\npasword = \"{env}\"\nversion = 1\nupdated = 1\n");
    let err = load_text(&text);
    assert!(err.to_string().contains("pasword"), "{err}");
    assert_clean(&format!("{err} {err:?}"), &[body]);

    let text =
        format!("format = 1\n[secrets.\"bad name\"]\nuser = \"u\"\npassword = \"{env}\"\nversion = 1\nupdated = 1\n");
    assert!(matches!(load_text(&text), SecretsError::InvalidName { .. }));

    let text = format!("format = 1\n[secrets.a]\nuser = \"u\"\npassword = \"{env}\"\nversion = 0\nupdated = 1\n");
    assert!(matches!(load_text(&text), SecretsError::InvalidVersion { .. }));
}

#[test]
fn decrypt_errors_name_the_secret_but_not_the_value() {
    let k = key();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    let mut store = SecretsFile::new();
    store.set(&k, "alpha", "u", OLD).unwrap();
    store.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let env = envelopes(&text).remove(0);

    let wrong = MasterKey::from_bytes([0x43; 32]);
    for err in [
        store.decrypt(&wrong, "alpha").unwrap_err(),
        store.decrypt_all(&wrong).unwrap_err(),
    ] {
        assert!(matches!(err, SecretsError::Authentication { .. }), "{err:?}");
        assert!(err.to_string().contains("alpha"));
        assert_clean(&format!("{err} {err:?}"), &[OLD, &env[4..]]);
    }

    // Copying alpha's envelope under another name does not decrypt.
    let moved = text.replace("[secrets.alpha]", "[secrets.beta]");
    std::fs::write(&path, moved).unwrap();
    let loaded = SecretsFile::load(&path).unwrap();
    assert!(matches!(
        loaded.decrypt(&k, "beta"),
        Err(SecretsError::Authentication { .. })
    ));
}

#[test]
fn debug_of_store_types_shows_no_secrets() {
    let k = key();
    let mut store = SecretsFile::new();
    store.set(&k, "alpha", "the_user", OLD).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    store.save(&path).unwrap();
    let env = envelopes(&std::fs::read_to_string(&path).unwrap()).remove(0);

    let all = store.decrypt_all(&k).unwrap();
    let (_, pw) = store.decrypt(&k, "alpha").unwrap();
    for shown in [
        format!("{store:?}"),
        format!("{store:#?}"),
        format!("{:?}", store.entry("alpha").unwrap()),
        format!("{all:?}"),
        format!("{pw} {pw:?}"),
    ] {
        assert!(shown.contains("<redacted>"), "{shown}");
        assert_clean(&shown, &[OLD, &env[4..]]);
    }
    assert!(format!("{all:?}").contains("the_user"));
}
