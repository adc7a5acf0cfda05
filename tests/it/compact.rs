//! `tempora compact` on a real server's data directory: after an import and
//! supersessions, and a kill -9 that leaves writes in the journal only, the
//! compacted store takes less disk and a server on it answers every read as
//! before (current, rewound, history, search) and goes on taking writes.
//! Also the refusals: a store in use, a missing directory.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;

fn tempora(args: &[&str], data: &Path) -> Output {
    tempora_command().args(args).arg("--data-dir").arg(data).output().expect("tempora runs")
}

/// Disk space of the store's file.
fn store_bytes(data: &Path) -> u64 {
    std::fs::metadata(data.join("tempora.redb")).unwrap().blocks() * 512
}

/// The two sizes in `tempora compact`'s report.
fn megabytes(report: &str) -> (f64, f64) {
    let words: Vec<&str> = report.split_whitespace().collect();
    let arrow = words.iter().position(|w| *w == "->").unwrap_or_else(|| panic!("no sizes in {report:?}"));
    let number = |i: usize| words[i].parse::<f64>().unwrap_or_else(|_| panic!("no size in {report:?}"));
    (number(arrow - 2), number(arrow + 1))
}

/// Subjects are numbered in decimal and imported in numeric order, which is
/// not key order: the pattern that leaves an imported store's pages half
/// full.
const SUBJECTS: usize = 6_000;

/// What the reads below answer, to compare before and after.
async fn answers(api: &Api, mid_tx: u64) -> Vec<Value> {
    let mut out = Vec::new();
    for i in [0, 7, 1234, 4999, SUBJECTS - 1] {
        out.push(json!(api.list(&format!("subject=Person:{i}&predicate=works_at")).await));
        out.push(json!(api.list(&format!("subject=Person:{i}&status=all")).await));
        out.push(json!(api.list(&format!("subject=Person:{i}&as_of_tx={mid_tx}&valid_at={}", year(2021))).await));
    }
    let some = api.list("subject=Person:7&status=all").await;
    for f in &some {
        let id = f["id"].as_str().unwrap();
        out.push(api.get(&format!("/api/facts/{id}/history")).await.expect(200).clone());
    }
    out.push(json!(api.list("predicate=works_at&object=Org:globex&limit=1000").await));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compacted_store_answers_as_before_in_less_disk_and_goes_on() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // Small checkpoints: many of them, as a large import would have.
    let server = Server::start(&data, &[("TEMPORA_STORAGE_CHECKPOINT_BYTES", "1048576")]);
    let api = Api::new(&server, None);
    let subjects: Vec<usize> = (0..SUBJECTS).collect();
    for chunk in subjects.chunks(500) {
        let facts: Vec<_> = chunk
            .iter()
            .map(|i| {
                json!({"subject": format!("Person:{i}"), "predicate": "works_at", "object": format!("Org:o{}", i % 97),
                    "valid_from": year(2020), "source": "import"})
            })
            .collect();
        api.post("/api/facts/batch", &json!({ "facts": facts })).await.expect(201);
    }
    let marker = api.assert_fact(json!({"subject": "Marker:import", "predicate": "done", "object": true})).await;
    let mid_tx = marker["tx"].as_u64().unwrap();
    // Supersessions after the import: closed facts and history to rewind.
    for i in (0..SUBJECTS).step_by(97) {
        let body = json!({"subject": format!("Person:{i}"), "predicate": "works_at", "object": "Org:globex",
            "valid_from": year(2022)});
        api.assert_fact(body).await;
    }
    api.assert_fact(json!({"subject": "Note:compact", "predicate": "says", "object": "violet harmonica"})).await;
    let before = answers(&api, mid_tx).await;
    assert!(before.iter().any(|a| a.as_array().is_some_and(|l| l.len() > 1)), "the reads have history to show");
    // The last writes are in the journal only: compaction must replay them.
    server.kill9();

    let out = tempora(&["compact"], &data);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "compact failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // "compacted DIR: N records, X MB -> Y MB in S s", X once the journal
    // was replayed into the file.
    let (mb_before, mb_after) = megabytes(&stdout);
    // About 43% smaller here; a fifth is the least that says the pages were packed.
    assert!(mb_after * 10.0 < mb_before * 8.0, "{stdout}");
    let on_disk = store_bytes(&data) as f64 / (1 << 20) as f64;
    assert!((on_disk - mb_after).abs() < 0.1, "the file takes {on_disk} MB: {stdout}");
    assert!(!data.join("tempora.redb.compacting").exists());

    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let after = answers(&api, mid_tx).await;
    assert!(after == before, "a read answers differently after compaction");
    // The search index was kept, and agrees with the store.
    let r = api.get(&format!("/api/search?question={}", enc("violet harmonica"))).await;
    let found = r.expect(200);
    assert_eq!(found["answer_facts"][0]["subject"], "Note:compact", "{}", r.text);
    // Writes go on, and survive another kill -9.
    let moved = api
        .assert_fact(json!({"subject": "Person:7", "predicate": "works_at", "object": "Org:initech",
            "valid_from": year(2024)}))
        .await;
    server.kill9();
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let now = api.list("subject=Person:7&predicate=works_at").await;
    assert_eq!(ids(&now), [moved["id"].as_str().unwrap()]);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn compact_refuses_a_store_in_use_and_a_missing_directory() {
    engine_only!();
    let (tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.assert_fact(json!({"subject": "Person:ada", "predicate": "works_at", "object": "Org:acme"})).await;
    let data = tmp.path().join("data");
    let out = tempora(&["compact"], &data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("in use"), "{err}");
    // Refused, and the server goes on as before.
    assert_eq!(api.list("subject=Person:ada").await.len(), 1);
    server.stop_ok();

    let out = tempora(&["compact"], &tmp.path().join("nowhere"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("does not exist"), "{err}");
}
