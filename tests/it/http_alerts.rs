//! Alerts over a real socket: every rule (confidence, freshness, drift,
//! cost) fires on real data, does not fire again while its condition holds,
//! and resolves when it clears; acking supersedes `open` with `acked` and
//! both stay in the fact history; rules are per tenant and checked; tenants
//! never see or ack each other's alerts; the background task evaluates by
//! itself.

use crate::common::fake_llm::FakeLlm;
use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// No background evaluation: the tests call POST /api/alerts/evaluate.
const MANUAL: (&str, &str) = ("TEMPORA_MONITOR_INTERVAL_SECS", "0");

fn env(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = keyed();
    v.push(MANUAL);
    v.extend_from_slice(extra);
    v
}

async fn put_rules(api: &Api, rules: Value) -> Value {
    api.put("/api/alerts/rules", &rules).await.expect(200).clone()
}

async fn evaluate(api: &Api) -> Value {
    let r = api.post("/api/alerts/evaluate", &json!({})).await;
    r.expect(200).clone()
}

async fn alerts(api: &Api, query: &str) -> Vec<Value> {
    api.get(&format!("/api/alerts{query}")).await.expect(200).as_array().expect("a list").clone()
}

fn check<'a>(eval: &'a Value, rule: &str) -> &'a Value {
    eval["checks"].as_array().unwrap().iter().find(|c| c["rule"] == rule).unwrap_or_else(|| panic!("no {rule} check in {eval}"))
}

async fn fact(api: &Api, subject: &str, predicate: &str, object: Value, confidence: f64) -> Value {
    api.assert_fact(json!({"subject": subject, "predicate": predicate, "object": object, "confidence": confidence})).await
}

/// Only the rule under test.
fn only(rule: &str, settings: Value) -> Value {
    let mut r = json!({
        "confidence": {"enabled": false},
        "freshness": {"enabled": false},
        "drift": {"enabled": false},
        "cost": {"enabled": false},
    });
    r[rule] = settings;
    r[rule]["enabled"] = json!(true);
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn confidence_fires_once_acks_with_history_and_resolves() {
    let (_tmp, server) = fresh(&env(&[]));
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    put_rules(&nas, only("confidence", json!({"max_share": 0.5, "min_facts": 4}))).await;

    for i in 0..2 {
        fact(&nas, &format!("Person:p{i}"), "role", json!("engineer"), 1.0).await;
    }
    for i in 0..3 {
        fact(&nas, &format!("Person:p{i}"), "rumor", json!(format!("rumor {i}")), 0.3).await;
    }
    let e = evaluate(&nas).await;
    assert_eq!(e["fired"].as_array().unwrap().len(), 1, "{e}");
    let a = &e["fired"][0];
    assert_eq!((a["rule"].as_str(), a["key"].as_str(), a["state"].as_str(), a["object"].as_str()), (Some("confidence"), Some("candidates"), Some("open"), Some("open")), "{a}");
    assert_eq!(a["value"], json!(0.6));
    assert_eq!(a["limit"], json!(0.5));
    let id = a["id"].as_str().unwrap().to_string();
    assert_eq!(a["subject"], format!("Alert:{id}"));
    let open_fact = a["fact_id"].as_str().unwrap().to_string();

    // The alert is facts of the tenant.
    let state = nas.list(&format!("subject={}&predicate=alert.state", enc(&format!("Alert:{id}")))).await;
    assert_eq!((state.len(), state[0]["object"].as_str(), state[0]["id"].as_str()), (1, Some("open"), Some(open_fact.as_str())));

    // No refiring while the condition holds; the alert facts themselves do
    // not count as live facts of the tenant.
    let e = evaluate(&nas).await;
    assert!(e["fired"].as_array().unwrap().is_empty(), "{e}");
    assert_eq!(e["unchanged"][0]["id"], json!(id));
    assert_eq!(check(&e, "confidence")["value"], json!(0.6), "{e}");
    assert_eq!(e["tx"], Value::Null, "nothing written");
    let listed = alerts(&nas, "").await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], json!(id));

    // Another tenant neither sees nor acks it; no key is the 404 answer.
    assert!(alerts(&acme, "").await.is_empty());
    assert!(alerts(&acme, "?state=all").await.is_empty());
    acme.post(&format!("/api/alerts/{id}/ack"), &json!({})).await.expect_hidden();
    Api::new(&server, None).get("/api/alerts").await.expect_hidden();
    Api::new(&server, None).post(&format!("/api/alerts/{id}/ack"), &json!({})).await.expect_hidden();
    nas.post(&format!("/api/alerts/{}/ack", uuid_like()), &json!({})).await.expect_hidden();
    nas.post("/api/alerts/not-an-id/ack", &json!({})).await.expect_hidden();
    nas.get("/api/alerts?state=bogus").await.expect_error(400, "SchemaInvalid");

    // Ack: `acked` supersedes `open`; the open state stays in history.
    let acked = nas.post(&format!("/api/alerts/Alert:{id}/ack"), &json!({})).await.expect(200).clone();
    assert_eq!((acked["state"].as_str(), acked["object"].as_str(), acked["id"].as_str()), (Some("acked"), Some("acked"), Some(id.as_str())));
    assert!(acked["acked_at"].as_i64().is_some(), "{acked}");
    let acked_fact = acked["fact_id"].as_str().unwrap().to_string();
    assert_ne!(acked_fact, open_fact);
    let h = nas.get(&format!("/api/facts/{open_fact}/history")).await.expect(200).clone();
    let last = h["versions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["status"].as_str(), last["superseded_by"].as_str()), (Some("superseded"), Some(acked_fact.as_str())), "{h}");
    assert_eq!(h["successors"], json!([acked_fact]));
    let states: Vec<Value> = nas
        .list(&format!("subject={}&predicate=alert.state&status=all", enc(&format!("Alert:{id}"))))
        .await
        .iter()
        .map(|f| json!([f["object"], f["status"]]))
        .collect();
    assert_eq!(states.len(), 2, "{states:?}");
    assert!(states.contains(&json!(["open", "superseded"])) && states.contains(&json!(["acked", "active"])), "{states:?}");
    // as_of before the ack: still open.
    let before = acked["tx"].as_u64().unwrap() - 1;
    let then = nas.list(&format!("subject={}&predicate=alert.state&as_of_tx={before}", enc(&format!("Alert:{id}")))).await;
    assert_eq!(then[0]["object"], "open");

    // Acking again answers the alert as it is and writes nothing.
    let tx_before = nas.stats().await["last_tx"].clone();
    let again = nas.post(&format!("/api/alerts/{id}/ack"), &json!({})).await.expect(200).clone();
    assert_eq!((again["state"].as_str(), again["fact_id"].as_str()), (Some("acked"), Some(acked_fact.as_str())));
    assert_eq!(nas.stats().await["last_tx"], tx_before);
    assert_eq!(alerts(&nas, "?state=acked").await.len(), 1);
    assert!(alerts(&nas, "?state=open").await.is_empty());

    // Still firing: an acked alert is not fired again either.
    assert!(evaluate(&nas).await["fired"].as_array().unwrap().is_empty());

    // The condition clears: resolved, and gone from the default listing.
    for i in 0..4 {
        fact(&nas, &format!("Person:q{i}"), "role", json!("analyst"), 1.0).await;
    }
    let e = evaluate(&nas).await;
    assert_eq!(check(&e, "confidence")["value"], json!(0.3333), "3 candidates of 9 live facts: {e}");
    assert_eq!(e["resolved"].as_array().unwrap().len(), 1, "{e}");
    assert_eq!(e["resolved"][0]["id"], json!(id));
    assert_eq!(e["resolved"][0]["state"], "resolved");
    assert!(alerts(&nas, "").await.is_empty());
    let resolved = alerts(&nas, "?state=resolved").await;
    assert_eq!((resolved.len(), resolved[0]["state"].as_str()), (1, Some("resolved")));
    assert!(resolved[0]["resolved_at"].as_i64().is_some() && resolved[0]["acked_at"].as_i64().is_some());
    nas.post(&format!("/api/alerts/{id}/ack"), &json!({})).await.expect_error(400, "Conflict");
    assert!(evaluate(&nas).await["resolved"].as_array().unwrap().is_empty(), "resolved once");

    // It holds again: a new alert.
    for i in 0..6 {
        fact(&nas, &format!("Person:r{i}"), "rumor", json!("maybe"), 0.2).await;
    }
    let e = evaluate(&nas).await;
    assert_eq!(e["fired"].as_array().unwrap().len(), 1, "{e}");
    assert_ne!(e["fired"][0]["id"], json!(id));
    assert_eq!(alerts(&nas, "?state=all").await.len(), 2);
    server.stop_ok();
}

fn uuid_like() -> &'static str {
    "0190d6a4-0000-7000-8000-000000000000"
}

/// The freshness TTL of the test: long enough for the writes and an
/// evaluation to finish within it on a slow machine.
const TTL: u64 = 1500;

#[tokio::test(flavor = "multi_thread")]
async fn freshness_fires_per_predicate_and_resolves_when_confirmed() {
    let (_tmp, server) = fresh(&env(&[]));
    let nas = Api::new(&server, Some(NAS_KEY));
    put_rules(&nas, only("freshness", json!({"ttl_ms": {"price": TTL, "stock": 3_600_000}}))).await;
    for i in 0..3 {
        fact(&nas, &format!("Product:{i}"), "price", json!(10 + i), 1.0).await;
        fact(&nas, &format!("Product:{i}"), "stock", json!(5), 1.0).await;
    }
    let e = evaluate(&nas).await;
    assert!(e["fired"].as_array().unwrap().is_empty(), "fresh facts: {e}");
    tokio::time::sleep(Duration::from_millis(TTL + 300)).await;
    let e = evaluate(&nas).await;
    let fired = e["fired"].as_array().unwrap();
    assert_eq!(fired.len(), 1, "only price has a TTL that passed: {e}");
    assert_eq!((fired[0]["rule"].as_str(), fired[0]["key"].as_str(), fired[0]["value"].as_u64(), fired[0]["limit"].as_u64()), (Some("freshness"), Some("price"), Some(3), Some(TTL)));
    assert!(fired[0]["message"].as_str().unwrap().contains("price"), "{e}");
    let stock = e["checks"].as_array().unwrap().iter().find(|c| c["key"] == "stock").unwrap();
    assert_eq!((stock["firing"].as_bool(), stock["value"].as_u64()), (Some(false), Some(0)));
    assert!(evaluate(&nas).await["fired"].as_array().unwrap().is_empty(), "no refiring");

    // Confirming two of three prices is not enough; the third clears it.
    fact(&nas, "Product:0", "price", json!(10), 1.0).await;
    fact(&nas, "Product:1", "price", json!(99), 1.0).await;
    let e = evaluate(&nas).await;
    assert!(e["resolved"].as_array().unwrap().is_empty(), "{e}");
    assert_eq!(e["unchanged"][0]["key"], "price");
    fact(&nas, "Product:2", "price", json!(12), 1.0).await;
    let e = evaluate(&nas).await;
    assert_eq!(e["resolved"].as_array().unwrap().len(), 1, "{e}");
    assert_eq!(check(&e, "freshness")["value"], json!(0));

    // A predicate dropped from the rules resolves its alert too.
    tokio::time::sleep(Duration::from_millis(TTL + 300)).await;
    assert_eq!(evaluate(&nas).await["fired"].as_array().unwrap().len(), 1);
    put_rules(&nas, only("freshness", json!({"ttl_ms": {"stock": 3_600_000}}))).await;
    assert_eq!(evaluate(&nas).await["resolved"].as_array().unwrap().len(), 1);
    assert!(alerts(&nas, "").await.is_empty());
    server.stop_ok();
}

/// The drift window of the test (the recent window is its last three to
/// four quarters): the burst, an ack and two evaluations fit in it.
const WINDOW: u64 = 3000;

#[tokio::test(flavor = "multi_thread")]
async fn drift_fires_on_a_burst_of_changes_over_a_quiet_baseline() {
    let (_tmp, server) = fresh(&env(&[]));
    let nas = Api::new(&server, Some(NAS_KEY));
    put_rules(&nas, only("drift", json!({"window_ms": WINDOW, "baseline_windows": 3, "factor": 2.0, "min_count": 5}))).await;

    // Quiet: two real changes, and re-confirmations of the same value
    // (which supersede the older copy but change nothing).
    fact(&nas, "Service:api", "status", json!("up"), 1.0).await;
    fact(&nas, "Service:api", "status", json!("degraded"), 1.0).await;
    fact(&nas, "Service:api", "status", json!("up"), 1.0).await;
    for _ in 0..6 {
        fact(&nas, "Service:api", "status", json!("up"), 1.0).await;
    }
    let e = evaluate(&nas).await;
    assert_eq!(check(&e, "drift")["value"], json!(2), "{e}");
    assert!(e["fired"].as_array().unwrap().is_empty(), "{e}");
    tokio::time::sleep(Duration::from_millis(WINDOW + 200)).await;

    // The burst.
    for i in 0..8 {
        fact(&nas, "Service:db", "leader", json!(format!("node-{i}")), 1.0).await;
    }
    let e = evaluate(&nas).await;
    let fired = e["fired"].as_array().unwrap();
    assert_eq!(fired.len(), 1, "{e}");
    assert_eq!((fired[0]["rule"].as_str(), fired[0]["key"].as_str(), fired[0]["value"].as_u64()), (Some("drift"), Some("supersessions"), Some(7)));
    let id = fired[0]["id"].as_str().unwrap().to_string();
    // Acking (a supersession of the alert's own state) is not drift.
    nas.post(&format!("/api/alerts/{id}/ack"), &json!({})).await.expect(200);
    let e = evaluate(&nas).await;
    assert!(e["fired"].as_array().unwrap().is_empty(), "{e}");
    assert_eq!(check(&e, "drift")["value"], json!(7), "{e}");

    // The window moves on: resolved.
    tokio::time::sleep(Duration::from_millis(WINDOW + 200)).await;
    let e = evaluate(&nas).await;
    assert_eq!(e["resolved"].as_array().unwrap().len(), 1, "{e}");
    assert_eq!(e["resolved"][0]["id"], json!(id));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn cost_counts_model_tokens_per_tenant_and_day() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&env(&[("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true")]));
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    put_rules(&nas, only("cost", json!({"daily_token_budget": 150}))).await;
    let model = json!({"base_url": fake.base_url, "model": "ok", "timeout_ms": 2000});
    let body = json!({"content": "Sarah is a staff engineer at Org:acme.", "content_type": "text/plain", "model": model});

    let r = nas.post("/api/digest", &body).await.expect(200).clone();
    assert_eq!(r["tokens"], json!({"in": 100, "out": 6}));
    let u = nas.get("/api/alerts/usage").await.expect(200).clone();
    assert_eq!((u["today"]["tokens"].as_u64(), u["today"]["tokens_in"].as_u64(), u["today"]["calls"].as_u64()), (Some(106), Some(100), Some(1)), "{u}");
    assert_eq!(u["daily_token_budget"], json!(150));
    let e = evaluate(&nas).await;
    assert!(e["fired"].as_array().unwrap().is_empty(), "{e}");
    assert_eq!(check(&e, "cost")["value"], json!(106));

    nas.post("/api/digest", &json!({"content": "Bob works at Org:globex.", "content_type": "text/plain", "model": model})).await.expect(200);
    let e = evaluate(&nas).await;
    let fired = e["fired"].as_array().unwrap();
    assert_eq!(fired.len(), 1, "{e}");
    assert_eq!((fired[0]["rule"].as_str(), fired[0]["key"].as_str(), fired[0]["value"].as_u64(), fired[0]["limit"].as_u64()), (Some("cost"), Some("tokens"), Some(212), Some(150)));

    // /api/ask with a model counts too.
    nas.post("/api/ask", &json!({"question": "Where does Sarah work?", "model": model})).await.expect(200);
    assert_eq!(nas.get("/api/alerts/usage").await.expect(200)["today"]["tokens"], json!(265));
    assert!(evaluate(&nas).await["fired"].as_array().unwrap().is_empty(), "no refiring");

    // Usage is per tenant.
    assert_eq!(acme.get("/api/alerts/usage").await.expect(200)["today"]["tokens"], json!(0));

    // A higher budget clears it.
    put_rules(&nas, only("cost", json!({"daily_token_budget": 1000}))).await;
    let e = evaluate(&nas).await;
    assert_eq!(e["resolved"].as_array().unwrap().len(), 1, "{e}");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_are_per_tenant_checked_and_kept_as_facts() {
    let (_tmp, server) = fresh(&env(&[("TEMPORA_MONITOR_CONFIDENCE_MIN_FACTS", "7")]));
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let d = nas.get("/api/alerts/rules").await.expect(200).clone();
    assert_eq!(d["confidence"]["min_facts"], json!(7), "the server default: {d}");
    assert_eq!(d["cost"]["daily_token_budget"], Value::Null);

    let r = put_rules(&nas, json!({"drift": {"min_count": 3}, "freshness": {"ttl_ms": {"price": 1000}}})).await;
    assert_eq!((r["drift"]["min_count"].as_u64(), r["drift"]["window_ms"].as_u64()), (Some(3), Some(3_600_000)));
    assert_eq!(nas.get("/api/alerts/rules").await.expect(200).clone(), r);
    assert_eq!(acme.get("/api/alerts/rules").await.expect(200).clone(), d, "another tenant keeps the defaults");
    let stored = nas.list("subject=AlertRules:current").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["object"]["drift"], json!({"min_count": 3}));

    for (bad, field) in [
        (json!({"drift": {"windw_ms": 5}}), "windw_ms"),
        (json!({"confidence": {"max_share": 2}}), "confidence.max_share"),
        (json!({"freshness": {"ttl_ms": {"price": 0}}}), "freshness.ttl_ms.price"),
        (json!({"cost": {"daily_token_budget": "lots"}}), "cost.daily_token_budget"),
        (json!({"alerts": true}), "alerts"),
        (json!([1, 2]), "object"),
    ] {
        let resp = nas.put("/api/alerts/rules", &bad).await;
        resp.expect_error(400, "SchemaInvalid");
        assert!(resp.json["error"]["message"].as_str().unwrap().contains(field), "{field}: {}", resp.text);
    }
    assert_eq!(nas.get("/api/alerts/rules").await.expect(200).clone(), r, "a refused PUT changes nothing");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_background_task_evaluates_every_tenant() {
    let (_tmp, server) = fresh(&[
        ("TEMPORA_TENANT_KEYS", "nas=nas-key-1,acme=acme-key-1"),
        ("TEMPORA_MONITOR_INTERVAL_SECS", "1"),
        ("TEMPORA_MONITOR_CONFIDENCE_MIN_FACTS", "2"),
    ]);
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    for i in 0..3 {
        fact(&nas, &format!("Person:p{i}"), "rumor", json!("maybe"), 0.1).await;
    }
    fact(&acme, "Person:a", "role", json!("ceo"), 1.0).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let open = loop {
        let open = alerts(&nas, "").await;
        if !open.is_empty() {
            break open;
        }
        assert!(Instant::now() < deadline, "no alert within 20 s; stderr:\n{}", server.stderr());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!((open.len(), open[0]["rule"].as_str(), open[0]["state"].as_str()), (1, Some("confidence"), Some("open")));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(alerts(&nas, "?state=all").await.len(), 1, "fired once");
    assert!(alerts(&acme, "?state=all").await.is_empty());
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn every_monitor_route_hides_itself_without_a_valid_key() {
    let (_tmp, server) = fresh(&env(&[]));
    let nas = Api::new(&server, Some(NAS_KEY));
    put_rules(&nas, only("confidence", json!({"max_share": 0.0, "min_facts": 1}))).await;
    fact(&nas, "Person:p", "rumor", json!("maybe"), 0.1).await;
    let alert = evaluate(&nas).await["fired"][0]["id"].as_str().unwrap().to_string();
    let report = nas.post("/api/reports", &json!({"name": "r", "blocks": [{"type": "alerts"}]})).await.expect(201)["id"].as_str().unwrap().to_string();
    let routes: Vec<(reqwest::Method, String, Option<Value>)> = vec![
        (reqwest::Method::GET, "/api/alerts".into(), None),
        (reqwest::Method::POST, "/api/alerts/evaluate".into(), Some(json!({}))),
        (reqwest::Method::GET, "/api/alerts/rules".into(), None),
        (reqwest::Method::PUT, "/api/alerts/rules".into(), Some(json!({}))),
        (reqwest::Method::GET, "/api/alerts/usage".into(), None),
        (reqwest::Method::POST, format!("/api/alerts/{alert}/ack"), Some(json!({}))),
        (reqwest::Method::GET, "/api/reports".into(), None),
        (reqwest::Method::POST, "/api/reports".into(), Some(json!({"name": "x", "blocks": [{"type": "stats"}]}))),
        (reqwest::Method::GET, format!("/api/reports/{report}"), None),
        (reqwest::Method::POST, format!("/api/reports/{report}/run"), Some(json!({}))),
        (reqwest::Method::GET, format!("/api/reports/{report}/runs"), None),
    ];
    for key in [None, Some("wrong-key-123")] {
        let api = Api::new(&server, key);
        for (m, path, body) in &routes {
            let mut req = api.req(m.clone(), path);
            if let Some(b) = body {
                req = req.json(b);
            }
            let r = send(req).await;
            assert_eq!(r.status.as_u16(), 404, "{m} {path} with {key:?}: {}", r.text);
            r.expect_hidden();
        }
    }
    // Nothing was written by them; the admin reads a tenant it names.
    let admin = Api::new(&server, Some(ADMIN));
    let listed = admin.get("/api/alerts?tenant=nas").await.expect(200).clone();
    assert_eq!(listed[0]["id"], json!(alert));
    assert_eq!(listed[0]["state"], "open");
    assert_eq!(admin.get("/api/reports?tenant=nas").await.expect(200).as_array().unwrap().len(), 1);
    admin.get("/api/alerts").await.expect_error(400, "SchemaInvalid");
    server.stop_ok();
}
