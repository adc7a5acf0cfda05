//! Moving a store between the embedded engine and PostgreSQL with `tempora
//! backup` and `tempora restore`: a keyed store built through the HTTP API
//! is backed up, restored into an empty PostgreSQL database, served from
//! there, backed up again and restored into a new data directory; each
//! server answers every read like the original (every fact, every version,
//! every past record time, the change feed, counts, idempotent replays, an
//! artifact), and goes on numbering transactions after the last. The two
//! backup files hold the same records. A database with data and a damaged
//! file are refused, changing nothing.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const ZED_KEY: &str = "zed-key-1";
const YAN_KEY: &str = "yan-key-1";

/// Keyed mode with a third tenant, `zed`, whose only write is refused, and
/// a fourth, `yan`, who first writes after the move.
fn env() -> Vec<(&'static str, &'static str)> {
    let keys = "nas=nas-key-1,acme=acme-key-1,zed=zed-key-1,yan=yan-key-1";
    vec![("TEMPORA_TENANT_KEYS", keys), ("TEMPORA_ADMIN_TOKENS", ADMIN)]
}

/// The next writes after a move: the next tx, and a tenant new to the
/// store numbered after the moved ones.
async fn next_writes(server: &Server, last_tx: u64) {
    let nas = Api::new(server, Some(NAS_KEY));
    let next = nas.assert_fact(fact("Person:new", "works_at", json!("Org:acme"), year(2026))).await;
    assert_eq!(next["tx"].as_u64(), Some(last_tx + 1));
    let yan = Api::new(server, Some(YAN_KEY));
    let first = yan.assert_fact(fact("Person:yan", "works_at", json!("Org:acme"), year(2026))).await;
    assert_eq!(first["tx"].as_u64(), Some(last_tx + 2));
    assert_eq!(yan.list("subject=Person:yan").await.len(), 1);
    assert_eq!(Api::new(server, Some(ADMIN)).stats().await["tenants"], 3);
}

fn tempora(args: &[&str]) -> Output {
    tempora_command().args(args).output().expect("tempora runs")
}

#[track_caller]
fn ok(out: &Output) -> String {
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "failed: {said}\n{}", String::from_utf8_lossy(&out.stderr));
    said
}

#[track_caller]
fn failed(out: &Output, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should have failed: {}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains(why), "stderr should say {why:?}: {err}");
}

fn fact(subject: &str, predicate: &str, object: Value, from: i64) -> Value {
    json!({"subject": subject, "predicate": predicate, "object": object, "valid_from": from})
}

/// A keyed POST; the response.
async fn keyed_post(api: &Api, path: &str, key: &str, body: &Value) -> Resp {
    send(api.req(Method::POST, path).header("Idempotency-Key", key).json(body)).await
}

/// What a store holds that moves with it, written through the API. Returns
/// the answers of the keyed writes, to be replayed: (tenant key, path,
/// idempotency key, body, status, answer).
async fn build(server: &Server) -> Vec<(&'static str, &'static str, &'static str, Value, u16, Value)> {
    let nas = Api::new(server, Some(NAS_KEY));
    let acme = Api::new(server, Some(ACME_KEY));
    let zed = Api::new(server, Some(ZED_KEY));
    let mut keyed = Vec::new();

    // A refused keyed write is the only write of zed: a stored answer and
    // no tenant on the engine.
    let bad = json!({"subject": "Doc:z", "predicate": "title", "object": "x", "valid_from": year(2020), "valid_until": year(2019)});
    let r = keyed_post(&zed, "/api/facts", "zed-bad", &bad).await;
    assert_eq!(r.status.as_u16(), 400, "{}", r.text);
    keyed.push((ZED_KEY, "/api/facts", "zed-bad", bad, 400, r.json.clone()));

    // nas: takeovers, a tail, retractions (one of a superseded fact), a
    // candidate below the threshold, then a lower threshold.
    let acme_job = nas.assert_fact(fact("Person:sarah", "works_at", json!("Org:acme"), year(2020))).await;
    nas.assert_fact(fact("Person:sarah", "works_at", json!("Org:globex"), year(2024))).await;
    let stint = nas
        .assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:initech",
                            "valid_from": year(2025), "valid_until": year(2026)}))
        .await;
    nas.delete(&format!("/api/facts/{}", stint["id"].as_str().unwrap())).await.expect(200);
    nas.delete(&format!("/api/facts/{}", acme_job["id"].as_str().unwrap())).await.expect(200);
    let candidate = json!({"subject": "Person:sarah", "predicate": "likes", "object": {"drink": "tea", "cups": 2.5},
                           "confidence": 0.5, "source": "chat", "properties": {"heard": "monday"}});
    assert_eq!(nas.assert_fact(candidate).await["status"], "candidate");
    nas.put("/api/predicates/speaks", &json!({"cardinality": "many"})).await.expect(200);
    for lang in ["en", "fr", "de"] {
        let mut f = fact("Person:ana", "speaks", json!(lang), year(2000));
        f["source"] = json!("crm");
        nas.assert_fact(f).await;
    }
    // Back to one: a bounded value closes all three, each continues after it.
    nas.put("/api/predicates/speaks", &json!({"cardinality": "one"})).await.expect(200);
    nas.assert_fact(json!({"subject": "Person:ana", "predicate": "speaks", "object": "fr",
                           "valid_from": year(2010), "valid_until": year(2012)}))
        .await;
    nas.put("/api/predicates/owns", &json!({"cardinality": "strict"})).await.expect(200);
    nas.assert_fact(fact("Person:ana", "owns", json!("Car:1"), year(2015))).await;
    nas.put("/api/predicates/tags", &json!({"cardinality": "many"})).await.expect(200);
    for tag in ["red", "blue"] {
        nas.assert_fact(fact("Doc:1", "tags", json!(tag), year(2021))).await;
    }
    nas.put("/api/predicates/works_at", &json!({"cardinality": "one"})).await.expect(200);
    // A digest with a threshold of its own: two threshold changes in its
    // transaction, and the pages and mentions it makes.
    let digest = json!({"content": "id,name\nc1,Sarah Chen\nc2,Ana Lopez\n", "content_type": "text/csv",
                        "subject": "Customer", "threshold": 0.95});
    nas.post("/api/digest", &digest).await.expect(200);
    let batch = json!({"facts": [fact("Doc:2", "title", json!("draft"), year(2022)), fact("Doc:2", "title", json!("final"), year(2023))]});
    nas.post("/api/facts/batch", &batch).await.expect(201);
    let once = fact("Note:n", "says", json!("violet harmonica"), year(2021));
    let r = keyed_post(&nas, "/api/facts", "nas-once", &once).await;
    keyed.push((NAS_KEY, "/api/facts", "nas-once", once, 201, r.expect(201).clone()));

    // acme: a keyed batch, a takeover, and an Agent Protocol task with an artifact.
    let facts = json!({"facts": [fact("Org:acme", "ceo", json!("Person:kim"), year(2019)), fact("Org:acme", "hq", json!("City:oslo"), year(2019))]});
    let r = keyed_post(&acme, "/api/facts/batch", "acme-batch", &facts).await;
    keyed.push((ACME_KEY, "/api/facts/batch", "acme-batch", facts, 201, r.expect(201).clone()));
    acme.assert_fact(fact("Org:acme", "ceo", json!("Person:lee"), year(2023))).await;
    let task = acme.post("/ap/v1/agent/tasks", &json!({"input": "remember Org:acme founded 1999"})).await;
    let task = task.expect(200)["task_id"].as_str().unwrap().to_string();
    let boundary = "----tempora-backup-test";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend((0..70_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8));
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let r = send(
        acme.req(Method::POST, &format!("/ap/v1/agent/tasks/{task}/artifacts"))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body),
    )
    .await;
    let artifact = r.expect(200)["artifact_id"].as_str().unwrap().to_string();
    let step = send(acme.req(Method::POST, &format!("/ap/v1/agent/tasks/{task}/steps")).json(&json!({}))).await;
    step.expect(200);
    let _ = artifact;
    keyed
}

/// Every read this test compares, of every tenant, as one JSON value.
async fn snapshot(server: &Server) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let admin = Api::new(server, Some(ADMIN));
    out.insert("admin stats".into(), admin.stats().await);
    let last_tx = admin.stats().await["last_tx"].as_u64().unwrap();
    for (name, key) in [("nas", NAS_KEY), ("acme", ACME_KEY), ("zed", ZED_KEY)] {
        let api = Api::new(server, Some(key));
        let mut all = every_fact(&api, "").await;
        out.insert(format!("{name} stats"), api.stats().await);
        // Every version of every fact, and what every past tx saw.
        for f in &all {
            let id = f["id"].as_str().unwrap();
            out.insert(format!("{name} history {id}"), api.get(&format!("/api/facts/{id}/history")).await.expect(200).clone());
        }
        for tx in 0..=last_tx {
            out.insert(format!("{name} as_of_tx {tx}"), json!(every_fact(&api, &format!("&as_of_tx={tx}")).await));
        }
        // Past record times, and valid times.
        let times: BTreeSet<i64> = all.iter().map(|f| f["recorded_at"].as_i64().unwrap()).collect();
        for t in times.iter().flat_map(|t| [t - 1, *t]) {
            out.insert(format!("{name} as_of {t}"), json!(every_fact(&api, &format!("&as_of={t}")).await));
        }
        for y in [2000, 2011, 2013, 2020, 2022, 2024, 2025, 2027] {
            out.insert(format!("{name} valid_at {y}"), json!(api.list(&format!("valid_at={}&limit=1000", year(y))).await));
        }
        for p in ["works_at", "speaks", "owns", "tags", "title"] {
            out.insert(format!("{name} predicate {p}"), api.get(&format!("/api/predicates/{p}")).await.expect(200).clone());
        }
        let changes = feed(&api, last_tx).await;
        // An event per operation; the last of a transaction carries its id.
        let txs: Vec<u64> = changes.iter().map(|(_, data)| data["tx"].as_u64().unwrap()).collect();
        assert!(txs.windows(2).all(|w| w[0] <= w[1]), "{name}'s feed is out of order: {txs:?}");
        assert!(name == "zed" || txs.len() >= 3, "{name}'s feed: {txs:?}");
        out.insert(format!("{name} changes"), json!(changes));
        all.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        out.insert(format!("{name} facts"), json!(all));
    }
    out
}

/// Every fact of the tenant in any status, with `extra` on the query,
/// through every page, by id.
async fn every_fact(api: &Api, extra: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = format!("/api/facts?status=all&include_retracted=true&limit=7{extra}");
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={}", enc(c)));
        }
        let r = api.get(&q).await;
        out.extend(r.expect(200).as_array().unwrap().iter().cloned());
        match r.header("x-next-cursor") {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    out.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    out
}

/// The tenant's change feed from its start: every transaction up to
/// `last_tx` (the feed ends there, or goes quiet).
async fn feed(api: &Api, last_tx: u64) -> Vec<(Option<String>, Value)> {
    let mut sse = Sse::open(api.req(Method::GET, "/api/stream?after_tx=0")).await;
    assert_eq!(sse.status, 200);
    let mut out = Vec::new();
    while let Ok(Some((id, data))) = tokio::time::timeout(Duration::from_secs(2), sse.next_event(Duration::from_secs(60))).await {
        let done = id.as_deref().and_then(|i| i.parse::<u64>().ok()) == Some(last_tx);
        out.push((id, data));
        if done {
            break;
        }
    }
    out
}

/// Asserts two snapshots equal, naming the first read that differs.
#[track_caller]
fn same(want: &BTreeMap<String, Value>, got: &BTreeMap<String, Value>, what: &str) {
    assert_eq!(want.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>(), "{what}: different reads");
    for (k, w) in want {
        assert_eq!(w, &got[k], "{what}: {k} differs");
    }
}

/// The keyed writes, replayed: the stored answers, marked as replays.
async fn replays(server: &Server, keyed: &[(&str, &str, &str, Value, u16, Value)]) {
    for (tenant, path, key, body, status, answer) in keyed {
        let api = Api::new(server, Some(tenant));
        let r = keyed_post(&api, path, key, body).await;
        assert_eq!(r.status.as_u16(), *status, "{key}: {}", r.text);
        assert_eq!(r.header("idempotency-replayed"), Some("true"), "{key} was not replayed");
        assert_eq!(&r.json, answer, "{key} answers differently");
    }
}

/// The artifact of acme's task is there, byte for byte.
async fn artifacts(server: &Server) -> Vec<(String, Vec<u8>)> {
    let acme = Api::new(server, Some(ACME_KEY));
    let tasks = acme.get("/ap/v1/agent/tasks").await;
    let mut out = Vec::new();
    for t in tasks.expect(200)["tasks"].as_array().unwrap() {
        let task = t["task_id"].as_str().unwrap();
        let list = acme.get(&format!("/ap/v1/agent/tasks/{task}/artifacts")).await;
        for a in list.expect(200)["artifacts"].as_array().unwrap() {
            let id = a["artifact_id"].as_str().unwrap();
            let bytes = acme
                .req(Method::GET, &format!("/ap/v1/agent/tasks/{task}/artifacts/{id}"))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            out.push((format!("{task}/{id}/{}", a["file_name"]), bytes.to_vec()));
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no artifact");
    out
}

/// The records of a backup file by keyspace (`storage/src/backup.rs`):
/// header, then (keyspace, key, value) until 0xFF.
fn records(file: &Path) -> Vec<(u8, Vec<u8>, Vec<u8>)> {
    let bytes = std::fs::read(file).unwrap();
    let mut at = 16 + 4 + 4 + 8 + 8 + 8;
    let mut take = |n: usize| {
        let part = bytes[at..at + n].to_vec();
        at += n;
        part
    };
    let mut out = Vec::new();
    loop {
        let ks = take(1)[0];
        if ks == 0xFF {
            return out;
        }
        let n = u32::from_be_bytes(take(4).try_into().unwrap()) as usize;
        let key = take(n);
        let n = u32::from_be_bytes(take(4).try_into().unwrap()) as usize;
        out.push((ks, key, take(n)));
    }
}

/// Tenant rows, facts and changes of the database at `url`.
async fn rows_in(url: &str) -> (i64, i64, i64, i64) {
    let c = postgres::connect(url).await;
    let r = c
        .query_one(
            "SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM fact_versions), (SELECT count(*) FROM changes),
                    (SELECT last_tx FROM clock)",
            &[],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_moves_to_postgres_and_back_with_every_read_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let url = postgres::database().await;

    // The original, on the embedded engine.
    let original = Server::start(&tmp.path().join("embedded"), &[&env()[..], &[("TEMPORA_STORE", "embedded")]].concat());
    let keyed = build(&original).await;
    let want = snapshot(&original).await;
    let want_artifacts = artifacts(&original).await;
    let last_tx = want["admin stats"]["last_tx"].as_u64().unwrap();
    assert!(want["nas facts"].as_array().unwrap().len() > 15, "{}", want["nas facts"]);
    ok(&tokio::task::block_in_place(|| tempora(&["backup", "--url", &original.base, "--key", ADMIN, "--out", &path("embedded.backup")])));
    original.stop_ok();

    // Into PostgreSQL, and served from there.
    let said = ok(&tempora(&["restore", "--from", &path("embedded.backup"), "--store", &url]));
    assert!(said.contains(&format!("up to tx {last_tx} ")), "{said}");
    assert!(!said.contains("tempora@") || !said.contains("password"), "{said}");
    let pg_env = [&env()[..], &[("TEMPORA_STORE", url.as_str())]].concat();
    let on_pg = Server::start(&tmp.path().join("pg"), &pg_env);
    same(&want, &snapshot(&on_pg).await, "PostgreSQL after the restore");
    assert_eq!(artifacts(&on_pg).await, want_artifacts);
    replays(&on_pg, &keyed).await;

    // A database that holds a store is refused, and keeps it.
    let before = rows_in(&url).await;
    failed(&tempora(&["restore", "--from", &path("embedded.backup"), "--store", &url]), "already holds a tempora store");
    assert_eq!(rows_in(&url).await, before);
    same(&want, &snapshot(&on_pg).await, "PostgreSQL after a refused restore");

    // Back out of PostgreSQL: from the server, and straight from the database.
    ok(&tokio::task::block_in_place(|| tempora(&["backup", "--url", &on_pg.base, "--key", ADMIN, "--out", &path("pg.backup")])));
    ok(&tempora(&["backup", "--store", &url, "--out", &path("direct.backup")]));
    // The same records as the original's backup, keyspace by keyspace (the
    // service's own records are rewritten by any server as it runs: the
    // replies and artifacts among them are compared).
    let (engine_file, pg_file) = (records(Path::new(&path("embedded.backup"))), records(Path::new(&path("pg.backup"))));
    const AUX: u8 = 8;
    let facts_part = |r: &[(u8, Vec<u8>, Vec<u8>)]| r.iter().filter(|x| x.0 != AUX).cloned().collect::<Vec<_>>();
    let kept = |r: &[(u8, Vec<u8>, Vec<u8>)]| {
        r.iter().filter(|x| x.0 == AUX && (x.1.starts_with(b"I") || x.1.starts_with(b"ap/"))).cloned().collect::<Vec<_>>()
    };
    assert_eq!(facts_part(&engine_file).len(), facts_part(&pg_file).len());
    assert!(facts_part(&engine_file) == facts_part(&pg_file), "the PostgreSQL backup's records differ from the original's");
    assert!(!kept(&engine_file).is_empty() && kept(&engine_file) == kept(&pg_file), "replies or artifacts differ");
    assert_eq!(facts_part(&records(Path::new(&path("direct.backup")))), facts_part(&pg_file));

    next_writes(&on_pg, last_tx).await;
    on_pg.stop_ok();

    // And into a new data directory: the round trip answers as the original.
    let dir = tmp.path().join("restored");
    ok(&tempora(&["restore", "--from", &path("pg.backup"), "--data-dir", dir.to_str().unwrap()]));
    let back = Server::start(&dir, &[&env()[..], &[("TEMPORA_STORE", "embedded")]].concat());
    same(&want, &snapshot(&back).await, "the embedded store restored from PostgreSQL's backup");
    assert_eq!(artifacts(&back).await, want_artifacts);
    replays(&back, &keyed).await;
    next_writes(&back, last_tx).await;
    back.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_backup_is_refused_and_leaves_the_database_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[("TEMPORA_STORE", "embedded")]);
    let api = Api::new(&server, None);
    for i in 0..50 {
        api.assert_fact(fact(&format!("Person:{i}"), "works_at", json!("Org:acme"), year(2020))).await;
    }
    let file = tmp.path().join("f.backup");
    ok(&tokio::task::block_in_place(|| tempora(&["backup", "--url", &server.base, "--out", file.to_str().unwrap()])));
    server.stop_ok();

    let url = postgres::database().await;
    let bytes = std::fs::read(&file).unwrap();
    let truncated = tmp.path().join("truncated.backup");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    failed(&tempora(&["restore", "--from", truncated.to_str().unwrap(), "--store", &url]), "truncated");
    assert_eq!(rows_in(&url).await, (0, 0, 0, 0));
    let mut flipped = bytes.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    let damaged = tmp.path().join("damaged.backup");
    std::fs::write(&damaged, &flipped).unwrap();
    failed(&tempora(&["restore", "--from", damaged.to_str().unwrap(), "--store", &url]), "damaged");
    assert_eq!(rows_in(&url).await, (0, 0, 0, 0));

    // The sound file then restores, into the same database.
    let said = ok(&tempora(&["restore", "--from", file.to_str().unwrap(), "--store", &url]));
    assert!(said.contains("restored into"), "{said}");
    assert_eq!(rows_in(&url).await.1, 50);
    // Not an embedded store's flag.
    failed(&tempora(&["restore", "--from", file.to_str().unwrap(), "--store", "embedded"]), "postgres://");
}
