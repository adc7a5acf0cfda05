//! The operator console as served by the real binary: `/` redirects to
//! `/console`; the page carries its mode and a Content-Security-Policy that
//! allows its own origin only; every file of the assets directory is served
//! with its type and cache headers; and no asset names another host, writes
//! data as markup, or imports a module from elsewhere. The console in a
//! browser is tested by scripts/console-e2e.sh.

use crate::common::*;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION};
use reqwest::redirect::Policy;
use std::path::{Path, PathBuf};

fn assets_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/console/assets")
}

/// Every file of the assets directory: `(name, bytes)`, sorted by name.
fn asset_files() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(assets_dir())
        .expect("the assets directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 10, "too few assets: {:?}", out.iter().map(|(n, _)| n).collect::<Vec<_>>());
    out
}

fn expected_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("html") => "text/html; charset=utf-8",
        other => panic!("an asset of an unexpected kind: {name} ({other:?})"),
    }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn root_redirects_and_the_page_carries_its_mode_and_policy() {
    let (_tmp, keyed) = fresh(&keyed());
    let (_tmp2, open) = fresh(&[]);
    let http = no_redirects();

    for server in [&keyed, &open] {
        let r = send(http.get(server.url("/"))).await;
        assert_eq!(r.status.as_u16(), 307, "{}", r.text);
        assert_eq!(r.header(LOCATION.as_str()), Some("/console"));
        let r = send(http.get(server.url("/console/"))).await;
        assert_eq!(r.status.as_u16(), 308, "{}", r.text);
        assert_eq!(r.header(LOCATION.as_str()), Some("/console"));
    }

    // The page is public in keyed mode too: it holds no data, only the
    // login form and the scripts.
    for (server, mode) in [(&keyed, "keyed"), (&open, "open")] {
        let r = send(http.get(server.url("/console"))).await;
        r.expect(200);
        assert_eq!(r.header(CONTENT_TYPE.as_str()), Some("text/html; charset=utf-8"));
        assert!(r.text.contains(&format!(r#"<meta name="tempora-mode" content="{mode}">"#)), "{}", r.text);
        assert!(!r.text.contains("{{"), "an unfilled placeholder: {}", r.text);
        let csp = r.header("content-security-policy").expect("a Content-Security-Policy");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ] {
            assert!(csp.contains(directive), "CSP lacks {directive}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval") && !csp.contains("http"), "{csp}");
        assert!(r.header(CACHE_CONTROL.as_str()).is_some_and(|c| c.contains("no-store")));
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        // HEAD answers like GET, without a body.
        let h = http.head(server.url("/console")).send().await.unwrap();
        assert_eq!(h.status().as_u16(), 200);
    }

    // The data stays gated: without a key, keyed mode answers 404 as ever.
    Api::new(&keyed, None).get("/api/stats").await.expect_hidden();
    Api::new(&keyed, None).get("/api/facts").await.expect_hidden();
    // Unknown paths keep the JSON 404, inside and outside the console.
    let api = Api::new(&open, None);
    api.get("/nope").await.expect_hidden();
    api.get("/console/nope.js").await.expect_hidden();
    api.get("/console/index.html").await.expect_hidden();
    api.get("/console/..%2FCargo.toml").await.expect_hidden();
    api.get("/console/app.js/x").await.expect_hidden();
    send(api.req(reqwest::Method::POST, "/console")).await.expect_error(405, "MethodNotAllowed");
    keyed.stop_ok();
    open.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn every_asset_is_served_with_its_type_and_a_validator() {
    let (_tmp, server) = fresh(&keyed());
    let http = no_redirects();
    for (name, bytes) in asset_files() {
        if name == "index.html" {
            continue;
        }
        let resp = http.get(server.url(&format!("/console/{name}"))).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "/console/{name}");
        let headers = resp.headers().clone();
        let header = |h: &str| headers.get(h).and_then(|v| v.to_str().ok()).map(String::from);
        assert_eq!(header(CONTENT_TYPE.as_str()).as_deref(), Some(expected_type(&name)), "{name}");
        assert_eq!(header(CACHE_CONTROL.as_str()).as_deref(), Some("no-cache"), "{name}");
        assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"), "{name}");
        let etag = header(ETAG.as_str()).unwrap_or_else(|| panic!("{name} has no ETag"));
        assert_eq!(resp.bytes().await.unwrap().as_ref(), bytes.as_slice(), "{name} is not the file of the same name");

        // Revalidation: the same tag answers 304 with no body; another 200.
        let again =
            http.get(server.url(&format!("/console/{name}"))).header(IF_NONE_MATCH, &etag).send().await.unwrap();
        assert_eq!(again.status().as_u16(), 304, "{name}");
        assert_eq!(again.headers().get(ETAG).unwrap(), etag.as_str());
        assert!(again.bytes().await.unwrap().is_empty());
        let other =
            http.get(server.url(&format!("/console/{name}"))).header(IF_NONE_MATCH, "\"other\"").send().await.unwrap();
        assert_eq!(other.status().as_u16(), 200, "{name}");
    }
    server.stop_ok();
}

/// The quoted strings of `src` that follow `keyword` (e.g. `from`).
fn strings_after(src: &str, keyword: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in src.match_indices(keyword) {
        let rest = src[i + keyword.len()..].trim_start();
        if let Some(q) = rest.chars().next().filter(|c| matches!(c, '\'' | '"')) {
            if let Some(end) = rest[1..].find(q) {
                out.push(rest[1..1 + end].to_string());
            }
        }
    }
    out
}

#[test]
fn assets_name_no_other_host_and_never_write_data_as_markup() {
    // Namespace names are identifiers, never fetched.
    const NAMESPACES: &[&str] = &["http://www.w3.org/2000/svg"];
    let files = asset_files();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    for (name, bytes) in &files {
        let text = String::from_utf8(bytes.clone()).unwrap_or_else(|_| panic!("{name} is not UTF-8"));
        let rest = NAMESPACES.iter().fold(text.clone(), |t, ns| t.replace(ns, ""));
        for scheme in ["http://", "https://", "ws://", "wss://"] {
            assert!(!rest.contains(scheme), "{name} names another origin ({scheme}...)");
        }
        // Protocol-relative addresses in markup and CSS.
        for needle in ["src=\"//", "href=\"//", "url(//", "url('//", "url(\"//", "@import"] {
            assert!(!rest.contains(needle), "{name} loads from elsewhere ({needle})");
        }
        if name.ends_with(".js") {
            for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
                assert!(!text.contains(sink), "{name} uses {sink}: data must reach the page as text nodes");
            }
            // Imports are of sibling modules that exist.
            for spec in strings_after(&text, " from ") {
                let file =
                    spec.strip_prefix("./").unwrap_or_else(|| panic!("{name} imports {spec:?}: not a sibling module"));
                assert!(names.contains(&file), "{name} imports {spec}, which is not an asset");
            }
        }
    }
    // The page's own references are assets too.
    let index =
        String::from_utf8(files.iter().find(|(n, _)| n == "index.html").expect("index.html").1.clone()).unwrap();
    let refs: Vec<String> = strings_after(&index, "src=").into_iter().chain(strings_after(&index, "href=")).collect();
    let local: Vec<&String> = refs.iter().filter(|r| r.starts_with("/console/")).collect();
    assert!(local.len() >= 3, "{refs:?}");
    for r in local {
        assert!(names.contains(&r.trim_start_matches("/console/")), "index.html references {r}, which is not an asset");
    }
    assert!(!index.contains("<script>") && !index.contains(" style="), "inline script or style would break the CSP");
}
