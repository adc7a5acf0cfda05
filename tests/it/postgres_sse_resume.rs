//! A change-feed subscriber resumes with `Last-Event-ID` on any replica:
//! two `tempora serve` processes on one PostgreSQL database, a subscriber
//! that reads part of replica A's feed, disconnects, and reconnects to
//! replica B with the id of the last event it received. B's stream carries
//! exactly the events after that id, of writes made through both replicas
//! before and after the reconnection, once each, in tx order, and nothing
//! more.

use crate::common::{client, postgres, Api, Server, Sse};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// One frame the feed must carry: its transaction, the fact it names, and
/// whether it is the last frame of its transaction (the one with `id:`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Expected {
    tx: u64,
    /// The frame's position within its transaction.
    nth: usize,
    op: &'static str,
    fact: String,
    last_of_tx: bool,
}

fn fact(subject: &str, object: &str) -> Value {
    json!({"subject": subject, "predicate": "works_at", "object": object})
}

/// POST /api/facts through `api`: its one frame.
async fn assert_one(api: &Api, subject: &str, object: &str) -> Vec<Expected> {
    let f = api.assert_fact(fact(subject, object)).await;
    vec![Expected {
        tx: f["tx"].as_u64().unwrap(),
        nth: 0,
        op: "assert",
        fact: f["id"].as_str().unwrap().to_string(),
        last_of_tx: true,
    }]
}

/// POST /api/facts/batch through `api`: one frame per fact, one tx.
async fn assert_batch(api: &Api, facts: &[(&str, &str)]) -> Vec<Expected> {
    let body = Value::Array(facts.iter().map(|(s, o)| fact(s, o)).collect());
    let batch = api.post("/api/facts/batch", &body).await.expect(201).clone();
    let tx = batch["tx"].as_u64().unwrap();
    let made = batch["facts"].as_array().unwrap();
    assert_eq!(made.len(), facts.len());
    made.iter()
        .enumerate()
        .map(|(nth, f)| Expected {
            tx,
            nth,
            op: "assert",
            fact: f["id"].as_str().unwrap().to_string(),
            last_of_tx: nth + 1 == made.len(),
        })
        .collect()
}

/// DELETE /api/facts/{id} through `api`: its one frame.
async fn retract(api: &Api, id: &str) -> Vec<Expected> {
    let f = api.delete(&format!("/api/facts/{id}")).await.expect(200).clone();
    vec![Expected { tx: f["tx"].as_u64().unwrap(), nth: 0, op: "retract", fact: id.to_string(), last_of_tx: true }]
}

/// The next frame of `feed`, checked against its `id:` line: the frame
/// says which of `expected` it is.
async fn next_frame(feed: &mut Sse, expected: &[Expected]) -> Expected {
    let (id, data) = feed.next_event(WAIT).await.expect("the feed ended");
    let tx = data["tx"].as_u64().unwrap_or_else(|| panic!("a frame without tx: {data}"));
    let fact = data["fact"]["id"].as_str().unwrap_or_else(|| panic!("a frame without a fact: {data}")).to_string();
    let known = expected
        .iter()
        .find(|e| e.tx == tx && e.fact == fact)
        .unwrap_or_else(|| panic!("a frame of no write of this test: {data}"));
    assert_eq!(data["op"], known.op, "{data}");
    let want_id = known.last_of_tx.then(|| tx.to_string());
    assert_eq!(id, want_id, "the id line is on the last frame of a transaction: {data}");
    known.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_resumes_with_last_event_id_on_another_replica() {
    let url = postgres::database().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [("TEMPORA_STORE", url.as_str())];
    let (server_a, server_b) = (Server::start(&dir.path().join("a"), &env), Server::start(&dir.path().join("b"), &env));
    let (a, b) = (Api::new(&server_a, None), Api::new(&server_b, None));

    // Subscribed to A before any write: its feed starts at the head.
    let mut feed = Sse::open(client().get(server_a.url("/api/stream"))).await;
    assert_eq!(feed.status, 200);

    // Writes through A: a fact, a batch of two (one tx, two frames), a
    // fact, then two more the subscriber will not read on A.
    let mut written = Vec::new();
    written.extend(assert_one(&a, "Person:p1", "Org:o1").await);
    written.extend(assert_batch(&a, &[("Person:p2", "Org:o2"), ("Person:p3", "Org:o3")]).await);
    written.extend(assert_one(&a, "Person:p4", "Org:o4").await);
    let read_on_a = written.len();
    written.extend(assert_one(&a, "Person:p5", "Org:o5").await);
    written.extend(assert_one(&a, "Person:p1", "Org:o6").await); // supersedes p1's first

    // Part of the feed on A: the first three transactions (four frames).
    let mut got_on_a = Vec::new();
    for _ in 0..read_on_a {
        got_on_a.push(next_frame(&mut feed, &written).await);
    }
    assert_eq!(got_on_a, written[..read_on_a], "A's feed, in tx order");
    let last = got_on_a.last().unwrap();
    assert!(last.last_of_tx);
    let last_id = last.tx;
    drop(feed);

    // While the subscriber is away: writes through both replicas.
    written.extend(assert_one(&b, "Person:q1", "Org:o1").await);
    written.extend(retract(&b, &written[0].fact).await);
    written.extend(assert_one(&a, "Person:q2", "Org:o2").await);
    written.extend(assert_batch(&b, &[("Person:q3", "Org:o3"), ("Person:q4", "Org:o4"), ("Person:q5", "Org:o5")]).await);

    // Back, on B, from the last id received on A.
    let mut feed = Sse::open(client().get(server_b.url("/api/stream")).header("Last-Event-ID", last_id.to_string())).await;
    assert_eq!(feed.status, 200);

    // Live writes through both replicas at once, after the reconnection.
    let live: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .map(|(r, api)| {
            tokio::spawn(async move {
                let mut out = Vec::new();
                for i in 0..5 {
                    out.extend(assert_one(&api, &format!("Person:live{r}-{i}"), "Org:live").await);
                }
                out
            })
        })
        .collect();
    for w in live {
        written.extend(w.await.unwrap());
    }

    // Exactly what came after last_id: every frame once, in tx order (and
    // in request order within a transaction), nothing before it, nothing
    // skipped.
    let mut want: Vec<Expected> = written.iter().filter(|e| e.tx > last_id).cloned().collect();
    want.sort();
    assert_eq!(want.len(), written.len() - read_on_a, "the writes after last_id");
    let txs: std::collections::BTreeSet<u64> = written.iter().map(|e| e.tx).collect();
    assert_eq!(txs.len(), 19, "every request a transaction of its own");
    let mut got = Vec::new();
    while got.len() < want.len() {
        got.push(next_frame(&mut feed, &written).await);
    }
    assert_eq!(got, want, "B's feed resumed after {last_id}");
    feed.expect_quiet(Duration::from_millis(1500)).await;
}
