//! `GET /api/stream` over a real socket: the raw SSE bytes, frames per
//! event with `id:` = tx, resuming with `Last-Event-ID` without gaps or
//! repeats, tenant scoping, and a clean end when the server stops.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(5);

fn fact(subject: &str, object: &str, valid_from: i64) -> Value {
    json!({"subject": subject, "predicate": "works_at", "object": object, "valid_from": valid_from})
}

#[tokio::test(flavor = "multi_thread")]
async fn frames_carry_op_tx_fact_and_id() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    // Something before the subscription: a new subscriber starts at the head.
    let old = api.assert_fact(fact("Person:old", "Org:old", year(2019))).await;

    let mut sse = Sse::open(api.req(Method::GET, "/api/stream")).await;
    assert_eq!(sse.status.as_u16(), 200);
    let ct = sse.headers.get("content-type").unwrap().to_str().unwrap();
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    assert_eq!(sse.headers.get("cache-control").unwrap(), "no-cache");

    let acme = api.assert_fact(fact("Person:sarah", "Org:acme", year(2020))).await;
    let globex = api.assert_fact(fact("Person:sarah", "Org:globex", year(2024))).await;
    let retracted = api.delete(&format!("/api/facts/{}", globex["id"].as_str().unwrap())).await.expect(200).clone();
    api.put("/api/predicates/works_at", &json!({"cardinality": "many"})).await.expect(200);
    let batch = api
        .post("/api/facts/batch", &json!([fact("Person:a", "Org:a", 0), fact("Person:b", "Org:b", 0)]))
        .await
        .expect(201)
        .clone();

    let (id, data) = sse.next_event(WAIT).await.expect("frame");
    assert_ne!(data["fact"]["id"], old["id"], "a write from before the subscription was sent");
    assert_eq!(data["op"], "assert");
    assert_eq!(data["tx"], acme["tx"]);
    assert_eq!(data["fact"]["id"], acme["id"]);
    assert_eq!(data["fact"]["status"], "active");
    assert_eq!(data["fact"]["object"], "Org:acme");
    assert!(data.get("superseded").is_none(), "{data}");
    assert_eq!(id.as_deref(), Some(acme["tx"].to_string().as_str()));

    let (id, data) = sse.next_event(WAIT).await.expect("frame");
    assert_eq!(data["op"], "assert");
    assert_eq!(data["tx"], globex["tx"]);
    assert_eq!(data["fact"]["id"], globex["id"]);
    assert_eq!(data["superseded"], json!([acme["id"]]));
    assert_eq!(id, Some(globex["tx"].to_string()));

    let (id, data) = sse.next_event(WAIT).await.expect("frame");
    assert_eq!(data["op"], "retract");
    assert_eq!(data["tx"], retracted["tx"]);
    assert_eq!(data["fact"]["id"], globex["id"]);
    assert_eq!(data["fact"]["status"], "retracted");
    assert_eq!(id, Some(retracted["tx"].to_string()));

    let (id, data) = sse.next_event(WAIT).await.expect("frame");
    assert_eq!(data["op"], "predicate", "{data}");
    assert_eq!(data["predicate"]["name"], "works_at");
    assert_eq!(data["predicate"]["cardinality"], "many");
    let ptx = data["tx"].as_u64().unwrap();
    assert_eq!(id, Some(ptx.to_string()));
    assert!(ptx > retracted["tx"].as_u64().unwrap());

    // A batch: one frame per fact, all with the batch's tx; only the last carries the id.
    let (id1, d1) = sse.next_event(WAIT).await.expect("frame");
    let (id2, d2) = sse.next_event(WAIT).await.expect("frame");
    assert_eq!(d1["tx"], batch["tx"]);
    assert_eq!(d2["tx"], batch["tx"]);
    assert_eq!(d1["fact"]["id"], batch["facts"][0]["id"]);
    assert_eq!(d2["fact"]["id"], batch["facts"][1]["id"]);
    assert_eq!(id1, None);
    assert_eq!(id2, Some(batch["tx"].to_string()));
    sse.expect_quiet(Duration::from_millis(200)).await;
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn last_event_id_resumes_without_gaps_or_repeats() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let mut txs = Vec::new();
    let mut facts = Vec::new();
    for i in 0..8 {
        let f = api.assert_fact(fact(&format!("Person:p{i}"), "Org:o", 0)).await;
        txs.push(f["tx"].as_u64().unwrap());
        facts.push(f);
    }
    for resume_at in [0usize, 2, 7] {
        let last = txs[resume_at];
        let mut sse = Sse::open(api.req(Method::GET, "/api/stream").header("Last-Event-ID", last.to_string())).await;
        for f in &facts[resume_at + 1..] {
            let (id, data) = sse.next_event(WAIT).await.expect("frame");
            assert_eq!(data["tx"], f["tx"], "resume after {last}");
            assert_eq!(data["fact"]["id"], f["id"]);
            assert_eq!(id, Some(f["tx"].to_string()));
        }
        sse.expect_quiet(Duration::from_millis(150)).await;
    }

    // From the very beginning, then live: the catch-up and live frames join without a seam.
    let mut sse = Sse::open(api.req(Method::GET, "/api/stream").header("Last-Event-ID", "0")).await;
    let live_writer = {
        let api = api.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            for i in 0..10 {
                out.push(api.assert_fact(fact(&format!("Person:live{i}"), "Org:o", 0)).await);
            }
            out
        })
    };
    let mut got = Vec::new();
    for _ in 0..18 {
        let (id, data) = sse.next_event(WAIT).await.expect("frame");
        assert_eq!(id, Some(data["tx"].to_string()));
        got.push(data["tx"].as_u64().unwrap());
    }
    let live = live_writer.await.unwrap();
    let mut want = txs.clone();
    want.extend(live.iter().map(|f| f["tx"].as_u64().unwrap()));
    assert_eq!(got, want, "frames out of order, repeated or missing");
    sse.expect_quiet(Duration::from_millis(150)).await;

    // The query-string form too.
    let mut sse = Sse::open(api.req(Method::GET, &format!("/api/stream?after_tx={}", want[15]))).await;
    for t in &want[16..] {
        assert_eq!(sse.next_event(WAIT).await.expect("frame").1["tx"], *t);
    }
    sse.expect_quiet(Duration::from_millis(150)).await;

    // A subscriber that drops and resumes from its last id misses nothing.
    let mut sse = Sse::open(api.req(Method::GET, "/api/stream")).await;
    let a = api.assert_fact(fact("Person:r1", "Org:o", 0)).await;
    let (id, _) = sse.next_event(WAIT).await.unwrap();
    drop(sse);
    let b = api.assert_fact(fact("Person:r2", "Org:o", 0)).await;
    let c = api.assert_fact(fact("Person:r3", "Org:o", 0)).await;
    assert_eq!(id, Some(a["tx"].to_string()));
    let mut sse = Sse::open(api.req(Method::GET, "/api/stream").header("Last-Event-ID", id.unwrap())).await;
    assert_eq!(sse.next_event(WAIT).await.unwrap().1["fact"]["id"], b["id"]);
    assert_eq!(sse.next_event(WAIT).await.unwrap().1["fact"]["id"], c["id"]);
    sse.expect_quiet(Duration::from_millis(150)).await;
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_sees_only_its_own_tenant() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let admin = Api::new(&server, Some(ADMIN));

    let mut nas_sse = Sse::open(nas.req(Method::GET, "/api/stream")).await;
    let mut nas_sneaky = Sse::open(nas.req(Method::GET, "/api/stream?tenant=acme").header("x-tempora-tenant", "acme")).await;
    let mut acme_sse = Sse::open(acme.req(Method::GET, "/api/stream")).await;
    let mut admin_acme = Sse::open(admin.req(Method::GET, "/api/stream?tenant=acme")).await;
    assert_eq!(nas_sse.status.as_u16(), 200);

    let mut acme_facts = Vec::new();
    for i in 0..3 {
        acme_facts.push(acme.assert_fact(fact(&format!("Person:a{i}"), "Org:acme", 0)).await);
    }
    let acme_id = acme_facts[0]["id"].as_str().unwrap().to_string();
    acme.delete(&format!("/api/facts/{acme_id}")).await.expect(200);
    acme.put("/api/predicates/works_at", &json!({"cardinality": "strict"})).await.expect(200);
    let n = nas.assert_fact(fact("Person:n", "Org:nas", 0)).await;

    // nas's subscribers: the nas fact is the first and only frame.
    for sse in [&mut nas_sse, &mut nas_sneaky] {
        let (_, data) = sse.next_event(WAIT).await.expect("frame");
        assert_eq!(data["fact"]["id"], n["id"], "nas saw another tenant's event: {data}");
        assert_eq!(data["fact"]["tenant"], "nas");
        sse.expect_quiet(Duration::from_millis(200)).await;
    }
    // acme's subscribers: acme's five events only.
    for sse in [&mut acme_sse, &mut admin_acme] {
        for f in &acme_facts {
            let (_, data) = sse.next_event(WAIT).await.expect("frame");
            assert_eq!(data["fact"]["id"], f["id"]);
        }
        assert_eq!(sse.next_event(WAIT).await.unwrap().1["op"], "retract");
        assert_eq!(sse.next_event(WAIT).await.unwrap().1["op"], "predicate");
        sse.expect_quiet(Duration::from_millis(200)).await;
    }

    // Replaying from the start is scoped too.
    let mut replay = Sse::open(nas.req(Method::GET, "/api/stream").header("Last-Event-ID", "0")).await;
    let (id, data) = replay.next_event(WAIT).await.expect("frame");
    assert_eq!(data["fact"]["id"], n["id"]);
    assert_eq!(id, Some(n["tx"].to_string()));
    replay.expect_quiet(Duration::from_millis(200)).await;

    // No key, a wrong key, or an admin naming no tenant: no stream.
    send(Api::new(&server, None).req(Method::GET, "/api/stream")).await.expect_hidden();
    send(Api::new(&server, Some("wrong-key-123")).req(Method::GET, "/api/stream")).await.expect_hidden();
    send(admin.req(Method::GET, "/api/stream")).await.expect_error(400, "SchemaInvalid");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn open_streams_end_cleanly_on_sigterm() {
    let (_tmp, mut server) = fresh(&[]);
    let api = Api::new(&server, None);
    let mut a = Sse::open(api.req(Method::GET, "/api/stream")).await;
    let mut b = Sse::open(api.req(Method::GET, "/api/stream").header("Last-Event-ID", "0")).await;
    let f = api.assert_fact(fact("Person:s", "Org:o", 0)).await;
    assert_eq!(a.next_event(WAIT).await.unwrap().1["fact"]["id"], f["id"]);
    assert_eq!(b.next_event(WAIT).await.unwrap().1["fact"]["id"], f["id"]);

    let started = Instant::now();
    server.sigterm();
    a.expect_end(WAIT).await;
    b.expect_end(WAIT).await;
    let status = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(5)))
        .unwrap_or_else(|| panic!("server still running 5 s after SIGTERM with open streams; stderr:\n{}", server.stderr()));
    assert!(status.success(), "exit status {status:?}; stderr:\n{}", server.stderr());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
async fn subscriber_limit_and_slots_freed_on_disconnect() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_SSE_SUBSCRIBERS", "2")]);
    let api = Api::new(&server, None);
    let a = Sse::open(api.req(Method::GET, "/api/stream")).await;
    let mut b = Sse::open(api.req(Method::GET, "/api/stream")).await;
    assert_eq!(a.status.as_u16(), 200);
    assert_eq!(b.status.as_u16(), 200);
    send(api.req(Method::GET, "/api/stream")).await.expect_error(429, "RateLimited");

    // A client that goes away gives its slot back, without any write to
    // wake its stream up.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut c = loop {
        let r = api.req(Method::GET, "/api/stream").send().await.unwrap();
        if r.status().as_u16() == 200 {
            break Sse::from_response(r);
        }
        assert_eq!(r.status().as_u16(), 429);
        assert!(Instant::now() < deadline, "the slot of a closed stream was not freed within 5 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(c.status.as_u16(), 200);
    let f = api.assert_fact(fact("Person:s", "Org:o", 0)).await;
    assert_eq!(b.next_event(WAIT).await.unwrap().1["fact"]["id"], f["id"]);
    assert_eq!(c.next_event(WAIT).await.unwrap().1["fact"]["id"], f["id"]);
    server.stop_ok();
}
