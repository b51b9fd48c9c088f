//! What a reload changes in an endpoint that it keeps, one short text per
//! setting: values as `max_client_connections: 10000 -> 5`, a certificate
//! or key by its content (a rotated file at the same path is a change, the
//! same file moved is not).

use super::value_change;
use crate::config::EndpointSettings;

/// The settings of a kept endpoint that differ between `old` and `new`,
/// other than its listen address (which the endpoints report) and its
/// cluster's settings (reported as the cluster's change).
pub fn endpoint_changes(old: &EndpointSettings, new: &EndpointSettings) -> Vec<String> {
    let mut out: Vec<String> = [
        value_change("cluster", &old.cluster.name, &new.cluster.name),
        value_change("role", &old.role, &new.role),
        value_change("pool_mode", &old.pool_mode, &new.pool_mode),
        value_change(
            "max_client_connections",
            &old.max_client_connections,
            &new.max_client_connections,
        ),
        value_change(
            "idle_client_timeout",
            &old.idle_client_timeout,
            &new.idle_client_timeout,
        ),
        value_change("max_replica_lag", &old.max_replica_lag, &new.max_replica_lag),
        value_change("reader_fallback", &old.reader_fallback, &new.reader_fallback),
        value_change("read_your_writes", &old.read_your_writes, &new.read_your_writes),
        value_change("writer_reads", &old.writer_reads, &new.writer_reads),
        value_change(
            "read_only_functions",
            &old.read_only_functions,
            &new.read_only_functions,
        ),
        value_change("pinning_filter", &old.pinning_filter, &new.pinning_filter),
        value_change("require_tls", &old.require_tls, &new.require_tls),
        value_change("client_auth", &old.client_auth, &new.client_auth),
        value_change(
            "allow_plaintext_tokens",
            &old.allow_plaintext_tokens,
            &new.allow_plaintext_tokens,
        ),
        value_change("mysql_default_auth", &old.mysql_default_auth, &new.mysql_default_auth),
    ]
    .into_iter()
    .flatten()
    .collect();
    match (&old.tls, &new.tls) {
        (None, Some(t)) => out.push(format!("TLS added (certificate sha256 {}…)", t.fingerprint())),
        (Some(_), None) => out.push("TLS removed".to_owned()),
        (Some(o), Some(n)) if o != n => out.push(format!(
            "TLS certificate reloaded (sha256 {}… -> {}…)",
            o.fingerprint(),
            n.fingerprint()
        )),
        _ => {}
    }
    let rsa = |k: &EndpointSettings| k.mysql_rsa_key.as_ref().map(|k| k.public_pem().to_owned());
    match (rsa(old), rsa(new)) {
        (None, Some(_)) => out.push("mysql_rsa_key added".to_owned()),
        (Some(_), None) => out.push("mysql_rsa_key removed".to_owned()),
        (Some(o), Some(n)) if o != n => out.push("mysql_rsa_key reloaded".to_owned()),
        _ => {}
    }
    out
}
