//! The NeuroSan API's read-only routes over a real socket: `/api/v1/list`,
//! `function` and `connectivity` (agent names with `/` included), the
//! built-in `memory` network, networks loaded from a directory (a broken
//! file does not stop the server), reload on SIGHUP, and keyed mode.

use crate::common::*;
use reqwest::Method;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

fn fixtures(which: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents").join(which)
}

fn names(list: &Value) -> Vec<String> {
    list["agents"].as_array().unwrap().iter().map(|a| a["agent_name"].as_str().unwrap().to_string()).collect()
}

/// neuro-san's clients send their GETs with a `{}` body.
async fn get_with_body(api: &Api, path: &str) -> Resp {
    send(api.req(Method::GET, path).header("content-type", "application/json").body("{}")).await
}

#[tokio::test]
async fn the_memory_network_is_always_served() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let list = get_with_body(&api, "/api/v1/list").await.expect(200).clone();
    assert_eq!(names(&list), ["memory"], "{list}");
    assert!(list["agents"][0]["description"].as_str().is_some_and(|d| !d.is_empty()), "{list}");

    let f = get_with_body(&api, "/api/v1/memory/function").await.expect(200).clone();
    assert!(f["function"]["description"].as_str().is_some_and(|d| !d.is_empty()), "{f}");
    let c = get_with_body(&api, "/api/v1/memory/connectivity").await.expect(200).clone();
    let info = c["connectivity_info"].as_array().unwrap();
    let front = info.iter().find(|i| i["origin"] == "memory").unwrap_or_else(|| panic!("{c}"));
    let tools: Vec<&str> = front["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for t in ["remember", "recall", "build_context", "history", "whats_changed"] {
        assert!(tools.contains(&t), "{t} in {tools:?}");
    }

    api.get("/api/v1/nobody/function").await.expect_error(404, "NotFound");
    api.get("/api/v1/memory/dance").await.expect_error(404, "NotFound");
    api.get("/api/v1/memory").await.expect_error(404, "NotFound");
    let docs = api.get("/api/v1/docs").await.expect(200).clone();
    assert!(docs["paths"]["/api/v1/list"].is_object(), "the API's own document");
}

#[tokio::test]
async fn networks_load_from_a_directory_and_reload_on_sighup() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("networks");
    copy_dir(&fixtures("good"), &dir);
    let server = Server::start(&tmp.path().join("data"), &[("TEMPORA_AGENTS_DIR", dir.to_str().unwrap())]);
    let api = Api::new(&server, None);
    let list = api.get("/api/v1/list").await.expect(200).clone();
    let mut listed = names(&list);
    listed.sort();
    assert_eq!(listed, ["hello", "memory", "music", "passthrough"], "deep/math_guy is served but not public: {list}");

    // A name with a slash routes; its function and connectivity are the file's.
    let f = api.get("/api/v1/deep/math_guy/function").await.expect(200).clone();
    assert!(f["function"]["description"].as_str().is_some_and(|d| !d.is_empty()), "{f}");
    let c = api.get("/api/v1/passthrough/connectivity").await.expect(200).clone();
    let all_tools: Vec<String> = c["connectivity_info"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()))
        .collect();
    assert!(all_tools.iter().any(|t| t == "/deep/math_guy"), "external references stay /name: {c}");

    // Remove a network from the manifest and reload without a restart.
    let manifest = dir.join("manifest.hocon");
    let text = std::fs::read_to_string(&manifest).unwrap().replace("\"music.hocon\": true,", "\"music.hocon\": false,");
    std::fs::write(&manifest, text).unwrap();
    unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = names(api.get("/api/v1/list").await.expect(200));
        if !listed.contains(&"music".to_string()) {
            assert!(listed.contains(&"hello".to_string()), "{listed:?}");
            break;
        }
        assert!(Instant::now() < deadline, "SIGHUP did not reload: {listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    api.get("/api/v1/music/function").await.expect_error(404, "NotFound");
    assert!(server.stderr().contains("agent networks loaded"), "the reload is logged");
}

#[tokio::test]
async fn a_broken_network_file_is_reported_and_the_rest_are_served() {
    let (_tmp, server) = fresh(&[("TEMPORA_AGENTS_DIR", fixtures("bad").to_str().unwrap())]);
    let api = Api::new(&server, None);
    let mut listed = names(api.get("/api/v1/list").await.expect(200));
    listed.sort();
    assert_eq!(listed, ["fine", "memory"]);
    let log = server.stderr();
    assert!(log.contains("syntax.hocon") && log.contains("agent network not loaded"), "errors name the file: {log}");
}

#[tokio::test]
async fn keyed_mode_hides_the_agent_routes_without_a_key() {
    let (_tmp, server) = fresh(&keyed());
    let anonymous = Api::new(&server, None);
    anonymous.get("/api/v1/list").await.expect_hidden();
    anonymous.get("/api/v1/memory/function").await.expect_hidden();
    let nas = Api::new(&server, Some(NAS_KEY));
    assert_eq!(names(nas.get("/api/v1/list").await.expect(200)), ["memory"]);
}
