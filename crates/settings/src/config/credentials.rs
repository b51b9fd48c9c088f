//! The credential sections of the configuration: `[secrets_store]` (backend
//! credentials from an encrypted file, decrypted with a key from a file or
//! the environment) and `[tokens]` (how signed tokens presented as
//! passwords are verified). Problems are reported without any secret value.

use std::collections::HashMap;
use std::sync::Arc;

use gatehouse_secrets::{MasterKey, SecretsFile};
use gatehouse_token::{KeySet, Verifier, VerifierConfig};
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::model::{Secret, TokenSettings};
use super::raw::{RawSecretsStore, RawTokens};
use super::validate::Ctx;

/// Adds the encrypted file's secrets to `secrets`; a name in both is an error.
pub(super) fn secrets_store(cx: &mut Ctx, raw: &Spanned<RawSecretsStore>, secrets: &mut HashMap<String, Arc<Secret>>) {
    let store = raw.get_ref();
    let key = match (&store.key_file, &store.key_env) {
        (Some(f), None) => MasterKey::from_file(cx.base.join(f)),
        (None, Some(var)) => MasterKey::from_env(var),
        _ => {
            cx.at(raw, "[secrets_store] needs exactly one of `key_file` or `key_env`");
            return;
        }
    };
    let key = match key {
        Ok(k) => k,
        Err(e) => return cx.at(raw, format!("[secrets_store] key: {e}")),
    };
    let decrypted = SecretsFile::load(cx.base.join(&store.file)).and_then(|file| file.decrypt_all(&key));
    let decrypted = match decrypted {
        Ok(d) => d,
        Err(e) => return cx.at(raw, format!("[secrets_store]: {e}")),
    };
    for d in decrypted {
        if secrets.contains_key(&d.name) {
            cx.at(
                raw,
                format!("secret \"{}\" is both in [[secrets]] and in the secrets store", d.name),
            );
            continue;
        }
        let secret = Secret {
            name: d.name.clone(),
            user: d.user,
            password: d.password,
        };
        secrets.insert(d.name, Arc::new(secret));
    }
}

/// The token verifier `[tokens]` describes.
pub(super) fn tokens(cx: &mut Ctx, raw: &Spanned<RawTokens>) -> Option<Arc<TokenSettings>> {
    let t = raw.get_ref();
    // What the verifier is built from, for a reload to tell a change: the
    // settings and the key files' content (read again below by the key set).
    let mut identity = Sha256::new();
    identity.update(format!("{:?} {:?} {:?}\n", t.issuer, t.leeway, t.cache_capacity));
    for f in [&t.jwks_file, &t.hs256_secret_file] {
        let content = f.as_ref().and_then(|f| std::fs::read(cx.base.join(f)).ok());
        identity.update(content.as_ref().map_or(0, Vec::len).to_be_bytes());
        identity.update(content.unwrap_or_default());
    }
    let mut keys = KeySet::new();
    if let Some(f) = &t.jwks_file
        && let Err(e) = keys.add_jwks_file(&cx.base.join(f))
    {
        cx.at(raw, format!("[tokens] jwks_file: {e}"));
        return None;
    }
    if let Some(f) = &t.hs256_secret_file
        && let Err(e) = keys.add_hs256_secret_file(&cx.base.join(f), None)
    {
        cx.at(raw, format!("[tokens] hs256_secret_file: {e}"));
        return None;
    }
    if keys.is_empty() {
        cx.at(raw, "[tokens] needs `jwks_file` or `hs256_secret_file`");
        return None;
    }
    let mut config = VerifierConfig::new(t.issuer.clone(), keys);
    if let Some(l) = t.leeway {
        config.leeway = l;
    }
    if let Some(c) = t.cache_capacity {
        config.cache_capacity = c;
    }
    match Verifier::new(config) {
        Ok(verifier) => Some(Arc::new(TokenSettings {
            verifier,
            identity: identity.finalize().into(),
        })),
        Err(e) => {
            cx.at(raw, format!("[tokens]: {e}"));
            None
        }
    }
}
