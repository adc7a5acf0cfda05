//! `/api/connectors` over a real socket: registration and its history,
//! field mappings, webhook deliveries in every framing with per-record
//! errors, re-delivery (unchanged records write nothing) and idempotent
//! replay, the live ingested count, a 100k-line delivery under bounded
//! memory, pulls from a real local HTTP source, the SSRF table (addresses
//! and redirect tricks, with the loopback allowlist on for the positive
//! cases), pull limits, scheduled pulls, and tenant isolation.

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// ------------------------------------------------------------- a real source

/// A local HTTP server standing for a connector's source, on its own thread
/// and runtime. Routes:
/// - `/people.jsonl`, `/people.json`, `/people.csv`: the same two people;
/// - `/counter.jsonl`: one record whose value is the number of requests so far;
/// - `/redirect?to=<url>`: 302 to `to`; `/loop`: 302 to itself;
/// - `/html`, `/fail` (500), `/big` (2 MB of JSON Lines), `/slow` (answers after 10 s).
struct Source {
    port: u16,
    hits: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Source {
    fn start() -> Source {
        let hits = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let h = Arc::clone(&hits);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap().port()).unwrap();
                let app = Router::new()
                    .route("/people.jsonl", get(|| async { typed("application/x-ndjson", PEOPLE_JSONL.to_string()) }))
                    .route("/people.json", get(|| async { typed("application/json", PEOPLE_JSON.to_string()) }))
                    .route("/people.csv", get(|| async { typed("text/csv", PEOPLE_CSV.to_string()) }))
                    .route("/counter.jsonl", get(counter))
                    .route("/redirect", get(redirect))
                    .route(
                        "/loop",
                        get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]).into_response() }),
                    )
                    .route("/html", get(|| async { typed("text/html", "<html></html>".into()) }))
                    .route("/fail", get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response() }))
                    .route(
                        "/big",
                        get(|| async { typed("application/x-ndjson", "{\"id\":1,\"name\":\"x\"}\n".repeat(100_000)) }),
                    )
                    .route(
                        "/slow",
                        get(|| async {
                            tokio::time::sleep(Duration::from_secs(10)).await;
                            typed("application/json", "{}".into())
                        }),
                    )
                    .with_state(h);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let port = rx.recv_timeout(Duration::from_secs(10)).expect("source started");
        Source { port, hits, _stop: stop_tx }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

const PEOPLE_JSONL: &str = "{\"id\":\"sarah\",\"name\":\"Sarah\",\"org\":\"Org:acme\"}\n{\"id\":\"bob\",\"name\":\"Bob\",\"org\":\"Org:globex\"}\n";
const PEOPLE_JSON: &str = "[{\"id\":\"sarah\",\"name\":\"Sarah\",\"org\":\"Org:acme\"},{\"id\":\"bob\",\"name\":\"Bob\",\"org\":\"Org:globex\"}]";
const PEOPLE_CSV: &str = "id,name,org\nsarah,Sarah,Org:acme\nbob,Bob,Org:globex\n";

fn typed(ct: &'static str, body: String) -> Response {
    ([(header::CONTENT_TYPE, ct)], body).into_response()
}

async fn counter(State(hits): State<Arc<AtomicUsize>>) -> Response {
    let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
    typed("application/x-ndjson", format!("{{\"id\":\"c\",\"seen\":{n}}}\n"))
}

async fn redirect(Query(q): Query<HashMap<String, String>>) -> Response {
    let to = q.get("to").cloned().unwrap_or_default();
    (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

// ------------------------------------------------------------- helpers

const ALLOW_LOOPBACK: (&str, &str) = ("TEMPORA_OUTBOUND_ALLOW", "127.0.0.1/32");

async fn register(api: &Api, body: Value) -> Value {
    api.post("/api/connectors", &body).await.expect(200).clone()
}

async fn deliver(api: &Api, name: &str, content_type: &str, body: &str) -> Resp {
    send(
        api.req(Method::POST, &format!("/api/connectors/{name}/events"))
            .header("content-type", content_type)
            .body(body.to_string()),
    )
    .await
}

async fn connector(api: &Api, name: &str) -> Value {
    let all = api.get("/api/connectors").await.expect(200).clone();
    all["connectors"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned().unwrap_or(Value::Null)
}

fn objects(facts: &[Value], predicate: &str) -> Vec<Value> {
    facts.iter().filter(|f| f["predicate"] == predicate).map(|f| f["object"].clone()).collect()
}

fn vm_hwm_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

// ------------------------------------------------------------- registration

#[tokio::test]
async fn registering_again_supersedes_only_what_changed_and_keeps_the_history() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let c = register(&api, json!({"name": "hr-feed", "label": "HR feed", "subject": "Person:{id}"})).await;
    assert_eq!(c["name"], "hr-feed");
    assert_eq!(c["kind"], "webhook");
    assert_eq!(c["label"], "HR feed");
    assert_eq!(c["subject"], "Person:{id}");
    assert_eq!(c["source"], "connector:hr-feed");
    assert_eq!(c["mask"], "redact");
    assert_eq!(c["ingested"], 0);
    assert_eq!(c["url"], Value::Null);

    let c2 = register(&api, json!({"name": "hr-feed", "label": "HR export", "subject": "Person:{id}"})).await;
    assert_eq!(c2["label"], "HR export");
    let listed = api.get("/api/connectors").await.expect(200).clone();
    assert_eq!(listed["connectors"].as_array().unwrap().len(), 1, "{listed}");

    // The settings are facts: the old label is superseded, not gone.
    let labels = api.list("subject=Connector:hr-feed&predicate=connector.label&status=active,superseded").await;
    let mut seen: Vec<&str> = labels.iter().map(|f| f["object"].as_str().unwrap()).collect();
    seen.sort();
    assert_eq!(seen, ["HR export", "HR feed"]);
    let subjects = api.list("subject=Connector:hr-feed&predicate=connector.subject&status=active,superseded").await;
    assert_eq!(subjects.len(), 1, "an unchanged setting is not written again: {subjects:?}");

    // Dropping a setting retracts it.
    let c3 = register(&api, json!({"name": "hr-feed"})).await;
    assert_eq!(c3["subject"], "");
    assert_eq!(c3["label"], "hr-feed");
}

#[tokio::test]
async fn bad_registrations_are_refused_with_the_reason() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    for (body, needle) in [
        (json!({"name": ""}), "name must be"),
        (json!({"name": "has space"}), "name may hold"),
        (json!({"name": "x", "kind": "ftp"}), "kind must be one of"),
        (json!({"name": "x", "kind": "pull"}), "needs a url"),
        (json!({"name": "x", "url": "ftp://example.com/x"}), "http or https"),
        (json!({"name": "x", "url": "https://u:p@example.com/x"}), "credentials"),
        (json!({"name": "x", "url": "https://example.com/x", "every_secs": 1}), "every_secs must be within"),
        (json!({"name": "x", "every_secs": 60}), "needs a url"),
        (json!({"name": "x", "subject": "{id}"}), "subject"),
        (json!({"name": "x", "subject": "Person:{id"}), "unclosed"),
        (json!({"name": "x", "fields": 3}), "fields must be"),
        (json!({"name": "x", "fields": []}), "at least one field"),
        (json!({"name": "x", "mask": "scramble"}), "scramble"),
        (json!({"name": "x", "confidence": 1.5}), "confidence must be within"),
        (json!({"name": "x", "colour": "red"}), "colour"),
        (json!({"name": "x", "url": "http://169.254.169.254/latest/meta-data/"}), "non-public"),
        (json!({"name": "x", "url": "http://10.0.0.8/export"}), "non-public"),
    ] {
        let r = api.post("/api/connectors", &body).await;
        r.expect_error(400, "SchemaInvalid");
        let msg = r.json["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{body}: {msg}");
    }
    assert_eq!(api.get("/api/connectors").await.expect(200)["connectors"], json!([]), "nothing was registered");
    api.post("/api/connectors/nope/pull", &json!({})).await.expect_hidden();
    deliver(&api, "nope", "application/json", "{}").await.expect_hidden();
}

// ------------------------------------------------------------- webhooks

#[tokio::test]
async fn every_framing_lands_the_same_facts_with_connector_provenance() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    for (name, ct, body) in [
        ("one", "application/json", "{\"id\":\"sarah\",\"name\":\"Sarah\",\"org\":\"Org:acme\"}"),
        ("array", "application/json", PEOPLE_JSON),
        ("lines", "application/x-ndjson", PEOPLE_JSONL),
        ("csv", "text/csv", PEOPLE_CSV),
    ] {
        register(&api, json!({"name": name, "subject": "Person:{id}", "mask": "none"})).await;
        let r = deliver(&api, name, ct, body).await;
        let receipt = r.expect(200).clone();
        let want = if name == "one" { 1 } else { 2 };
        assert_eq!(receipt["records"], want, "{name}: {receipt}");
        assert_eq!(receipt["asserted"], want * 2, "{name}: {receipt}");
        assert_eq!(receipt["rejected"], 0, "{name}: {receipt}");
        assert_eq!(receipt["source"], format!("connector:{name}"));
        let facts = api.list("subject=Person:sarah&predicate=name").await;
        let mine: Vec<&Value> = facts.iter().filter(|f| f["source"] == format!("connector:{name}")).collect();
        assert_eq!(mine.len(), 1, "{name}: {facts:?}");
        assert_eq!(mine[0]["object"], "Sarah");
        assert_eq!(mine[0]["properties"]["connector"], name);
        assert_eq!(mine[0]["properties"]["record"], 1);
        assert_eq!(mine[0]["properties"]["delivery"], receipt["delivery"]);
    }
    // The org field is an entity ref, so it is an edge of the graph.
    let edges = api.list("subject=Person:bob&predicate=org").await;
    assert_eq!(objects(&edges, "org")[0], "Org:globex");
}

#[tokio::test]
async fn bad_records_are_rejected_one_by_one_and_the_rest_land() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "hr", "subject": "Person:{id}", "fields": {"name": "full_name"}, "mask": "none"}))
        .await;
    let body = "{\"id\":1,\"name\":\"Ann\"}\nnot json\n[1,2]\n{\"name\":\"no id\"}\n{\"id\":2,\"title\":\"no mapped field\"}\n{\"id\":3,\"name\":\"Cy\"}\n";
    let receipt = deliver(&api, "hr", "application/x-ndjson", body).await.expect(200).clone();
    assert_eq!(receipt["records"], 6, "{receipt}");
    assert_eq!(receipt["asserted"], 2, "{receipt}");
    assert_eq!(receipt["rejected"], 4, "{receipt}");
    let lines: Vec<u64> =
        receipt["rejections"].as_array().unwrap().iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [2, 3, 4, 5], "{receipt}");
    let reasons: Vec<&str> =
        receipt["rejections"].as_array().unwrap().iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert!(reasons[0].contains("not valid JSON"), "{reasons:?}");
    assert!(reasons[1].contains("must be a JSON object"), "{reasons:?}");
    assert!(reasons[2].contains("\"id\" of the subject template is missing"), "{reasons:?}");
    assert!(reasons[3].contains("none of the connector's mapped fields"), "{reasons:?}");
    let names = api.list("predicate=full_name").await;
    let mut got: Vec<(String, Value)> =
        names.iter().map(|f| (f["subject"].as_str().unwrap().to_string(), f["object"].clone())).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, [("Person:1".to_string(), json!("Ann")), ("Person:3".to_string(), json!("Cy"))]);
    assert!(api.list("predicate=name").await.is_empty(), "fields renames name to full_name");

    // A JSON body that is not records at all, and an unknown content type.
    let r = deliver(&api, "hr", "application/json", "42").await.expect(200).clone();
    assert_eq!((r["records"].as_u64(), r["rejected"].as_u64()), (Some(1), Some(1)), "{r}");
    deliver(&api, "hr", "application/xml", "<a/>").await.expect_error(415, "UnsupportedMediaType");
    deliver(&api, "hr", "application/x-ndjson", "").await.expect_error(400, "SchemaInvalid");
    // A webhook connector has no url to pull.
    api.post("/api/connectors/hr/pull", &json!({})).await.expect_error(409, "Conflict");
}

#[tokio::test]
async fn redelivery_writes_nothing_changes_supersede_and_the_ingested_count_is_live() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "hr", "subject": "Person:{id}", "mask": "none"})).await;
    let first = deliver(&api, "hr", "application/x-ndjson", PEOPLE_JSONL).await.expect(200).clone();
    assert_eq!(first["asserted"], 4);
    assert_eq!(connector(&api, "hr").await["ingested"], 4);

    let again = deliver(&api, "hr", "application/x-ndjson", PEOPLE_JSONL).await.expect(200).clone();
    assert_eq!((again["asserted"].as_u64(), again["unchanged"].as_u64()), (Some(0), Some(2)), "{again}");
    assert_eq!(again["transactions"], 0, "{again}");
    let history = api.list("subject=Person:sarah&predicate=name&status=active,superseded").await;
    assert_eq!(history.len(), 1, "re-delivery adds no versions: {history:?}");

    // A changed value supersedes; the old one stays in history.
    let changed =
        deliver(&api, "hr", "application/json", "{\"id\":\"sarah\",\"name\":\"Sarah Connor\",\"org\":\"Org:acme\"}")
            .await
            .expect(200)
            .clone();
    assert_eq!(changed["asserted"], 1, "only the changed field is written: {changed}");
    let history = api.list("subject=Person:sarah&predicate=name&status=active,superseded").await;
    assert_eq!(history.len(), 2);
    assert_eq!(connector(&api, "hr").await["ingested"], 4, "one live name replaced another");

    // Another source taking over a value, or a retraction, lowers the count.
    api.assert_fact(json!({"subject": "Person:bob", "predicate": "org", "object": "Org:initech", "source": "manual"}))
        .await;
    assert_eq!(connector(&api, "hr").await["ingested"], 3);
    let bob_name = api.list("subject=Person:bob&predicate=name").await;
    api.delete(&format!("/api/facts/{}", bob_name[0]["id"].as_str().unwrap())).await.expect(200);
    assert_eq!(connector(&api, "hr").await["ingested"], 2);
}

#[tokio::test]
async fn low_confidence_connectors_land_candidates() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "rumors", "subject": "Person:{id}", "confidence": 0.3, "mask": "none"})).await;
    let r = deliver(&api, "rumors", "application/x-ndjson", PEOPLE_JSONL).await.expect(200).clone();
    assert_eq!((r["asserted"].as_u64(), r["candidates"].as_u64()), (Some(0), Some(4)), "{r}");
    assert_eq!(connector(&api, "rumors").await["ingested"], 4, "held candidates count as ingested");
    assert!(api.list("subject=Person:sarah").await.is_empty(), "candidates are not current facts");
}

#[tokio::test]
async fn pii_is_masked_before_it_is_stored() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "crm", "subject": "Person:{id}"})).await;
    let body =
        "{\"id\":\"sarah\",\"email\":\"sarah@example.com\",\"note\":\"call +1 415 555 0100\",\"city\":\"Paris\"}";
    deliver(&api, "crm", "application/json", body).await.expect(200);
    let facts = api.list("subject=Person:sarah").await;
    let all = serde_json::to_string(&facts).unwrap();
    assert!(!all.contains("sarah@example.com") && !all.contains("555 0100"), "{all}");
    assert_eq!(objects(&facts, "city"), [json!("Paris")]);
}

#[tokio::test]
async fn idempotency_key_replays_the_first_receipt() {
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "hr", "subject": "Person:{id}", "mask": "none"})).await;
    let post = || {
        send(
            api.req(Method::POST, "/api/connectors/hr/events")
                .header("content-type", "application/x-ndjson")
                .header("idempotency-key", "delivery-7")
                .body(PEOPLE_JSONL),
        )
    };
    let first = post().await;
    let second = post().await;
    assert_eq!(first.expect(200), second.expect(200), "the retry gets the first receipt");
    assert_eq!(second.header("idempotency-replayed"), Some("true"));
    assert_eq!(first.json["asserted"], 4);
}

#[tokio::test]
async fn a_100k_line_delivery_streams_under_bounded_memory() {
    let (_tmp, server) =
        fresh(&[("TEMPORA_CONNECTORS_MAX_INGEST_BYTES", "1000000000"), ("TEMPORA_DURABILITY", "relaxed")]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "bulk", "subject": "Item:{id}", "fields": ["name"], "mask": "none"})).await;
    // 100k records of about 4 KB each: a 400 MB body, 400x the request body
    // limit of other routes. Only `name` is mapped, so the facts are small
    // and what the server holds while reading is what the body costs it.
    const N: usize = 100_000;
    let pad = "p".repeat(4000);
    let stream = futures_util::stream::iter((0..N).step_by(1000).map(move |start| {
        let mut chunk = String::with_capacity(1000 * 4100);
        for i in start..start + 1000 {
            chunk.push_str(&format!("{{\"id\":{i},\"name\":\"n{i}\",\"pad\":\"{pad}\"}}\n"));
        }
        Ok::<_, std::io::Error>(chunk)
    }));
    let before = vm_hwm_kb(server.pid());
    let started = Instant::now();
    let r = send(
        api.req(Method::POST, "/api/connectors/bulk/events")
            .header("content-type", "application/x-ndjson")
            .timeout(Duration::from_secs(900))
            .body(reqwest::Body::wrap_stream(stream)),
    )
    .await;
    let receipt = r.expect(200).clone();
    let grown_mb = (vm_hwm_kb(server.pid()) - before) / 1024;
    let body_mb = receipt["bytes"].as_u64().unwrap() / (1 << 20);
    eprintln!("100k-line delivery: {body_mb} MB body, server peak memory grew {grown_mb} MB, {:?}", started.elapsed());
    assert_eq!(receipt["records"], N, "{receipt}");
    assert_eq!(receipt["asserted"], N, "{receipt}");
    assert_eq!(receipt["rejected"], 0);
    assert!(body_mb >= 380, "{body_mb}");
    // The engine's caches and the search index grow with 100k new facts
    // (about 200 MB in a debug build); a server that held the body would
    // grow by at least the body's 400 MB on top.
    assert!(grown_mb < 330, "peak memory grew {grown_mb} MB reading a {body_mb} MB body");
    assert_eq!(connector(&api, "bulk").await["ingested"], N);
}

#[tokio::test]
async fn deliveries_over_the_bounds_stop_with_what_landed_said() {
    let (_tmp, server) = fresh(&[
        ("TEMPORA_CONNECTORS_MAX_INGEST_BYTES", "2000"),
        ("TEMPORA_CONNECTORS_MAX_RECORD_BYTES", "200"),
        ("TEMPORA_CONNECTORS_MAX_RECORDS", "50"),
    ]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "hr", "subject": "Person:{id}", "mask": "none"})).await;
    // Declared too large: refused before reading.
    let big = "{\"id\":1,\"name\":\"x\"}\n".repeat(200);
    deliver(&api, "hr", "application/x-ndjson", &big).await.expect_error(413, "PayloadTooLarge");
    assert!(api.list("subject=Person:1").await.is_empty(), "nothing read, nothing written");
    // Streamed past the limit: what came before is stored and said.
    let chunks: Vec<Result<String, std::io::Error>> = (0..30)
        .map(|i| Ok(format!("{{\"id\":{i},\"name\":\"n{i}\"}}\n{{\"id\":{i},\"x\":\"{}\"}}\n", "y".repeat(40))))
        .collect();
    let r = send(
        api.req(Method::POST, "/api/connectors/hr/events")
            .header("content-type", "application/x-ndjson")
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))),
    )
    .await;
    r.expect_error(413, "PayloadTooLarge");
    let msg = r.json["error"]["message"].as_str().unwrap();
    assert!(msg.contains("larger than the limit of 2000 bytes") && msg.contains("are stored"), "{msg}");
    assert!(!api.list("subject=Person:0").await.is_empty(), "records before the limit landed");
    // One oversized record is that record's error.
    let body = format!("{{\"id\":\"a\",\"name\":\"{}\"}}\n{{\"id\":\"b\",\"name\":\"ok\"}}\n", "z".repeat(300));
    let receipt = deliver(&api, "hr", "application/x-ndjson", &body).await.expect(200).clone();
    assert_eq!((receipt["asserted"].as_u64(), receipt["rejected"].as_u64()), (Some(1), Some(1)), "{receipt}");
    assert!(receipt["rejections"][0]["reason"].as_str().unwrap().contains("longer than the limit of 200 bytes"));
    // Too many records.
    let many = "{}\n".repeat(60);
    let r = deliver(&api, "hr", "application/x-ndjson", &many).await;
    r.expect_error(413, "PayloadTooLarge");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("at most 50 records"), "{}", r.text);
}

// ------------------------------------------------------------- pulls

#[tokio::test]
async fn pulls_read_json_lines_json_and_csv_from_an_allowed_source() {
    let source = Source::start();
    let (_tmp, server) = fresh(&[ALLOW_LOOPBACK]);
    let api = Api::new(&server, None);
    for (name, path) in [("l", "/people.jsonl"), ("j", "/people.json"), ("c", "/people.csv")] {
        let c = register(
            &api,
            json!({"name": name, "kind": "pull", "url": source.url(path), "subject": "Person:{id}", "mask": "none"}),
        )
        .await;
        assert_eq!(c["kind"], "pull");
        let receipt = api.post(&format!("/api/connectors/{name}/pull"), &json!({})).await.expect(200).clone();
        assert_eq!(
            (receipt["records"].as_u64(), receipt["asserted"].as_u64()),
            (Some(2), Some(4)),
            "{name}: {receipt}"
        );
        let c = connector(&api, name).await;
        assert_eq!(c["ingested"], 4, "{c}");
        assert_eq!(c["last_pull"]["ok"], true, "{c}");
        assert_eq!(c["last_pull"]["trigger"], "request", "{c}");
        assert_eq!(c["last_pull"]["records"], 2, "{c}");
    }
    // A second pull of an unchanged source writes nothing (`c` wrote last:
    // each pull above took the values over from the one before).
    let again = api.post("/api/connectors/c/pull", &json!({})).await.expect(200).clone();
    assert_eq!((again["asserted"].as_u64(), again["unchanged"].as_u64()), (Some(0), Some(2)), "{again}");
}

/// The SSRF table. With only 127.0.0.1/32 allowed, every other non-public
/// address is refused, directly or behind a redirect from the allowed
/// source; nothing is fetched from a refused address.
#[tokio::test]
async fn the_ssrf_guard_refuses_private_addresses_and_redirect_tricks() {
    let source = Source::start();
    let (_tmp, server) = fresh(&[ALLOW_LOOPBACK, ("TEMPORA_CONNECTORS_PULL_TIMEOUT_SECS", "3")]);
    let api = Api::new(&server, None);
    let port = source.port;
    let redirect = |to: &str| source.url(&format!("/redirect?to={}", enc(to)));
    // (url, status, code, message fragment)
    let table: Vec<(String, u16, &str, &str)> = vec![
        // The allowed address itself, and a redirect within it.
        (source.url("/people.jsonl"), 200, "", ""),
        (redirect(&source.url("/people.jsonl")), 200, "", ""),
        (redirect("/people.json"), 200, "", ""),
        // Redirects to what the allowlist does not name.
        (redirect(&format!("http://127.0.0.2:{port}/people.jsonl")), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect(&format!("http://[::1]:{port}/people.jsonl")), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://169.254.169.254/latest/meta-data/iam/"), 400, "SchemaInvalid", "169.254.169.254"),
        (redirect("http://[fd00:ec2::254]/latest/meta-data/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[::ffff:169.254.169.254]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://10.0.0.1/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://100.64.0.1/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://0.0.0.0/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[::]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://172.16.0.1/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://172.31.255.254/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://192.168.1.1/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[fe80::1]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[fc00::1]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[::ffff:10.0.0.1]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[64:ff9b::a9fe:a9fe]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://[2002:a9fe:a9fe::]/"), 400, "SchemaInvalid", "redirect 1 refused"),
        (redirect("http://2130706434/"), 400, "SchemaInvalid", "127.0.0.2"),
        (redirect("http://0x7f.0.0.2/"), 400, "SchemaInvalid", "127.0.0.2"),
        (redirect("file:///etc/passwd"), 400, "SchemaInvalid", "http or https"),
        (redirect("gopher://127.0.0.1:6379/_FLUSHALL"), 400, "SchemaInvalid", "http or https"),
        (redirect(&redirect("http://192.168.0.1/")), 400, "SchemaInvalid", "redirect 2 refused"),
        // Sources that answer badly.
        (source.url("/loop"), 502, "UpstreamError", "more than 5 redirects"),
        (source.url("/html"), 502, "UpstreamError", "text/html"),
        (source.url("/fail"), 502, "UpstreamError", "HTTP 500"),
        (source.url("/slow"), 504, "UpstreamTimeout", "3 s"),
        (format!("http://127.0.0.1:{}/", free_port()), 502, "UpstreamError", "cannot fetch"),
    ];
    for (i, (url, status, code, needle)) in table.iter().enumerate() {
        let name = format!("t{i}");
        register(&api, json!({"name": name, "url": url, "subject": "Person:{id}", "mask": "none"})).await;
        let r = api.post(&format!("/api/connectors/{name}/pull"), &json!({})).await;
        if *status == 200 {
            r.expect(200);
            continue;
        }
        r.expect_error(*status, code);
        let msg = r.json["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{url}: {msg}");
        let c = connector(&api, &name).await;
        assert_eq!(c["last_pull"]["ok"], false, "{c}");
        assert!(c["last_pull"]["error"].as_str().is_some_and(|e| e.contains(needle)), "{c}");
    }
}

/// Without the allowlist, loopback is refused however it is spelled, by
/// name included (names are resolved and every answer checked).
#[tokio::test]
async fn without_the_allowlist_loopback_is_refused_however_it_is_spelled() {
    let source = Source::start();
    let (_tmp, server) = fresh(&[]);
    let api = Api::new(&server, None);
    let port = source.port;
    for url in [
        format!("http://127.0.0.1:{port}/people.jsonl"),
        format!("http://127.1:{port}/people.jsonl"),
        format!("http://2130706433:{port}/people.jsonl"),
        format!("http://[::ffff:127.0.0.1]:{port}/people.jsonl"),
        format!("http://[::1]:{port}/people.jsonl"),
        format!("http://0.0.0.0:{port}/people.jsonl"),
    ] {
        let r = api.post("/api/connectors", &json!({"name": "x", "url": url})).await;
        r.expect_error(400, "SchemaInvalid");
        assert!(r.json["error"]["message"].as_str().unwrap().contains("non-public"), "{url}: {}", r.text);
    }
    register(&api, json!({"name": "byname", "url": format!("http://localhost:{port}/people.jsonl")})).await;
    let r = api.post("/api/connectors/byname/pull", &json!({})).await;
    r.expect_error(400, "SchemaInvalid");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("non-public"), "{}", r.text);
    assert_eq!(source.hits.load(Ordering::SeqCst), 0);
    assert!(api.list("subject=Person:sarah").await.is_empty());
}

#[tokio::test]
async fn an_oversized_source_is_cut_off_at_the_limit() {
    let source = Source::start();
    let (_tmp, server) = fresh(&[ALLOW_LOOPBACK, ("TEMPORA_CONNECTORS_MAX_INGEST_BYTES", "100000")]);
    let api = Api::new(&server, None);
    register(&api, json!({"name": "big", "url": source.url("/big"), "subject": "Item:{id}", "mask": "none"})).await;
    let r = api.post("/api/connectors/big/pull", &json!({})).await;
    r.expect_error(502, "UpstreamError");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("over the limit of 100000 bytes"), "{}", r.text);
}

#[tokio::test]
async fn scheduled_pulls_run_by_themselves_and_survive_a_restart() {
    let source = Source::start();
    let env = [ALLOW_LOOPBACK, ("TEMPORA_CONNECTORS_MIN_EVERY_SECS", "1")];
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let server = Server::start(&dir, &env);
    let api = Api::new(&server, None);
    let c = register(
        &api,
        json!({"name": "tick", "url": source.url("/counter.jsonl"), "every_secs": 1, "subject": "Counter:{id}"}),
    )
    .await;
    assert_eq!(c["kind"], "pull", "a schedule makes a pull connector");
    let seen = |api: Api| async move {
        let f = api.list("subject=Counter:c&predicate=seen").await;
        f.first().and_then(|f| f["object"].as_u64()).unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen(api.clone()).await < 2 {
        assert!(Instant::now() < deadline, "no scheduled pulls: {}", connector(&api, "tick").await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let c = connector(&api, "tick").await;
    assert_eq!(c["last_pull"]["trigger"], "schedule", "{c}");
    server.stop_ok();

    // After a restart the schedule is read back from memory.
    let hits = source.hits.load(Ordering::SeqCst);
    let server = Server::start(&dir, &env);
    let api = Api::new(&server, None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while source.hits.load(Ordering::SeqCst) <= hits + 1 {
        assert!(Instant::now() < deadline, "the schedule did not resume after a restart");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Unscheduling stops it.
    register(
        &api,
        json!({"name": "tick", "kind": "pull", "url": source.url("/counter.jsonl"), "subject": "Counter:{id}"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let settled = source.hits.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(source.hits.load(Ordering::SeqCst), settled, "an unscheduled connector is not pulled");
}

// ------------------------------------------------------------- tenancy

#[tokio::test]
async fn connectors_are_tenant_scoped() {
    let (_tmp, server) = fresh(&keyed());
    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    register(&nas, json!({"name": "hr", "subject": "Person:{id}", "mask": "none"})).await;
    deliver(&nas, "hr", "application/x-ndjson", PEOPLE_JSONL).await.expect(200);
    assert_eq!(acme.get("/api/connectors").await.expect(200)["connectors"], json!([]));
    deliver(&acme, "hr", "application/x-ndjson", PEOPLE_JSONL).await.expect_hidden();
    acme.post("/api/connectors/hr/pull", &json!({})).await.expect_hidden();
    assert!(acme.list("subject=Person:sarah").await.is_empty());
    let anonymous = Api::new(&server, None);
    anonymous.get("/api/connectors").await.expect_hidden();
    deliver(&anonymous, "hr", "application/json", "{}").await.expect_hidden();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
