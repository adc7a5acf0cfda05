//! Several `tempora serve` processes on one PostgreSQL database: writers
//! spread over the replicas on hot keys, then the rules checked in the
//! database itself; the change feed of one replica carrying every write of
//! the others, once and in order; an idempotent write replayed on another
//! replica; a replica killed with SIGKILL under load losing nothing it
//! acknowledged.

use crate::common::{client, postgres, Api, Server, Sse};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const WRITERS: usize = 16;
const KEYS: usize = 100;

/// `n` servers on one new database; the database's URL.
async fn replicas(n: usize) -> (tempfile::TempDir, Vec<Server>, String) {
    let url = postgres::database().await;
    let dir = tempfile::tempdir().unwrap();
    let servers =
        (0..n).map(|i| Server::start(&dir.path().join(format!("r{i}")), &[("TEMPORA_STORE", url.as_str())])).collect();
    (dir, servers, url)
}

/// One acknowledged write: its tx and the fact it made.
#[derive(Debug, Clone)]
struct Ack {
    tx: u64,
    id: String,
}

/// Writes to hot keys through `api` until `stop`; what was acknowledged.
async fn hot_writer(api: Api, w: usize, stop: Arc<AtomicBool>) -> Vec<Ack> {
    let mut acks = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = (w * 7 + n * 13) % KEYS;
        let body = json!({"subject": format!("Hot:{key}"), "predicate": "value", "object": format!("w{w}n{n}")});
        let Ok(resp) = api.req(reqwest::Method::POST, "/api/facts").json(&body).send().await else { break };
        if resp.status().as_u16() != 201 {
            break;
        }
        let Ok(fact) = resp.json::<Value>().await else { break };
        acks.push(Ack { tx: fact["tx"].as_u64().unwrap(), id: fact["id"].as_str().unwrap().to_string() });
    }
    acks
}


#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_keep_one_order_and_one_value_per_hot_key() {
    let (_dir, servers, url) = replicas(3).await;
    let apis: Vec<Api> = servers.iter().map(|s| Api::new(s, None)).collect();
    // A subscriber on the first replica, before any write.
    let mut feed = Sse::open(client().get(servers[0].url("/api/stream"))).await;
    assert_eq!(feed.status, 200);

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(hot_writer(apis[w % apis.len()].clone(), w, Arc::clone(&stop))))
        .collect();
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acks = Vec::new();
    for w in writers {
        acks.extend(w.await.unwrap());
    }
    assert!(acks.len() >= 3 * WRITERS, "too few writes acknowledged: {}", acks.len());

    // Every acknowledged write has a transaction of its own.
    let txs: BTreeSet<u64> = acks.iter().map(|a| a.tx).collect();
    assert_eq!(txs.len(), acks.len(), "two writes share a tx");

    // In the database itself: at most one active value per key, no inverted
    // interval, no two versions of a key overlapping while active, and tx
    // and record time rising together.
    let db = postgres::connect(&url).await;
    let doubled: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT subject FROM facts WHERE status = 'active' GROUP BY subject, predicate
             HAVING count(*) > 1) d",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(doubled, 0, "a key with two active values");
    let inverted: i64 = db
        .query_one("SELECT count(*) FROM fact_versions WHERE valid_until < valid_from", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(inverted, 0);
    let backwards: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT recorded_at < lag(recorded_at) OVER (ORDER BY tx) AS back FROM changes) c
             WHERE back",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(backwards, 0, "record time went back while tx rose");

    // Every acknowledged fact is there, through any replica.
    let facts = apis[2].all_facts().await;
    let known: HashMap<&str, &Value> = facts.iter().map(|f| (f["id"].as_str().unwrap(), f)).collect();
    for a in &acks {
        assert!(known.contains_key(a.id.as_str()), "acknowledged fact {} missing", a.id);
    }
    // Each key: exactly one active fact now, the rest superseded.
    let active: Vec<&&Value> = known.values().filter(|f| f["status"] == "active").collect();
    let keys: BTreeSet<&str> = known.values().map(|f| f["subject"].as_str().unwrap()).collect();
    assert_eq!(active.len(), keys.len(), "one active value per key");

    // The first replica's feed carried every write, of every replica, once and in tx order.
    let mut seen = Vec::new();
    while seen.len() < acks.len() {
        let Some((_, event)) = feed.next_event(Duration::from_secs(20)).await else { break };
        seen.push(event["tx"].as_u64().unwrap());
    }
    let sorted: Vec<u64> = txs.iter().copied().collect();
    assert_eq!(seen, sorted, "the feed is every acknowledged tx, once, in order");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keyed_write_replayed_on_another_replica_gets_the_first_answer() {
    let (_dir, servers, _url) = replicas(2).await;
    let (a, b) = (Api::new(&servers[0], None), Api::new(&servers[1], None));
    let body = json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme"});
    let send = |api: &Api| api.req(reqwest::Method::POST, "/api/facts").header("Idempotency-Key", "hire-sarah-1").json(&body);
    let first = crate::common::send(send(&a)).await;
    let first = first.expect(201).clone();
    let again = crate::common::send(send(&b)).await;
    assert_eq!(again.header("idempotency-replayed"), Some("true"));
    assert_eq!(again.json, first, "the replay on another replica is the first answer");
    assert_eq!(b.list("subject=Person:sarah&status=all").await.len(), 1, "written once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_under_load_loses_nothing_it_acknowledged() {
    let (dir, mut servers, url) = replicas(2).await;
    let victim = servers.remove(1);
    let survivor = Api::new(&servers[0], None);
    let stop = Arc::new(AtomicBool::new(false));
    let doomed = Api::new(&victim, None);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let api = if w % 2 == 0 { doomed.clone() } else { survivor.clone() };
            tokio::spawn(hot_writer(api, w, Arc::clone(&stop)))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    victim.kill9();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acks = Vec::new();
    for w in writers {
        acks.extend(w.await.unwrap());
    }
    assert!(!acks.is_empty());
    // A new replica on the same database sees every acknowledged write.
    let fresh = Server::start(&dir.path().join("r9"), &[("TEMPORA_STORE", url.as_str())]);
    let facts = Api::new(&fresh, None).all_facts().await;
    let ids: BTreeSet<&str> = facts.iter().map(|f| f["id"].as_str().unwrap()).collect();
    let lost: Vec<&Ack> = acks.iter().filter(|a| !ids.contains(a.id.as_str())).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
}

/// What a writer saw while the database went away and came back.
#[derive(Default)]
struct Seen {
    acks: Vec<Ack>,
    /// When each ack came, by its position in `acks`.
    at: Vec<std::time::Instant>,
    unavailable: usize,
    other: Vec<String>,
    slowest: Duration,
}

/// Writes until `stop`, going on through 503s.
async fn patient_writer(api: Api, w: usize, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let body = json!({"subject": format!("Steady:{w}-{n}"), "predicate": "value", "object": n});
        let started = std::time::Instant::now();
        let resp = api.req(reqwest::Method::POST, "/api/facts").json(&body).send().await;
        seen.slowest = seen.slowest.max(started.elapsed());
        let Ok(resp) = resp else {
            seen.other.push("no answer".into());
            continue;
        };
        match resp.status().as_u16() {
            201 => {
                let fact: Value = resp.json().await.unwrap();
                seen.acks.push(Ack { tx: fact["tx"].as_u64().unwrap(), id: fact["id"].as_str().unwrap().to_string() });
                seen.at.push(std::time::Instant::now());
            }
            503 => {
                let e: Value = resp.json().await.unwrap();
                if e["error"]["code"] != "Unavailable" {
                    seen.other.push(e.to_string());
                }
                seen.unavailable += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            s => seen.other.push(format!("{s}: {}", resp.text().await.unwrap_or_default())),
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_crash_under_load_answers_503_meanwhile_and_loses_nothing_acknowledged() {
    let cluster = postgres::Cluster::own();
    let url = cluster.new_database().await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("r0"), &[("TEMPORA_STORE", url.as_str())]);
    let api = Api::new(&server, None);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4).map(|w| tokio::spawn(patient_writer(api.clone(), w, Arc::clone(&stop)))).collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = api.get("/readyz").await;
    cluster.restart();
    let restarted = std::time::Instant::now();
    // The server reconnects by itself: ready, and writes acknowledged again.
    // The database first replays its log after the kill, for as long as
    // the machine takes (seconds on a loaded one), refusing connections.
    let mut after = api.get("/readyz").await;
    while after.status.as_u16() != 200 && restarted.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = api.get("/readyz").await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Seen::default();
    for w in writers {
        let s = w.await.unwrap();
        all.acks.extend(s.acks);
        all.at.extend(s.at);
        all.unavailable += s.unavailable;
        all.other.extend(s.other);
        all.slowest = all.slowest.max(s.slowest);
    }
    assert!(all.other.is_empty(), "answers other than 201 and 503: {:?}", all.other);
    assert!(all.unavailable > 0, "no write was refused while the database was down");
    assert!(all.slowest < Duration::from_secs(20), "a write hung for {:?}", all.slowest);
    assert_eq!(during.status.as_u16(), 503, "readyz while the database is down: {}", during.text);
    assert_eq!(after.status.as_u16(), 200, "readyz once it is back: {}", after.text);
    assert!(all.at.iter().any(|t| *t > restarted), "no write was acknowledged after the database came back");
    // Every acknowledged write is there.
    let facts = api.all_facts().await;
    let ids: BTreeSet<&str> = facts.iter().map(|f| f["id"].as_str().unwrap()).collect();
    let lost: Vec<&Ack> = all.acks.iter().filter(|a| !ids.contains(a.id.as_str())).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_report_runs_once_per_due_time_across_replicas() {
    let url = postgres::database().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [("TEMPORA_STORE", url.as_str()), ("TEMPORA_MONITOR_INTERVAL_SECS", "1")];
    let servers: Vec<Server> = (0..3).map(|i| Server::start(&dir.path().join(format!("r{i}")), &env)).collect();
    let api = Api::new(&servers[0], None);
    let report = api
        .post("/api/reports", &json!({"name": "Every second", "blocks": [{"type": "stats"}], "schedule": {"every_secs": 1}}))
        .await
        .expect(201)
        .clone();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let runs = api.get(&format!("/api/reports/{}/runs?limit=100", report["id"].as_str().unwrap())).await;
    let mut at: Vec<i64> = runs.expect(200).as_array().unwrap().iter().map(|r| r["ran_at"].as_i64().unwrap()).collect();
    at.sort();
    assert!(at.len() >= 3, "the report did not run on schedule: {at:?}");
    // Each run is due a second after the one before; a run of the same due
    // time by a second replica would come within milliseconds.
    for pair in at.windows(2) {
        assert!(pair[1] - pair[0] >= 990, "two runs {} ms apart: {at:?}", pair[1] - pair[0]);
    }
}

/// The arbitration under the schedules: of many claims of one run, from two
/// stores on one database (two servers), exactly one is taken.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_is_taken_once_across_stores() {
    use tempora::store::MemoryStore;
    let url = postgres::database().await;
    let stores: Vec<std::sync::Arc<tempora::store::postgres::PostgresStore>> =
        (0..2).map(|_| tempora::store::postgres::open(&url).unwrap()).collect();
    for run in 0..20 {
        let key = format!("report-run/t/r/{run}");
        let takers: Vec<_> = (0..8)
            .map(|i| {
                let (store, key) = (std::sync::Arc::clone(&stores[i % 2]), key.clone());
                std::thread::spawn(move || store.claim(key.as_bytes()).unwrap())
            })
            .collect();
        let taken = takers.into_iter().map(|t| t.join().unwrap()).filter(|t| *t).count();
        assert_eq!(taken, 1, "run {run} was claimed {taken} times");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_replicas_search_index_catches_up_and_reports_its_lag() {
    let (_dir, servers, _url) = replicas(2).await;
    let (a, b) = (Api::new(&servers[0], None), Api::new(&servers[1], None));
    a.assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:zanzibarcorp"})).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = b.get("/api/search?question=zanzibarcorp").await;
        let found = r.expect(200)["answer_facts"].as_array().is_some_and(|f| !f.is_empty());
        if found {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "replica b never indexed a write made through a: {}", r.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = b.get("/metrics").await;
    let lag = metrics
        .text
        .lines()
        .find_map(|l| l.strip_prefix("tempora_search_index_lag_tx "))
        .unwrap_or_else(|| panic!("no lag metric: {}", metrics.text));
    assert_eq!(lag, "0", "caught up, the index lags by nothing");
}

/// A read `as_of` a past record time answers the same before and after
/// later commits, while writers go on through two replicas.
#[tokio::test(flavor = "multi_thread")]
async fn a_past_record_time_answers_the_same_after_later_commits() {
    let (_dir, servers, _url) = replicas(2).await;
    let apis: Vec<Api> = servers.iter().map(|s| Api::new(s, None)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> =
        (0..6).map(|w| tokio::spawn(hot_writer(apis[w % 2].clone(), w, Arc::clone(&stop)))).collect();
    let mut checks = Vec::new();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A time that has just passed: writes of that very millisecond may
        // still be committing when the first read runs.
        let t = crate::common::now_ms() - 1;
        let q = format!("/api/facts?status=all&limit=1000&as_of={t}");
        let first = apis[0].get(&q).await.expect(200).clone();
        checks.push((q, first));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    for (q, first) in &checks {
        let again = apis[1].get(q).await.expect(200).clone();
        assert_eq!(&again, first, "{q} changed after later commits");
    }
}
