//! kill -9 of the real server under concurrent write load: every write that
//! was acknowledged (201) is there after a restart, with its tx, and no
//! transaction is there in part.

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WRITERS: usize = 6;
const ROUNDS: usize = 3;
const BATCH: usize = 3;

/// An acknowledged write: the ids it created and their tx.
#[derive(Debug, Clone)]
struct Ack {
    tx: u64,
    ids: Vec<String>,
}

async fn writer(api: Api, round: usize, w: usize, stop: Arc<AtomicBool>, count: Arc<AtomicUsize>) -> Vec<Ack> {
    let mut acks = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        // Alternate single facts and batches; distinct subjects, so no write
        // supersedes another and each fact's current version is its first.
        let resp = if n.is_multiple_of(2) {
            let body = json!({"subject": format!("Load:r{round}-w{w}-n{n}"), "predicate": "seq", "object": n, "source": "durability"});
            api.req(Method::POST, "/api/facts").json(&body).send().await
        } else {
            let facts: Vec<Value> = (0..BATCH)
                .map(|i| json!({"subject": format!("Batch:r{round}-w{w}-n{n}"), "predicate": format!("part{i}"), "object": i}))
                .collect();
            api.req(Method::POST, "/api/facts/batch").json(&json!({"facts": facts})).send().await
        };
        let Ok(resp) = resp else { break };
        if resp.status().as_u16() != 201 {
            break;
        }
        let Ok(body) = resp.json::<Value>().await else { break };
        let ack = if let Some(facts) = body.get("facts").and_then(|f| f.as_array()) {
            Ack { tx: body["tx"].as_u64().unwrap(), ids: ids(facts) }
        } else {
            Ack { tx: body["tx"].as_u64().unwrap(), ids: vec![body["id"].as_str().unwrap().to_string()] }
        };
        acks.push(ack);
        count.fetch_add(1, Ordering::Relaxed);
    }
    acks
}

/// Runs the load for at least `at_least`, and until every writer could have
/// had a few writes acknowledged (a slow machine gets up to 10 s more).
async fn load_for(count: &AtomicUsize, at_least: Duration) {
    tokio::time::sleep(at_least).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while count.load(Ordering::Relaxed) < 3 * WRITERS && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every fact of the tenant, page by page.
async fn all_facts(api: &Api) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/api/facts?status=all&limit=1000&cursor={}", enc(c)),
            None => "/api/facts?status=all&limit=1000".to_string(),
        };
        let r = api.get(&q).await;
        out.extend(r.expect(200).as_array().unwrap().iter().cloned());
        match r.header("x-next-cursor") {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_writes_survive_kill_9_under_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut acked: Vec<Ack> = Vec::new();

    for round in 0..ROUNDS {
        let server = Server::start(&dir, &[]);
        let api = Api::new(&server, None);
        // What earlier rounds acknowledged is all still there.
        verify(&api, &acked).await;

        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| tokio::spawn(writer(api.clone(), round, w, Arc::clone(&stop), Arc::clone(&count))))
            .collect();
        // Let the load run, then pull the plug mid-flight.
        load_for(&count, Duration::from_millis(400)).await;
        let pid = server.pid();
        tokio::task::block_in_place(|| server.kill9());
        stop.store(true, Ordering::Relaxed);
        let mut this_round = 0;
        for t in tasks {
            let acks = t.await.unwrap();
            this_round += acks.len();
            acked.extend(acks);
        }
        assert!(this_round >= WRITERS, "round {round}: only {this_round} writes acknowledged before the kill (pid {pid})");
        eprintln!("round {round}: {this_round} writes acknowledged before kill -9");
    }

    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    verify(&api, &acked).await;
    server.stop_ok();
}

async fn verify(api: &Api, acked: &[Ack]) {
    // Every acknowledged fact, by id, with its tx.
    let facts = all_facts(api).await;
    let by_id: HashMap<&str, &Value> = facts.iter().map(|f| (f["id"].as_str().unwrap(), f)).collect();
    for ack in acked {
        for id in &ack.ids {
            let f = by_id.get(id.as_str()).unwrap_or_else(|| panic!("acknowledged fact {id} (tx {}) is lost", ack.tx));
            assert_eq!(f["tx"], ack.tx, "fact {id}");
            assert_eq!(f["created_tx"], ack.tx, "fact {id}");
            assert_eq!(f["status"], "active");
        }
    }
    // Spot-check the single-fact read route too.
    for ack in acked.iter().step_by(17) {
        let r = api.get(&format!("/api/facts/{}", ack.ids[0])).await;
        assert_eq!(r.expect(200)["tx"], ack.tx);
    }
    // No partial transaction: each tx holds exactly one single fact or one whole batch.
    let mut by_tx: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for f in &facts {
        by_tx.entry(f["tx"].as_u64().unwrap()).or_default().push(f);
    }
    for (tx, fs) in &by_tx {
        let subject = fs[0]["subject"].as_str().unwrap();
        assert!(fs.iter().all(|f| f["subject"] == subject), "tx {tx} mixes writes");
        let want = if subject.starts_with("Batch:") { BATCH } else { 1 };
        assert_eq!(fs.len(), want, "tx {tx} is partial: {fs:?}");
    }
    // Stats agree with what the list shows, and tx numbers are unique per write.
    let s = api.stats().await;
    assert_eq!(s["facts"]["total"].as_u64().unwrap() as usize, facts.len());
    let mut txs: Vec<u64> = acked.iter().map(|a| a.tx).collect();
    txs.sort_unstable();
    txs.dedup();
    assert_eq!(txs.len(), acked.len(), "two acknowledged writes share a tx");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_under_load_drains_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> =
        (0..WRITERS).map(|w| tokio::spawn(writer(api.clone(), 9, w, Arc::clone(&stop), Arc::clone(&count)))).collect();
    load_for(&count, Duration::from_millis(300)).await;
    server.sigterm();
    let status = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(10)))
        .unwrap_or_else(|| panic!("server still running 10 s after SIGTERM under load; stderr:\n{}", server.stderr()));
    assert!(status.success(), "exit status {status:?}; stderr:\n{}", server.stderr());
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    assert!(acked.len() >= WRITERS);
    let server = Server::start(&dir, &[]);
    verify(&Api::new(&server, None), &acked).await;
    server.stop_ok();
}
