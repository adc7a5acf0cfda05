//! Reports over a real socket: blocks are checked up front (the error names
//! the block and the field), a run executes every block type against the
//! tenant's real facts and answers JSON and Markdown, runs are kept as facts
//! and listed, outputs too large for a stored value are cut (and say so),
//! tenants never see each other's reports, and a scheduled report runs by
//! itself.

use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const MANUAL: (&str, &str) = ("TEMPORA_MONITOR_INTERVAL_SECS", "0");

fn env() -> Vec<(&'static str, &'static str)> {
    let mut v = keyed();
    v.push(MANUAL);
    v
}

async fn fact(api: &Api, subject: &str, predicate: &str, object: Value, confidence: f64) -> Value {
    api.assert_fact(json!({"subject": subject, "predicate": predicate, "object": object, "confidence": confidence})).await
}

fn block(run: &Value, i: usize) -> &Value {
    &run["output"]["blocks"][i]
}

#[tokio::test(flavor = "multi_thread")]
async fn blocks_are_checked_up_front() {
    let (_tmp, server) = fresh(&env());
    let nas = Api::new(&server, Some(NAS_KEY));
    for (body, needle) in [
        (json!({"name": "r", "blocks": [{"type": "stats"}, {"type": "pie"}]}), "blocks[1].type"),
        (json!({"name": "r", "blocks": [{"limit": 3}]}), "blocks[0].type"),
        (json!({"name": "r", "blocks": [{"type": "facts", "limit": 0}]}), "blocks[0].limit"),
        (json!({"name": "r", "blocks": [{"type": "facts", "limit": "ten"}]}), "blocks[0].limit"),
        (json!({"name": "r", "blocks": [{"type": "facts", "status": "maybe"}]}), "blocks[0].status"),
        (json!({"name": "r", "blocks": [{"type": "facts", "subject": ""}]}), "blocks[0].subject"),
        (json!({"name": "r", "blocks": [{"type": "stats"}, {"type": "stats"}, {"type": "changes", "since": "last tuesday"}]}), "blocks[2].since"),
        (json!({"name": "r", "blocks": [{"type": "alerts", "limit": 5}]}), "blocks[0].limit"),
        (json!({"name": "r", "blocks": [{"type": "top_entities", "colour": "red"}]}), "blocks[0].colour"),
        (json!({"name": "r", "blocks": ["stats"]}), "blocks[0]"),
        (json!({"name": "r", "blocks": []}), "blocks"),
        (json!({"name": " ", "blocks": [{"type": "stats"}]}), "name"),
        (json!({"name": "r", "blocks": [{"type": "stats"}], "schedule": {"every_secs": 0}}), "schedule.every_secs"),
        (json!({"name": "r", "blocks": [{"type": "stats"}], "schedule": {"every": 5}}), "schedule"),
        (json!({"name": "r", "blocks": [{"type": "stats"}], "colour": "red"}), "colour"),
    ] {
        let r = nas.post("/api/reports", &body).await;
        r.expect_error(400, "SchemaInvalid");
        assert!(r.json["error"]["message"].as_str().unwrap().contains(needle), "{needle}: {}", r.text);
    }
    let listed = nas.get("/api/reports").await.expect(200).clone();
    assert_eq!(listed, json!([]), "nothing was stored");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_executes_every_block_on_real_data_and_is_kept() {
    let (_tmp, server) = fresh(&env());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));

    fact(&nas, "Person:sarah", "works_at", json!("Org:acme"), 1.0).await;
    fact(&nas, "Person:bob", "works_at", json!("Org:acme"), 1.0).await;
    fact(&nas, "Person:carol", "works_at", json!("Org:acme"), 1.0).await;
    fact(&nas, "Person:sarah", "knows", json!("Person:bob"), 1.0).await;
    fact(&nas, "Person:sarah", "role", json!("engineer"), 1.0).await;
    fact(&nas, "Person:sarah", "role", json!("staff engineer"), 1.0).await;
    fact(&nas, "Person:sarah", "rumor", json!("leaving | maybe"), 0.2).await;
    fact(&acme, "Person:zed", "works_at", json!("Org:zeta"), 1.0).await;
    // An open alert for the alerts block: any candidate fires.
    nas.put("/api/alerts/rules", &json!({"confidence": {"max_share": 0.0, "min_facts": 1}, "drift": {"enabled": false}})).await.expect(200);
    let fired = nas.post("/api/alerts/evaluate", &json!({})).await.expect(200).clone();
    assert_eq!(fired["fired"].as_array().unwrap().len(), 1, "{fired}");

    let created = nas
        .post(
            "/api/reports",
            &json!({"name": "Weekly memory", "schedule": null, "blocks": [
                {"type": "stats"},
                {"type": "facts", "subject": "Person:sarah"},
                {"type": "changes", "since": "1h", "limit": 100},
                {"type": "alerts"},
                {"type": "top_entities", "limit": 3},
                {"type": "facts", "predicate": "role", "status": "all"},
            ]}),
        )
        .await;
    let report = created.expect(201).clone();
    let id = report["id"].as_str().unwrap().to_string();
    assert_eq!(report["subject"], format!("Report:{id}"));
    assert_eq!((report["name"].as_str(), &report["schedule"], &report["last_run"]), (Some("Weekly memory"), &Value::Null, &Value::Null));
    assert_eq!(report["blocks"][1], json!({"type": "facts", "subject": "Person:sarah", "limit": 20}));
    assert_eq!(report["blocks"][2], json!({"type": "changes", "since": "1h", "limit": 100}));
    assert_eq!(nas.get(&format!("/api/reports/{id}")).await.expect(200).clone(), report);

    let run = nas.post(&format!("/api/reports/{id}/run"), &json!({})).await.expect(200).clone();
    let run_subject = run["run"].as_str().unwrap().to_string();
    assert!(run_subject.starts_with("ReportRun:"), "{run}");
    assert_eq!(run["report"], format!("Report:{id}"));
    assert_eq!(run["truncated"], false);

    // stats: the tenant's counts as /api/stats has them.
    let stats = nas.stats().await;
    assert_eq!(block(&run, 0)["type"], "stats");
    assert_eq!(block(&run, 0)["facts"]["candidate"], stats["facts"]["candidate"]);
    assert_eq!(block(&run, 0)["facts"], json!({"active": 5, "candidate": 1, "superseded": 1, "retracted": 0, "total": 7}), "the tenant's own facts, not the monitor's: {run}");
    assert_eq!((block(&run, 0)["entities"].as_u64(), block(&run, 0)["predicates"].as_u64()), (Some(3), Some(4)), "{run}");
    // facts: Sarah's current facts.
    let sarah: Vec<(String, Value)> = block(&run, 1)["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["predicate"].as_str().unwrap().to_string(), f["object"].clone()))
        .collect();
    assert_eq!(sarah.len(), 3, "{sarah:?}");
    assert!(sarah.contains(&("role".into(), json!("staff engineer"))) && sarah.contains(&("knows".into(), json!("Person:bob"))));
    assert!(!sarah.contains(&("role".into(), json!("engineer"))), "superseded facts are not current");
    // changes: the tenant's writes of the last hour, never another tenant's
    // or the monitor's own.
    let changes = block(&run, 2)["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 7, "{}", block(&run, 2));
    assert!(changes.iter().all(|c| c["op"] == "assert"));
    let superseding: Vec<&Value> = changes.iter().filter(|c| !c["superseded"].as_array().unwrap().is_empty()).collect();
    assert_eq!(superseding.len(), 1);
    assert_eq!(superseding[0]["fact"]["object"], "staff engineer");
    assert!(!changes.iter().any(|c| c["fact"]["subject"] == "Person:zed"));
    // alerts: the open one.
    assert_eq!(block(&run, 3)["count"], json!(1));
    assert_eq!(block(&run, 3)["alerts"][0]["id"], fired["fired"][0]["id"]);
    // top entities: Org:acme has three edges.
    assert_eq!(block(&run, 4)["entities"][0], json!({"id": "Org:acme", "type": "Org", "degree": 3}));
    assert_eq!(block(&run, 4)["entities"].as_array().unwrap().len(), 3);
    assert_eq!(block(&run, 4)["total"], json!(4), "acme, sarah, bob, carol and nothing of the monitor's");
    // facts with a status: both roles.
    assert_eq!(block(&run, 5)["count"], json!(2));

    // Markdown of the same data.
    let md = run["markdown"].as_str().unwrap();
    for needle in [
        "# Weekly memory",
        &run_subject,
        "## 1. Stats",
        "| candidate | 1 |",
        "## 2. Facts (subject = `Person:sarah`)",
        "| Person:sarah | role | staff engineer | 1.0 | active |",
        "leaving \\| maybe",
        "## 3. Changes since",
        "`Person:sarah` `role` `staff engineer` (supersedes 1)",
        "## 4. Open alerts",
        "**confidence** `candidates` (open",
        "## 5. Top entities",
        "| Org:acme | Org | 3 |",
        "## 6. Facts (predicate = `role`, status = `all`)",
    ] {
        assert!(md.contains(needle), "markdown lacks {needle:?}:\n{md}");
    }

    // Kept as facts, and listed.
    let kept = nas.list(&format!("subject={}", enc(&run_subject))).await;
    let by = |p: &str| kept.iter().find(|f| f["predicate"] == p).unwrap_or_else(|| panic!("{p} in {kept:?}"))["object"].clone();
    assert_eq!(by("run.markdown"), run["markdown"]);
    assert_eq!(by("run.output"), run["output"]);
    assert_eq!(by("run.report"), json!(format!("Report:{id}")));
    assert_eq!(by("run.ran_at"), run["ran_at"]);
    let runs = nas.get(&format!("/api/reports/{id}/runs")).await.expect(200).clone();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!((runs[0]["run"].as_str(), &runs[0]["markdown"]), (Some(run_subject.as_str()), &run["markdown"]));
    let listed = nas.get("/api/reports").await.expect(200).clone();
    assert_eq!(listed[0]["last_run"], json!({"run": run_subject, "ran_at": run["ran_at"]}));

    // A second run sees new data, and not the first run's facts.
    fact(&nas, "Person:dave", "works_at", json!("Org:acme"), 1.0).await;
    let run2 = nas.post(&format!("/api/reports/Report:{id}/run"), &json!({})).await.expect(200).clone();
    assert_eq!(block(&run2, 4)["entities"][0]["degree"], json!(4));
    let changes2 = block(&run2, 2)["changes"].as_array().unwrap();
    assert_eq!(changes2.len(), 8);
    assert!(!changes2.iter().any(|c| c["fact"]["subject"].as_str().unwrap().starts_with("ReportRun:")));
    let runs = nas.get(&format!("/api/reports/{id}/runs?limit=5")).await.expect(200).clone();
    assert_eq!(runs.as_array().unwrap().len(), 2);
    assert_eq!(runs[0]["run"], run2["run"], "newest first");
    nas.get(&format!("/api/reports/{id}/runs?limit=0")).await.expect_error(400, "SchemaInvalid");

    // Idempotent runs.
    let once = nas.req(reqwest::Method::POST, &format!("/api/reports/{id}/run")).header("Idempotency-Key", "run-1").json(&json!({}));
    let first = send(once).await;
    let again = send(nas.req(reqwest::Method::POST, &format!("/api/reports/{id}/run")).header("Idempotency-Key", "run-1").json(&json!({}))).await;
    assert_eq!(first.json["run"], again.json["run"]);
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(nas.get(&format!("/api/reports/{id}/runs")).await.expect(200).as_array().unwrap().len(), 3);

    // Another tenant sees none of it.
    assert_eq!(acme.get("/api/reports").await.expect(200).clone(), json!([]));
    acme.get(&format!("/api/reports/{id}")).await.expect_hidden();
    acme.post(&format!("/api/reports/{id}/run"), &json!({})).await.expect_hidden();
    acme.get(&format!("/api/reports/{id}/runs")).await.expect_hidden();
    Api::new(&server, None).get("/api/reports").await.expect_hidden();
    nas.post("/api/reports/0190d6a4-0000-7000-8000-000000000000/run", &json!({})).await.expect_hidden();
    nas.get("/api/reports/nope").await.expect_hidden();
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn outputs_too_large_to_store_are_cut_and_say_so() {
    let (_tmp, server) = fresh(&env());
    let nas = Api::new(&server, Some(NAS_KEY));
    let big = "x".repeat(40_000);
    let batch: Vec<Value> = (0..10).map(|i| json!({"subject": format!("Doc:{i}"), "predicate": "body", "object": big})).collect();
    nas.post("/api/facts/batch", &json!(batch)).await.expect(201);
    let report = nas.post("/api/reports", &json!({"name": "Bodies", "blocks": [{"type": "facts", "predicate": "body"}, {"type": "stats"}]})).await.expect(201).clone();
    let run = nas.post(&format!("/api/reports/{}/run", report["id"].as_str().unwrap()), &json!({})).await.expect(200).clone();
    assert_eq!(run["truncated"], true, "{}", run["markdown"]);
    assert_eq!(block(&run, 0)["truncated"], true);
    let kept = block(&run, 0)["facts"].as_array().unwrap().len();
    assert!((1..10).contains(&kept), "{kept}");
    assert_eq!(block(&run, 0)["count"], json!(10), "the count is of what matched");
    assert_eq!(block(&run, 1)["facts"]["active"], json!(10));
    assert!(run["markdown"].as_str().unwrap().contains("shortened"));
    let runs = nas.get(&format!("/api/reports/{}/runs", report["id"].as_str().unwrap())).await.expect(200).clone();
    assert_eq!(runs[0]["output"], run["output"]);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_report_runs_by_itself() {
    let (_tmp, server) = fresh(&[("TEMPORA_TENANT_KEYS", "nas=nas-key-1"), ("TEMPORA_MONITOR_INTERVAL_SECS", "1")]);
    let nas = Api::new(&server, Some(NAS_KEY));
    fact(&nas, "Person:sarah", "works_at", json!("Org:acme"), 1.0).await;
    let scheduled = nas.post("/api/reports", &json!({"name": "Every second", "blocks": [{"type": "stats"}], "schedule": {"every_secs": 1}})).await.expect(201).clone();
    assert_eq!(scheduled["schedule"], json!({"every_secs": 1}));
    let manual = nas.post("/api/reports", &json!({"name": "By hand", "blocks": [{"type": "stats"}]})).await.expect(201).clone();
    let runs_of = |r: &Value| format!("/api/reports/{}/runs", r["id"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let runs = loop {
        let runs = nas.get(&runs_of(&scheduled)).await.expect(200).as_array().unwrap().clone();
        if runs.len() >= 2 {
            break runs;
        }
        assert!(Instant::now() < deadline, "the scheduled report did not run twice within 20 s; stderr:\n{}", server.stderr());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(runs[0]["output"]["blocks"][0]["facts"]["active"], json!(1), "{}", runs[0]);
    assert!(runs[0]["markdown"].as_str().unwrap().starts_with("# Every second"));
    assert!(runs[0]["ran_at"].as_i64() > runs[1]["ran_at"].as_i64());
    let listed = nas.get(&format!("/api/reports/{}", scheduled["id"].as_str().unwrap())).await.expect(200).clone();
    assert_eq!(listed["last_run"]["run"], runs[0]["run"]);
    assert_eq!(nas.get(&runs_of(&manual)).await.expect(200).clone(), json!([]), "an unscheduled report runs only when asked");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_facts_block_of_status_all_lists_retracted_facts_too() {
    let (_tmp, server) = fresh(&env());
    let nas = Api::new(&server, Some(NAS_KEY));
    fact(&nas, "Person:sarah", "role", json!("engineer"), 1.0).await;
    let gone = fact(&nas, "Person:sarah", "title", json!("lead"), 1.0).await;
    nas.delete(&format!("/api/facts/{}", gone["id"].as_str().unwrap())).await.expect(200);
    let blocks = json!([
        {"type": "facts", "subject": "Person:sarah", "status": "all"},
        {"type": "facts", "subject": "Person:sarah", "status": "active,retracted"},
        {"type": "facts", "subject": "Person:sarah"},
    ]);
    let id = nas.post("/api/reports", &json!({"name": "r", "blocks": blocks})).await.expect(201)["id"].as_str().unwrap().to_string();
    let run = nas.post(&format!("/api/reports/{id}/run"), &json!({})).await.expect(200).clone();
    assert_eq!((block(&run, 0)["count"].as_u64(), block(&run, 1)["count"].as_u64(), block(&run, 2)["count"].as_u64()), (Some(2), Some(2), Some(1)), "{run}");
}
