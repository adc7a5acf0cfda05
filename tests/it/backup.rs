//! `tempora backup` from a running server under write load, `tempora
//! restore` into a new directory, and a server on the restored store that
//! answers as the original did at the backup's transaction, for every
//! tenant, with its search index rebuilt. Also the refusals: a tenant key,
//! a store in use, a non-empty target, a damaged file.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn tempora(args: &[&str]) -> Output {
    tempora_command().args(args).output().expect("tempora runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: &Output, why: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should have failed: {}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains(why), "stderr should say {why:?}: {err}");
}

/// Every fact of a tenant as (id, created_tx), optionally as of a tx.
async fn facts(api: &Api, as_of_tx: Option<u64>) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = "/api/facts?status=all&include_retracted=true&limit=1000".to_string();
        if let Some(t) = as_of_tx {
            q.push_str(&format!("&as_of_tx={t}"));
        }
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={}", enc(c)));
        }
        let r = api.get(&q).await;
        for f in r.expect(200).as_array().unwrap() {
            out.push((f["id"].as_str().unwrap().to_string(), f["created_tx"].as_u64().unwrap()));
        }
        match r.header("x-next-cursor") {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    out.sort();
    out
}

async fn seed(api: &Api, who: &str) {
    for i in 0..30 {
        let body = json!({"subject": format!("Person:{who}{i}"), "predicate": "works_at", "object": "Org:acme",
            "valid_from": year(2020)});
        api.assert_fact(body).await;
    }
    for i in 0..10 {
        let body = json!({"subject": format!("Person:{who}{i}"), "predicate": "works_at", "object": "Org:globex",
            "valid_from": year(2024)});
        api.assert_fact(body).await;
    }
    // A write under an idempotency key leaves a service record behind.
    let r = api
        .req(reqwest::Method::POST, "/api/facts")
        .header("Idempotency-Key", format!("{who}-once"))
        .json(&json!({"subject": format!("Note:{who}"), "predicate": "says", "object": "violet harmonica"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

#[tokio::test(flavor = "multi_thread")]
async fn backup_under_load_restores_to_a_store_that_answers_as_the_original() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    seed(&nas, "n").await;
    seed(&acme, "a").await;

    // Writers keep going while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (api, stop) = (nas.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let facts: Vec<Value> = (0..3)
                    .map(|i| json!({"subject": format!("Load:{n}"), "predicate": format!("p{i}"), "object": i}))
                    .collect();
                let r = api.post("/api/facts/batch", &json!({"facts": facts})).await;
                assert_eq!(r.status.as_u16(), 201, "{}", r.text);
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let file = tmp.path().join("store.backup");
    let out = tokio::task::block_in_place(|| {
        tempora(&["backup", "--url", &server.base, "--key", ADMIN, "--out", file.to_str().unwrap()])
    });
    let said = ok(&out);
    assert!(said.contains("records"), "{said}");
    stop.store(true, Ordering::Relaxed);
    let written = load.await.unwrap();
    assert!(written > 0);
    assert!(!tmp.path().join("store.backup.partial").exists());
    let verified = ok(&tempora(&["verify-backup", file.to_str().unwrap()]));
    let last_tx: u64 = verified.split("up to tx ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();

    // A tenant key may not take a backup; nothing is left behind.
    let denied = tmp.path().join("denied.backup");
    let out = tempora(&["backup", "--url", &server.base, "--key", NAS_KEY, "--out", denied.to_str().unwrap()]);
    failed(&out, "admin token");
    assert!(!denied.exists() && !tmp.path().join("denied.backup.partial").exists());
    // A data directory a server holds is refused for an offline backup.
    let out = tempora(&["backup", "--data-dir", server.data_dir.to_str().unwrap(), "--out", denied.to_str().unwrap()]);
    failed(&out, "in use");

    // The original as it stood at the backup's transaction, per tenant.
    let want_nas = facts(&nas, Some(last_tx)).await;
    let want_acme = facts(&acme, Some(last_tx)).await;
    server.stop_ok();

    let restored = tmp.path().join("restored");
    ok(&tempora(&["restore", "--from", file.to_str().unwrap(), "--data-dir", restored.to_str().unwrap()]));
    let server = Server::start(&restored, &keyed());
    let (nas, acme) = (Api::new(&server, Some(NAS_KEY)), Api::new(&server, Some(ACME_KEY)));
    assert_eq!(nas.get("/readyz").await.expect(200)["last_tx"], last_tx);
    assert_eq!(facts(&nas, None).await, want_nas);
    assert_eq!(facts(&acme, None).await, want_acme);
    // Whole transactions only: every Load batch has its three facts.
    let loads = nas.list("predicate=p0&limit=1000").await.len();
    assert_eq!(nas.list("predicate=p2&limit=1000").await.len(), loads);
    // Bitemporal reads work on the restored store.
    let then = nas.list(&format!("subject=Person:n3&valid_at={}", year(2022))).await;
    assert_eq!(then[0]["object"], "Org:acme");
    // The service records came along: the idempotent write replays.
    let r = nas
        .req(reqwest::Method::POST, "/api/facts")
        .header("Idempotency-Key", "n-once")
        .json(&json!({"subject": "Note:n", "predicate": "says", "object": "violet harmonica"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers().get("idempotency-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    // The search index was rebuilt from the restored change log, per tenant.
    let s = nas.get("/api/search?question=harmonica").await;
    let hits = s.expect(200)["answer_facts"].as_array().unwrap().clone();
    assert_eq!(hits.len(), 1, "{}", s.text);
    assert_eq!(hits[0]["subject"], "Note:n");
    // And it takes writes, numbered after the backup's last tx.
    let f = nas.assert_fact(json!({"subject": "Person:new", "predicate": "works_at", "object": "Org:acme"})).await;
    assert!(f["tx"].as_u64().unwrap() > last_tx);
    server.stop_ok();

    // A store is never overwritten, and a damaged file restores nothing.
    let out = tempora(&["restore", "--from", file.to_str().unwrap(), "--data-dir", restored.to_str().unwrap()]);
    failed(&out, "not empty");
    let damaged = tmp.path().join("damaged.backup");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&damaged, &bytes).unwrap();
    // Whichever byte the flip hits (a length, a tag, a value), it is "damaged".
    failed(&tempora(&["verify-backup", damaged.to_str().unwrap()]), "damaged");
    let target = tmp.path().join("from-damaged");
    failed(
        &tempora(&["restore", "--from", damaged.to_str().unwrap(), "--data-dir", target.to_str().unwrap()]),
        "damaged",
    );
    assert!(!target.exists());
    assert!(!Path::new(&tmp.path().join(".from-damaged.restoring")).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn open_mode_and_offline_backups() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    seed(&api, "o").await;
    // Open mode: no key needed; the body is the file.
    let r = api.get("/api/admin/backup").await;
    assert_eq!(r.status.as_u16(), 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    let last_tx = api.stats().await["last_tx"].as_u64().unwrap();
    server.stop_ok();

    // Offline, from the directory itself, once no server holds it.
    let file = tmp.path().join("offline.backup");
    let said = ok(&tempora(&["backup", "--data-dir", data.to_str().unwrap(), "--out", file.to_str().unwrap()]));
    assert!(said.contains(&format!("up to tx {last_tx} ")), "{said}");
    let restored = tmp.path().join("restored");
    ok(&tempora(&["restore", "--from", file.to_str().unwrap(), "--data-dir", restored.to_str().unwrap()]));
    let server = Server::start(&restored, &[]);
    let api = Api::new(&server, None);
    assert_eq!(api.stats().await["last_tx"].as_u64().unwrap(), last_tx);
    assert_eq!(api.list("subject=Person:o3").await[0]["object"], "Org:globex");
    server.stop_ok();
}
