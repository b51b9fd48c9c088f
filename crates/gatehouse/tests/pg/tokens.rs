//! Token authentication on a `client_auth = "password"` endpoint, with
//! tokio-postgres over TLS (rustls, verifying the test CA): HS256, ES256,
//! EdDSA and RS256 tokens accepted and cached; every refusal (expired, wrong audience,
//! another tenant's token, wrong database, tampered, unknown key, `alg:
//! none`, unknown tenant, tenant without tokens) answered with 28P01 and a
//! message that names neither the token nor the reason; plain text refused
//! with 28000 unless the endpoint allows it; a tenant's password over TLS.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, ensure};
use base64::Engine as _;
use gatehouse_token::{IssueRequest, IssuingKey, JwkSet, issue, jwk_from_public_pem, unix_seconds};
use tokio_postgres::error::SqlState;

use crate::Ctx;

const ISSUER: &str = "gatehouse-test";
const HS256_SECRET: &[u8] = b"gatehouse-test-shared-secret-0123456789";
/// A file of the token crate's test-only RSA key pair. The package's
/// directory is read when the test runs (cargo sets it for the test
/// process): a test binary reused from a build cache shared with another
/// checkout carries that checkout's directory in `env!`, which may be gone.
fn rsa_fixture(name: &str) -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../token/tests/fixtures")
        .join(name)
}

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("tokens::accepted_over_tls_and_cached", accepted),
        ("tokens::refusals_say_nothing", refusals),
        ("tokens::plain_text_only_where_allowed", plain_text),
        ("tokens::tenant_password_over_tls", password),
    ]
}

/// Writes the HS256 secret, an ES256 key pair and the JWKS holding its
/// public key into `dir`.
pub fn key_files(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("token-hs256.secret"), HS256_SECRET)?;
    let es = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    std::fs::write(dir.join("token-es256.key"), es.serialize_pem())?;
    let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
    std::fs::write(dir.join("token-eddsa.key"), ed.serialize_pem())?;
    // RSA keys cannot be generated with ring: the token crate's test-only pair.
    let rsa_public = std::fs::read(rsa_fixture("rsa-test-public.pem"))?;
    let keys = vec![
        jwk_from_public_pem(es.public_key_pem().as_bytes(), Some("es-1"))?,
        jwk_from_public_pem(ed.public_key_pem().as_bytes(), Some("ed-1"))?,
        jwk_from_public_pem(&rsa_public, Some("rs-1"))?,
    ];
    std::fs::write(dir.join("jwks.json"), JwkSet { keys }.to_json())?;
    Ok(())
}

fn now() -> u64 {
    unix_seconds(SystemTime::now())
}

fn hs256() -> Result<IssuingKey> {
    Ok(IssuingKey::hs256(HS256_SECRET, None)?)
}

fn es256(ctx: &Ctx) -> Result<IssuingKey> {
    Ok(IssuingKey::from_pem_file(
        &ctx.dir.join("token-es256.key"),
        Some("es-1".into()),
    )?)
}

fn eddsa(ctx: &Ctx) -> Result<IssuingKey> {
    Ok(IssuingKey::from_pem_file(
        &ctx.dir.join("token-eddsa.key"),
        Some("ed-1".into()),
    )?)
}

fn rs256() -> Result<IssuingKey> {
    let pem = rsa_fixture("rsa-test-private.pem");
    Ok(IssuingKey::from_pem_file(&pem, Some("rs-1".into()))?)
}

fn token(key: &IssuingKey, tenant: &str, database: &str, audience: &str, issued: u64) -> Result<String> {
    Ok(issue(
        key,
        &IssueRequest {
            issuer: ISSUER.into(),
            audience: audience.into(),
            tenant: tenant.into(),
            database: database.into(),
            ttl: Duration::from_secs(300),
            now: issued,
        },
    )?)
}

pub fn tls_connector(ctx: &Ctx) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(&ctx.ca)?;
    for cert in rustls_pemfile_certs(&pem)? {
        roots.add(cert)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// DER certificates from PEM text (the test CA file).
fn rustls_pemfile_certs(pem: &[u8]) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    let text = std::str::from_utf8(pem)?;
    let mut out = Vec::new();
    for block in text.split("-----BEGIN CERTIFICATE-----").skip(1) {
        let body = block
            .split("-----END CERTIFICATE-----")
            .next()
            .context("unterminated certificate")?;
        let b64: String = body.split_whitespace().collect();
        out.push(base64::engine::general_purpose::STANDARD.decode(b64)?.into());
    }
    Ok(out)
}

/// Connects to `endpoint` over TLS (host name `localhost`, verified).
pub async fn connect_tls(
    ctx: &Ctx,
    endpoint: &str,
    user: &str,
    password: &str,
    db: &str,
) -> Result<Result<tokio_postgres::Client, tokio_postgres::Error>> {
    let a = ctx.addr(endpoint);
    let info = format!(
        "host=localhost hostaddr={} port={} user={user} password={password} dbname={db} sslmode=require",
        a.ip(),
        a.port()
    );
    Ok(match tokio_postgres::connect(&info, tls_connector(ctx)?).await {
        Ok((client, conn)) => {
            tokio::spawn(conn);
            Ok(client)
        }
        Err(e) => Err(e),
    })
}

async fn one(client: &tokio_postgres::Client) -> Result<String> {
    let row = client.query_one("SELECT current_database()::text", &[]).await?;
    Ok(row.get(0))
}

fn accepted(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let verifier = ctx.core.settings().tokens.clone().context("no verifier")?;
        for key in [hs256()?, es256(ctx)?, eddsa(ctx)?, rs256()?] {
            let t = token(&key, "tina", "app1", "tok", now())?;
            let c = connect_tls(ctx, "tok", "tina", &t, "app1")
                .await?
                .context("token refused")?;
            ensure!(one(&c).await? == "app1");
            // The same token again: served from the verified-token cache.
            let hits = verifier.cache_hits();
            let c = connect_tls(ctx, "tok", "tina", &t, "app1")
                .await?
                .context("token refused")?;
            ensure!(one(&c).await? == "app1");
            ensure!(verifier.cache_hits() > hits, "second use of a token was verified again");
        }
        Ok(())
    })
}

/// Asserts a refused login: 28P01 and the generic message only.
fn refused(
    r: Result<tokio_postgres::Client, tokio_postgres::Error>,
    user: &str,
    secret: &str,
    what: &str,
) -> Result<()> {
    let e = r.err().with_context(|| format!("{what}: accepted"))?;
    ensure!(e.code() == Some(&SqlState::INVALID_PASSWORD), "{what}: {e:?}");
    let msg = crate::db_message(&e);
    ensure!(
        msg == format!("password authentication failed for user \"{user}\""),
        "{what}: {msg}"
    );
    ensure!(!format!("{e:?}").contains(secret), "{what}: the error shows the token");
    Ok(())
}

fn b64(v: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
}

fn refusals(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let key = hs256()?;
        let n = now();
        let mut cases: Vec<(&str, &str, &str, String)> = vec![
            ("expired", "tina", "app1", token(&key, "tina", "app1", "tok", n - 3600)?),
            ("wrong audience", "tina", "app1", token(&key, "tina", "app1", "rw", n)?),
            (
                "another tenant's token",
                "tina",
                "app1",
                token(&key, "tom", "app2", "tok", n)?,
            ),
            (
                "token for another database",
                "tina",
                "app1",
                token(&key, "tina", "app2", "tok", n)?,
            ),
            (
                "unknown tenant",
                "nobody",
                "app1",
                token(&key, "nobody", "app1", "tok", n)?,
            ),
            (
                "tenant without tokens",
                "alice",
                "app1",
                token(&key, "alice", "app1", "tok", n)?,
            ),
            (
                "unknown key",
                "tina",
                "app1",
                token(
                    &IssuingKey::hs256(b"another-secret-another-secret-0123", None)?,
                    "tina",
                    "app1",
                    "tok",
                    n,
                )?,
            ),
        ];
        let good = token(&key, "tina", "app1", "tok", n)?;
        let parts: Vec<&str> = good.split('.').collect();
        let forged_claims = format!(
            r#"{{"iss":"{ISSUER}","aud":"tok","sub":"tina","db":"app1","exp":{},"iat":{n}}}"#,
            n + 86_400
        );
        cases.push((
            "tampered",
            "tina",
            "app1",
            format!("{}.{}.{}", parts[0], b64(&forged_claims), parts[2]),
        ));
        cases.push((
            "alg none",
            "tina",
            "app1",
            format!("{}.{}.", b64(r#"{"alg":"none","typ":"JWT"}"#), parts[1]),
        ));
        for (what, user, db, t) in &cases {
            refused(connect_tls(ctx, "tok", user, t, db).await?, user, t, what)?;
        }
        // A valid token for a database the tenant does not own: 28000, the
        // same answer as for any database it may not use.
        let t = token(&key, "tina", "app2", "tok", n)?;
        let e = connect_tls(ctx, "tok", "tina", &t, "app2")
            .await?
            .err()
            .context("app2 accepted")?;
        ensure!(
            e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{e:?}"
        );
        ensure!(!format!("{e:?}").contains(&t));
        Ok(())
    })
}

fn plain_text(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let t = token(&hs256()?, "tina", "app1", "tok", now())?;
        let e = ctx
            .try_client("tok", "tina", &t, "app1")
            .await
            .err()
            .context("token accepted over plain text")?;
        ensure!(
            e.code() == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{e:?}"
        );
        ensure!(!format!("{e:?}").contains(&t));
        // An endpoint that allows it (local testing) takes its own tokens...
        let t = token(&hs256()?, "tina", "app1", "tok_plain", now())?;
        let c = ctx.client("tok_plain", "tina", &t, "app1").await?;
        ensure!(one(&c).await? == "app1");
        // ...but not tokens for another endpoint.
        let t = token(&hs256()?, "tina", "app1", "tok", now())?;
        refused(
            ctx.try_client("tok_plain", "tina", &t, "app1").await,
            "tina",
            &t,
            "audience",
        )?;
        Ok(())
    })
}

fn password(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let c = connect_tls(ctx, "tok", "tom", "tom-pw", "app2")
            .await?
            .context("password refused")?;
        ensure!(one(&c).await? == "app2");
        refused(
            connect_tls(ctx, "tok", "tom", "wrong-pw", "app2").await?,
            "tom",
            "wrong-pw",
            "wrong password",
        )?;
        // A token-only tenant has no password to check.
        refused(
            connect_tls(ctx, "tok", "tina", "guess", "app1").await?,
            "tina",
            "guess",
            "token-only tenant",
        )?;
        // Tom may use a token as well.
        let t = token(&hs256()?, "tom", "app2", "tok", now())?;
        let c = connect_tls(ctx, "tok", "tom", &t, "app2")
            .await?
            .context("token refused")?;
        ensure!(one(&c).await? == "app2");
        Ok(())
    })
}
