//! `[[rules]]` as the TOML file spells them, before [`super::compile`]
//! checks them against the endpoints and clusters (the rest of the file's
//! raw form is `config::raw`'s, which re-exports these).

use std::fmt;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

/// `[[rules]]`: one query rule; match fields, then actions.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    pub name: Spanned<String>,
    pub tenants: Option<Spanned<Vec<String>>>,
    pub databases: Option<Spanned<Vec<String>>>,
    pub endpoints: Option<Spanned<Vec<String>>>,
    pub client_cidrs: Option<Spanned<Vec<String>>>,
    pub kinds: Option<Spanned<Vec<String>>>,
    pub digest: Option<Spanned<String>>,
    pub digest_id: Option<Spanned<String>>,
    pub digest_regex: Option<Spanned<String>>,
    pub query_regex: Option<Spanned<String>>,
    /// The message a blocked client sees.
    pub block: Option<Spanned<String>>,
    pub route: Option<Spanned<RawRoute>>,
    pub rewrite: Option<Spanned<RawRewrite>>,
    pub statement_timeout: Option<Spanned<humantime_serde::Serde<Duration>>>,
    pub log: Option<bool>,
    #[serde(rename = "continue")]
    pub continue_: Option<bool>,
}

/// `rewrite = { pattern, replacement }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRewrite {
    pub pattern: String,
    pub replacement: String,
}

/// `route = "writer"` (a role, checked by validation), `{ backend = ".." }`
/// or `{ cluster = ".." }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawRoute {
    Role(String),
    Backend(String),
    Cluster(String),
}

impl<'de> Deserialize<'de> for RawRoute {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct RouteVisitor;
        impl<'de> Visitor<'de> for RouteVisitor {
            type Value = RawRoute;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"writer\", \"replica\", { backend = \"host:port\" } or { cluster = \"name\" }")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawRoute, E> {
                Ok(RawRoute::Role(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawRoute, A::Error> {
                let mut route = None;
                while let Some(key) = map.next_key::<String>()? {
                    let value: String = map.next_value()?;
                    let next = match key.as_str() {
                        "backend" => RawRoute::Backend(value),
                        "cluster" => RawRoute::Cluster(value),
                        other => return Err(de::Error::unknown_field(other, &["backend", "cluster"])),
                    };
                    if route.replace(next).is_some() {
                        return Err(de::Error::custom("route takes one of `backend` or `cluster`, not both"));
                    }
                }
                route.ok_or_else(|| de::Error::custom("route needs `backend` or `cluster`"))
            }
        }
        d.deserialize_any(RouteVisitor)
    }
}
