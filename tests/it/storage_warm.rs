//! `[limits] storage_warm_cache` (env `TEMPORA_STORAGE_WARM_CACHE`) on the
//! real server: restarted on a store of a few MiB, a server reads it into its
//! page cache by itself, with no request asking, and with the setting off it
//! does not.

use crate::common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// A sample from `/metrics`, e.g. `tempora_storage_cache_bytes{kind="used"}`.
async fn sample(api: &Api, name: &str) -> f64 {
    let m = api.get("/metrics").await;
    m.expect(200);
    let prefix = format!("{name} ");
    let line = m.text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix}: {}", m.text));
    line[prefix.len()..].parse().unwrap()
}

async fn cache_used(api: &Api) -> f64 {
    sample(api, "tempora_storage_cache_bytes{kind=\"used\"}").await
}

async fn warm_passes(api: &Api) -> f64 {
    sample(api, "tempora_storage_cache_warm_passes_total").await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_server_reads_its_store_into_the_cache_unless_told_not_to() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let filler = "x".repeat(400);
    for b in 0..20 {
        let facts: Vec<_> = (0..100)
            .map(|i| json!({"subject": format!("Doc:{b}"), "predicate": format!("line_{i}"), "object": format!("{i} {filler}")}))
            .collect();
        api.post("/api/facts/batch", &json!({ "facts": facts })).await.expect(201);
    }
    server.stop_ok();
    let store = std::fs::metadata(data.join("tempora.redb")).unwrap().len() as f64;

    // Off: two seconds after the start (a pass would come after one), the
    // cache holds what opening the store read, a few pages.
    let server = Server::start(&data, &[("TEMPORA_STORAGE_WARM_CACHE", "false")]);
    let api = Api::new(&server, None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cold = cache_used(&api).await;
    assert!(cold < 512.0 * 1024.0, "{cold} bytes cached with warming off (store {store})");
    assert!(!server.stderr().contains("warmed the page cache"), "{}", server.stderr());
    assert_eq!(warm_passes(&api).await, 0.0);
    server.stop_ok();

    // On (the default): the pass reads the whole store, well under the
    // cache, with no request.
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let deadline = Instant::now() + Duration::from_secs(60);
    let warm = loop {
        let used = cache_used(&api).await;
        if used > 2.0 * 1024.0 * 1024.0 && server.stderr().contains("warmed the page cache") {
            break used;
        }
        assert!(Instant::now() < deadline, "no warm pass: {used} bytes cached; {}", server.stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(warm > 8.0 * cold, "warm {warm}, cold {cold}");
    assert_eq!(warm_passes(&api).await, 1.0, "one pass, at the open");
    // Reads still answer from it as before.
    let r = api.get("/api/facts?subject=Doc:7&limit=1000").await;
    assert_eq!(r.expect(200).as_array().unwrap().len(), 100);
    server.stop_ok();
}
