//! kill -9 of the real server under concurrent write load, over and over:
//! after every restart each write that was acknowledged (201) is there with
//! its tx, no transaction is there in part, the search index finds what was
//! acknowledged, and a change-feed subscriber that resumes from its last
//! event id gets every acknowledged transaction, in order, once.
//!
//! `TEMPORA_KILL_ROUNDS` sets the number of kills (10 by default, as in CI;
//! the soak in docs/operations.md runs 50).

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WRITERS: usize = 6;
const BATCH: usize = 3;
/// How long a restarted server may take to let the search index and a
/// resumed change feed catch up with what was acknowledged before the kill.
const CATCH_UP: Duration = Duration::from_secs(30);

fn rounds() -> usize {
    std::env::var("TEMPORA_KILL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10)
}

/// The word a single-fact write carries in its object, for the search check.
fn mark(round: usize, w: usize, n: usize) -> String {
    format!("mark{round}x{w}x{n}")
}

/// An acknowledged write: the ids it created and their tx, and for a single
/// fact the word to search it by.
#[derive(Debug, Clone)]
struct Ack {
    tx: u64,
    ids: Vec<String>,
    mark: Option<String>,
}

async fn writer(api: Api, round: usize, w: usize, stop: Arc<AtomicBool>, count: Arc<AtomicUsize>) -> Vec<Ack> {
    let mut acks = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        // Alternate single facts and batches; distinct subjects, so no write
        // supersedes another and each fact's current version is its first.
        let resp = if n.is_multiple_of(2) {
            let body = json!({"subject": format!("Load:r{round}-w{w}-n{n}"), "predicate": "seq",
                "object": format!("note {}", mark(round, w, n)), "source": "durability"});
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
            Ack { tx: body["tx"].as_u64().unwrap(), ids: ids(facts), mark: None }
        } else {
            let id = body["id"].as_str().unwrap().to_string();
            Ack { tx: body["tx"].as_u64().unwrap(), ids: vec![id], mark: Some(mark(round, w, n)) }
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


#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_writes_survive_kill_9_under_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut acked: Vec<Ack> = Vec::new();
    // The previous round's feed: where its subscriber stood when the server
    // died, the transactions it had seen, and what that round acknowledged.
    let mut feed: Option<(u64, Vec<u64>, Vec<Ack>)> = None;

    for round in 0..rounds() {
        let server = Server::start(&dir, &[]);
        let api = Api::new(&server, None);
        // What earlier rounds acknowledged is all still there, and the
        // derived views catch up with it.
        verify(&api, &acked).await;
        if let Some((resume, seen, round_acks)) = feed.take() {
            feed_catches_up(&api, resume, seen, &round_acks).await;
            search_catches_up(&api, &round_acks).await;
        }

        // A subscriber from the current transaction on, for the whole round.
        let start_tx = api.stats().await["last_tx"].as_u64().unwrap();
        let mut sse = Sse::open(api.req(Method::GET, &format!("/api/stream?after_tx={start_tx}"))).await;
        assert_eq!(sse.status, 200);

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
        let mut this_round = Vec::new();
        for t in tasks {
            this_round.extend(t.await.unwrap());
        }
        assert!(
            this_round.len() >= WRITERS,
            "round {round}: only {} writes acknowledged before the kill (pid {pid})",
            this_round.len()
        );
        eprintln!("round {round}: {} writes acknowledged before kill -9", this_round.len());

        // What the subscriber got before its server died; it resumes from
        // the last event id it was given (the round's start if none).
        let mut seen = Vec::new();
        let mut resume = start_tx;
        while let Some((id, data)) = sse.next_event(Duration::from_secs(10)).await {
            seen.push(data["tx"].as_u64().unwrap());
            if let Some(id) = id {
                resume = id.parse().unwrap();
            }
        }
        acked.extend(this_round.iter().cloned());
        feed = Some((resume, seen, this_round));
    }

    let server = Server::start(&dir, &[]);
    let api = Api::new(&server, None);
    verify(&api, &acked).await;
    if let Some((resume, seen, round_acks)) = feed.take() {
        feed_catches_up(&api, resume, seen, &round_acks).await;
        search_catches_up(&api, &round_acks).await;
    }
    server.stop_ok();
}

/// A subscriber that saw `seen` before the kill and resumes after `resume`
/// gets every transaction of `round_acks` it had not had, in tx order, with
/// none twice (a transaction's frames come together; only its last carries
/// the id).
async fn feed_catches_up(api: &Api, resume: u64, mut seen: Vec<u64>, round_acks: &[Ack]) {
    seen.retain(|t| *t <= resume);
    let Some(want_up_to) = round_acks.iter().map(|a| a.tx).max() else { return };
    let mut sse = Sse::open(api.req(Method::GET, "/api/stream").header("Last-Event-ID", resume.to_string())).await;
    assert_eq!(sse.status, 200);
    let deadline = tokio::time::Instant::now() + CATCH_UP;
    // Until the last frame (the one with the id) of the newest acknowledged tx.
    let mut last_id = resume;
    while last_id < want_up_to {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let (id, data) = sse.next_event(left).await.expect("the resumed feed ended before catching up");
        let tx = data["tx"].as_u64().unwrap();
        assert!(tx > resume, "tx {tx} repeated after resuming from {resume}");
        seen.push(tx);
        if let Some(id) = id {
            last_id = id.parse().unwrap();
        }
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "feed out of tx order: {seen:?}");
    let mut runs = seen.clone();
    runs.dedup();
    let mut distinct = runs.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(runs.len(), distinct.len(), "a transaction's frames came twice: {seen:?}");
    for a in round_acks {
        assert!(distinct.binary_search(&a.tx).is_ok(), "acknowledged tx {} never reached the feed", a.tx);
        let frames = seen.iter().filter(|t| **t == a.tx).count();
        assert_eq!(frames, a.ids.len(), "tx {}: {frames} frames for {} facts", a.tx, a.ids.len());
    }
}

/// The search index, rebuilt from the change log after the kill, finds the
/// last single-fact writes each writer had acknowledged.
async fn search_catches_up(api: &Api, round_acks: &[Ack]) {
    let marked: Vec<&Ack> = round_acks.iter().filter(|a| a.mark.is_some()).collect();
    for a in marked.iter().rev().take(WRITERS) {
        let word = a.mark.as_deref().unwrap();
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            let r = api.get(&format!("/api/search?question={word}")).await;
            let v = r.expect(200);
            let found = v["answer_facts"].as_array().unwrap().iter().any(|f| f["id"] == a.ids[0].as_str());
            if found && v["stale"] == false {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "search never found acknowledged {word} (tx {}): {v}", a.tx);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn verify(api: &Api, acked: &[Ack]) {
    // Every acknowledged fact, by id, with its tx.
    let facts = api.all_facts().await;
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
