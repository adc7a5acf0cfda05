//! Optional embeddings, end to end: the real `tempora serve` with an
//! `[embeddings]` endpoint served by the local fake (`common::fake_llm`),
//! whose bag-of-words vectors make synonyms (`employer` ~ `works_at`)
//! similar without sharing a word.

use crate::common::fake_llm::{self, FakeLlm};
use crate::common::*;
use serde_json::{json, Value};
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

const EMB_KEY: &str = "sk-embed-secret-4242";
const WAIT: Duration = Duration::from_secs(30);

/// `TEMPORA_*` of a server whose embeddings go to `fake` with `model`; the
/// config file sets the timeout and batch size.
fn emb_env(dir: &Path, fake: &FakeLlm, model: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let file = dir.join("tempora.toml");
    std::fs::write(&file, "[embeddings]\ntimeout_ms = 700\nbatch_size = 2\n").unwrap();
    let mut env: Vec<(String, String)> = vec![
        ("TEMPORA_CONFIG".into(), file.display().to_string()),
        ("TEMPORA_EMBEDDINGS_BASE_URL".into(), fake.base_url.clone()),
        ("TEMPORA_EMBEDDINGS_MODEL".into(), model.into()),
        ("TEMPORA_EMBEDDINGS_API_KEY".into(), EMB_KEY.into()),
        ("TEMPORA_OUTBOUND_ALLOW_PRIVATE".into(), "true".into()),
    ];
    for (k, v) in extra {
        env.retain(|(kk, _)| kk != k);
        env.push((k.to_string(), v.to_string()));
    }
    env
}

fn start(data_dir: &Path, env: &[(String, String)]) -> Server {
    let refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Server::start(data_dir, &refs)
}

/// The value of a metric (summed over its labels); 0 when absent.
async fn metric(api: &Api, name: &str) -> f64 {
    let r = api.get("/metrics").await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    r.text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn eventually<F, Fut>(server: &Server, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !check().await {
        if Instant::now() > deadline {
            panic!("not within {WAIT:?}: {what}; stderr:\n{}", server.stderr());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `n` vectors are held and the worker has no lag.
async fn wait_embedded(server: &Server, metrics: &Api, n: usize) {
    eventually(server, &format!("{n} vectors and no lag"), || async {
        metric(metrics, "tempora_embeddings_vectors").await == n as f64
            && metric(metrics, "tempora_embeddings_lag_tx").await == 0.0
    })
    .await;
}

async fn search(api: &Api, question: &str) -> Value {
    api.get(&format!("/api/search?question={}", enc(question))).await.expect(200).clone()
}

/// The match of fact `id` in a search result.
fn match_of<'a>(result: &'a Value, id: &str) -> Option<&'a Value> {
    result["matches"].as_array().unwrap().iter().find(|m| m["id"] == id)
}

fn reasons(m: &Value) -> Vec<String> {
    m["reasons"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect()
}

/// Three facts; the `works_at` one is the answer to "employer?".
async fn load(api: &Api) -> (String, String, String) {
    no_collisions();
    let work = api.assert_fact(json!({"subject": "Person:zed", "predicate": "works_at", "object": "Org:initech"})).await;
    let cello = api.assert_fact(json!({"subject": "Person:ben", "predicate": "hobby", "object": "plays the cello"})).await;
    let lives = api.assert_fact(json!({"subject": "Person:amy", "predicate": "lives_in", "object": "City:paris"})).await;
    let id = |v: &Value| v["id"].as_str().unwrap().to_string();
    (id(&work), id(&cello), id(&lives))
}

/// The words of the tests' facts and questions fall in distinct buckets of
/// the fake embedding, so only shared words (or synonyms) make similarity.
fn no_collisions() {
    let words = "person zed works at org initech ben hobby plays the cello amy lives in city paris kim oslo bob chess \
                 who is a cellist where does work employer residence married to lee spouse p0 p1 p2 p3 likes tea 0 1 2 3";
    let mut seen = std::collections::HashMap::new();
    for w in words.split_whitespace() {
        if let Some(other) = seen.insert(fake_llm::bucket(w), w) {
            panic!("{w} and {other} share a bucket of the fake embedding");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn similar_meaning_without_shared_words_is_found_by_vector() {
    // The premise: the question shares no word (not even after stemming)
    // with the fact, but the fake embedding maps `employer` to `works`.
    assert_eq!(fake_llm::embedding_words("employer"), ["works"]);
    let fake = FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let server = start(&tmp.path().join("data"), &emb_env(tmp.path(), &fake, "ok", &[]));
    let api = Api::new(&server, None);
    let (work, cello, _) = load(&api).await;
    wait_embedded(&server, &api, 3).await;

    let r = search(&api, "employer?").await;
    assert_eq!(r["terms"], json!(["employer"]));
    assert_eq!(r["answer_facts"][0]["id"], work.as_str(), "{r}");
    let m = match_of(&r, &work).unwrap();
    assert_eq!(reasons(m), ["vector"], "found by similarity only: {r}");
    assert_eq!(m["ranks"]["vector"], 1);
    assert!(r.get("unavailable").is_none(), "{r}");
    // BM25 and vector agree: both reasons.
    let r = search(&api, "who is a cellist, who plays the cello").await;
    let m = match_of(&r, &cello).unwrap();
    assert_eq!(reasons(m), ["bm25", "vector"], "{r}");
    assert_eq!(r["answer_facts"][0]["id"], cello.as_str());

    // One call per search question; a transaction of 5 facts goes in
    // batches of batch_size (2).
    let batch: Vec<Value> =
        (0..5).map(|i| json!({"subject": format!("Person:p{i}"), "predicate": "likes", "object": "tea"})).collect();
    api.post("/api/facts/batch", &json!({"facts": batch})).await.expect(201);
    wait_embedded(&server, &api, 8).await;
    let reqs = fake.requests();
    let sizes: Vec<usize> = reqs.iter().filter_map(|r| r.body["input"].as_array().map(Vec::len)).collect();
    assert!(sizes.ends_with(&[2, 2, 1]), "{sizes:?}");
    assert!(sizes.iter().all(|n| *n <= 2), "{sizes:?}");
    let inputs = fake.embed_inputs();
    assert!(inputs.contains(&"Person:zed works_at Org:initech".to_string()), "{inputs:?}");
    assert_eq!(inputs.iter().filter(|i| *i == "employer?").count(), 1, "one call per search: {inputs:?}");
    // The key: sent as a bearer token on every call, never logged.
    assert!(reqs.iter().all(|r| r.authorization.as_deref() == Some(&format!("Bearer {EMB_KEY}"))));
    assert_eq!(metric(&api, "tempora_embeddings_facts_total").await, 8.0);
    let log = server.stderr();
    assert!(log.contains("embeddings on"), "{log}");
    assert!(!log.contains(EMB_KEY), "the key is in the log:\n{log}");
    server.stop_ok();
    assert!(!fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_embeddings_search_answers_from_full_text() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let (work, _, _) = load(&api).await;
    let r = search(&api, "where does zed work").await;
    assert_eq!(r["answer_facts"][0]["id"], work.as_str(), "{r}");
    assert_eq!(reasons(match_of(&r, &work).unwrap()), ["bm25", "entity"], "zed names Person:zed; no vector list");
    assert!(r.get("unavailable").is_none(), "no provider is not a failure: {r}");
    // No similarity without a model: a question sharing no word finds nothing.
    let r = search(&api, "employer?").await;
    assert_eq!(r["answer_facts"], json!([]));
    assert_eq!(metric(&api, "tempora_embeddings_lag_tx").await, 0.0);
    assert!(server.stderr().contains("embeddings off"));
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_never_wait_for_a_stuck_endpoint() {
    // `slow` answers after 3 s; the timeout is 700 ms: every call fails.
    let fake = FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let server = start(&tmp.path().join("data"), &emb_env(tmp.path(), &fake, "slow", &[]));
    let api = Api::new(&server, None);
    let started = Instant::now();
    let (work, _, _) = load(&api).await;
    let f = api.get(&format!("/api/facts/{work}")).await;
    assert_eq!(f.expect(200)["object"], "Org:initech");
    let r = search(&api, "where does zed work").await;
    assert_eq!(r["answer_facts"][0]["id"], work.as_str(), "{r}");
    assert!(started.elapsed() < fake_llm::SLOW * 3, "writes and reads did not wait for the endpoint");
    eventually(&server, "the worker times out and retries", || async {
        metric(&api, "tempora_embeddings_failures_total").await >= 2.0
    })
    .await;
    assert_eq!(metric(&api, "tempora_embeddings_vectors").await, 0.0, "no vector yet");
    assert!(metric(&api, "tempora_embeddings_lag_tx").await >= 3.0);
    // More writes while the worker is stuck.
    for i in 0..5 {
        api.assert_fact(json!({"subject": format!("Person:p{i}"), "predicate": "likes", "object": "tea"})).await;
    }
    assert!(server.stderr().contains("embedding failed; retrying"));
    // Shutdown does not wait for the endpoint either.
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_calls_are_retried_until_every_vector_is_stored() {
    for model in ["flaky-2", "garbled-2"] {
        let fake = FakeLlm::start();
        let tmp = tempfile::tempdir().unwrap();
        let server = start(&tmp.path().join("data"), &emb_env(tmp.path(), &fake, model, &[]));
        let api = Api::new(&server, None);
        let (work, _, _) = load(&api).await;
        for i in 0..4 {
            api.assert_fact(json!({"subject": format!("Person:p{i}"), "predicate": "likes", "object": format!("tea {i}")})).await;
        }
        wait_embedded(&server, &api, 7).await;
        assert!(metric(&api, "tempora_embeddings_failures_total").await >= 2.0, "{model}");
        assert_eq!(metric(&api, "tempora_embeddings_facts_total").await, 7.0, "{model}: each fact once");
        // Every fact was sent until it got a vector: nothing lost.
        let inputs = fake.embed_inputs();
        for i in 0..4 {
            assert!(inputs.iter().any(|t| t.contains(&format!("tea {i}"))), "{model}: {inputs:?}");
        }
        let r = search(&api, "employer?").await;
        assert_eq!(reasons(match_of(&r, &work).unwrap()), ["vector"], "{model}: {r}");
        let log = server.stderr();
        assert!(log.contains("embedding failed; retrying"), "{model}: {log}");
        server.stop_ok();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn vectors_survive_kill_9_and_the_backlog_is_embedded_after_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeLlm::start();
    let server = start(&data, &emb_env(tmp.path(), &fake, "ok", &[]));
    let api = Api::new(&server, None);
    let (work, _, _) = load(&api).await;
    wait_embedded(&server, &api, 3).await;
    // The endpoint goes away; a fact is asserted and cannot be embedded.
    drop(fake);
    let kim = api.assert_fact(json!({"subject": "Person:kim", "predicate": "married_to", "object": "Person:lee"})).await;
    let kim = kim["id"].as_str().unwrap().to_string();
    eventually(&server, "the worker fails on the missing endpoint", || async {
        metric(&api, "tempora_embeddings_failures_total").await >= 1.0
    })
    .await;
    server.kill9();

    // Restart against a new endpoint (same model).
    let fake = FakeLlm::start();
    let server = start(&data, &emb_env(tmp.path(), &fake, "ok", &[]));
    let api = Api::new(&server, None);
    wait_embedded(&server, &api, 4).await;
    let inputs = fake.embed_inputs();
    assert_eq!(inputs, ["Person:kim married_to Person:lee"], "only the backlog is embedded, once");
    let r = search(&api, "employer?").await;
    assert_eq!(reasons(match_of(&r, &work).unwrap()), ["vector"], "a stored vector, loaded: {r}");
    let r = search(&api, "spouse?").await;
    assert_eq!(r["answer_facts"][0]["id"], kim.as_str(), "{r}");
    assert_eq!(reasons(match_of(&r, &kim).unwrap()), ["vector"]);
    assert!(server.stderr().contains("embeddings loaded"));
    server.stop_ok();

    // A clean restart embeds nothing again.
    let server = start(&data, &emb_env(tmp.path(), &fake, "ok", &[]));
    let api = Api::new(&server, None);
    wait_embedded(&server, &api, 4).await;
    server.stop_ok();
    assert_eq!(fake.embed_inputs().len(), inputs.len() + 2, "two questions, no facts");

    // Another model: every fact is embedded again, and it is logged.
    let other = FakeLlm::start();
    let server = start(&data, &emb_env(tmp.path(), &other, "ok-v2", &[]));
    let api = Api::new(&server, None);
    wait_embedded(&server, &api, 4).await;
    assert_eq!(other.embed_inputs().len(), 4);
    assert!(server.stderr().contains("the embedding model changed"), "{}", server.stderr());
    let r = search(&api, "employer?").await;
    assert_eq!(reasons(match_of(&r, &work).unwrap()), ["vector"]);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_never_gets_another_tenants_vectors() {
    let fake = FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let mut env = emb_env(tmp.path(), &fake, "ok", &[]);
    env.extend(keyed().into_iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let server = start(&tmp.path().join("data"), &env);
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    let admin = Api::new(&server, Some(ADMIN));
    let zed = nas.assert_fact(json!({"subject": "Person:zed", "predicate": "works_at", "object": "Org:initech"})).await;
    let bob = acme.assert_fact(json!({"subject": "Person:bob", "predicate": "hobby", "object": "chess"})).await;
    wait_embedded(&server, &admin, 2).await;
    // acme asks nas's question: similar only to nas's fact.
    for q in ["employer?", "employer initech zed"] {
        let r = search(&acme, q).await;
        for f in r["answer_facts"].as_array().unwrap() {
            assert_eq!(f["id"], bob["id"], "acme got a foreign fact: {r}");
        }
        assert!(r["matches"].as_array().unwrap().iter().all(|m| m["id"] != zed["id"]));
    }
    let r = search(&nas, "employer?").await;
    assert_eq!(r["answer_facts"][0]["id"], zed["id"]);
    assert_eq!(r["answer_facts"].as_array().unwrap().len(), 1, "{r}");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_key_never_reaches_the_log_and_the_outbound_policy_applies() {
    // An endpoint that quotes the key back in its error.
    let fake = FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let server = start(&tmp.path().join("data"), &emb_env(tmp.path(), &fake, "echo-key", &[]));
    let api = Api::new(&server, None);
    let (work, _, _) = load(&api).await;
    eventually(&server, "the worker fails", || async {
        metric(&api, "tempora_embeddings_failures_total").await >= 2.0
    })
    .await;
    assert!(fake.requests().iter().all(|r| r.authorization.as_deref() == Some(&format!("Bearer {EMB_KEY}"))));
    let log = server.stderr();
    assert!(log.contains("401"), "{log}");
    assert!(!log.contains(EMB_KEY), "the key is in the log:\n{log}");
    server.stop_ok();

    // Loopback without allow_private: refused before any request, retried,
    // and full-text search works meanwhile.
    let fake = FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let env = emb_env(tmp.path(), &fake, "ok", &[("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "false")]);
    let server = start(&tmp.path().join("data"), &env);
    let api = Api::new(&server, None);
    load(&api).await;
    eventually(&server, "the worker is refused", || async {
        metric(&api, "tempora_embeddings_failures_total").await >= 1.0
    })
    .await;
    assert!(server.stderr().contains("allow_private"), "{}", server.stderr());
    assert!(fake.requests().is_empty(), "no request reached the loopback endpoint");
    let r = search(&api, "where does zed work").await;
    assert_eq!(reasons(&r["matches"][0]), ["bm25", "entity"], "no vector list: {r}");
    let _ = work;
    server.stop_ok();
}

/// A question that cannot be embedded: the search answers from the other
/// lists and says the vector list is missing.
#[tokio::test(flavor = "multi_thread")]
async fn search_falls_back_when_the_question_cannot_be_embedded() {
    let fake = FakeLlm::start();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = start(&data, &emb_env(tmp.path(), &fake, "ok", &[]));
    let api = Api::new(&server, None);
    let (work, _, _) = load(&api).await;
    wait_embedded(&server, &api, 3).await;
    server.stop_ok();
    // Same model, an endpoint that is gone: the vectors are loaded, the
    // question cannot be embedded.
    let gone = emb_env(tmp.path(), &fake, "ok", &[("TEMPORA_EMBEDDINGS_BASE_URL", "http://127.0.0.1:9/v1")]);
    drop(fake);
    let server = start(&data, &gone);
    let api = Api::new(&server, None);
    let resp = api.get(&format!("/api/search?question={}", enc("where does zed work"))).await;
    let r = resp.expect(200);
    assert_eq!(r["answer_facts"][0]["id"], work.as_str(), "{r}");
    assert_eq!(r["unavailable"], json!(["vector"]), "{r}");
    assert_eq!(reasons(&r["matches"][0]), ["bm25", "entity"], "no vector list");
    assert!(metric(&api, "tempora_embeddings_failures_total").await >= 1.0);
    assert!(server.stderr().contains("answering without the vector list"));
    server.stop_ok();
}
