//! `/api/search` over a real socket: ranking, current and `as_of` views,
//! retraction, tenant isolation, read-your-writes, the index catching up
//! after kill -9 or the loss of its directory, `tempora reindex`, and the
//! request errors.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// GET /api/search with `question` and extra raw query parameters.
async fn search(api: &Api, question: &str, extra: &str) -> Value {
    let r = api.get(&format!("/api/search?question={}{extra}", enc(question))).await;
    let v = r.expect(200).clone();
    assert_eq!(v["kind"], "search_result", "{}", r.text);
    assert_eq!(v["stale"], false, "the index did not catch up: {}", r.text);
    assert!(r.header("x-tempora-index-stale").is_none());
    let facts = v["answer_facts"].as_array().unwrap();
    let matches = v["matches"].as_array().unwrap();
    assert_eq!(facts.len(), matches.len(), "{}", r.text);
    for (f, m) in facts.iter().zip(matches) {
        assert_eq!(f["id"], m["id"], "matches are parallel to answer_facts");
    }
    v
}

fn answer_ids(v: &Value) -> Vec<String> {
    ids(v["answer_facts"].as_array().unwrap())
}

fn objects(v: &Value) -> Vec<Value> {
    v["answer_facts"].as_array().unwrap().iter().map(|f| f["object"].clone()).collect()
}

/// Thirty facts about six people.
fn people() -> Vec<Value> {
    let rows: [(&str, [(&str, Value); 5]); 6] = [
        ("Person:ana", [
            ("works_at", json!("Org:acme")),
            ("lives_in", json!("City:lisbon")),
            ("speaks", json!("Portuguese and Spanish")),
            ("hobby", json!("rock climbing on weekends")),
            ("role", json!("staff engineer on the billing platform")),
        ]),
        ("Person:ben", [
            ("works_at", json!("Org:globex")),
            ("lives_in", json!("City:berlin")),
            ("speaks", json!("German and English")),
            ("hobby", json!("plays the cello in an amateur orchestra")),
            ("role", json!("product manager for mobile apps")),
        ]),
        ("Person:chloe", [
            ("works_at", json!("Org:initech")),
            ("lives_in", json!("City:paris")),
            ("speaks", json!("French and English")),
            ("hobby", json!("long distance running")),
            ("role", json!("head of security")),
        ]),
        ("Person:dev", [
            ("works_at", json!("Org:acme")),
            ("lives_in", json!("City:bangalore")),
            ("speaks", json!("Hindi, Kannada and English")),
            ("hobby", json!("competitive chess")),
            ("role", json!("data scientist on fraud detection")),
        ]),
        ("Person:emma", [
            ("works_at", json!("Org:umbrella")),
            ("lives_in", json!("City:london")),
            ("speaks", json!("English")),
            ("hobby", json!("restores vintage motorcycles")),
            ("role", json!("chief financial officer")),
        ]),
        ("Person:farid", [
            ("works_at", json!("Org:globex")),
            ("lives_in", json!("City:cairo")),
            ("speaks", json!("Arabic and English")),
            ("hobby", json!("amateur astronomy with a backyard telescope")),
            ("role", json!("site reliability engineer")),
        ]),
    ];
    let mut out = Vec::new();
    for (subject, facts) in rows {
        for (predicate, object) in facts {
            out.push(json!({"subject": subject, "predicate": predicate, "object": object, "source": "hr-import"}));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_distinctive_question_puts_the_right_fact_first() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.post("/api/facts/batch", &json!({"facts": people()})).await.expect(201);

    for (question, subject, object) in [
        ("who plays the cello?", "Person:ben", json!("plays the cello in an amateur orchestra")),
        ("Which colleague speaks Portuguese", "Person:ana", json!("Portuguese and Spanish")),
        ("who looks after security", "Person:chloe", json!("head of security")),
        ("telescope", "Person:farid", json!("amateur astronomy with a backyard telescope")),
        ("vintage motorcycle restoration", "Person:emma", json!("restores vintage motorcycles")),
        ("who lives in Lisbon", "Person:ana", json!("City:lisbon")),
    ] {
        let v = search(&api, question, "").await;
        let first = &v["answer_facts"][0];
        assert_eq!((first["subject"].as_str().unwrap(), &first["object"]), (subject, &object), "{question}: {v}");
        assert!(v["matches"][0]["reasons"].as_array().unwrap().contains(&json!("bm25")), "{v}");
        assert!(!v["matches"][0]["terms"].as_array().unwrap().is_empty(), "{v}");
        assert_eq!(v["question"], question);
    }

    // The default top_k is 8; top_k bounds the answer; a common word matches many.
    let v = search(&api, "English", "").await;
    assert_eq!(v["answer_facts"].as_array().unwrap().len(), 5, "{v}");
    let v = search(&api, "English", "&top_k=2").await;
    assert_eq!(v["answer_facts"].as_array().unwrap().len(), 2);
    let v = search(&api, "engineer", "").await;
    assert_eq!(v["answer_facts"].as_array().unwrap().len(), 2, "{v}");
    // Entities of the answer facts, deduplicated, in rank order.
    let v = search(&api, "cello", "&top_k=1").await;
    assert_eq!(v["entities"], json!(["Person:ben"]));
    let v = search(&api, "who works at acme", "").await;
    let entities: Vec<&str> = v["entities"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert!(entities.contains(&"Org:acme") && entities.contains(&"Person:ana") && entities.contains(&"Person:dev"), "{v}");
    // Nothing matches: an empty answer, not an error.
    let v = search(&api, "submarine", "").await;
    assert!(v["answer_facts"].as_array().unwrap().is_empty());
    let v = search(&api, "what is the", "").await;
    assert!(v["answer_facts"].as_array().unwrap().is_empty(), "stopwords only: {v}");
    // Query syntax is just text.
    for q in ["AND OR NOT", "\"unbalanced", "title:(x", "*", "a:b:c ~2 ^3"] {
        search(&api, q, "").await;
    }

    // POST takes the same search as a body.
    let r = api.post("/api/search", &json!({"question": "who plays the cello?", "top_k": 3})).await;
    let v = r.expect(200);
    assert_eq!(v["answer_facts"][0]["subject"], "Person:ben");
    assert!(v["answer_facts"].as_array().unwrap().len() <= 3);

    // Filters.
    let v = search(&api, "English", "&predicate=speaks&subject=Person:ben").await;
    assert_eq!(objects(&v), [json!("German and English")]);
    let v = search(&api, "English", "&predicate=hobby").await;
    assert!(v["answer_facts"].as_array().unwrap().is_empty());

    // Seeds: every fact about Dev is in the graph list, so the English
    // speaker first is Dev; a question naming Person:ben makes him a seed.
    let r = api.post("/api/search", &json!({"question": "english", "seeds": ["Person:dev"], "top_k": 3})).await;
    let v = r.expect(200);
    assert_eq!(v["answer_facts"][0]["subject"], "Person:dev", "{v}");
    assert_eq!(v["matches"][0]["reasons"], json!(["bm25", "graph"]), "{v}");
    assert_eq!(v["matches"][0]["ranks"]["graph"], 1, "{v}");
    let reasons: Vec<Value> = v["matches"].as_array().unwrap().iter().map(|m| m["reasons"].clone()).collect();
    assert!(reasons.iter().skip(1).all(|r| r == &json!(["bm25"]) || r == &json!(["graph"])), "{v}");
    let v = search(&api, "where does Person:ben live", "").await;
    assert_eq!(v["answer_facts"][0]["object"], "City:berlin", "{v}");
    // One hop: the facts of a seed's neighbours (Org:acme's employees).
    let r = api.post("/api/search", &json!({"question": "chess", "seeds": ["Org:acme"]})).await;
    let v = r.expect(200);
    assert_eq!(v["answer_facts"][0]["object"], "competitive chess", "{v}");
    assert_eq!(v["matches"][0]["reasons"], json!(["bm25", "graph"]), "Dev is one hop from Org:acme: {v}");
    let r = api.post("/api/search", &json!({"question": "chess", "seeds": ["Org:umbrella"]})).await;
    let v = r.expect(200);
    assert_eq!(v["answer_facts"][0]["object"], "competitive chess", "{v}");
    assert_eq!(v["matches"][0]["reasons"], json!(["bm25"]), "Dev is not near Org:umbrella: {v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_superseded_fact_leaves_current_search_but_not_as_of_before_it() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let acme = api
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme", "valid_from": year(2020)}))
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let globex = api
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:globex", "valid_from": year(2024)}))
        .await;
    assert!(globex["recorded_at"].as_i64() > acme["recorded_at"].as_i64());
    let before = acme["recorded_at"].as_i64().unwrap();

    // Now: acme is superseded, so only globex is found.
    assert!(answer_ids(&search(&api, "acme", "").await).is_empty());
    assert_eq!(answer_ids(&search(&api, "sarah works", "").await), [globex["id"].as_str().unwrap()]);
    // As of before the supersession: acme, active as it was then; globex did not exist.
    let v = search(&api, "acme", &format!("&as_of={before}")).await;
    assert_eq!(answer_ids(&v), [acme["id"].as_str().unwrap()]);
    assert_eq!(v["answer_facts"][0]["status"], "active");
    assert_eq!(v["answer_facts"][0]["valid_until"], Value::Null);
    assert!(answer_ids(&search(&api, "globex", &format!("&as_of={before}")).await).is_empty());
    let v = search(&api, "sarah works", &format!("&as_of={before}")).await;
    assert_eq!(answer_ids(&v), [acme["id"].as_str().unwrap()]);
    // As of after it: globex only. POST takes as_of too.
    let after = globex["recorded_at"].as_i64().unwrap();
    let r = api.post("/api/search", &json!({"question": "acme globex", "as_of": after})).await;
    assert_eq!(answer_ids(r.expect(200)), [globex["id"].as_str().unwrap()]);
    // Before anything was written: nothing.
    assert!(answer_ids(&search(&api, "sarah", &format!("&as_of={}", before - 1)).await).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retracted_fact_disappears_and_candidates_need_asking() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let f = api.assert_fact(json!({"subject": "Person:omar", "predicate": "hobby", "object": "beekeeping"})).await;
    let id = f["id"].as_str().unwrap();
    assert_eq!(answer_ids(&search(&api, "beekeeping", "").await), [id]);
    tokio::time::sleep(Duration::from_millis(20)).await;
    api.delete(&format!("/api/facts/{id}")).await.expect(200);
    assert!(answer_ids(&search(&api, "beekeeping", "").await).is_empty());
    // It was there before the retraction.
    let v = search(&api, "beekeeping", &format!("&as_of={}", f["recorded_at"])).await;
    assert_eq!(answer_ids(&v), [id]);

    // A candidate (below the confidence threshold) only with include_candidates.
    let c = api
        .assert_fact(json!({"subject": "Person:omar", "predicate": "rumour", "object": "moving to Oslo", "confidence": 0.3}))
        .await;
    assert_eq!(c["status"], "candidate");
    assert!(answer_ids(&search(&api, "oslo", "").await).is_empty());
    let v = search(&api, "oslo", "&include_candidates=true").await;
    assert_eq!(answer_ids(&v), [c["id"].as_str().unwrap()]);
    assert_eq!(v["answer_facts"][0]["status"], "candidate");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_never_sees_another_tenants_facts() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let admin = Api::new(&server, Some(ADMIN));
    let secret = nas
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "codename", "object": "operation nightingale"}))
        .await;
    let mine = acme
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "codename", "object": "project kestrel"}))
        .await;

    assert_eq!(answer_ids(&search(&nas, "nightingale", "").await), [secret["id"].as_str().unwrap()]);
    // Same words, other tenant: nothing; the same subject only finds its own.
    assert!(answer_ids(&search(&acme, "nightingale", "").await).is_empty());
    assert_eq!(answer_ids(&search(&acme, "sarah codename", "").await), [mine["id"].as_str().unwrap()]);
    assert_eq!(answer_ids(&search(&nas, "sarah codename", "").await), [secret["id"].as_str().unwrap()]);
    let r = acme.post("/api/search", &json!({"question": "operation nightingale", "seeds": ["Person:sarah"]})).await;
    assert_eq!(answer_ids(r.expect(200)), [mine["id"].as_str().unwrap()], "graph proximity stays in the tenant");
    let v = search(&acme, "nightingale", &format!("&as_of={}", i64::MAX)).await;
    assert!(answer_ids(&v).is_empty());
    // Admins name the tenant.
    assert_eq!(answer_ids(&search(&admin, "nightingale", "&tenant=nas").await), [secret["id"].as_str().unwrap()]);
    assert!(answer_ids(&search(&admin, "nightingale", "&tenant=acme").await).is_empty());
    // Without a key the route hides itself.
    Api::new(&server, None).get("/api/search?question=nightingale").await.expect_hidden();
    Api::new(&server, None).post("/api/search", &json!({"question": "nightingale"})).await.expect_hidden();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_is_found_by_the_next_search() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    for i in 0..15 {
        let word = format!("zebra{i}x");
        let f = api.assert_fact(json!({"subject": format!("Animal:a{i}"), "predicate": "name", "object": word})).await;
        // No pause: the search waits for the index to reach the write.
        let v = search(&api, &word, "").await;
        assert_eq!(answer_ids(&v), [f["id"].as_str().unwrap()], "write {i}");
        if i % 3 == 0 {
            api.delete(&format!("/api/facts/{}", f["id"].as_str().unwrap())).await.expect(200);
            assert!(answer_ids(&search(&api, &word, "").await).is_empty(), "retraction {i}");
        }
    }
    // The lag gauge and the documents counter are exported.
    let metrics = api.get("/metrics").await;
    assert!(metrics.text.contains("tempora_search_index_lag_tx 0"), "{}", metrics.text);
    let docs = metrics
        .text
        .lines()
        .find_map(|l| l.strip_prefix("tempora_search_indexed_docs_total "))
        .expect("docs counter")
        .parse::<f64>()
        .unwrap();
    assert!(docs >= 20.0, "{docs}");
}

/// Writes `n` facts (some superseded, some retracted); the ids expected in
/// a search for "kiwi" (all current facts carry that word).
async fn write_fruit(api: &Api, n: usize) -> BTreeSet<String> {
    let mut expected = BTreeSet::new();
    let facts: Vec<Value> =
        (0..n).map(|i| json!({"subject": format!("Tree:t{i}"), "predicate": "fruit", "object": format!("kiwi number {i}")})).collect();
    let r = api.post("/api/facts/batch", &json!({"facts": facts})).await;
    for f in r.expect(201)["facts"].as_array().unwrap() {
        expected.insert(f["id"].as_str().unwrap().to_string());
    }
    // t0 is superseded by a new kiwi fact, t1 retracted.
    let old: Vec<String> = expected.iter().cloned().collect();
    let t0 = api.list("subject=Tree:t0").await;
    let t1 = api.list("subject=Tree:t1").await;
    let newer = api.assert_fact(json!({"subject": "Tree:t0", "predicate": "fruit", "object": "kiwi replanted"})).await;
    expected.remove(t0[0]["id"].as_str().unwrap());
    expected.insert(newer["id"].as_str().unwrap().to_string());
    api.delete(&format!("/api/facts/{}", t1[0]["id"].as_str().unwrap())).await.expect(200);
    expected.remove(t1[0]["id"].as_str().unwrap());
    assert_eq!(old.len(), n);
    expected
}

async fn kiwi_ids(api: &Api) -> BTreeSet<String> {
    answer_ids(&search(api, "kiwi", "&top_k=100").await).into_iter().collect()
}

/// Copies the (flat) index directory.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_index_catches_up_after_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let mut expected = write_fruit(&api, 40).await;
    server.stop_ok();
    // An index that will be behind the store.
    let old_index = tmp.path().join("old-index");
    copy_dir(&data.join("search"), &old_index);

    // Killed right after more writes: the indexer may not have committed them.
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let more = api.assert_fact(json!({"subject": "Tree:late", "predicate": "fruit", "object": "kiwi late"})).await;
    expected.insert(more["id"].as_str().unwrap().to_string());
    let t5 = api.list("subject=Tree:t5").await;
    api.delete(&format!("/api/facts/{}", t5[0]["id"].as_str().unwrap())).await.expect(200);
    expected.remove(t5[0]["id"].as_str().unwrap());
    server.kill9();

    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    assert_eq!(kiwi_ids(&api).await, expected);
    // And it keeps following new writes.
    let newest = api.assert_fact(json!({"subject": "Tree:newest", "predicate": "fruit", "object": "kiwi newest"})).await;
    expected.insert(newest["id"].as_str().unwrap().to_string());
    assert_eq!(kiwi_ids(&api).await, expected);
    server.kill9();

    // An index behind the store (its watermark older than the last writes):
    // the server catches up from the watermark, no rebuild.
    std::fs::remove_dir_all(data.join("search")).unwrap();
    copy_dir(&old_index, &data.join("search"));
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    assert_eq!(kiwi_ids(&api).await, expected);
    let log = server.stderr();
    assert!(!log.contains("building it from the change log") && !log.contains("unusable"), "{log}");
    server.kill9();

    // The index directory lost while stopped: rebuilt from the log at start.
    std::fs::remove_dir_all(data.join("search")).unwrap();
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    assert_eq!(kiwi_ids(&api).await, expected);
    assert!(server.stderr().contains("building it from the change log"), "{}", server.stderr());
    server.stop_ok();

    // An unreadable index is rebuilt too.
    std::fs::write(data.join("search").join("meta.json"), b"{ not json").unwrap();
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    assert_eq!(kiwi_ids(&api).await, expected);
    assert!(server.stderr().contains("search index unusable"), "{}", server.stderr());
    server.stop_ok();
}

fn reindex(data: &std::path::Path) -> std::process::Output {
    let mut cmd = tempora_command();
    cmd.arg("reindex").arg("--data-dir").arg(data);
    cmd.env("NO_COLOR", "1").env("RUST_BACKTRACE", "0").output().expect("tempora reindex runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn tempora_reindex_rebuilds_the_index() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    let expected = write_fruit(&api, 25).await;

    // Not while a server holds the data directory.
    let out = reindex(&data);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use"), "{err}");
    server.stop_ok();

    std::fs::remove_dir_all(data.join("search")).unwrap();
    let out = reindex(&data);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // 25 + the replanted t0: 26 facts (the superseded and the retracted one
    // are indexed too, as not live).
    assert!(text.contains("indexed 26 facts of 1 tenants"), "{text}");

    // The server finds a complete index: nothing to rebuild or catch up.
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    assert_eq!(kiwi_ids(&api).await, expected);
    let log = server.stderr();
    assert!(!log.contains("building it from the change log") && !log.contains("unusable"), "{log}");
    server.stop_ok();

    // A missing data directory is an error, not a new store.
    let out = reindex(&tmp.path().join("nowhere"));
    assert!(!out.status.success());
    assert!(!tmp.path().join("nowhere").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_searches_answer_400() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    for path in [
        "/api/search",
        "/api/search?question=",
        "/api/search?question=%20%20",
        "/api/search?question=x&top_k=0",
        "/api/search?question=x&top_k=101",
        "/api/search?question=x&top_k=ten",
        "/api/search?question=x&as_of=soon",
        "/api/search?question=x&include_candidates=maybe",
        "/api/search?question=x&question=y",
    ] {
        api.get(path).await.expect_error(400, "SchemaInvalid");
    }
    for body in [
        json!({}),
        json!({"question": ""}),
        json!({"question": " \n "}),
        json!({"question": null}),
        json!({"question": 42}),
        json!({"question": "x", "top_k": 0}),
        json!({"question": "x", "top_k": 1000}),
        json!({"question": "x", "top_k": null}),
        json!({"question": "x", "seeds": "Person:a"}),
        json!({"question": "x", "seeds": (0..17).map(|i| format!("P:{i}")).collect::<Vec<_>>()}),
        json!(["x"]),
    ] {
        api.post("/api/search", &body).await.expect_error(400, "SchemaInvalid");
    }
    let r = send(api.req(reqwest::Method::POST, "/api/search").body("question=x")).await;
    r.expect_error(400, "SchemaInvalid");
    // The bounds themselves are fine; unknown fields are ignored.
    api.get("/api/search?question=x&top_k=1").await.expect(200);
    api.get("/api/search?question=x&top_k=100").await.expect(200);
    api.post("/api/search", &json!({"question": "x", "top_k": 100, "whatever": 1})).await.expect(200);
}

/// 2024-01-01T00:00:00Z and a day, in unix ms.
const JAN_2024: i64 = 1_704_067_200_000;
const DAY: i64 = 86_400_000;

/// `said` facts, a `many` predicate: (speaker, text, days after 2024-01-01).
async fn say(api: &Api, lines: &[(&str, &str, i64)]) -> Vec<String> {
    api.put("/api/predicates/said", &json!({"cardinality": "many"})).await.expect(200);
    let facts: Vec<Value> = lines
        .iter()
        .map(|(who, text, day)| json!({"subject": who, "predicate": "said", "object": text, "valid_from": JAN_2024 + day * DAY}))
        .collect();
    let v = api.post("/api/facts/batch", &json!({"facts": facts})).await.expect(201).clone();
    v["facts"].as_array().unwrap().iter().map(|f| f["fact"]["id"].as_str().or(f["id"].as_str()).unwrap().to_string()).collect()
}

fn subjects(v: &Value) -> Vec<String> {
    v["answer_facts"].as_array().unwrap().iter().map(|f| f["subject"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_valid_time_range_ranks_the_facts_inside_it_first() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    // Dana does many things; the one in May is not the best word match.
    say(&api, &[
        ("Person:dana", "went hiking and hiking again in the hills, hiking is the best", 20),
        ("Person:dana", "went hiking in the Alps with friends", 70),
        ("Person:dana", "went to a pottery class", 130), // 2024-05-10
        ("Person:dana", "went hiking near the lake", 300),
    ])
    .await;
    let may = (JAN_2024 + 121 * DAY, JAN_2024 + 152 * DAY);
    let body = |signals: Option<Value>| {
        let mut b = json!({"question": "where did Dana go hiking", "valid_from": may.0, "valid_until": may.1, "top_k": 4});
        if let Some(s) = signals {
            b["signals"] = s;
        }
        b
    };
    let v = api.post("/api/search", &body(None)).await.expect(200).clone();
    assert_eq!(v["answer_facts"][0]["object"], "went to a pottery class", "{v}");
    assert!(v["matches"][0]["reasons"].as_array().unwrap().contains(&json!("time")), "{v}");
    assert_eq!(v["time"], json!({"from": may.0, "until": may.1, "source": "request"}), "{v}");
    // Without the interval (or with BM25 alone) the best word match leads.
    let v = api.post("/api/search", &json!({"question": "where did Dana go hiking", "top_k": 4})).await.expect(200).clone();
    assert_ne!(v["answer_facts"][0]["object"], "went to a pottery class", "{v}");
    // An open-ended range: everything from October on.
    let r = api.get(&format!("/api/search?question={}&valid_from={}", enc("Dana hiking"), JAN_2024 + 274 * DAY)).await;
    let v = r.expect(200);
    assert_eq!(v["answer_facts"][0]["object"], "went hiking near the lake", "{v}");
    assert_eq!(v["time"]["until"], Value::Null, "an open end: {v}");
    // Both ends open (the extremes count as open): every fact is in it.
    for body in [json!({"question": "Dana hiking", "valid_until": i64::MAX}), json!({"question": "Dana hiking", "valid_from": i64::MIN})] {
        let v = api.post("/api/search", &body).await.expect(200).clone();
        assert_eq!(v["answer_facts"].as_array().unwrap().len(), 4, "{v}");
        assert_eq!((&v["time"]["from"], &v["time"]["until"]), (&Value::Null, &Value::Null), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_naming_a_month_is_grounded_against_the_reference_time() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    say(&api, &[
        ("Person:dana", "I ran a half marathon, what a run", 10),
        ("Person:dana", "I started a pottery class", 130), // 2024-05-10
        ("Person:dana", "I ran along the river", 200),
        ("Person:sam", "I did a pottery class too", 300),
    ])
    .await;
    let reference = JAN_2024 + 340 * DAY; // 2024-12-06
    let ask = |q: &str, signals: Option<Value>| {
        let mut b = json!({"question": q, "reference_time": reference, "top_k": 3});
        if let Some(s) = signals {
            b["signals"] = s;
        }
        b
    };
    let v = api.post("/api/search", &ask("What did Dana do in May?", None)).await.expect(200).clone();
    assert_eq!(v["answer_facts"][0]["object"], "I started a pottery class", "{v}");
    assert_eq!(v["time"]["from"], json!(JAN_2024 + 121 * DAY), "{v}");
    assert_eq!(v["time"]["until"], json!(JAN_2024 + 152 * DAY), "{v}");
    assert_eq!(v["time"]["source"], "question", "{v}");
    assert!(v["matches"][0]["reasons"].as_array().unwrap().contains(&json!("time")), "{v}");
    // "may" and "2024" name the time: they are not searched for as words.
    assert!(!v["terms"].as_array().unwrap().contains(&json!("may")), "{v}");
    // Relative to the reference: eleven months before 2024-12-06 is January.
    let v = api.post("/api/search", &ask("What did Dana do eleven months ago?", None)).await.expect(200).clone();
    assert_eq!(v["answer_facts"][0]["object"], "I ran a half marathon, what a run", "{v}");
    // The time signal off: no grounding.
    let v = api.post("/api/search", &ask("What did Dana do in May?", Some(json!(["entity"])))).await.expect(200).clone();
    assert_eq!(v["time"], Value::Null, "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_named_persons_own_facts_rank_above_facts_that_mention_them() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    say(&api, &[
        ("Person:dana", "Nice one, Sam! Sam, you bake so well, Sam", 1),
        ("Person:dana", "Sam, what do you bake next, Sam?", 2),
        ("Person:dana", "Great bake, Sam!", 3),
        ("Person:sam", "I baked a loaf of sourdough this morning", 4),
        ("Person:sam", "my starter is finally bubbly", 5),
    ])
    .await;
    let q = json!({"question": "What does Sam bake?", "top_k": 3});
    let v = api.post("/api/search", &q).await.expect(200).clone();
    assert_eq!(v["answer_facts"][0]["object"], "I baked a loaf of sourdough this morning", "{v}");
    assert!(v["matches"][0]["reasons"].as_array().unwrap().contains(&json!("entity")), "{v}");
    // BM25 alone prefers the replies that repeat the name.
    let mut bare = q.clone();
    bare["signals"] = json!([]);
    let v = api.post("/api/search", &bare).await.expect(200).clone();
    assert_eq!(subjects(&v)[0], "Person:dana", "{v}");

    // A name fact finds its entity too, case-insensitively, first name included.
    api.post("/api/facts", &json!({"subject": "Person:p42", "predicate": "name", "object": "Robin Okafor"})).await.expect(201);
    say(&api, &[
        ("Person:p42", "I repaired the old bicycle", 6),
        ("Person:dana", "robin okafor repaired a bicycle? Robin, the bicycle!", 7),
    ])
    .await;
    for q in ["what did ROBIN OKAFOR repair", "what did robin repair"] {
        let v = api.post("/api/search", &json!({"question": q, "top_k": 4})).await.expect(200).clone();
        let at = |text: &str| objects(&v).iter().position(|o| o == text);
        let own = at("I repaired the old bicycle").unwrap_or_else(|| panic!("{q}: {v}"));
        assert!(at("robin okafor repaired a bicycle? Robin, the bicycle!").is_none_or(|m| own < m), "{q}: {v}");
        assert!(v["matches"][own]["reasons"].as_array().unwrap().contains(&json!("entity")), "{q}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn near_duplicates_make_room_for_distinct_mentions() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    say(&api, &[
        ("Person:sam", "tennis again today, I love playing tennis sport", 1),
        ("Person:sam", "tennis again this week, I love playing tennis sport", 2),
        ("Person:sam", "tennis again on sunday, I love playing tennis sport", 3),
        ("Person:sam", "tennis again tonight, I love playing tennis sport", 4),
        ("Person:sam", "I tried rock climbing, a new sport for me", 5),
        ("Person:sam", "first swimming lesson, what a sport", 6),
    ])
    .await;
    let q = |signals: Value| json!({"question": "which sport has Sam tried playing?", "top_k": 3, "signals": signals});
    let tops = |v: &Value| -> usize {
        objects(v).iter().filter(|o| o.as_str().unwrap().starts_with("tennis")).count()
    };
    let v = api.post("/api/search", &q(json!([]))).await.expect(200).clone();
    assert!(tops(&v) >= 2, "BM25 alone fills the top with tennis: {v}");
    let v = api.post("/api/search", &q(json!(["diverse"]))).await.expect(200).clone();
    assert_eq!(tops(&v), 1, "one tennis mention, then the distinct ones: {v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hit_brings_the_turns_around_it_when_asked() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    api.put("/api/predicates/said", &json!({"cardinality": "many"})).await.expect(200);
    let turns = [
        ("Person:sam", "guess what happened at the weekend"),
        ("Person:dana", "tell me!"),
        ("Person:sam", "I adopted a greyhound called Biscuit"),
        ("Person:dana", "oh wow, congratulations"),
        ("Person:sam", "thanks, he sleeps all day"),
    ];
    let facts: Vec<Value> = turns
        .iter()
        .enumerate()
        .map(|(i, (who, text))| json!({
            "subject": who, "predicate": "said", "object": text, "valid_from": JAN_2024 + i as i64 * 60_000,
            "properties": {"conversation": "c1", "turn": i}
        }))
        .collect();
    api.post("/api/facts/batch", &json!({"facts": facts})).await.expect(201);
    let v = api.post("/api/search", &json!({"question": "greyhound", "top_k": 1, "neighbours": 1})).await.expect(200).clone();
    assert_eq!(v["answer_facts"][0]["object"], "I adopted a greyhound called Biscuit", "{v}");
    let around: Vec<&str> =
        v["matches"][0]["neighbours"].as_array().unwrap().iter().map(|f| f["object"].as_str().unwrap()).collect();
    assert_eq!(around, ["tell me!", "oh wow, congratulations"], "{v}");
    let v = api.post("/api/search", &json!({"question": "greyhound", "top_k": 1, "neighbours": 2})).await.expect(200).clone();
    assert_eq!(v["matches"][0]["neighbours"].as_array().unwrap().len(), 4, "{v}");
    // Not asked: none.
    let v = api.post("/api/search", &json!({"question": "greyhound", "top_k": 1})).await.expect(200).clone();
    assert!(v["matches"][0].get("neighbours").is_none(), "{v}");
    // A context packet brings one turn each side by default, right after the hit.
    let v = api.post("/api/context", &json!({"goal": "greyhound Biscuit"})).await.expect(200).clone();
    let ranking = v["ranking"].as_array().unwrap();
    let hit = v["facts"].as_array().unwrap().iter().position(|f| f["object"] == "I adopted a greyhound called Biscuit").unwrap();
    let hit_id = &v["facts"][hit]["id"];
    let adjacent: Vec<&Value> = ranking.iter().filter(|r| r["origin"] == "adjacent").collect();
    assert_eq!(adjacent.len(), 2, "{v}");
    assert!(adjacent.iter().all(|r| &r["next_to"] == hit_id), "{v}");
    // Within the budget: a budget for the hit alone leaves them out.
    let tokens = ranking[hit]["tokens"].as_u64().unwrap();
    let v = api.post("/api/context", &json!({"goal": "greyhound Biscuit", "token_budget": tokens})).await.expect(200).clone();
    assert_eq!(v["facts"].as_array().unwrap().len(), 1, "{v}");
    let v = api.post("/api/context", &json!({"goal": "greyhound Biscuit", "neighbours": 0})).await.expect(200).clone();
    assert!(v["ranking"].as_array().unwrap().iter().all(|r| r["origin"] != "adjacent"), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_time_and_signal_parameters_answer_400() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    for path in [
        "/api/search?question=x&signals=time,magic",
        "/api/search?question=x&valid_from=10&valid_until=10",
        "/api/search?question=x&valid_from=yesterday",
        "/api/search?question=x&neighbours=6",
        "/api/search?question=x&neighbours=-1",
        "/api/search?question=x&reference_time=now",
    ] {
        api.get(path).await.expect_error(400, "SchemaInvalid");
    }
    for body in [
        json!({"question": "x", "signals": "time"}),
        json!({"question": "x", "signals": ["time", 3]}),
        json!({"question": "x", "valid_from": 20, "valid_until": 10}),
        json!({"question": "x", "valid_from": null}),
        json!({"question": "x", "neighbours": 9}),
    ] {
        api.post("/api/search", &body).await.expect_error(400, "SchemaInvalid");
    }
    api.post("/api/context", &json!({"goal": "x", "neighbours": 6})).await.expect_error(400, "SchemaInvalid");
    // Every signal by name, and none.
    api.get("/api/search?question=x&signals=bm25,graph,time,entity,diverse,vector").await.expect(200);
    api.get("/api/search?question=x&signals=").await.expect(200);
}
