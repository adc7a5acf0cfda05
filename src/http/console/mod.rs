//! The operator console: a browser page at `/console` over the same REST API
//! (`docs/console.md`). The page and its assets are plain ES modules and CSS
//! under `assets/`, embedded in the binary at build time, so the console
//! needs no build step and loads nothing from another origin.
//!
//! The page itself holds no data and is public; everything it shows comes
//! from `/api/*` with the caller's session cookie (or no key in open mode),
//! so it sees exactly what that key sees.

use super::error::ApiError;
use super::extract::PathParam;
use super::AppState;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// Same origin only: no inline script, no other host, no framing. Inline
/// `style` attributes are refused too; the scripts style through the CSSOM.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

/// Where the console lives.
pub const PATH: &str = "/console";

/// The page. `{{MODE}}` becomes `open` or `keyed`, so the page knows whether
/// to ask for a key before it makes any request.
const INDEX: &str = include_str!("assets/index.html");

/// One embedded file: its name under `/console/`, type and bytes.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset { name: $name, content_type: $type, body: include_bytes!(concat!("assets/", $name)) }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `assets/` but the page (`tests/it/console.rs` checks that
/// none is missing).
pub const ASSETS: &[Asset] = &[
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("time.js", JS),
    asset!("session.js", JS),
    asset!("facts.js", JS),
    asset!("timeline.js", JS),
    asset!("graph.js", JS),
    asset!("feed.js", JS),
    asset!("search.js", JS),
    asset!("context.js", JS),
    asset!("alerts.js", JS),
];

/// Strong validators of the assets, in [`ASSETS`] order.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body);
                let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

fn harden(headers: &mut HeaderMap) {
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
}

/// `GET /`: the console.
pub async fn root() -> Redirect {
    Redirect::temporary(PATH)
}

/// `GET /console`: the page. Never cached, so a new binary's page (and its
/// asset list) is picked up on the next load.
pub async fn page(State(st): State<AppState>) -> Response {
    let mode = if st.service.is_open() { "open" } else { "keyed" };
    let mut resp = INDEX.replace("{{MODE}}", mode).into_response();
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, no-store"));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    harden(h);
    resp
}

/// `GET /console/{file}`: an embedded asset. Cached, but revalidated on
/// every use (`no-cache` + ETag): the module imports are plain relative
/// names, so a changed file must never be served stale.
pub async fn asset(PathParam(name): PathParam, headers: HeaderMap) -> Result<Response, ApiError> {
    let i = ASSETS.iter().position(|a| a.name == name).ok_or_else(ApiError::not_found)?;
    let (a, tag) = (&ASSETS[i], &etags()[i]);
    let fresh = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim().trim_start_matches("W/") == tag));
    let mut resp = if fresh { StatusCode::NOT_MODIFIED.into_response() } else { a.body.into_response() };
    let h = resp.headers_mut();
    if !fresh {
        h.insert(CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    }
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(ETAG, HeaderValue::from_str(tag).map_err(|_| ApiError::internal())?);
    harden(h);
    Ok(resp)
}

/// `GET /console/`: the page has one address.
pub async fn slash() -> Redirect {
    Redirect::permanent(PATH)
}
