//! Recall over a real socket: `/api/walk`, `/api/graph`, `/api/context` and
//! `/api/ask` (extractive, and with a model behind a local OpenAI-compatible
//! endpoint), including time travel, bounds, request errors and tenant
//! isolation in keyed mode.

use crate::common::fake_llm::{self, FakeLlm, SLOW};
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The API key sent to model endpoints; it must never come back.
const MODEL_KEY: &str = "sk-test-7f3a9c-do-not-leak";
/// Lets the server call the local model endpoint (loopback is refused by default).
const ALLOW_PRIVATE: (&str, &str) = ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true");

fn fact(subject: &str, predicate: &str, object: Value, confidence: f64) -> Value {
    json!({
        "subject": subject, "predicate": predicate, "object": object,
        "confidence": confidence, "source": "test", "valid_from": year(2020),
    })
}

fn id(f: &Value) -> String {
    f["id"].as_str().expect("fact id").to_string()
}

/// The ids of the small graph's facts.
struct Small {
    sarah_acme: String,
    acme_paris: String,
    bob_acme: String,
    sarah_bob: String,
    sarah_age: String,
    sarah_motto: String,
    acme_founded: String,
    paris_country: String,
}

/// Person:sarah works_at Org:acme, Org:acme located_in City:paris,
/// Person:bob works_at Org:acme, Person:sarah knows Person:bob, and literal
/// facts (age 34, a motto, acme's founding year, paris's country) that are
/// not edges.
async fn small_graph(api: &Api) -> Small {
    let mut ids = Vec::new();
    for (s, p, o, c) in [
        ("Person:sarah", "works_at", json!("Org:acme"), 0.9),
        ("Org:acme", "located_in", json!("City:paris"), 0.8),
        ("Person:bob", "works_at", json!("Org:acme"), 1.0),
        ("Person:sarah", "knows", json!("Person:bob"), 0.7 + 0.1),
        ("Person:sarah", "age", json!(34), 1.0),
        ("Person:sarah", "motto", json!("work hard: play hard"), 0.95),
        ("Org:acme", "founded", json!(1999), 1.0),
        ("City:paris", "country", json!("France"), 1.0),
    ] {
        ids.push(id(&api.assert_fact(fact(s, p, o, c)).await));
    }
    let mut it = ids.into_iter();
    let mut next = || it.next().unwrap();
    Small {
        sarah_acme: next(),
        acme_paris: next(),
        bob_acme: next(),
        sarah_bob: next(),
        sarah_age: next(),
        sarah_motto: next(),
        acme_founded: next(),
        paris_country: next(),
    }
}

// ---------------------------------------------------------------- walk

async fn walk(api: &Api, query: &str) -> Value {
    let r = api.get(&format!("/api/walk?{query}")).await;
    let v = r.expect(200).clone();
    check_walk(&v);
    v
}

/// The invariants of every walk answer.
#[track_caller]
fn check_walk(v: &Value) {
    let reached: Vec<&str> = v["reached"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(reached.first().copied(), v["start"].as_str(), "the start comes first: {v}");
    let unique: BTreeSet<&str> = reached.iter().copied().collect();
    assert_eq!(unique.len(), reached.len(), "reached has duplicates: {v}");
    let depths = v["depths"].as_object().unwrap();
    assert_eq!(depths.keys().map(String::as_str).collect::<BTreeSet<_>>(), unique, "depths cover reached: {v}");
    assert_eq!(depths[reached[0]], 0);
    let mut ids = BTreeSet::new();
    for e in v["edges"].as_array().unwrap() {
        assert!(ids.insert(e["fact_id"].as_str().unwrap().to_string()), "edge listed twice: {v}");
        for end in [&e["from"], &e["to"]] {
            let end = end.as_str().unwrap();
            assert!(end.contains(':'), "an edge end is not an entity: {e}");
        }
        assert!(e["depth"].as_u64().unwrap() >= 1, "{e}");
        assert!(e["confidence"].as_f64().is_some(), "{e}");
    }
    assert!(v["truncated"].is_boolean());
}

fn reached(v: &Value) -> BTreeSet<String> {
    v["reached"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// (from, predicate, to) of every edge.
fn walk_edges(v: &Value) -> BTreeSet<(String, String, String)> {
    v["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("from"), s("predicate"), s("to"))
        })
        .collect()
}

fn triple(from: &str, predicate: &str, to: &str) -> (String, String, String) {
    (from.to_string(), predicate.to_string(), to.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_depth_direction_and_edge_types() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let g = small_graph(&api).await;

    // Depth 1, out of sarah: her two entity-ref facts; the age, the motto
    // (a string with a colon and a space) are not edges.
    let d1 = walk(&api, "start=Person:sarah&depth=1").await;
    assert_eq!(d1["start"], "Person:sarah");
    assert_eq!(reached(&d1), set(&["Person:sarah", "Org:acme", "Person:bob"]));
    assert_eq!(
        walk_edges(&d1),
        BTreeSet::from([triple("Person:sarah", "works_at", "Org:acme"), triple("Person:sarah", "knows", "Person:bob")])
    );
    assert_eq!(d1["depths"], json!({"Person:sarah": 0, "Org:acme": 1, "Person:bob": 1}));
    assert_eq!(d1["truncated"], false);
    // Index order at each node: sarah's facts by predicate (knows before works_at).
    assert_eq!(d1["reached"], json!(["Person:sarah", "Person:bob", "Org:acme"]));
    let works = d1["edges"].as_array().unwrap().iter().find(|e| e["predicate"] == "works_at").unwrap();
    assert_eq!(works["fact_id"], g.sarah_acme.as_str());
    assert_eq!(works["confidence"], 0.9);
    assert_eq!(works["depth"], 1);
    let edge_ids: BTreeSet<&str> = d1["edges"].as_array().unwrap().iter().map(|e| e["fact_id"].as_str().unwrap()).collect();
    assert!(!edge_ids.contains(g.sarah_age.as_str()) && !edge_ids.contains(g.sarah_motto.as_str()));

    // Depth 2 adds what acme and bob point at.
    let d2 = walk(&api, "start=Person:sarah&depth=2&direction=out").await;
    assert_eq!(reached(&d2), set(&["Person:sarah", "Org:acme", "Person:bob", "City:paris"]));
    assert_eq!(d2["depths"]["City:paris"], 2);
    assert_eq!(
        walk_edges(&d2),
        BTreeSet::from([
            triple("Person:sarah", "works_at", "Org:acme"),
            triple("Person:sarah", "knows", "Person:bob"),
            triple("Org:acme", "located_in", "City:paris"),
            triple("Person:bob", "works_at", "Org:acme"),
        ])
    );
    let paris_edge = d2["edges"].as_array().unwrap().iter().find(|e| e["to"] == "City:paris").unwrap();
    assert_eq!(paris_edge["depth"], 2);
    assert_eq!(paris_edge["fact_id"], g.acme_paris.as_str());
    // The defaults are depth 2, out.
    let default = walk(&api, "start=Person:sarah").await;
    assert_eq!(reached(&default), reached(&d2));
    assert_eq!(walk_edges(&default), walk_edges(&d2));
    // Depth 0: the start alone.
    let d0 = walk(&api, "start=Person:sarah&depth=0").await;
    assert_eq!(d0["reached"], json!(["Person:sarah"]));
    assert_eq!(d0["edges"], json!([]));

    // Directions from acme.
    let out = walk(&api, "start=Org:acme&depth=1&direction=out").await;
    assert_eq!(reached(&out), set(&["Org:acme", "City:paris"]));
    let inn = walk(&api, "start=Org:acme&depth=1&direction=in").await;
    assert_eq!(reached(&inn), set(&["Org:acme", "Person:sarah", "Person:bob"]));
    assert_eq!(
        walk_edges(&inn),
        BTreeSet::from([triple("Person:sarah", "works_at", "Org:acme"), triple("Person:bob", "works_at", "Org:acme")])
    );
    let both = walk(&api, "start=Org:acme&depth=1&direction=both").await;
    assert_eq!(reached(&both), set(&["Org:acme", "City:paris", "Person:sarah", "Person:bob"]));
    assert_eq!(walk_edges(&both).len(), 3);
    // In, two hops from paris: acme, then who works there.
    let from_paris = walk(&api, "start=City:paris&direction=in").await;
    assert_eq!(reached(&from_paris), set(&["City:paris", "Org:acme", "Person:sarah", "Person:bob"]));
    assert_eq!(from_paris["depths"]["Person:bob"], 2);
    // Out of paris: only a literal fact, so nothing.
    let nowhere = walk(&api, "start=City:paris&direction=out&depth=6").await;
    assert_eq!(nowhere["reached"], json!(["City:paris"]));
    assert_eq!(nowhere["edges"], json!([]));
    // A start nobody mentions is not an error.
    let unknown = walk(&api, "start=Person:nobody").await;
    assert_eq!(unknown["reached"], json!(["Person:nobody"]));
    assert_eq!(unknown["edges"], json!([]));

    // edge_types restricts which predicates are followed.
    let works_only = walk(&api, "start=Person:sarah&depth=3&direction=both&edge_types=works_at").await;
    assert_eq!(reached(&works_only), set(&["Person:sarah", "Org:acme", "Person:bob"]));
    assert!(walk_edges(&works_only).iter().all(|(_, p, _)| p == "works_at"), "{works_only}");
    assert_eq!(works_only["depths"]["Person:bob"], 2, "bob is reached through acme, not by knows");
    let two = walk(&api, "start=Person:sarah&depth=3&edge_types=works_at,%20located_in").await;
    assert_eq!(reached(&two), set(&["Person:sarah", "Org:acme", "City:paris"]));
    let none = walk(&api, "start=Person:sarah&edge_types=married_to").await;
    assert_eq!(none["reached"], json!(["Person:sarah"]));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_as_of_sees_the_edge_of_its_time() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let acme = api.assert_fact(fact("Person:sarah", "works_at", json!("Org:acme"), 1.0)).await;
    let noted = acme["recorded_at"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut globex = fact("Person:sarah", "works_at", json!("Org:globex"), 1.0);
    globex["valid_from"] = json!(year(2024));
    let globex = api.assert_fact(globex).await;
    assert_eq!(globex["superseded"], json!([acme["id"]]));
    assert!(globex["recorded_at"].as_i64().unwrap() > noted);

    let now = walk(&api, "start=Person:sarah&depth=1").await;
    assert_eq!(reached(&now), set(&["Person:sarah", "Org:globex"]));
    assert_eq!(now["edges"][0]["fact_id"], globex["id"]);
    let then = walk(&api, &format!("start=Person:sarah&depth=1&as_of={noted}")).await;
    assert_eq!(reached(&then), set(&["Person:sarah", "Org:acme"]));
    assert_eq!(then["edges"][0]["fact_id"], acme["id"]);
    let by_tx = walk(&api, &format!("start=Person:sarah&depth=1&as_of_tx={}", acme["tx"])).await;
    assert_eq!(reached(&by_tx), set(&["Person:sarah", "Org:acme"]));
    // Inbound too: acme had sarah then, nobody now.
    let acme_then = walk(&api, &format!("start=Org:acme&direction=in&as_of={noted}")).await;
    assert_eq!(reached(&acme_then), set(&["Org:acme", "Person:sarah"]));
    let acme_now = walk(&api, "start=Org:acme&direction=in").await;
    assert_eq!(acme_now["reached"], json!(["Org:acme"]));
    // Before anything was written.
    let before = walk(&api, &format!("start=Person:sarah&as_of={}", noted - 1)).await;
    assert_eq!(before["reached"], json!(["Person:sarah"]));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_max_nodes_bounds_the_answer() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let facts: Vec<Value> =
        (0..10).map(|i| fact(&format!("Leaf:l{i}"), "part_of", json!("Hub:h"), 1.0)).collect();
    api.post("/api/facts/batch", &json!({"facts": facts})).await.expect(201);

    let all = walk(&api, "start=Hub:h&direction=in").await;
    assert_eq!(reached(&all).len(), 11);
    assert_eq!(all["truncated"], false);
    for n in [1, 4, 10] {
        let some = walk(&api, &format!("start=Hub:h&direction=in&max_nodes={n}")).await;
        assert_eq!(some["reached"].as_array().unwrap().len(), n, "max_nodes={n}: {some}");
        assert_eq!(some["truncated"], true, "max_nodes={n}: {some}");
        assert!(reached(&some).is_subset(&reached(&all)));
    }
    // Exactly enough room is not a truncation.
    let exact = walk(&api, "start=Hub:h&direction=in&max_nodes=11").await;
    assert_eq!(reached(&exact).len(), 11);
    assert_eq!(exact["truncated"], false);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn walk_rejects_bad_parameters() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    for q in [
        "",
        "depth=1",
        "start=",
        "start=sarah",
        "start=Person:",
        "start=:sarah",
        "start=Person:sarah&direction=sideways",
        "start=Person:sarah&direction=OUT",
        "start=Person:sarah&depth=7",
        "start=Person:sarah&depth=-1",
        "start=Person:sarah&depth=two",
        "start=Person:sarah&max_nodes=0",
        "start=Person:sarah&max_nodes=2001",
        "start=Person:sarah&as_of=yesterday",
        "start=Person:sarah&start=Person:bob",
    ] {
        let r = api.get(&format!("/api/walk?{q}")).await;
        assert_eq!(r.status.as_u16(), 400, "{q:?}: {}", r.text);
        r.expect_error(400, "SchemaInvalid");
    }
    // The bounds themselves are accepted.
    walk(&api, "start=Person:sarah&depth=6&max_nodes=2000").await;
    server.stop_ok();
}

// ---------------------------------------------------------------- graph

async fn graph(api: &Api, query: &str) -> Value {
    let r = api.get(&format!("/api/graph?{query}")).await;
    let v = r.expect(200).clone();
    // Every edge joins two listed nodes; node degrees are non-zero.
    let nodes = node_ids(&v);
    for e in v["edges"].as_array().unwrap() {
        assert!(nodes.contains(e["source"].as_str().unwrap()) && nodes.contains(e["target"].as_str().unwrap()), "{e} in {v}");
    }
    for n in v["nodes"].as_array().unwrap() {
        assert!(n["degree"].as_u64().unwrap() >= 1, "{n}");
    }
    v
}

fn node_ids(v: &Value) -> BTreeSet<String> {
    v["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap().to_string()).collect()
}

fn graph_edges(v: &Value) -> BTreeSet<(String, String, String)> {
    v["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("source"), s("predicate"), s("target"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn graph_view_limit_and_focus() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let g = small_graph(&api).await;

    let full = graph(&api, "").await;
    assert_eq!(node_ids(&full), set(&["Person:sarah", "Person:bob", "Org:acme", "City:paris"]));
    let all_edges = BTreeSet::from([
        triple("Person:sarah", "works_at", "Org:acme"),
        triple("Org:acme", "located_in", "City:paris"),
        triple("Person:bob", "works_at", "Org:acme"),
        triple("Person:sarah", "knows", "Person:bob"),
    ]);
    assert_eq!(graph_edges(&full), all_edges);
    assert_eq!(full["total_nodes"], 4);
    assert_eq!(full["total_edges"], 4);
    assert_eq!(full["truncated"], false);
    let degrees: BTreeMap<String, u64> = full["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), n["degree"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        degrees,
        BTreeMap::from([
            ("Org:acme".to_string(), 3),
            ("Person:sarah".to_string(), 2),
            ("Person:bob".to_string(), 2),
            ("City:paris".to_string(), 1)
        ])
    );
    let sarah = full["nodes"].as_array().unwrap().iter().find(|n| n["id"] == "Person:sarah").unwrap();
    assert_eq!(sarah["type"], "Person");
    assert_eq!(sarah["label"], "sarah");
    let e = full["edges"].as_array().unwrap().iter().find(|e| e["id"] == g.sarah_acme.as_str()).unwrap();
    assert_eq!(e["confidence"], 0.9);
    let edge_ids: BTreeSet<&str> = full["edges"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    for literal in [&g.sarah_age, &g.sarah_motto, &g.acme_founded, &g.paris_country] {
        assert!(!edge_ids.contains(literal.as_str()), "a literal fact is an edge: {full}");
    }
    assert_eq!(graph(&api, "limit=0").await["nodes"], full["nodes"]);

    // limit: the top nodes by degree (ties by id), with only the edges among them.
    let top2 = graph(&api, "limit=2").await;
    assert_eq!(node_ids(&top2), set(&["Org:acme", "Person:bob"]));
    assert_eq!(graph_edges(&top2), BTreeSet::from([triple("Person:bob", "works_at", "Org:acme")]));
    assert_eq!(top2["total_nodes"], 4, "totals are before the limit");
    assert_eq!(top2["total_edges"], 4);
    let top3 = graph(&api, "limit=3").await;
    assert_eq!(node_ids(&top3), set(&["Org:acme", "Person:bob", "Person:sarah"]));
    assert_eq!(
        graph_edges(&top3),
        BTreeSet::from([
            triple("Person:sarah", "works_at", "Org:acme"),
            triple("Person:bob", "works_at", "Org:acme"),
            triple("Person:sarah", "knows", "Person:bob"),
        ])
    );
    assert_eq!(graph(&api, "limit=1").await["edges"], json!([]));
    assert_eq!(node_ids(&graph(&api, "limit=99").await), node_ids(&full));

    // q: the matches and their one-hop neighbourhood.
    let paris = graph(&api, "q=paris").await;
    assert_eq!(node_ids(&paris), set(&["City:paris", "Org:acme"]));
    assert_eq!(graph_edges(&paris), BTreeSet::from([triple("Org:acme", "located_in", "City:paris")]));
    assert_eq!(graph(&api, "q=PARIS").await["nodes"], paris["nodes"]);
    let bob = graph(&api, "q=bob").await;
    assert_eq!(node_ids(&bob), set(&["Person:bob", "Org:acme", "Person:sarah"]));
    assert!(!graph_edges(&bob).contains(&triple("Org:acme", "located_in", "City:paris")), "two hops from bob: {bob}");
    let located = graph(&api, "q=located_in").await;
    assert_eq!(node_ids(&located), set(&["City:paris", "Org:acme", "Person:sarah", "Person:bob"]));
    let nothing = graph(&api, "q=zebra").await;
    assert_eq!(nothing["nodes"], json!([]));
    assert_eq!(nothing["edges"], json!([]));
    assert_eq!(nothing["total_nodes"], 0);
    // Focus and limit together.
    // (within the focus bob has degree 2, acme and sarah 1 each)
    let capped = graph(&api, "q=bob&limit=1").await;
    assert_eq!(node_ids(&capped), set(&["Person:bob"]));

    api.get("/api/graph?limit=-1").await.expect_error(400, "SchemaInvalid");
    api.get("/api/graph?limit=many").await.expect_error(400, "SchemaInvalid");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn graph_superseded_facts_are_not_edges() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let acme = api.assert_fact(fact("Person:sarah", "works_at", json!("Org:acme"), 1.0)).await;
    let noted = acme["recorded_at"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut globex = fact("Person:sarah", "works_at", json!("Org:globex"), 1.0);
    globex["valid_from"] = json!(year(2024));
    api.assert_fact(globex).await;
    // A low-confidence candidate is not a current edge either.
    let cand = api.assert_fact(fact("Person:sarah", "works_at", json!("Org:initech"), 0.3)).await;
    assert_eq!(cand["status"], "candidate");

    let now = graph(&api, "").await;
    assert_eq!(graph_edges(&now), BTreeSet::from([triple("Person:sarah", "works_at", "Org:globex")]));
    assert_eq!(node_ids(&now), set(&["Person:sarah", "Org:globex"]));
    assert_eq!(now["total_edges"], 1);
    let then = graph(&api, &format!("as_of={noted}")).await;
    assert_eq!(graph_edges(&then), BTreeSet::from([triple("Person:sarah", "works_at", "Org:acme")]));
    server.stop_ok();
}

// ---------------------------------------------------------------- context

async fn context(api: &Api, body: Value) -> Value {
    let r = api.post("/api/context", &body).await;
    let v = r.expect(200).clone();
    check_packet(&v);
    v
}

/// The invariants of every packet.
#[track_caller]
fn check_packet(v: &Value) {
    assert_eq!(v["kind"], "context_packet");
    let facts = v["facts"].as_array().unwrap();
    let ranking = v["ranking"].as_array().unwrap();
    assert_eq!(facts.len(), ranking.len(), "{v}");
    for (f, r) in facts.iter().zip(ranking) {
        assert_eq!(f["id"], r["id"], "ranking is in fact order: {v}");
    }
    let scores: Vec<f64> = ranking.iter().map(|r| r["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "facts in rank order: {scores:?}");
    let sum: u64 = ranking.iter().map(|r| r["tokens"].as_u64().unwrap()).sum();
    assert_eq!(v["tokens"].as_u64().unwrap(), sum, "tokens is the selected facts' cost: {v}");
    assert!(v["total_tokens"].as_u64().unwrap() >= sum);
    assert!(v["candidates"].as_u64().unwrap() >= facts.len() as u64);
    assert!(v["summary"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(v["entities"].is_array() && v["pages"].is_array() && v["warnings"].is_array());
}

fn fact_ids(packet: &Value) -> Vec<String> {
    packet["facts"].as_array().unwrap().iter().map(id).collect()
}

fn warning_kinds(packet: &Value) -> Vec<String> {
    packet["warnings"].as_array().unwrap().iter().map(|w| w["kind"].as_str().unwrap().to_string()).collect()
}

fn origin_of(packet: &Value, fact_id: &str) -> Option<String> {
    packet["ranking"].as_array().unwrap().iter().find(|r| r["id"] == fact_id).map(|r| r["origin"].as_str().unwrap().to_string())
}

/// Person:maya with ten literal facts.
async fn maya(api: &Api) -> BTreeMap<&'static str, String> {
    let mut ids = BTreeMap::new();
    for (p, o) in [
        ("age", json!(31)),
        ("height_cm", json!(170)),
        ("favourite_colour", json!("green")),
        ("favourite_food", json!("ramen")),
        ("hometown", json!("Porto")),
        ("job", json!("industrial designer")),
        ("pet", json!("a cat named Miso")),
        ("speaks", json!("Portuguese and English")),
        ("hobby", json!("bouldering on weekends")),
        ("email", json!("maya@example.com")),
    ] {
        ids.insert(p, id(&api.assert_fact(fact("Person:maya", p, o, 0.9)).await));
    }
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn context_ranks_by_goal_and_trims_to_budget() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let m = maya(&api).await;

    let p = context(&api, json!({"seeds": ["Person:maya"], "goal": "what is maya's favourite food"})).await;
    assert_eq!(p["facts"].as_array().unwrap().len(), 10);
    assert_eq!(p["facts"][0]["id"], m["favourite_food"].as_str(), "the goal's fact first: {p}");
    assert_eq!(p["facts"][0]["object"], "ramen");
    assert_eq!(p["ranking"][0]["relevance"], 1.0);
    assert_eq!(p["ranking"][0]["origin"], "seed");
    assert_eq!(p["goal"], "what is maya's favourite food");
    assert_eq!(p["candidates"], 10);
    assert_eq!(p["tokens"], p["total_tokens"], "nothing trimmed without a budget");
    assert!(p["entities"].as_array().unwrap().contains(&json!("Person:maya")));
    assert!(!warning_kinds(&p).contains(&"budget".to_string()));
    // A different goal puts a different fact first.
    let pet = context(&api, json!({"seeds": ["Person:maya"], "goal": "does she have a cat?"})).await;
    assert_eq!(pet["facts"][0]["id"], m["pet"].as_str(), "{pet}");

    // A token budget: the best-ranked facts that fit, with a warning.
    let ranked = fact_ids(&p);
    let costs: Vec<u64> = p["ranking"].as_array().unwrap().iter().map(|r| r["tokens"].as_u64().unwrap()).collect();
    let budget: u64 = costs[..3].iter().sum();
    let b = context(
        &api,
        json!({"seeds": ["Person:maya"], "goal": "what is maya's favourite food", "token_budget": budget}),
    )
    .await;
    assert!(b["tokens"].as_u64().unwrap() <= budget, "{b}");
    assert_eq!(b["total_tokens"], p["total_tokens"], "total_tokens is before trimming");
    assert_eq!(fact_ids(&b), ranked[..3].to_vec(), "exactly the top three fit");
    assert!(warning_kinds(&b).contains(&"budget".to_string()), "{b}");
    let smaller = context(&api, json!({"seeds": ["Person:maya"], "goal": "favourite food", "token_budget": budget - 1})).await;
    assert!(smaller["tokens"].as_u64().unwrap() < budget);
    assert!(smaller["facts"].as_array().unwrap().len() < 10);
    assert_eq!(smaller["facts"][0]["id"], m["favourite_food"].as_str());
    let zero = context(&api, json!({"seeds": ["Person:maya"], "token_budget": 0})).await;
    assert_eq!(zero["facts"], json!([]));
    assert_eq!(zero["tokens"], 0);
    assert!(warning_kinds(&zero).contains(&"budget".to_string()));

    // max_facts caps the count, keeping the rank order.
    let capped = context(&api, json!({"seeds": ["Person:maya"], "goal": "what is maya's favourite food", "max_facts": 2})).await;
    assert_eq!(fact_ids(&capped), ranked[..2].to_vec());
    let one = context(&api, json!({"seeds": ["Person:maya"], "max_facts": 1})).await;
    assert_eq!(one["facts"].as_array().unwrap().len(), 1);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn context_brings_one_hop_and_inbound_facts() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let g = small_graph(&api).await;

    let p = context(&api, json!({"seeds": ["Person:sarah"], "goal": "where is sarah's employer located"})).await;
    let ids = fact_ids(&p);
    for own in [&g.sarah_acme, &g.sarah_bob, &g.sarah_age, &g.sarah_motto] {
        assert_eq!(origin_of(&p, own).as_deref(), Some("seed"), "{p}");
    }
    // Facts about the entities sarah links to are one hop out.
    for hop in [&g.acme_paris, &g.acme_founded, &g.bob_acme] {
        assert_eq!(origin_of(&p, hop).as_deref(), Some("hop"), "{hop} in {p}");
    }
    // Paris is two hops from sarah: its facts stay out.
    assert!(!ids.contains(&g.paris_country), "{p}");
    let entities: BTreeSet<&str> = p["entities"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(p["entities"][0], "Person:sarah", "the seeds come first");
    for e in ["Org:acme", "Person:bob", "City:paris"] {
        assert!(entities.contains(e), "{e} in {p}");
    }
    // Seed facts outrank hop facts of the same confidence when the goal says nothing.
    let plain = context(&api, json!({"seeds": ["Org:acme"]})).await;
    assert_eq!(origin_of(&plain, &g.acme_paris).as_deref(), Some("seed"));
    // Facts pointing at the seed are inbound.
    assert_eq!(origin_of(&plain, &g.sarah_acme).as_deref(), Some("inbound"), "{plain}");
    assert_eq!(origin_of(&plain, &g.bob_acme).as_deref(), Some("inbound"));
    // The project is a seed too.
    let proj = context(&api, json!({"project": "City:paris"})).await;
    assert_eq!(origin_of(&proj, &g.paris_country).as_deref(), Some("seed"), "{proj}");
    assert_eq!(origin_of(&proj, &g.acme_paris).as_deref(), Some("inbound"));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn context_warns_of_a_conflicting_candidate() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let acme = api.assert_fact(fact("Person:sarah", "works_at", json!("Org:acme"), 0.95)).await;
    let cand = api.assert_fact(fact("Person:sarah", "works_at", json!("Org:globex"), 0.6)).await;
    assert_eq!(cand["status"], "candidate", "below the default 0.75 threshold");
    assert_eq!(cand["superseded"], json!([]));
    // A `many` predicate holds several values without conflict.
    api.put("/api/predicates/knows", &json!({"cardinality": "many"})).await.expect(200);
    api.assert_fact(fact("Person:sarah", "knows", json!("Person:bob"), 0.95)).await;
    let knows_cand = api.assert_fact(fact("Person:sarah", "knows", json!("Person:carol"), 0.5)).await;
    assert_eq!(knows_cand["status"], "candidate");

    let p = context(&api, json!({"seeds": ["Person:sarah"]})).await;
    let ids = fact_ids(&p);
    assert!(ids.contains(&id(&acme)) && ids.contains(&id(&cand)), "{p}");
    let conflicts: Vec<&Value> = p["warnings"].as_array().unwrap().iter().filter(|w| w["kind"] == "conflict").collect();
    assert_eq!(conflicts.len(), 1, "one conflict, works_at only: {p}");
    assert_eq!(conflicts[0]["facts"], json!([acme["id"], cand["id"]]));
    let msg = conflicts[0]["message"].as_str().unwrap();
    assert!(msg.contains("Org:acme") && msg.contains("Org:globex"), "{msg}");
    // The candidates are flagged as such.
    let flagged: Vec<&Value> = p["warnings"].as_array().unwrap().iter().filter(|w| w["kind"] == "candidate").collect();
    let flagged: BTreeSet<String> = flagged.iter().map(|w| w["facts"][0].as_str().unwrap().to_string()).collect();
    assert_eq!(flagged, BTreeSet::from([id(&cand), id(&knows_cand)]));

    // No candidate, no conflict.
    let clean = api.assert_fact(fact("Person:tom", "works_at", json!("Org:acme"), 0.95)).await;
    let t = context(&api, json!({"seeds": ["Person:tom"]})).await;
    assert_eq!(fact_ids(&t), vec![id(&clean)]);
    assert!(!warning_kinds(&t).contains(&"conflict".to_string()), "{t}");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn context_as_of_determinism_and_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let ramen = api.assert_fact(fact("Person:maya", "favourite_food", json!("ramen"), 0.9)).await;
    api.assert_fact(fact("Person:maya", "hometown", json!("Porto"), 0.9)).await;
    let noted = api.stats().await["last_recorded_at"].as_i64().unwrap_or_else(|| ramen["recorded_at"].as_i64().unwrap());
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut sushi = fact("Person:maya", "favourite_food", json!("sushi"), 0.9);
    sushi["valid_from"] = json!(year(2024));
    let sushi = api.assert_fact(sushi).await;

    let now = context(&api, json!({"seeds": ["Person:maya"], "goal": "favourite food"})).await;
    assert_eq!(now["facts"][0]["id"], sushi["id"]);
    assert!(!fact_ids(&now).contains(&id(&ramen)), "superseded facts stay out: {now}");
    let then = context(&api, json!({"seeds": ["Person:maya"], "goal": "favourite food", "as_of": noted})).await;
    assert_eq!(then["facts"][0]["id"], ramen["id"], "{then}");
    assert_eq!(then["facts"][0]["status"], "active", "as it stood then");
    assert!(!fact_ids(&then).contains(&id(&sushi)));
    assert_eq!(then["facts"].as_array().unwrap().len(), 2);

    // The same request gives the same bytes, also after a restart.
    let body = json!({"seeds": ["Person:maya"], "goal": "favourite food", "token_budget": 40});
    let first = api.post("/api/context", &body).await;
    first.expect(200);
    for _ in 0..3 {
        assert_eq!(api.post("/api/context", &body).await.text, first.text);
    }
    server.stop_ok();
    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    assert_eq!(api.post("/api/context", &body).await.text, first.text, "the packet changes only when memory does");

    // Request errors.
    for bad in [
        json!({}),
        json!({"seeds": []}),
        json!({"goal": "   "}),
        json!({"seeds": ["Person:maya"], "token_budget": -1}),
        json!({"seeds": ["Person:maya"], "max_facts": -5}),
        json!({"seeds": ["Person:maya"], "token_budget": "lots"}),
        json!({"seeds": "Person:maya"}),
        json!({"seeds": ["Person:maya"], "surprise": true}),
        json!(["Person:maya"]),
    ] {
        let r = api.post("/api/context", &bad).await;
        assert_eq!(r.status.as_u16(), 400, "{bad}: {}", r.text);
        r.expect_error(400, "SchemaInvalid");
    }
    let too_many: Vec<String> = (0..40).map(|i| format!("Person:p{i}")).collect();
    api.post("/api/context", &json!({"seeds": too_many})).await.expect_error(400, "SchemaInvalid");
    let r = send(api.req(Method::POST, "/api/context").header("content-type", "application/json").body("{\"seeds\": [")).await;
    r.expect_error(400, "SchemaInvalid");
    // A goal alone is a valid request.
    context(&api, json!({"goal": "anything about food"})).await;
    server.stop_ok();
}

/// The reference time of `expired`/`stale` is the last write's record time:
/// it must be the tenant's own, or another tenant's writes change this
/// tenant's packets (and tell it when that tenant writes).
#[tokio::test(flavor = "multi_thread")]
async fn context_packet_does_not_change_with_another_tenants_writes() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let other = Api::new(&server, Some(ACME_KEY));
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let mut trial = fact("Person:maya", "plan", json!("trial"), 0.9);
    trial["valid_until"] = json!(now_ms + 1500);
    let trial = nas.assert_fact(trial).await;
    assert!(trial["recorded_at"].as_i64().unwrap() < now_ms + 1500);
    let body = json!({"seeds": ["Person:maya"]});
    let first = nas.post("/api/context", &body).await;
    assert!(!warning_kinds(first.expect(200)).contains(&"expired".to_string()), "{}", first.text);
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert_eq!(nas.post("/api/context", &body).await.text, first.text, "no write, same packet");
    other.assert_fact(fact("Person:zed", "plan", json!("pro"), 0.9)).await;
    let after = nas.post("/api/context", &body).await;
    assert_eq!(after.text, first.text, "another tenant's write changed this tenant's packet");
    server.stop_ok();
}

// ---------------------------------------------------------------- ask

async fn ask(api: &Api, body: Value) -> Value {
    let r = api.post("/api/ask", &body).await;
    let v = r.expect(200).clone();
    check_reliability(&v);
    v
}

/// `system_reliability` is the mean confidence of the returned evidence.
#[track_caller]
fn check_reliability(v: &Value) {
    let ev = v["evidence"].as_array().unwrap();
    if ev.is_empty() {
        assert_eq!(v["system_reliability"], Value::Null, "{v}");
    } else {
        let mean = ev.iter().map(|f| f["confidence"].as_f64().unwrap()).sum::<f64>() / ev.len() as f64;
        let got = v["system_reliability"].as_f64().unwrap_or_else(|| panic!("no reliability: {v}"));
        assert!((got - mean).abs() < 1e-9, "reliability {got} != mean {mean}: {v}");
    }
}

fn evidence_ids(v: &Value) -> Vec<String> {
    v["evidence"].as_array().unwrap().iter().map(id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_extractive_answers_from_evidence() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let g = small_graph(&api).await;

    let a = ask(&api, json!({"question": "Where does Person:sarah work?"})).await;
    assert_eq!(a["mode"], "extractive");
    assert!(a["answer"].as_str().unwrap().contains("Org:acme"), "{a}");
    assert!(evidence_ids(&a).contains(&g.sarah_acme), "{a}");
    assert_eq!(a["model_confidence"], Value::Null);
    assert_eq!(a["tokens"], json!({"in": 0, "out": 0}));
    // The evidence is sarah's; her other facts have other confidences, so
    // the mean is not that of one fact.
    assert!(a["evidence"].as_array().unwrap().len() >= 2, "{a}");
    let rel = a["system_reliability"].as_f64().unwrap();
    assert!(rel > 0.0 && rel <= 1.0);
    let top1 = ask(&api, json!({"question": "Where does Person:sarah work?", "top_k": 1})).await;
    assert_eq!(top1["evidence"].as_array().unwrap().len(), 1);

    // After a change of employer the answer follows; as_of rewinds it.
    let noted = api.stats().await["last_recorded_at"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut globex = fact("Person:sarah", "works_at", json!("Org:globex"), 0.85);
    globex["valid_from"] = json!(year(2024));
    let globex = api.assert_fact(globex).await;
    let now = ask(&api, json!({"question": "Where does Person:sarah work?"})).await;
    assert!(evidence_ids(&now).contains(&id(&globex)), "{now}");
    assert!(now["answer"].as_str().unwrap().contains("Org:globex"), "{now}");
    assert!(now["evidence"].as_array().unwrap().iter().all(|f| f["status"] == "active"), "only current facts: {now}");
    let then = ask(&api, json!({"question": "Where does Person:sarah work?", "as_of": noted})).await;
    assert!(evidence_ids(&then).contains(&g.sarah_acme), "{then}");
    assert!(!evidence_ids(&then).contains(&id(&globex)), "{then}");

    // A question about nothing memory holds.
    let none = ask(&api, json!({"question": "What is the capital of Atlantis?"})).await;
    assert_eq!(none["mode"], "extractive");
    if none["evidence"].as_array().unwrap().is_empty() {
        assert!(none["answer"].as_str().unwrap().to_lowercase().contains("no facts"), "{none}");
    }
    let unknown = ask(&api, json!({"question": "Where does Person:nobody work?"})).await;
    if unknown["evidence"].as_array().unwrap().is_empty() {
        assert!(unknown["answer"].as_str().unwrap().to_lowercase().contains("no facts"), "{unknown}");
    }

    for bad in [
        json!({}),
        json!({"question": ""}),
        json!({"question": "   "}),
        json!({"question": 42}),
        json!({"question": "Where does Person:sarah work?", "top_k": 0}),
        json!({"question": "Where does Person:sarah work?", "top_k": 101}),
        json!({"question": "Where does Person:sarah work?", "model": {"api_key": "x"}}),
        json!({"question": "Where does Person:sarah work?", "model": {"model": "ok", "base_url": "ftp://example.com/v1"}}),
    ] {
        let r = api.post("/api/ask", &bad).await;
        assert_eq!(r.status.as_u16(), 400, "{bad}: {}", r.text);
        r.expect_error(400, "SchemaInvalid");
    }
    server.stop_ok();
}

fn model(fake: &FakeLlm, name: &str) -> Value {
    json!({"base_url": fake.base_url, "api_key": MODEL_KEY, "model": name, "timeout_ms": 300})
}

/// How a fact is shown to a model: `subject predicate object (confidence c, source s)`.
fn fact_line(f: &Value) -> String {
    let object = match &f["object"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!(
        "{} {} {} (confidence {:.2}, source {})",
        f["subject"].as_str().unwrap(),
        f["predicate"].as_str().unwrap(),
        object,
        f["confidence"].as_f64().unwrap(),
        f["source"].as_str().unwrap()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_with_a_model() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[ALLOW_PRIVATE]);
    let api = Api::new(&server, None);
    let g = small_graph(&api).await;

    let question = "Where does Person:sarah work?";
    let a = ask(&api, json!({"question": question, "model": model(&fake, "ok")})).await;
    assert_eq!(a["mode"], "model");
    assert_eq!(a["answer"], "Acme.", "the confidence line is split off: {a}");
    assert_eq!(a["model_confidence"], 0.9);
    assert_eq!(a["tokens"], json!({"in": 50, "out": 3}));
    assert!(evidence_ids(&a).contains(&g.sarah_acme), "{a}");

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let req = &reqs[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.authorization.as_deref(), Some(format!("Bearer {MODEL_KEY}").as_str()));
    assert_eq!(req.body["model"], "ok");
    let messages = req.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    let user = messages[1]["content"].as_str().unwrap();
    assert!(user.contains(question), "{user}");
    for (i, f) in a["evidence"].as_array().unwrap().iter().enumerate() {
        let line = format!("[{}] {}", i + 1, fact_line(f));
        assert!(user.contains(&line), "{line:?} not in {user:?}");
    }
    assert!(user.contains("Person:sarah works_at Org:acme (confidence 0.90, source test)"), "{user}");
    assert!(!messages[0]["content"].as_str().unwrap().contains(MODEL_KEY));

    // A trailing slash on base_url, max_tokens and temperature pass through.
    let mut cfg = model(&fake, "ok");
    cfg["base_url"] = json!(format!("{}/", fake.base_url));
    cfg["max_tokens"] = json!(64);
    cfg["temperature"] = json!(0.2);
    let b = ask(&api, json!({"question": question, "model": cfg})).await;
    assert_eq!(b["answer"], "Acme.");
    let last = fake.requests().pop().unwrap();
    assert_eq!(last.path, "/v1/chat/completions");
    assert_eq!(last.body["max_tokens"], 64);
    assert_eq!(last.body["temperature"], 0.2);
    // No key configured: no Authorization header.
    let mut keyless = model(&fake, "ok");
    keyless.as_object_mut().unwrap().remove("api_key");
    ask(&api, json!({"question": question, "model": keyless})).await;
    assert_eq!(fake.requests().pop().unwrap().authorization, None);
    // A question with no evidence still goes to the model, with no facts.
    let none = ask(&api, json!({"question": "What is the capital of Atlantis?", "model": model(&fake, "ok")})).await;
    assert_eq!(none["mode"], "model");
    if none["evidence"].as_array().unwrap().is_empty() {
        let user = fake.requests().pop().unwrap().body["messages"][1]["content"].as_str().unwrap().to_string();
        assert!(user.contains("(none)"), "{user}");
    }

    assert!(!server.stderr().contains(MODEL_KEY), "the key reached the log");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_model_failures_are_gateway_errors_without_the_key() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[ALLOW_PRIVATE]);
    let api = Api::new(&server, None);
    small_graph(&api).await;
    let question = "Where does Person:sarah work?";

    let cases: [(&str, u16, &str); 3] =
        [("fail-500", 502, "UpstreamError"), ("malformed", 502, "UpstreamError"), ("no-choices", 502, "UpstreamError")];
    for (name, status, code) in cases {
        let r = api.post("/api/ask", &json!({"question": question, "model": model(&fake, name)})).await;
        assert_eq!(r.status.as_u16(), status, "{name}: {}", r.text);
        r.expect_error(status, code);
        assert!(!r.text.contains(MODEL_KEY), "{name}: the key is in the error: {}", r.text);
    }
    // The upstream status is named in the message.
    let r = api.post("/api/ask", &json!({"question": question, "model": model(&fake, "fail-500")})).await;
    assert!(r.json["error"]["message"].as_str().unwrap().contains("500"), "{}", r.text);

    // Past the timeout: 504, and promptly (not after the endpoint's delay).
    let started = Instant::now();
    let r = api.post("/api/ask", &json!({"question": question, "model": model(&fake, "slow")})).await;
    let took = started.elapsed();
    r.expect_error(504, "UpstreamTimeout");
    assert!(!r.text.contains(MODEL_KEY), "{}", r.text);
    assert!(took < SLOW - Duration::from_millis(500), "the timeout was not applied: {took:?}");
    assert!(took >= Duration::from_millis(250), "answered before the timeout: {took:?}");

    // Nobody listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut cfg = model(&fake, "ok");
    cfg["base_url"] = json!(format!("http://127.0.0.1:{port}/v1"));
    let r = api.post("/api/ask", &json!({"question": question, "model": cfg})).await;
    r.expect_error(502, "UpstreamError");
    assert!(!r.text.contains(MODEL_KEY), "{}", r.text);

    // A key that cannot be a header value fails before any call, quietly.
    let mut cfg = model(&fake, "ok");
    cfg["api_key"] = json!(format!("{MODEL_KEY}\nX-Injected: 1"));
    let r = api.post("/api/ask", &json!({"question": question, "model": cfg})).await;
    assert!(matches!(r.status.as_u16(), 400 | 502), "{}", r.text);
    assert!(r.json["error"]["code"].is_string(), "{}", r.text);
    assert!(!r.text.contains(MODEL_KEY), "{}", r.text);

    // Every failing call did reach the endpoint with the key.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 5, "{reqs:?}");
    assert!(reqs.iter().all(|r| r.authorization.as_deref() == Some(format!("Bearer {MODEL_KEY}").as_str())));

    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = server.stderr();
    assert!(log.contains("model call failed"), "failures are logged: {log}");
    assert!(!log.contains(MODEL_KEY), "the key reached the log:\n{log}");
    server.stop_ok();
}

/// Some providers quote the key they were given in their error body; the
/// 502 quotes the endpoint's body, so that quote must be redacted (and kept
/// out of the log line of the failure).
#[tokio::test(flavor = "multi_thread")]
async fn ask_model_error_quoting_the_key_does_not_leak_it() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[ALLOW_PRIVATE]);
    let api = Api::new(&server, None);
    let r = api.post("/api/ask", &json!({"question": "Where does Person:sarah work?", "model": model(&fake, "echo-key")})).await;
    r.expect_error(502, "UpstreamError");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("401"), "{}", r.text);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = server.stderr();
    let leaks: Vec<&str> = [("response", r.text.contains(MODEL_KEY)), ("log", log.contains(MODEL_KEY))]
        .into_iter()
        .filter_map(|(w, leaked)| leaked.then_some(w))
        .collect();
    assert!(leaks.is_empty(), "the key the endpoint echoed reached the {leaks:?}:\n{}\n{log}", r.text);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn ask_refuses_private_model_endpoints_by_default() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    small_graph(&api).await;
    for base in [
        fake.base_url.clone(),
        fake.base_url.replace("127.0.0.1", "localhost"),
        fake.base_url.replace("127.0.0.1", "[::1]"),
        "http://169.254.169.254/latest".to_string(),
        "http://10.0.0.1:8080/v1".to_string(),
        // The rest of the SSRF table (docs/security.md): every private and
        // special range, however it is spelled.
        fake.base_url.replace("127.0.0.1", "[::ffff:127.0.0.1]"),
        fake.base_url.replace("127.0.0.1", "2130706433"),
        fake.base_url.replace("127.0.0.1", "0.0.0.0"),
        fake.base_url.replace("127.0.0.1", "[::]"),
        "http://[::ffff:169.254.169.254]/latest".to_string(),
        "http://[fd00:ec2::254]/latest".to_string(),
        "http://[fe80::1]/v1".to_string(),
        "http://[fc00::1]/v1".to_string(),
        "http://172.16.0.1/v1".to_string(),
        "http://192.168.1.1/v1".to_string(),
        "http://100.64.0.1/v1".to_string(),
        "http://[64:ff9b::a9fe:a9fe]/v1".to_string(),
    ] {
        let mut cfg = model(&fake, "ok");
        cfg["base_url"] = json!(base);
        let r = api.post("/api/ask", &json!({"question": "Where does Person:sarah work?", "model": cfg})).await;
        assert_eq!(r.status.as_u16(), 400, "{base}: {}", r.text);
        r.expect_error(400, "SchemaInvalid");
        assert!(!r.text.contains(MODEL_KEY), "{}", r.text);
    }
    assert!(fake.requests().is_empty(), "a refused endpoint was called: {:?}", fake.requests());
    // Without a model the route needs no outbound call at all.
    ask(&api, json!({"question": "Where does Person:sarah work?"})).await;
    assert!(!server.stderr().contains(MODEL_KEY));
    server.stop_ok();
}

/// The fake endpoint's embeddings, for the tests that will use them.
#[tokio::test(flavor = "multi_thread")]
async fn fake_endpoint_embeddings() {
    let fake = FakeLlm::start();
    let http = client();
    let url = format!("{}/embeddings", fake.base_url);
    let r = send(http.post(&url).bearer_auth(MODEL_KEY).json(&json!({"model": "ok", "input": ["acme", "globex"]}))).await;
    let data = r.expect(200)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 2);
    for (i, (item, input)) in data.iter().zip(["acme", "globex"]).enumerate() {
        assert_eq!(item["index"], i);
        let v: Vec<f32> = item["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        assert_eq!(v, fake_llm::embedding(input));
        assert_eq!(v.len(), fake_llm::EMBED_DIM);
    }
    let r = send(http.post(&url).json(&json!({"model": "fail-500", "input": ["x"]}))).await;
    assert_eq!(r.status.as_u16(), 500);
    let r = send(http.post(&url).json(&json!({"model": "no-choices", "input": ["x"]}))).await;
    assert!(r.expect(200).get("data").is_none());
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].path, "/v1/embeddings");
    assert_eq!(reqs[0].authorization.as_deref(), Some(format!("Bearer {MODEL_KEY}").as_str()));
    assert_eq!(reqs[1].authorization, None);
}

// ---------------------------------------------------------------- tenancy

#[tokio::test(flavor = "multi_thread")]
async fn recall_is_tenant_scoped() {
    let fake = FakeLlm::start();
    let mut env = keyed();
    env.push(ALLOW_PRIVATE);
    let (_tmp, server) = fresh(&env);
    let nas = Api::new(&server, Some(NAS_KEY));
    let other = Api::new(&server, Some(ACME_KEY));
    let g = small_graph(&nas).await;
    maya(&nas).await;
    // The other tenant has its own, unrelated sarah.
    let own = other.assert_fact(fact("Person:sarah", "lives_in", json!("City:oslo"), 1.0)).await;

    // walk
    let mine = walk(&nas, "start=Person:sarah&direction=both").await;
    assert_eq!(reached(&mine).len(), 4);
    let theirs = walk(&other, "start=Person:sarah&direction=both&depth=6").await;
    assert_eq!(reached(&theirs), set(&["Person:sarah", "City:oslo"]));
    assert_eq!(theirs["edges"].as_array().unwrap().len(), 1);
    assert_eq!(theirs["edges"][0]["fact_id"], own["id"]);
    let acme_in = walk(&other, "start=Org:acme&direction=in").await;
    assert_eq!(acme_in["reached"], json!(["Org:acme"]));
    assert_eq!(acme_in["edges"], json!([]));

    // graph
    let gm = graph(&nas, "").await;
    assert_eq!(gm["total_nodes"], 4);
    let go = graph(&other, "").await;
    assert_eq!(node_ids(&go), set(&["Person:sarah", "City:oslo"]));
    assert_eq!(go["total_edges"], 1);
    assert_eq!(graph(&other, "q=acme").await["nodes"], json!([]));

    // context
    let cm = context(&nas, json!({"seeds": ["Person:sarah"]})).await;
    assert!(fact_ids(&cm).contains(&g.sarah_acme));
    let co = context(&other, json!({"seeds": ["Person:sarah", "Person:maya", "Org:acme"], "goal": "favourite food"})).await;
    assert_eq!(fact_ids(&co), vec![id(&own)], "{co}");

    // ask, extractive and with a model
    let am = ask(&nas, json!({"question": "Where does Person:sarah work?"})).await;
    assert!(evidence_ids(&am).contains(&g.sarah_acme));
    let ao = ask(&other, json!({"question": "Where does Person:sarah work? Person:maya Org:acme"})).await;
    assert_eq!(evidence_ids(&ao), vec![id(&own)], "{ao}");
    let before = fake.requests().len();
    let aom = ask(&other, json!({"question": "Where does Person:sarah work?", "model": model(&fake, "ok")})).await;
    assert_eq!(evidence_ids(&aom), vec![id(&own)]);
    let sent = fake.requests()[before].body["messages"][1]["content"].as_str().unwrap().to_string();
    assert!(!sent.contains("Org:acme") && sent.contains("City:oslo"), "{sent}");

    // Without a valid key the routes are not there.
    let anonymous = Api::new(&server, None);
    let wrong = Api::new(&server, Some("nas-key-9"));
    for api in [&anonymous, &wrong] {
        api.get("/api/walk?start=Person:sarah").await.expect_hidden();
        api.get("/api/graph").await.expect_hidden();
        api.post("/api/context", &json!({"seeds": ["Person:sarah"]})).await.expect_hidden();
        api.post("/api/ask", &json!({"question": "Where does Person:sarah work?"})).await.expect_hidden();
    }
    // An admin names the tenant to read.
    let admin = Api::new(&server, Some(ADMIN));
    let aw = walk(&admin, "start=Person:sarah&tenant=nas").await;
    assert_eq!(reached(&aw), reached(&walk(&nas, "start=Person:sarah").await));
    admin.get("/api/walk?start=Person:sarah").await.expect_error(400, "SchemaInvalid");
    server.stop_ok();
}

/// Without seeds or entity refs, context packets and answers come from the
/// full-text index: the goal's words find the fact.
#[tokio::test(flavor = "multi_thread")]
async fn goal_and_question_words_alone_recall_through_the_index() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let g = small_graph(&api).await;
    let lisbon = id(&api.assert_fact(fact("Person:zoe", "favourite_city", json!("Lisbon"), 0.9)).await);

    // A goal with no seed: the recalled facts are the packet.
    let p = context(&api, json!({"goal": "which company was founded in 1999"})).await;
    assert_eq!(p["facts"][0]["id"], g.acme_founded.as_str(), "{p}");
    assert_eq!(origin_of(&p, &g.acme_founded).as_deref(), Some("recall"), "{p}");
    assert_eq!(p["ranking"][0]["recalled"], true);

    // With a seed, a fact the graph reaches and the goal recalls keeps its
    // graph origin and is marked recalled.
    let p = context(&api, json!({"seeds": ["Person:sarah"], "goal": "where is acme located"})).await;
    assert_eq!(origin_of(&p, &g.acme_paris).as_deref(), Some("hop"), "{p}");
    let r = p["ranking"].as_array().unwrap().iter().find(|r| r["id"] == g.acme_paris.as_str()).unwrap();
    assert_eq!(r["recalled"], true, "{p}");

    // ask: no entity named, the index finds the evidence.
    let a = ask(&api, json!({"question": "who loves lisbon?"})).await;
    assert_eq!(a["evidence"][0]["id"], lisbon.as_str(), "{a}");
    assert!(a["answer"].as_str().unwrap().contains("Lisbon"), "{a}");
    server.stop_ok();
}
