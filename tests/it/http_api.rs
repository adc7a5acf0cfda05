//! The memory REST API over a real socket, in open mode: the bitemporal
//! worked example, reads, history, retraction, batches, predicates, filters,
//! pagination, the operational routes, the error envelope and idempotency.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

fn fact(subject: &str, predicate: &str, object: &str, valid_from: i64) -> Value {
    json!({"subject": subject, "predicate": predicate, "object": object, "valid_from": valid_from, "source": "test"})
}

#[tokio::test(flavor = "multi_thread")]
async fn worked_example_history_and_retraction() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    let acme = api.assert_fact(fact("Person:sarah", "works_at", "Org:acme", year(2020))).await;
    assert_eq!(acme["status"], "active");
    assert_eq!(acme["object"], "Org:acme");
    assert_eq!(acme["valid_from"], year(2020));
    assert_eq!(acme["valid_until"], Value::Null);
    assert_eq!(acme["superseded"], json!([]));
    // A later record time for the second write, so a time strictly between exists.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let globex = api.assert_fact(fact("Person:sarah", "works_at", "Org:globex", year(2024))).await;
    let (acme_id, globex_id) = (acme["id"].as_str().unwrap(), globex["id"].as_str().unwrap());
    assert_eq!(globex["status"], "active");
    assert_eq!(globex["superseded"], json!([acme_id]));
    assert!(globex["tx"].as_u64().unwrap() > acme["tx"].as_u64().unwrap());
    assert!(globex["recorded_at"].as_i64().unwrap() > acme["recorded_at"].as_i64().unwrap());

    // Now: globex is the active value.
    let now = api.list("subject=Person%3Asarah").await;
    assert_eq!(ids(&now), vec![globex_id]);
    // acme is superseded, closed at 2024.
    let all = api.list("subject=Person:sarah&status=all").await;
    assert_eq!(all.len(), 2);
    let acme_now = all.iter().find(|f| f["id"] == acme_id).unwrap();
    assert_eq!(acme_now["status"], "superseded");
    assert_eq!(acme_now["valid_until"], year(2024));
    assert_eq!(acme_now["superseded_by"], globex_id);

    // valid_at 2022 answers acme; 2025 answers globex.
    let at_2022 = api.list(&format!("subject=Person:sarah&predicate=works_at&valid_at={}", year(2022))).await;
    assert_eq!(ids(&at_2022), vec![acme_id]);
    assert_eq!(at_2022[0]["object"], "Org:acme");
    let at_2025 = api.list(&format!("subject=Person:sarah&valid_at={}", year(2025))).await;
    assert_eq!(ids(&at_2025), vec![globex_id]);

    // as_of between the writes: acme, active, open-ended; globex does not exist yet.
    let by_tx = api.list(&format!("subject=Person:sarah&as_of_tx={}", acme["tx"])).await;
    assert_eq!(ids(&by_tx), vec![acme_id]);
    assert_eq!(by_tx[0]["status"], "active");
    assert_eq!(by_tx[0]["valid_until"], Value::Null);
    for t in [acme["recorded_at"].as_i64().unwrap(), globex["recorded_at"].as_i64().unwrap() - 1] {
        let by_time = api.list(&format!("subject=Person:sarah&as_of={t}")).await;
        assert_eq!(ids(&by_time), vec![acme_id], "as_of={t}");
        assert_eq!(by_time[0]["status"], "active");
        assert_eq!(by_time[0]["valid_until"], Value::Null);
    }
    // Before the first write nothing existed.
    let before = api.list(&format!("subject=Person:sarah&as_of={}", acme["recorded_at"].as_i64().unwrap() - 1)).await;
    assert!(before.is_empty(), "{before:?}");
    // Both axes together: as of the first write, valid in 2025, acme still held.
    let both = api.list(&format!("subject=Person:sarah&as_of_tx={}&valid_at={}", acme["tx"], year(2025))).await;
    assert_eq!(ids(&both), vec![acme_id]);

    // GET one fact, now and as of the first write.
    let got = api.get(&format!("/api/facts/{acme_id}")).await;
    let got = got.expect(200);
    assert_eq!(got["status"], "superseded");
    assert_eq!(got["superseded_by"], globex_id);
    assert_eq!(got["tx"], globex["tx"]);
    assert_eq!(got["created_tx"], acme["tx"]);
    let old = api.get(&format!("/api/facts/{acme_id}?as_of_tx={}", acme["tx"])).await;
    assert_eq!(old.expect(200)["status"], "active");
    assert_eq!(old.json["valid_until"], Value::Null);
    let g = api.get(&format!("/api/facts/{globex_id}")).await;
    assert_eq!(g.expect(200)["supersedes"], json!([acme_id]));
    // globex did not exist as of the first write.
    api.get(&format!("/api/facts/{globex_id}?as_of_tx={}", acme["tx"])).await.expect_error(404, "NotFound");

    // History: every version, and the chain both ways.
    let h = api.get(&format!("/api/facts/{acme_id}/history")).await;
    let h = h.expect(200);
    assert_eq!(h["id"], acme_id);
    let versions = h["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{h}");
    assert_eq!(versions[0]["status"], "active");
    assert_eq!(versions[0]["tx"], acme["tx"]);
    assert_eq!(versions[0]["valid_until"], Value::Null);
    assert_eq!(versions[1]["status"], "superseded");
    assert_eq!(versions[1]["tx"], globex["tx"]);
    assert_eq!(versions[1]["valid_until"], year(2024));
    assert_eq!(h["predecessors"], json!([]));
    assert_eq!(h["successors"], json!([globex_id]));
    let gh = api.get(&format!("/api/facts/{globex_id}/history")).await;
    let gh = gh.expect(200);
    assert_eq!(gh["versions"].as_array().unwrap().len(), 1);
    assert_eq!(gh["predecessors"], json!([acme_id]));
    assert_eq!(gh["successors"], json!([]));

    // Retract globex: hidden unless asked for; acme is not revived.
    let r = api.delete(&format!("/api/facts/{globex_id}")).await;
    let r = r.expect(200).clone();
    assert_eq!(r["id"], globex_id);
    assert_eq!(r["status"], "retracted");
    assert!(r["tx"].as_u64().unwrap() > globex["tx"].as_u64().unwrap());
    assert!(api.list("subject=Person:sarah").await.is_empty());
    let with = api.list("subject=Person:sarah&include_retracted=true").await;
    assert_eq!(ids(&with), vec![globex_id]);
    assert_eq!(with[0]["status"], "retracted");
    let only = api.list("subject=Person:sarah&status=retracted").await;
    assert_eq!(ids(&only), vec![globex_id]);
    // Before the retraction it was active.
    let then = api.list(&format!("subject=Person:sarah&as_of_tx={}", globex["tx"])).await;
    assert_eq!(ids(&then), vec![globex_id]);
    let rh = api.get(&format!("/api/facts/{globex_id}/history")).await;
    let statuses: Vec<&Value> = rh.expect(200)["versions"].as_array().unwrap().iter().map(|v| &v["status"]).collect();
    assert_eq!(statuses, vec!["active", "retracted"]);
    assert_eq!(api.get(&format!("/api/facts/{globex_id}")).await.expect(200)["status"], "retracted");

    let s = api.stats().await;
    assert_eq!(s["facts"]["active"], 0);
    assert_eq!(s["facts"]["superseded"], 1);
    assert_eq!(s["facts"]["retracted"], 1);
    assert_eq!(s["facts"]["total"], 2);
    assert_eq!(s["tenant"], "default");
    assert_eq!(s["last_tx"], r["tx"]);
    server.stop_ok();
}

/// `status=all` is every status, retracted included; `include_retracted`
/// adds retracted facts to whatever statuses were asked for.
#[tokio::test(flavor = "multi_thread")]
async fn status_all_lists_every_status_retracted_included() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let acme = api.assert_fact(fact("Person:ann", "works_at", "Org:acme", year(2020))).await;
    let globex = api.assert_fact(fact("Person:ann", "works_at", "Org:globex", year(2024))).await;
    assert_eq!(globex["superseded"], json!([acme["id"]]));
    let gone = api.assert_fact(fact("Person:ann", "lives_in", "City:oslo", year(2020))).await;
    api.delete(&format!("/api/facts/{}", gone["id"].as_str().unwrap())).await.expect(200);
    let mut maybe = fact("Person:ann", "speaks", "Lang:fi", year(2020));
    maybe["confidence"] = json!(0.3);
    let maybe = api.assert_fact(maybe).await;
    assert_eq!(maybe["status"], "candidate");

    let statuses = |facts: &[Value]| {
        let mut by_id: Vec<(String, String)> = facts
            .iter()
            .map(|f| (f["id"].as_str().unwrap().to_string(), f["status"].as_str().unwrap().to_string()))
            .collect();
        by_id.sort();
        by_id
    };
    let expected = |pairs: &[(&Value, &str)]| {
        let mut v: Vec<(String, String)> =
            pairs.iter().map(|(f, s)| (f["id"].as_str().unwrap().to_string(), s.to_string())).collect();
        v.sort();
        v
    };
    let every = expected(&[(&acme, "superseded"), (&globex, "active"), (&gone, "retracted"), (&maybe, "candidate")]);
    for q in ["status=all", "status=any", "status=all&include_retracted=false", "status=all&include_retracted=true"] {
        assert_eq!(statuses(&api.list(&format!("subject=Person:ann&{q}")).await), every, "{q}");
    }
    // include_retracted adds retracted facts to the statuses asked for, and only those.
    assert_eq!(
        statuses(&api.list("subject=Person:ann&status=active&include_retracted=true").await),
        expected(&[(&globex, "active"), (&gone, "retracted")])
    );
    assert_eq!(
        statuses(&api.list("subject=Person:ann&status=candidate,superseded").await),
        expected(&[(&acme, "superseded"), (&maybe, "candidate")])
    );
    assert_eq!(statuses(&api.list("subject=Person:ann").await), expected(&[(&globex, "active")]));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn batch_is_one_transaction_all_or_nothing() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let before = api.stats().await;

    let r = api
        .post(
            "/api/facts/batch",
            &json!({"facts": [
                fact("Person:ann", "lives_in", "City:paris", year(2019)),
                fact("Person:bob", "lives_in", "City:rome", year(2019)),
                {"subject": "Person:ann", "predicate": "age", "object": 41},
            ]}),
        )
        .await;
    let b = r.expect(201).clone();
    let tx = b["tx"].as_u64().unwrap();
    let facts = b["facts"].as_array().unwrap();
    assert_eq!(facts.len(), 3);
    for f in facts {
        assert_eq!(f["tx"], tx, "every fact of a batch carries the batch's tx");
        assert_eq!(f["recorded_at"], b["recorded_at"]);
        assert_eq!(f["status"], "active");
    }
    let after = api.stats().await;
    assert_eq!(after["facts"]["total"].as_u64().unwrap(), before["facts"]["total"].as_u64().unwrap() + 3);
    assert_eq!(after["last_tx"], tx);

    // A bare array is accepted too.
    let r = api.post("/api/facts/batch", &json!([fact("Person:cy", "lives_in", "City:oslo", year(2018))])).await;
    assert_eq!(r.expect(201)["facts"].as_array().unwrap().len(), 1);
    let mid = api.stats().await;

    // One invalid fact: nothing of the batch is written, no tx consumed.
    let r = api
        .post(
            "/api/facts/batch",
            &json!({"facts": [
                fact("Person:dee", "lives_in", "City:lima", year(2019)),
                {"subject": "Person:dee", "predicate": "age", "object": 30, "confidence": 1.5},
            ]}),
        )
        .await;
    r.expect_error(400, "SchemaInvalid");
    let r = api
        .post("/api/facts/batch", &json!({"facts": [fact("Person:dee", "lives_in", "City:lima", year(2019)), {"subject": "", "predicate": "x"}]}))
        .await;
    r.expect_error(400, "SchemaInvalid");
    // A wrong shape anywhere in the batch, and an empty batch.
    api.post("/api/facts/batch", &json!({"facts": [fact("Person:dee", "p", "o", 0), {"subject": "Person:dee"}]}))
        .await
        .expect_error(400, "SchemaInvalid");
    api.post("/api/facts/batch", &json!({"facts": []})).await.expect_error(400, "SchemaInvalid");
    let end = api.stats().await;
    assert_eq!(end, mid, "a failed batch changed the store");
    assert!(api.list("subject=Person:dee&status=all&include_retracted=true").await.is_empty());
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn predicates_statuses_objects_and_pagination() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    // Predicates: default `one`, then strict rejects a conflicting assertion.
    let p = api.get("/api/predicates/employer").await;
    assert_eq!(p.expect(200).clone(), json!({"name": "employer", "cardinality": "one"}));
    let p = api.put("/api/predicates/employer", &json!({"cardinality": "strict"})).await;
    assert_eq!(p.expect(200).clone(), json!({"name": "employer", "cardinality": "strict"}));
    assert_eq!(api.get("/api/predicates/employer").await.expect(200)["cardinality"], "strict");
    api.put("/api/predicates/employer", &json!({"cardinality": "sometimes"})).await.expect_error(400, "SchemaInvalid");
    api.put("/api/predicates/employer", &json!({"card": "one"})).await.expect_error(400, "SchemaInvalid");

    let first = api.assert_fact(fact("Person:eve", "employer", "Org:acme", year(2020))).await;
    let before = api.stats().await;
    let r = api.post("/api/facts", &fact("Person:eve", "employer", "Org:globex", year(2021))).await;
    r.expect_error(400, "Conflict");
    assert_eq!(api.stats().await, before, "a rejected assertion wrote something");
    assert_eq!(ids(&api.list("subject=Person:eve").await), vec![first["id"].as_str().unwrap()]);
    // The same object over the interval is fine under strict.
    let again = api.assert_fact(fact("Person:eve", "employer", "Org:acme", year(2021))).await;
    assert_eq!(again["status"], "active");

    // `many` lets values coexist.
    api.put("/api/predicates/knows", &json!({"cardinality": "many"})).await.expect(200);
    api.assert_fact(fact("Person:eve", "knows", "Person:ann", year(2020))).await;
    api.assert_fact(fact("Person:eve", "knows", "Person:bob", year(2020))).await;
    assert_eq!(api.list("subject=Person:eve&predicate=knows").await.len(), 2);

    // Status filters: a low-confidence assertion is a candidate.
    let cand = api
        .assert_fact(json!({"subject": "Person:eve", "predicate": "nickname", "object": "evie", "confidence": 0.5}))
        .await;
    assert_eq!(cand["status"], "candidate");
    let active = api.list("subject=Person:eve").await;
    assert!(!ids(&active).contains(&cand["id"].as_str().unwrap().to_string()));
    let both = api.list("subject=Person:eve&status=active,candidate").await;
    assert!(ids(&both).contains(&cand["id"].as_str().unwrap().to_string()));
    assert_eq!(both.len(), active.len() + 1);
    for f in &both {
        assert!(f["status"] == "active" || f["status"] == "candidate", "{f}");
    }
    let only = api.list("subject=Person:eve&status=candidate").await;
    assert_eq!(ids(&only), vec![cand["id"].as_str().unwrap()]);
    api.get("/api/facts?status=bogus").await.expect_error(400, "SchemaInvalid");

    // Object filter: who points at Org:acme (across subjects).
    let other = api.assert_fact(fact("Person:zed", "employer", "Org:acme", year(2022))).await;
    api.assert_fact(fact("Person:yan", "employer", "Org:initech", year(2022))).await;
    let pointing = api.list("object=Org:acme").await;
    let pointing_ids: HashSet<String> = ids(&pointing).into_iter().collect();
    assert!(pointing_ids.contains(other["id"].as_str().unwrap()));
    assert!(pointing_ids.contains(again["id"].as_str().unwrap()));
    for f in &pointing {
        assert_eq!(f["object"], "Org:acme");
    }
    // JSON objects match by value.
    let n = api.assert_fact(json!({"subject": "Thing:t", "predicate": "count", "object": 42})).await;
    assert_eq!(ids(&api.list("object=42").await), vec![n["id"].as_str().unwrap()]);

    // Pagination: 25 facts in pages of 7 via X-Next-Cursor, each exactly once.
    let many: Vec<Value> = (0..25).map(|i| json!({"subject": "Page:p", "predicate": format!("p{i:02}"), "object": i})).collect();
    let b = api.post("/api/facts/batch", &json!({"facts": many})).await;
    let written: HashSet<String> = ids(b.expect(201)["facts"].as_array().unwrap()).into_iter().collect();
    assert_eq!(written.len(), 25);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let q = match &cursor {
            Some(c) => format!("/api/facts?subject=Page:p&limit=7&cursor={}", enc(c)),
            None => "/api/facts?subject=Page:p&limit=7".to_string(),
        };
        let r = api.get(&q).await;
        let page = r.expect(200).as_array().unwrap().clone();
        assert!(page.len() <= 7);
        pages += 1;
        seen.extend(ids(&page));
        match r.header("x-next-cursor") {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(seen.len(), 25, "a fact was returned twice or missed: {seen:?}");
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), written);
    assert!(pages >= 4);
    // A cursor of another query is refused.
    if let Some(c) = api.get("/api/facts?subject=Page:p&limit=3").await.header("x-next-cursor").map(String::from) {
        api.get(&format!("/api/facts?subject=Person:eve&cursor={}", enc(&c))).await.expect_error(400, "SchemaInvalid");
    } else {
        panic!("no cursor on a partial page");
    }
    api.get("/api/facts?cursor=garbage").await.expect_error(400, "SchemaInvalid");

    // Reads longer than the inline budget (64 index entries) finish on the
    // blocking pool with the same answer: 150 facts, whole and in two pages.
    let long: Vec<Value> = (0..150).map(|i| json!({"subject": "Page:long", "predicate": format!("p{i:03}"), "object": i})).collect();
    api.post("/api/facts/batch", &json!({"facts": long})).await.expect(201);
    assert_eq!(api.list("subject=Page:long&limit=1000").await.len(), 150);
    let first = api.get("/api/facts?subject=Page:long&limit=100").await;
    assert_eq!(first.expect(200).as_array().unwrap().len(), 100);
    let c = first.header("x-next-cursor").expect("a cursor after 100 of 150").to_string();
    let rest = api.get(&format!("/api/facts?subject=Page:long&limit=100&cursor={}", enc(&c))).await;
    assert_eq!(rest.expect(200).as_array().unwrap().len(), 50);
    assert!(api.list("subject=Page:long&valid_at=0").await.is_empty(), "a filter that matches none of 150");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn operational_routes() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);

    assert_eq!(api.get("/api/health").await.expect(200).clone(), json!({"ok": true}));
    assert_eq!(api.get("/healthz").await.expect(200).clone(), json!({"ok": true}));
    assert_eq!(api.get("/livez").await.expect(200).clone(), json!({"ok": true}));
    let ready = api.get("/readyz").await;
    assert_eq!(ready.expect(200)["ready"], true);
    assert_eq!(ready.json["last_tx"], 0);

    let empty = api.stats().await;
    assert_eq!(empty["facts"]["total"], 0);
    assert_eq!(empty["tenant"], "default");
    assert!(empty["version"].is_string());
    let f = api.assert_fact(fact("Person:ops", "role", "Role:sre", year(2020))).await;
    let s = api.stats().await;
    assert_eq!(s["facts"]["active"], 1);
    assert_eq!(s["facts"]["total"], 1);
    assert_eq!(s["entities"], 1);
    assert_eq!(s["predicates"], 1);
    assert_eq!(s["tenants"], 1);
    assert_eq!(s["last_tx"], f["tx"]);
    assert_eq!(s["last_recorded_at"], f["recorded_at"]);
    assert_eq!(api.get("/readyz").await.json["last_tx"], f["tx"]);

    let m = api.get("/metrics").await;
    m.expect(200);
    assert!(m.header("content-type").unwrap().starts_with("text/plain"), "{:?}", m.headers);
    assert!(m.text.contains("tempora_http_requests_total"), "{}", m.text);
    assert!(m.text.contains("route=\"/api/facts\""), "requests are labelled by route template: {}", m.text);
    assert!(!m.text.contains(f["id"].as_str().unwrap()), "a fact id leaked into metric labels");
    let gauge = |name: &str, kind: &str| -> f64 {
        let prefix = format!("{name}{{kind=\"{kind}\"}} ");
        let line = m.text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix}: {}", m.text));
        line[prefix.len()..].parse().unwrap()
    };
    // The server runs on jemalloc and reports its figures: what it holds,
    // and what the allocator keeps resident for it (never less).
    let heap = |kind: &str| gauge("tempora_heap_bytes", kind);
    assert!(heap("allocated") > 1e6, "a running server holds more than a megabyte");
    assert!(heap("resident") >= heap("allocated"));
    // The storage cache (redb, the default backend): filling, within its
    // bound on memory (256 MiB unless set).
    // A PostgreSQL store has no cache of its own (the database's is its own).
    if !crate::common::on_postgres() {
        let cache = |kind: &str| gauge("tempora_storage_cache_bytes", kind);
        assert_eq!(cache("capacity"), (256u64 << 20) as f64);
        assert!(cache("used") > 0.0 && cache("used") <= cache("capacity"), "{}", m.text);
    }
    // Prometheus text: every non-comment line is `name{labels} value`.
    for line in m.text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok() || value == "+Inf" || value == "NaN", "bad sample line {line:?}");
    }

    let o = api.get("/openapi.json").await;
    let doc = o.expect(200);
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with('3')), "{}", o.text);
    for p in ["/api/facts", "/api/stats", "/api/health", "/api/stream", "/api/session"] {
        assert!(doc["paths"].get(p).is_some(), "openapi.json lacks {p}");
    }

    // Open mode: a session is scope `open`.
    let s = api.post("/api/session", &json!({"key": "anything-at-all"})).await;
    assert_eq!(s.expect(200)["scope"], "open");
    let bye = api.delete("/api/session").await;
    bye.expect(200);
    assert!(bye.header("set-cookie").unwrap().contains("Max-Age=0"));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_answer_with_the_envelope() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let raw = |m: Method, p: &str| api.req(m, p);

    // Bad JSON, wrong content type, missing fields, wrong types.
    let bad_json = send(raw(Method::POST, "/api/facts").header("content-type", "application/json").body("{not json")).await;
    bad_json.expect_error(400, "SchemaInvalid");
    let trailing = send(
        raw(Method::POST, "/api/facts").header("content-type", "application/json").body(r#"{"subject":"A:a","predicate":"p"} x"#),
    )
    .await;
    trailing.expect_error(400, "SchemaInvalid");
    let text = send(raw(Method::POST, "/api/facts").header("content-type", "text/plain").body(r#"{"subject":"A:a","predicate":"p"}"#)).await;
    text.expect_error(400, "SchemaInvalid");
    let none = send(raw(Method::POST, "/api/facts").body(r#"{"subject":"A:a","predicate":"p"}"#)).await;
    none.expect_error(400, "SchemaInvalid");
    let missing = api.post("/api/facts", &json!({"subject": "A:a", "object": 1})).await;
    missing.expect_error(400, "SchemaInvalid");
    assert!(missing.json["error"]["message"].as_str().unwrap().contains("predicate"), "{}", missing.text);
    let wrong = api.post("/api/facts", &json!({"subject": "A:a", "predicate": "p", "confidence": "high"})).await;
    wrong.expect_error(400, "SchemaInvalid");
    assert!(wrong.json["error"]["message"].as_str().unwrap().contains("confidence"), "{}", wrong.text);
    api.post("/api/facts", &json!({"subject": 7, "predicate": "p"})).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts", &json!({"subject": "A:a", "predicate": "p", "valid_from": "2020"})).await.expect_error(400, "SchemaInvalid");
    // A JSON array is not an object, even one that lists the fields in order.
    api.post("/api/facts", &json!(["Person:a", "likes", "x"])).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts/batch", &json!([["Person:a", "likes", "x"]])).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts/batch", &json!({"facts": [["Person:a", "likes", "x"]]})).await.expect_error(400, "SchemaInvalid");
    api.put("/api/predicates/p", &json!(["many"])).await.expect_error(400, "SchemaInvalid");
    api.post("/api/session", &json!(["some-key-1"])).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts", &json!("Person:a likes x")).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts", &Value::Null).await.expect_error(400, "SchemaInvalid");
    let empty = send(raw(Method::POST, "/api/facts").header("content-type", "application/json")).await;
    empty.expect_error(400, "SchemaInvalid");
    // Limits of the engine: names, depth.
    api.post("/api/facts", &json!({"subject": "A:a", "predicate": "p".repeat(300)})).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts", &json!({"subject": "A:\u{7}", "predicate": "p"})).await.expect_error(400, "SchemaInvalid");
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    api.post("/api/facts", &json!({"subject": "A:a", "predicate": "p", "object": deep})).await.expect_error(400, "SchemaInvalid");
    let very_deep = format!(r#"{{"subject":"A:a","predicate":"p","object":{}1{}}}"#, "[".repeat(5000), "]".repeat(5000));
    send(raw(Method::POST, "/api/facts").header("content-type", "application/json").body(very_deep))
        .await
        .expect_error(400, "SchemaInvalid");
    api.post("/api/facts", &json!({"subject": "A:a", "predicate": "p", "confidence": -0.1})).await.expect_error(400, "SchemaInvalid");
    api.post("/api/facts", &json!({"subject": "A:a", "predicate": "p", "valid_from": 10, "valid_until": 5}))
        .await
        .expect_error(400, "SchemaInvalid");
    api.post("/api/session", &json!({})).await.expect_error(400, "SchemaInvalid");
    api.put("/api/predicates/p", &json!({"cardinality": 1})).await.expect_error(400, "SchemaInvalid");

    // Bad query values.
    for q in [
        "as_of=abc",
        "as_of_tx=abc",
        "as_of_tx=-1",
        "as_of=1&as_of_tx=1",
        "valid_at=yesterday",
        "limit=ten",
        "include_retracted=maybe",
        "subject=A:a&subject=B:b",
    ] {
        api.get(&format!("/api/facts?{q}")).await.expect_error(400, "SchemaInvalid");
    }
    let some_id = "0190a5d2-0000-7000-8000-000000000000";
    api.get(&format!("/api/facts/{some_id}?as_of=abc")).await.expect_error(400, "SchemaInvalid");
    let r = send(raw(Method::GET, "/api/stream").header("last-event-id", "not-a-tx")).await;
    r.expect_error(400, "SchemaInvalid");
    send(raw(Method::POST, "/api/facts").header("idempotency-key", "k".repeat(300)).json(&fact("A:a", "p", "o", 0)))
        .await
        .expect_error(400, "SchemaInvalid");

    // Unknown ids and routes: 404 NotFound.
    api.get(&format!("/api/facts/{some_id}")).await.expect_hidden();
    api.get(&format!("/api/facts/{some_id}/history")).await.expect_hidden();
    api.delete(&format!("/api/facts/{some_id}")).await.expect_hidden();
    api.get("/api/facts/not-a-uuid").await.expect_hidden();
    api.get("/api/nope").await.expect_hidden();
    api.get("/nope").await.expect_hidden();
    api.post("/api/facts/x/y/z", &json!({})).await.expect_hidden();

    // Wrong methods: 405 with the envelope.
    send(raw(Method::PUT, "/api/facts").json(&json!({}))).await.expect_error(405, "MethodNotAllowed");
    api.delete("/api/stats").await.expect_error(405, "MethodNotAllowed");
    api.post("/api/health", &json!({})).await.expect_error(405, "MethodNotAllowed");
    api.get("/api/facts/batch").await.expect_error(405, "MethodNotAllowed");
    send(raw(Method::PATCH, &format!("/api/facts/{some_id}"))).await.expect_error(405, "MethodNotAllowed");
    api.post("/api/stream", &json!({})).await.expect_error(405, "MethodNotAllowed");
    api.get("/api/session").await.expect_error(405, "MethodNotAllowed");
    api.delete("/api/predicates/p").await.expect_error(405, "MethodNotAllowed");

    // Nothing of the above wrote anything, and the server is still fine.
    let s = api.stats().await;
    assert_eq!(s["facts"]["total"], 0, "{s}");
    assert_eq!(s["last_tx"], 0);
    api.assert_fact(fact("A:a", "p", "o", 0)).await;
    // JSON media types with parameters or a +json suffix are JSON.
    let r = send(
        raw(Method::POST, "/api/facts")
            .header("content-type", "application/json; charset=utf-8")
            .body(serde_json::to_vec(&fact("A:b", "p", "o", 0)).unwrap()),
    )
    .await;
    r.expect(201);
    let r = send(
        raw(Method::POST, "/api/facts")
            .header("content-type", "application/merge-patch+json")
            .body(serde_json::to_vec(&fact("A:c", "p", "o", 0)).unwrap()),
    )
    .await;
    r.expect(201);
    assert_eq!(api.stats().await["facts"]["total"], 3);
    // Non-ASCII names are kept and found again.
    let u = api.assert_fact(json!({"subject": "Person:zoë", "predicate": "名前", "object": "✓"})).await;
    assert_eq!(u["subject"], "Person:zoë");
    assert_eq!(ids(&api.list(&format!("subject={}", enc("Person:zoë"))).await), vec![u["id"].as_str().unwrap()]);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn body_over_the_limit_is_413() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_BODY_BYTES", "1024")]);
    let api = Api::new(&server, None);
    let big = json!({"subject": "A:a", "predicate": "p", "object": "x".repeat(2000)});
    assert!(serde_json::to_vec(&big).unwrap().len() > 2000);
    let r = api.post("/api/facts", &big).await;
    r.expect_error(413, "PayloadTooLarge");
    // The unread rest of the body makes the connection unusable; the server says so.
    assert_eq!(r.header("connection"), Some("close"));
    api.post("/api/facts/batch", &json!({"facts": [big]})).await.expect_error(413, "PayloadTooLarge");
    // Without a Content-Length (chunked), too.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        vec![Ok(br#"{"subject":"A:a","predicate":"p","object":""#.to_vec()), Ok(vec![b'y'; 2000]), Ok(br#""}"#.to_vec())];
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    send(api.req(Method::POST, "/api/facts").header("content-type", "application/json").body(body))
        .await
        .expect_error(413, "PayloadTooLarge");
    // Under the limit works.
    let small = api.assert_fact(json!({"subject": "A:a", "predicate": "p", "object": "x".repeat(500)})).await;
    assert_eq!(small["status"], "active");
    assert_eq!(api.stats().await["facts"]["total"], 1);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotency_key_replays_and_survives_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let post = |key: &str, body: Value| {
        let api = api.clone();
        let key = key.to_string();
        async move { send(api.req(Method::POST, "/api/facts").header("Idempotency-Key", key).json(&body)).await }
    };

    let first = post("order-1", fact("Person:ida", "likes", "Food:tea", year(2020))).await;
    first.expect(201);
    assert_eq!(first.header("idempotency-replayed"), None);
    let second = post("order-1", fact("Person:ida", "likes", "Food:tea", year(2020))).await;
    second.expect(201);
    assert_eq!(second.header("idempotency-replayed"), Some("true"));
    assert_eq!(second.text, first.text, "the replay is verbatim");
    // Even a different body under the same key replays the first answer.
    let third = post("order-1", fact("Person:ida", "likes", "Food:coffee", year(2021))).await;
    assert_eq!(third.header("idempotency-replayed"), Some("true"));
    assert_eq!(third.text, first.text);
    let s = api.stats().await;
    assert_eq!(s["facts"]["total"], 1, "a replay wrote again: {s}");
    assert_eq!(s["last_tx"], first.json["tx"]);

    // Another key writes; the batch route has its own key space.
    let other = post("order-2", fact("Person:ida", "likes", "Food:cake", year(2020))).await;
    other.expect(201);
    assert_eq!(other.header("idempotency-replayed"), None);
    let batch = || {
        send(
            api.req(Method::POST, "/api/facts/batch")
                .header("Idempotency-Key", "order-1")
                .json(&json!([fact("Person:joe", "likes", "Food:tea", year(2020))])),
        )
    };
    let b1 = batch().await;
    b1.expect(201);
    assert_eq!(b1.header("idempotency-replayed"), None);
    let b2 = batch().await;
    assert_eq!(b2.header("idempotency-replayed"), Some("true"));
    assert_eq!(b2.text, b1.text);

    // A request error is stored and replayed too, and wrote nothing.
    let bad = fact("Person:kim", "likes", "Food:tea", 0);
    let mut bad_body = bad.clone();
    bad_body["confidence"] = json!(7);
    let e1 = post("order-bad", bad_body.clone()).await;
    e1.expect_error(400, "SchemaInvalid");
    let e2 = post("order-bad", bad).await;
    e2.expect_error(400, "SchemaInvalid");
    assert_eq!(e2.header("idempotency-replayed"), Some("true"));
    assert_eq!(e2.text, e1.text);

    // Concurrent requests under one new key: one write, every answer the same.
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move {
                send(
                    api.req(Method::POST, "/api/facts")
                        .header("Idempotency-Key", "race")
                        .json(&fact("Person:race", "likes", &format!("Food:f{i}"), year(2020))),
                )
                .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for r in racers {
        answers.push(r.await.unwrap());
    }
    let fresh_answers: Vec<&Resp> = answers.iter().filter(|r| r.header("idempotency-replayed").is_none()).collect();
    assert_eq!(fresh_answers.len(), 1, "more than one request under one key wrote");
    for a in &answers {
        a.expect(201);
        assert_eq!(a.text, fresh_answers[0].text);
    }
    assert_eq!(api.list("subject=Person:race&status=all").await.len(), 1);
    let before_restart = api.stats().await;
    assert_eq!(before_restart["facts"]["total"], 4);

    // Restart on the same data dir: replays survive.
    server.stop_ok();
    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let again = send(
        api.req(Method::POST, "/api/facts")
            .header("Idempotency-Key", "order-1")
            .json(&fact("Person:ida", "likes", "Food:tea", year(2020))),
    )
    .await;
    again.expect(201);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.text, first.text);
    let b3 = send(
        api.req(Method::POST, "/api/facts/batch")
            .header("Idempotency-Key", "order-1")
            .json(&json!([fact("Person:joe", "likes", "Food:tea", year(2020))])),
    )
    .await;
    assert_eq!(b3.header("idempotency-replayed"), Some("true"));
    assert_eq!(b3.text, b1.text);
    let after = api.stats().await;
    assert_eq!(after["facts"], before_restart["facts"], "a replay after restart wrote again");
    assert_eq!(after["last_tx"], before_restart["last_tx"]);
    server.stop_ok();
}
