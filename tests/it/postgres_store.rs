//! tempora serving from PostgreSQL (`--store postgres://…`): the memory
//! API end to end on a real database, with the bitemporal rules of the
//! embedded engine.

use crate::common::{postgres, year, Api, Server};
use serde_json::{json, Value};

async fn serve_on_postgres() -> (tempfile::TempDir, Server, String) {
    let url = postgres::database().await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[("TEMPORA_STORE", url.as_str())]);
    (dir, server, url)
}

fn objects(facts: &[Value]) -> Vec<&str> {
    facts.iter().map(|f| f["object"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_takeover_a_rewind_and_a_retraction_on_postgres() {
    let (_dir, server, _url) = serve_on_postgres().await;
    takeover_rewind_retraction(&Api::new(&server, None)).await;
}

/// The same on the embedded engine: both stores answer alike.
#[tokio::test(flavor = "multi_thread")]
async fn a_takeover_a_rewind_and_a_retraction_embedded() {
    let (_dir, server) = crate::common::fresh(&[]);
    takeover_rewind_retraction(&Api::new(&server, None)).await;
}

async fn takeover_rewind_retraction(api: &Api) {
    let acme = api
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme", "valid_from": year(2020)}))
        .await;
    let globex = api
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:globex", "valid_from": year(2024)}))
        .await;
    assert_eq!(globex["supersedes"], json!([acme["id"]]), "{globex}");
    assert!(globex["tx"].as_u64() > acme["tx"].as_u64());

    // Now: globex. In 2022: acme. As of acme's transaction: acme, open-ended.
    assert_eq!(objects(&api.list("subject=Person:sarah").await), ["Org:globex"]);
    assert_eq!(objects(&api.list(&format!("subject=Person:sarah&valid_at={}", year(2022))).await), ["Org:acme"]);
    let then = api.list(&format!("subject=Person:sarah&as_of_tx={}", acme["tx"])).await;
    assert_eq!(objects(&then), ["Org:acme"]);
    assert_eq!(then[0]["valid_until"], Value::Null);

    // A bounded secondment splits globex into a head and a tail.
    let stint = api
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:initech",
                            "valid_from": year(2025), "valid_until": year(2026)}))
        .await;
    assert_eq!(objects(&api.list(&format!("subject=Person:sarah&valid_at={}", year(2027))).await), ["Org:globex"]);
    assert_eq!(objects(&api.list(&format!("subject=Person:sarah&valid_at={}", year(2025) + 1)).await), ["Org:initech"]);

    // Retracting the secondment revives nothing.
    api.delete(&format!("/api/facts/{}", stint["id"].as_str().unwrap())).await.expect(200);
    assert!(api.list(&format!("subject=Person:sarah&valid_at={}", year(2025) + 1)).await.is_empty());
    let all = api.list("subject=Person:sarah&status=all").await;
    assert_eq!(all.len(), 4, "acme, globex's head and tail, the retracted secondment: {all:?}");

    // The history of globex: asserted, then closed by the secondment.
    let history = api.get(&format!("/api/facts/{}/history", globex["id"].as_str().unwrap())).await;
    let versions = history.expect(200)["versions"].as_array().unwrap().clone();
    let statuses: Vec<&str> = versions.iter().map(|v| v["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["active", "superseded"]);
    let stats = api.get("/api/stats").await.expect(200).clone();
    assert_eq!(stats["facts"]["retracted"], 1, "{stats}");
}

#[tokio::test(flavor = "multi_thread")]
async fn values_held_under_many_keep_their_remainders_once_the_predicate_is_one_on_postgres() {
    let (_dir, server, _url) = serve_on_postgres().await;
    values_from_many_to_one(&Api::new(&server, None)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn values_held_under_many_keep_their_remainders_once_the_predicate_is_one_embedded() {
    let (_dir, server) = crate::common::fresh(&[]);
    values_from_many_to_one(&Api::new(&server, None)).await;
}

/// Two values asserted while the predicate was `many` stand side by side.
/// Made `one`, a bounded assert closes both over its interval, and each
/// continues after it: the remainders share the pair as their facts did.
async fn values_from_many_to_one(api: &Api) {
    api.put("/api/predicates/speaks", &json!({"cardinality": "many"})).await.expect(200);
    for lang in ["en", "fr"] {
        api.assert_fact(json!({"subject": "Person:ana", "predicate": "speaks", "object": lang, "valid_from": year(2000)}))
            .await;
    }
    api.put("/api/predicates/speaks", &json!({"cardinality": "one"})).await.expect(200);
    let bounded = api
        .assert_fact(json!({"subject": "Person:ana", "predicate": "speaks", "object": "fr",
                            "valid_from": year(2010), "valid_until": year(2012)}))
        .await;
    assert_eq!(bounded["supersedes"].as_array().map(Vec::len), Some(2), "{bounded}");

    let mut later = api.list(&format!("subject=Person:ana&valid_at={}", year(2013))).await;
    later.sort_by(|a, b| a["object"].as_str().cmp(&b["object"].as_str()));
    assert_eq!(objects(&later), ["en", "fr"]);
    assert_eq!(objects(&api.list(&format!("subject=Person:ana&valid_at={}", year(2011))).await), ["fr"]);
}
