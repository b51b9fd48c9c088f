//! Crate-wide check that no [`SecretsError`] variant's `Display` or `Debug`
//! (including its `source` chain) shows a plaintext, key material or an
//! envelope. Each variant is produced the way it happens in real use, with
//! canary secrets around, and an exhaustive `match` makes a new variant fail
//! to compile until it is covered here.

use std::error::Error as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::{MasterKey, SecretsError, SecretsFile, envelope};

const PLAIN: &str = "Canary-Plaintext-Password-91";
const KEY_BYTES: [u8; 32] = [0x5c; 32];

/// Index of each variant; the match must stay exhaustive.
fn variant(err: &SecretsError) -> usize {
    match err {
        SecretsError::KeyFileRead { .. } => 0,
        SecretsError::KeyEnvMissing { .. } => 1,
        SecretsError::KeyFormat { .. } => 2,
        SecretsError::Random => 3,
        SecretsError::UnknownVersion { .. } => 4,
        SecretsError::Malformed { .. } => 5,
        SecretsError::Authentication { .. } => 6,
        SecretsError::Encryption { .. } => 7,
        SecretsError::FileMissing { .. } => 8,
        SecretsError::FileRead { .. } => 9,
        SecretsError::FileWrite { .. } => 10,
        SecretsError::FileParse { .. } => 11,
        SecretsError::UnsupportedFormat { .. } => 12,
        SecretsError::Serialize { .. } => 13,
        SecretsError::InvalidName { .. } => 14,
        SecretsError::InvalidUser { .. } => 15,
        SecretsError::NotFound { .. } => 16,
        SecretsError::InvalidVersion { .. } => 17,
    }
}
const VARIANTS: usize = 18;

fn rendered(err: &SecretsError) -> String {
    let mut out = format!("{err}\n{err:?}\n{err:#?}");
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(&format!("\n{s}\n{s:?}"));
        source = s.source();
    }
    out
}

#[test]
fn no_error_variant_shows_secrets() {
    let key = MasterKey::from_bytes(KEY_BYTES);
    let key_b64 = key.to_text().to_string();
    let key_hex: String = KEY_BYTES.iter().map(|b| format!("{b:02x}")).collect();
    let env = envelope::encrypt(&key, "alpha", PLAIN).unwrap();
    let env_body = env["gh1:".len()..].to_owned();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, content: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path
    };
    let entry = |password: &str, version: &str| {
        format!(
            "format = 1\n[secrets.alpha]\nuser = \"u\"\npassword = \"{password}\"\nversion = {version}\nupdated = 1\n"
        )
    };
    let mut store = SecretsFile::new();
    store.set(&key, "alpha", "u", PLAIN).unwrap();

    let mut tampered = STANDARD.decode(&env_body).unwrap();
    tampered[20] ^= 0xff;
    let errors = vec![
        MasterKey::from_file(dir.path().join("missing.key")).unwrap_err(),
        MasterKey::from_env("GATEHOUSE_SECRETS_REDACTION_TEST_UNSET").unwrap_err(),
        MasterKey::from_file(file("bad.key", &format!("{key_hex}ff\n{PLAIN}"))).unwrap_err(),
        SecretsError::Random,
        // A plaintext pasted into the file instead of an envelope.
        SecretsFile::load(file("plain.toml", &entry(PLAIN, "1")))
            .unwrap()
            .decrypt(&key, "alpha")
            .unwrap_err(),
        envelope::decrypt(&key, "alpha", &format!("gh1:{PLAIN}")).unwrap_err(),
        envelope::decrypt(&key, "alpha", &format!("gh1:{}", STANDARD.encode(&tampered))).unwrap_err(),
        SecretsError::Encryption { name: "alpha".into() },
        SecretsFile::load(dir.path().join("absent.toml")).unwrap_err(),
        SecretsFile::load(dir.path()).unwrap_err(),
        store.save(dir.path().join("no/dir/s.toml")).unwrap_err(),
        SecretsFile::load(file("type.toml", &entry(&env, &format!("\"{env}\"")))).unwrap_err(),
        SecretsFile::load(file("fmt.toml", &format!("format = 9\n[x]\np = \"{env}\"\n"))).unwrap_err(),
        SecretsError::Serialize {
            path: dir.path().join("s.toml"),
        },
        store.clone().set(&key, "bad name", "u", PLAIN).unwrap_err(),
        store.clone().set(&key, "beta", "", PLAIN).unwrap_err(),
        store.clone().rotate(&key, "ghost", PLAIN).unwrap_err(),
        SecretsFile::load(file("v0.toml", &entry(&env, "0"))).unwrap_err(),
    ];

    let mut seen = [false; VARIANTS];
    for err in &errors {
        seen[variant(err)] = true;
        let shown = rendered(err);
        for canary in [
            PLAIN,
            &env_body,
            &env_body[..16],
            &key_b64,
            &key_hex[..16],
            "92, 92, 92",
        ] {
            assert!(
                !shown.contains(canary),
                "variant {} leaks {canary:?}:\n{shown}",
                variant(err)
            );
        }
    }
    let missing: Vec<_> = (0..VARIANTS).filter(|&i| !seen[i]).collect();
    assert!(missing.is_empty(), "variants not exercised: {missing:?}");
}
