//! `gatehouse token issue|jwks`: mint a signed token (JWT) for development
//! and tests, and turn a public key into the JWKS document the proxy
//! verifies such tokens with, using `gatehouse-token`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use clap::Subcommand;
use gatehouse_token::{IssueRequest, IssuingKey, JwkSet, issue, jwk_from_public_pem, unix_seconds};

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Mint a token and print it. The key is a private key PEM whose type
    /// picks the algorithm (RSA: RS256, EC P-256 PKCS#8: ES256, Ed25519:
    /// EdDSA), or with --hs256 a file holding the shared secret (at least 32
    /// bytes; one trailing line end ignored).
    Issue {
        /// The tenant (`sub`).
        #[arg(long)]
        tenant: String,
        /// The database (`db`).
        #[arg(long)]
        database: String,
        /// Lifetime, e.g. `15m`, `1h`, `90s` (at least one second).
        #[arg(long, value_parser = humantime::parse_duration)]
        ttl: Duration,
        /// Private key PEM file, or with --hs256 the shared secret file.
        #[arg(long, value_name = "PATH")]
        key: PathBuf,
        /// Sign with HS256 using the shared secret in --key.
        #[arg(long)]
        hs256: bool,
        /// Key id to put in the token header.
        #[arg(long)]
        kid: Option<String>,
        /// The issuer (`iss`); must match the proxy's configured issuer.
        #[arg(long)]
        issuer: String,
        /// The audience (`aud`): the endpoint name the token is for.
        #[arg(long)]
        audience: String,
    },
    /// Print a JWKS document holding one public key (RSA, EC P-256 or
    /// Ed25519; `BEGIN PUBLIC KEY` or `BEGIN RSA PUBLIC KEY`), for
    /// development setups.
    Jwks {
        /// Public key PEM file (derive it with `openssl pkey -in key.pem -pubout`).
        #[arg(long, value_name = "PEM")]
        public_key: PathBuf,
        /// Key id of the entry (tokens then need the same --kid).
        #[arg(long)]
        kid: Option<String>,
    },
}

pub fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        TokenCommand::Issue {
            tenant,
            database,
            ttl,
            key,
            hs256,
            kid,
            issuer,
            audience,
        } => {
            let key = if hs256 {
                IssuingKey::hs256_from_file(&key, kid)
            } else {
                IssuingKey::from_pem_file(&key, kid)
            }
            .context("loading the signing key")?;
            let request = IssueRequest {
                issuer,
                audience,
                tenant,
                database,
                ttl,
                now: unix_seconds(SystemTime::now()),
            };
            println!("{}", issue(&key, &request).context("issuing the token")?);
        }
        TokenCommand::Jwks { public_key, kid } => println!("{}", jwks(&public_key, kid.as_deref())?),
    }
    Ok(ExitCode::SUCCESS)
}

fn jwks(path: &Path, kid: Option<&str>) -> anyhow::Result<String> {
    let pem = std::fs::read(path).with_context(|| format!("reading public key {}", path.display()))?;
    let jwk = jwk_from_public_pem(&pem, kid).with_context(|| format!("public key {}", path.display()))?;
    Ok(JwkSet { keys: vec![jwk] }.to_json())
}
