//! `tempora size` on a real server's data directory: it counts what the
//! store holds (every fact version, the live and the closed facts, the
//! change log), accounts for the file's bytes, changes nothing, and refuses
//! a store in use.

use crate::common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

fn tempora(args: &[&str], data: &Path) -> Output {
    tempora_command().args(args).arg("--data-dir").arg(data).output().expect("tempora runs")
}

/// The table rows of the report: name -> (entries, records MB, pages MB).
fn tables(report: &str) -> BTreeMap<String, (u64, f64, f64)> {
    report
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("all tables"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].to_string(), (w[1].parse().unwrap(), w[2].parse().unwrap(), w[3].parse().unwrap()))
        })
        .collect()
}

/// The number after `label` in the report.
fn number_after(report: &str, label: &str) -> f64 {
    let rest = &report[report.find(label).unwrap_or_else(|| panic!("no {label:?} in {report}")) + label.len()..];
    rest.split_whitespace().next().unwrap().trim_end_matches(|c: char| !c.is_ascii_digit()).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn size_accounts_for_every_version_and_changes_nothing() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    // `likes` is many: only its live facts are kept by value (idx_spo).
    api.put("/api/predicates/likes", &json!({"cardinality": "many"})).await.expect(200);
    let mut facts: Vec<_> = (0..2_000)
        .map(|i| json!({"subject": format!("Person:{i}"), "predicate": "works_at", "object": format!("Org:o{}", i % 13)}))
        .collect();
    facts.extend((0..10).map(|i| json!({"subject": "Person:0", "predicate": "likes", "object": format!("Thing:{i}")})));
    api.post("/api/facts/batch", &json!({ "facts": facts })).await.expect(201);
    // 40 supersessions: each closes a fact (a second version of it) and adds one.
    for i in 0..40 {
        api.assert_fact(json!({"subject": format!("Person:{i}"), "predicate": "works_at", "object": "Org:globex"}))
            .await;
    }
    server.stop_ok();

    let file = data.join("tempora.redb");
    let before = std::fs::read(&file).unwrap();
    let out = tempora(&["size"], &data);
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "size failed: {report}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&file).unwrap() == before, "size changed the store");

    let t = tables(&report);
    assert_eq!(t["versions"].0, 2_010 + 40 + 40, "{report}");
    assert_eq!(t["idx_sp"].0, 2_010, "live facts: {report}");
    assert_eq!(t["idx_spo"].0, 10, "the live facts of many predicates: {report}");
    assert_eq!(t["idx_closed"].0, 40, "{report}");
    assert_eq!(t["idx_os"].0, 2_050, "one per fact: {report}");
    assert_eq!(t["log"].0, 42, "a transaction each: {report}");
    for (name, (entries, records, pages)) in &t {
        assert!(*entries == 0 || records <= pages, "{name}: records cannot exceed their pages: {report}");
    }
    assert_eq!(number_after(&report, "on disk for"), 2_090.0, "{report}");
    // Every byte of the file on disk is in a table, redb's own, or free.
    let all: Vec<f64> = report.lines().find(|l| l.starts_with("all tables")).unwrap().split_whitespace().skip(2)
        .map(|w| w.parse().unwrap()).collect();
    let all_pages = all[1];
    let on_disk = std::fs::metadata(&file).map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512).unwrap() as f64 / 1e6;
    let pages: f64 = t.values().map(|v| v.2).sum();
    assert!((all_pages - pages).abs() < 0.1 * t.len() as f64, "{report}");
    assert!(pages <= on_disk + 0.1, "{pages} MB of pages in a file of {on_disk} MB on disk: {report}");
    assert!(number_after(&report, "search index") > 0.0, "the index is reported: {report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn size_refuses_a_store_in_use() {
    engine_only!();
    let (tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.assert_fact(json!({"subject": "Person:ada", "predicate": "works_at", "object": "Org:acme"})).await;
    let out = tempora(&["size"], &tmp.path().join("data"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("in use"), "{err}");
    assert_eq!(api.list("subject=Person:ada").await.len(), 1);
    server.stop_ok();
}
