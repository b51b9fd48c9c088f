//! The live dashboard: `GET /dashboard` serves one self-contained page
//! (its HTML, CSS and JavaScript are embedded in the binary from
//! `admin/dashboard/` and inlined, with no external URL) whose script polls
//! `/metrics`, `/api/backends`, `/api/clusters` and `/api/stats` every
//! second; `GET /` redirects to it. The page itself carries no data, so it is
//! served without the admin token: its script sends the token (taken from a
//! small form or the URL's `#token=…` fragment, kept in `sessionStorage`)
//! with each request. A Content-Security-Policy lets the page run only its
//! own script and style (by hash) and reach only this origin.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use base64::Engine as _;
use sha2::{Digest, Sha256};

const TEMPLATE: &str = include_str!("dashboard/page.html");
const STYLE: &str = include_str!("dashboard/style.css");
const SCRIPT: &str = include_str!("dashboard/app.js");

/// The page as served, and the policy that goes with it; built once per
/// admin router and shared by its handler.
#[derive(Clone)]
struct Page {
    html: std::sync::Arc<str>,
    policy: std::sync::Arc<str>,
}

/// `'sha256-…'`: the CSP source that allows exactly this inline text.
fn hash_source(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

impl Page {
    fn new() -> Self {
        let html = TEMPLATE.replace("/*STYLE*/", STYLE).replace("/*SCRIPT*/", SCRIPT);
        // Everything from this origin only; inline code only if it is this
        // page's own (by hash); no plugin, no frame, no form post anywhere.
        let policy = format!(
            "default-src 'self'; script-src {}; style-src {}; img-src 'self' data:; \
             object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            hash_source(SCRIPT),
            hash_source(STYLE),
        );
        Self {
            html: html.into(),
            policy: policy.into(),
        }
    }

    fn response(&self) -> Response {
        (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CONTENT_SECURITY_POLICY, &*self.policy),
                (header::CACHE_CONTROL, "no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::REFERRER_POLICY, "no-referrer"),
                (header::X_FRAME_OPTIONS, "DENY"),
            ],
            self.html.to_string(),
        )
            .into_response()
    }
}

/// `GET /dashboard` and `GET /` (a redirect to it), without the token.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let page = Page::new();
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard") }))
        .route("/dashboard", get(move || async move { page.response() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_inlines_its_style_and_script_and_names_no_other_host() {
        let page = Page::new();
        assert!(page.html.contains(STYLE) && page.html.contains(SCRIPT));
        assert!(!page.html.contains("/*STYLE*/") && !page.html.contains("/*SCRIPT*/"));
        for external in ["http://", "https://", "//cdn", "@import"] {
            assert!(!page.html.contains(external), "the page names {external}");
        }
        // The inlined code must not close its own element early.
        assert!(!SCRIPT.contains("</script") && !STYLE.contains("</style"));
    }

    #[test]
    fn policy_allows_only_this_pages_inline_code_and_this_origin() {
        let page = Page::new();
        assert!(page.policy.starts_with("default-src 'self';"));
        assert!(page.policy.contains(&format!("script-src {};", hash_source(SCRIPT))));
        assert!(page.policy.contains(&format!("style-src {};", hash_source(STYLE))));
        assert!(!page.policy.contains("unsafe"));
    }
}
