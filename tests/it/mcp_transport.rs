//! The MCP endpoint over a real socket: the Streamable HTTP rules real
//! clients rely on (docs/mcp.md), auth and non-disclosure, Origin, the
//! namespace pin, idempotent writes, and every tool end to end.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

struct Mcp {
    api: Api,
}

impl Mcp {
    fn new(server: &Server, key: Option<&str>) -> Mcp {
        Mcp { api: Api::new(server, key) }
    }

    fn post(&self) -> reqwest::RequestBuilder {
        self.api.req(Method::POST, "/mcp").header("accept", "application/json, text/event-stream")
    }

    async fn raw(&self, body: &Value) -> Resp {
        send(self.post().json(body)).await
    }

    async fn rpc(&self, id: Value, method: &str, params: Value) -> Resp {
        self.raw(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await
    }

    /// A tools/call that must answer 200 with a result; returns the result.
    async fn call(&self, tool: &str, args: Value) -> Value {
        let r = self.rpc(json!(7), "tools/call", json!({"name": tool, "arguments": args})).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.text);
        assert!(r.header("content-type").unwrap().starts_with("application/json"));
        assert_eq!(r.json["id"], 7);
        r.json["result"].clone()
    }

    /// A successful call: structuredContent, and the same JSON as text.
    async fn ok(&self, tool: &str, args: Value) -> Value {
        let res = self.call(tool, args).await;
        assert_eq!(res["isError"], false, "{tool}: {res}");
        let text = res["content"][0]["text"].as_str().expect("a text item");
        assert_eq!(res["content"][0]["type"], "text");
        let parsed: Value = serde_json::from_str(text).unwrap();
        assert_eq!(parsed, res["structuredContent"]);
        res["structuredContent"].clone()
    }

    /// A failed call: a result with isError and a message.
    async fn fails(&self, tool: &str, args: Value) -> String {
        let res = self.call(tool, args).await;
        assert_eq!(res["isError"], true, "{tool} should fail: {res}");
        res["content"][0]["text"].as_str().unwrap().to_string()
    }
}

fn init(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}})
}

#[tokio::test(flavor = "multi_thread")]
async fn transport_rules() {
    let (_tmp, server) = fresh(&[]);
    let mcp = Mcp::new(&server, None);

    // initialize echoes every supported version, else answers the latest
    // handshake version; id 0 is an id; no session is issued.
    for v in VERSIONS {
        let r = mcp.rpc(json!(0), "initialize", init(v)).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.text);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(r.header("mcp-session-id").is_none());
        assert_eq!(r.json["jsonrpc"], "2.0");
        assert_eq!(r.json["id"], 0);
        let res = &r.json["result"];
        assert_eq!(res["protocolVersion"], v);
        assert!(res["capabilities"]["tools"].is_object(), "{res}");
        assert_eq!(res["serverInfo"]["name"], "tempora");
        assert!(res["serverInfo"]["version"].is_string());
    }
    let r = mcp.rpc(json!("init-1"), "initialize", init("1999-01-01")).await;
    assert_eq!(r.json["id"], "init-1");
    assert_eq!(r.json["result"]["protocolVersion"], "2025-11-25");

    // Notifications: 202 with an empty body.
    let r = mcp.raw(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    assert_eq!(r.status.as_u16(), 202);
    assert!(r.text.is_empty());

    // tools/list: every tool with an object input schema and an output schema.
    let r = mcp.rpc(json!(1), "tools/list", json!({})).await;
    let tools = r.json["result"]["tools"].as_array().unwrap().clone();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["build_context", "digest", "explain_fact", "recall", "recall_as_of", "remember", "whats_changed"]);
    for t in &tools {
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 40), "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
    }
    // tools/list without params, and ping.
    let r = mcp.raw(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
    assert!(r.json["result"]["tools"].is_array(), "{}", r.text);
    let r = mcp.raw(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await;
    assert_eq!(r.json["result"], json!({}), "{}", r.text);

    // Unknown method, unknown tool, tool failure.
    let r = mcp.rpc(json!(4), "no/such/method", json!({})).await;
    assert_eq!(r.json["error"]["code"], -32601, "{}", r.text);
    assert_eq!(r.json["id"], 4);
    let r = mcp.rpc(json!(5), "tools/call", json!({"name": "no_such_tool", "arguments": {}})).await;
    assert_eq!(r.json["error"]["code"], -32602, "{}", r.text);
    let msg = mcp.fails("recall", json!({"question": ""})).await;
    assert!(msg.contains("question"), "{msg}");
    let msg = mcp.fails("remember", json!({"subject": "Person:a"})).await;
    assert!(msg.contains("predicate"), "{msg}");
    let msg = mcp.fails("remember", json!({"subject": "Person:a", "predicate": "p", "object": 1, "colour": "red"})).await;
    assert!(msg.contains("colour"), "{msg}");

    // Batches, bad JSON, not JSON-RPC, wrong content type: 400s/415 with a JSON-RPC error.
    let r = mcp.raw(&json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])).await;
    assert_eq!(r.status.as_u16(), 400);
    assert_eq!(r.json["error"]["code"], -32600, "{}", r.text);
    let r = send(mcp.post().header("content-type", "application/json").body("{not json")).await;
    assert_eq!(r.status.as_u16(), 400);
    assert_eq!(r.json["error"]["code"], -32700, "{}", r.text);
    let r = mcp.raw(&json!({"jsonrpc": "1.0", "id": 1, "method": "ping"})).await;
    assert_eq!(r.status.as_u16(), 400);
    assert_eq!(r.json["error"]["code"], -32600);
    let r = mcp.raw(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}})).await;
    assert_eq!(r.json["error"]["code"], -32602, "{}", r.text);
    let r = mcp.raw(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": [1]}})).await;
    assert_eq!(r.json["error"]["code"], -32602, "{}", r.text);
    let r = send(mcp.post().header("content-type", "text/plain").body("{}")).await;
    assert_eq!(r.status.as_u16(), 415);
    assert!(r.json["error"]["code"].is_i64());

    // MCP-Protocol-Version: a supported one is fine, another is 400.
    for v in VERSIONS {
        let r = send(mcp.post().header("mcp-protocol-version", v).json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))).await;
        assert_eq!(r.status.as_u16(), 200, "{v}: {}", r.text);
    }
    let r = send(mcp.post().header("mcp-protocol-version", "1999-01-01").json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))).await;
    assert_eq!(r.status.as_u16(), 400, "{}", r.text);

    // server/discover as mcp 2.x sends it first: answered at once, never a 5xx.
    for with_method_header in [false, true] {
        let mut req = mcp.post().header("mcp-protocol-version", "2026-07-28");
        if with_method_header {
            req = req.header("mcp-method", "server/discover");
        }
        let started = Instant::now();
        let r = send(req.json(&json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {}}))).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(r.status.as_u16() < 500, "{} {}", r.status, r.text);
        assert!(r.json.get("result").is_some() || r.json.get("error").is_some(), "{}", r.text);
    }

    // GET: 405 with Allow; DELETE: 204; other methods 405.
    let r = mcp.api.get("/mcp").await;
    assert_eq!(r.status.as_u16(), 405);
    assert_eq!(r.header("allow"), Some("POST, DELETE"));
    let r = mcp.api.delete("/mcp").await;
    assert_eq!(r.status.as_u16(), 204);
    assert!(r.text.is_empty());
    let r = send(mcp.api.req(Method::PUT, "/mcp")).await;
    assert_eq!(r.status.as_u16(), 405);

    // Origin: a foreign one is 403; the server's own is fine.
    let r = send(mcp.post().header("origin", "https://evil.example").json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))).await;
    assert_eq!(r.status.as_u16(), 403, "{}", r.text);
    let own = format!("http://{}", server.authority());
    let r = send(mcp.post().header("origin", own).json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let r = send(mcp.api.req(Method::GET, "/mcp").header("origin", "null")).await;
    assert_eq!(r.status.as_u16(), 403);

    // Open mode: the namespace is `default`; another is an error result.
    mcp.ok("recall", json!({"question": "anything", "namespace": "default"})).await;
    let msg = mcp.fails("recall", json!({"question": "anything", "namespace": "other"})).await;
    assert!(msg.contains("NotFound"), "{msg}");

    // The manifest.
    let r = mcp.api.get("/.well-known/mcp.json").await;
    let m = r.expect(200);
    assert_eq!(m["endpoint"], "/mcp");
    assert_eq!(m["transport"]["type"], "streamable-http");
    assert_eq!(m["auth"]["required"], false);
    assert_eq!(m["tools"].as_array().unwrap().len(), 7);
    for t in m["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_end_to_end() {
    let (_tmp, server) = fresh(&[]);
    let mcp = Mcp::new(&server, None);

    let acme = mcp
        .ok("remember", json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme", "valid_from": year(2020), "source": "hr-feed", "confidence": 0.9}))
        .await;
    let acme_id = acme["fact"]["id"].as_str().unwrap().to_string();
    assert_eq!(acme["fact"]["source"], "hr-feed");
    assert_eq!(acme["superseded"], json!([]));
    let between = acme["fact"]["recorded_at"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let globex = mcp
        .ok("remember", json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:globex", "valid_from": year(2024)}))
        .await;
    let globex_id = globex["fact"]["id"].as_str().unwrap().to_string();
    assert_eq!(globex["superseded"], json!([acme_id]));

    // recall sees the writes made before it.
    let r = mcp.ok("recall", json!({"question": "where does sarah work", "top_k": 5})).await;
    let objects: Vec<&Value> = r["facts"].as_array().unwrap().iter().map(|f| &f["object"]).collect();
    assert_eq!(objects.first(), Some(&&json!("Org:globex")), "{r}");
    assert_eq!(r["matches"][0]["id"], globex_id.as_str());
    mcp.fails("recall", json!({"question": "x", "top_k": 0})).await;

    // recall_as_of: valid time, record time, and a question.
    let r = mcp.ok("recall_as_of", json!({"subject": "Person:sarah", "predicate": "works_at", "valid_at": year(2022)})).await;
    assert_eq!(r["facts"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["facts"][0]["object"], "Org:acme");
    let r = mcp.ok("recall_as_of", json!({"subject": "Person:sarah", "as_of": between})).await;
    assert_eq!(r["facts"][0]["object"], "Org:acme");
    assert_eq!(r["facts"][0]["valid_until"], Value::Null);
    let r = mcp.ok("recall_as_of", json!({"question": "sarah works", "as_of": between})).await;
    assert_eq!(r["facts"][0]["id"], acme_id.as_str(), "{r}");
    mcp.fails("recall_as_of", json!({"subject": "Person:sarah", "as_of": 1, "as_of_tx": 1})).await;

    // whats_changed: pages by cursor, and from a time.
    let p1 = mcp.ok("whats_changed", json!({"limit": 1})).await;
    assert_eq!(p1["changes"].as_array().unwrap().len(), 1);
    assert_eq!(p1["changes"][0]["events"][0]["op"], "assert");
    assert_eq!(p1["changes"][0]["events"][0]["fact"]["id"], acme_id.as_str());
    let cursor = p1["next_cursor"].as_u64().expect("more to come");
    let p2 = mcp.ok("whats_changed", json!({"cursor": cursor, "limit": 1})).await;
    assert_eq!(p2["changes"][0]["events"][0]["fact"]["id"], globex_id.as_str());
    assert_eq!(p2["changes"][0]["events"][0]["superseded"], json!([acme_id]));
    assert_eq!(p2["next_cursor"], Value::Null, "{p2}");
    let since = globex["fact"]["recorded_at"].as_i64().unwrap();
    let r = mcp.ok("whats_changed", json!({"since": since})).await;
    assert_eq!(r["changes"].as_array().unwrap().len(), 1, "{r}");
    let r = mcp.ok("whats_changed", json!({"since_tx": p2["last_tx"]})).await;
    assert_eq!(r["changes"], json!([]));
    assert_eq!(r["last_tx"], p2["last_tx"]);
    mcp.fails("whats_changed", json!({"limit": 100000})).await;

    // explain_fact: provenance, versions, the chain both ways.
    let r = mcp.ok("explain_fact", json!({"id": acme_id})).await;
    assert_eq!(r["fact"]["status"], "superseded");
    assert_eq!(r["provenance"]["source"], "hr-feed");
    assert!(r["versions"].as_array().unwrap().len() >= 2, "{r}");
    assert_eq!(r["successors"][0]["id"], globex_id.as_str());
    let r = mcp.ok("explain_fact", json!({"id": globex_id})).await;
    assert_eq!(r["predecessors"][0]["id"], acme_id.as_str());
    mcp.fails("explain_fact", json!({"id": "0190a5d2-0000-7000-8000-000000000000"})).await;
    mcp.fails("explain_fact", json!({"id": "not-an-id"})).await;

    // build_context: the spec's argument names (task, max_tokens) and the REST ones.
    let r = mcp.ok("build_context", json!({"task": "brief me on Sarah", "seeds": ["Person:sarah"], "max_tokens": 200})).await;
    assert_eq!(r["goal"], "brief me on Sarah");
    assert!(r["facts"].as_array().unwrap().iter().any(|f| f["id"] == globex_id.as_str()), "{r}");
    let r2 = mcp.ok("build_context", json!({"goal": "brief me on Sarah", "seeds": ["Person:sarah"], "token_budget": 200})).await;
    assert_eq!(r["facts"], r2["facts"]);
    mcp.fails("build_context", json!({})).await;
    mcp.fails("build_context", json!({"goal": "a", "task": "b"})).await;

    // digest: POST /api/digest's pipeline, its receipt, its idempotency.
    let args = json!({"content": "# Sarah\n\nSarah joined Acme as a staff engineer in 2024.", "source": "notes"});
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "digest", "arguments": args}});
    let first = send(mcp.post().header("idempotency-key", "d-1").json(&body)).await;
    let receipt = &first.json["result"]["structuredContent"];
    assert_eq!(first.json["result"]["isError"], false, "{}", first.text);
    assert_eq!(receipt["source"], "notes");
    assert!(receipt["page"].as_str().is_some_and(|p| p.starts_with("Page:")), "{receipt}");
    let again = send(mcp.post().header("idempotency-key", "d-1").json(&body)).await;
    assert_eq!(again.json["result"]["structuredContent"]["tx"], receipt["tx"]);
    assert_eq!(again.json["result"]["structuredContent"]["replayed"], true);
    mcp.fails("digest", json!({"content": ""})).await;
    mcp.fails("digest", json!({"content": "x", "bogus": 1})).await;
    mcp.fails("digest", json!({"content": "x", "mask": "nope"})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn keyed_mode_auth_tenants_idempotency() {
    let mut env = keyed();
    env.push(("TEMPORA_MCP_ALLOWED_ORIGINS", "https://app.example.com"));
    let (_tmp, server) = fresh(&env);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});

    // No key or a wrong key: the REST non-disclosure answer, on every method.
    for key in [None, Some("nas-key-9-not-configured")] {
        let anon = Mcp::new(&server, key);
        send(anon.post().json(&ping)).await.expect_hidden();
        send(anon.post().json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init("2025-06-18")}))).await.expect_hidden();
        anon.api.get("/mcp").await.expect_hidden();
        anon.api.delete("/mcp").await.expect_hidden();
    }
    // The manifest is public and says a key is needed.
    let m = Api::new(&server, None).get("/.well-known/mcp.json").await;
    assert_eq!(m.expect(200)["auth"]["required"], true);

    let nas = Mcp::new(&server, Some(NAS_KEY));
    let acme = Mcp::new(&server, Some(ACME_KEY));
    let admin = Mcp::new(&server, Some(ADMIN));
    let r = nas.rpc(json!(0), "initialize", init("2025-06-18")).await;
    assert_eq!(r.json["result"]["protocolVersion"], "2025-06-18");

    // A configured origin is allowed; a foreign one is not.
    let r = send(nas.post().header("origin", "https://app.example.com").json(&ping)).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let r = send(nas.post().header("origin", "https://app.example.com.evil.net").json(&ping)).await;
    assert_eq!(r.status.as_u16(), 403);

    // The tenant pin.
    let fact = json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:nas-secret"});
    let stored = nas.ok("remember", fact.clone()).await;
    let id = stored["fact"]["id"].as_str().unwrap().to_string();
    assert_eq!(stored["fact"]["tenant"], "nas");
    nas.ok("remember", json!({"subject": "Person:x", "predicate": "p", "object": 1, "namespace": "nas"})).await;
    let msg = nas.fails("recall", json!({"question": "sarah", "namespace": "acme"})).await;
    assert!(msg.starts_with("NotFound"), "{msg}");
    assert!(!msg.contains("nas-secret"));
    nas.fails("remember", json!({"subject": "Person:y", "predicate": "p", "object": 1, "namespace": "acme"})).await;
    let r = acme.ok("recall", json!({"question": "sarah works"})).await;
    assert_eq!(r["facts"], json!([]), "acme sees nas data: {r}");
    acme.fails("explain_fact", json!({"id": id})).await;
    let r = acme.ok("whats_changed", json!({})).await;
    assert_eq!(r["changes"], json!([]));
    let r = nas.ok("recall", json!({"question": "sarah works"})).await;
    assert_eq!(r["facts"][0]["id"], id.as_str());

    // Admins name the namespace.
    let msg = admin.fails("recall", json!({"question": "sarah"})).await;
    assert!(msg.contains("namespace"), "{msg}");
    let r = admin.ok("explain_fact", json!({"id": id, "namespace": "nas"})).await;
    assert_eq!(r["fact"]["object"], "Org:nas-secret");
    admin.fails("recall", json!({"question": "sarah", "namespace": "nobody"})).await;

    // Idempotency-Key: a replay answers the first result and writes nothing.
    let args = json!({"subject": "Person:ida", "predicate": "likes", "object": "tea"});
    let call = |mcp: &Mcp, key: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "remember", "arguments": args}});
        mcp.post().header("idempotency-key", key.to_string()).json(&body)
    };
    let first = send(call(&nas, "k-1")).await;
    let first = first.json["result"]["structuredContent"].clone();
    let again = send(call(&nas, "k-1")).await;
    let again = again.json["result"]["structuredContent"].clone();
    assert_eq!(again["fact"], first["fact"]);
    assert_eq!(again["replayed"], true);
    assert!(first.get("replayed").is_none());
    let facts = Api::new(&server, Some(NAS_KEY)).list("subject=Person:ida&status=all").await;
    assert_eq!(facts.len(), 1, "{facts:?}");
    // Another key writes again; the same key in another tenant is that tenant's own.
    let other = send(call(&nas, "k-2")).await;
    assert_ne!(other.json["result"]["structuredContent"]["fact"]["id"], first["fact"]["id"]);
    let theirs = send(call(&acme, "k-1")).await;
    assert_eq!(theirs.json["result"]["structuredContent"]["fact"]["tenant"], "acme");
    assert!(theirs.json["result"]["structuredContent"].get("replayed").is_none());
    // A failed write under a key replays its failure.
    let bad = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "remember", "arguments": {"subject": "Person:z", "predicate": "p", "object": 1, "confidence": 7.0}}});
    let r1 = send(nas.post().header("idempotency-key", "k-bad").json(&bad)).await;
    assert_eq!(r1.json["result"]["isError"], true, "{}", r1.text);
    let r2 = send(nas.post().header("idempotency-key", "k-bad").json(&bad)).await;
    assert_eq!(r2.json["result"]["content"], r1.json["result"]["content"]);
    let long = "k".repeat(300);
    let r = send(call(&nas, &long)).await;
    assert_eq!(r.status.as_u16(), 400);
}

/// `recall` and `build_context` read the question's time words against
/// `reference_time`, rank a named person's own facts first and return the
/// turns around a hit, as `/api/search` does; `ask` grounds its question too.
#[tokio::test(flavor = "multi_thread")]
async fn recall_understands_time_people_and_turns() {
    let (_tmp, server) = fresh(&[]);
    let mcp = Mcp::new(&server, None);
    let day = 86_400_000i64;
    let jan_2024 = 1_704_067_200_000i64;
    let turns = json!({"conversation": "c1", "turns": [
        {"speaker": "Dana", "text": "I started a pottery class", "at": jan_2024 + 130 * day},
        {"speaker": "Sam", "text": "Nice one, Dana! A class, Dana?", "at": jan_2024 + 130 * day + 60_000},
        {"speaker": "Dana", "text": "I ran a half marathon, what a run", "at": jan_2024 + 200 * day},
        {"speaker": "Sam", "text": "Dana, Dana, what a run, Dana", "at": jan_2024 + 200 * day + 60_000}
    ]});
    mcp.api.post("/api/conversations", &turns).await.expect(201);
    let reference = jan_2024 + 340 * day;
    let r = mcp.ok("recall", json!({"question": "What did Dana do in May?", "reference_time": reference, "neighbours": 1})).await;
    assert_eq!(r["facts"][0]["object"], "I started a pottery class", "{r}");
    assert_eq!(r["facts"][0]["subject"], "Person:dana", "{r}");
    let reasons = r["matches"][0]["reasons"].as_array().unwrap();
    assert!(reasons.contains(&json!("time")) && reasons.contains(&json!("entity")), "{r}");
    assert_eq!(r["time"]["from"], json!(jan_2024 + 121 * day), "{r}");
    assert_eq!(r["matches"][0]["neighbours"][0]["object"], "Nice one, Dana! A class, Dana?", "{r}");
    // BM25 alone: no interval, no other list.
    let r = mcp.ok("recall", json!({"question": "What did Dana do in May?", "reference_time": reference, "signals": []})).await;
    assert_eq!(r["time"], Value::Null, "{r}");
    assert!(r["matches"].as_array().unwrap().iter().all(|m| m["reasons"] == json!(["bm25"])), "{r}");
    let msg = mcp.fails("recall", json!({"question": "x", "signals": ["magic"]})).await;
    assert!(msg.contains("magic"), "{msg}");
    // A packet for a goal naming May ranks May's facts above July's (which
    // are newer, and would lead on recency alone).
    let at = |packet: &Value, text: &str| {
        packet["facts"].as_array().unwrap().iter().position(|f| f["object"] == text).unwrap_or_else(|| panic!("{text}: {packet}"))
    };
    let packet = mcp.ok("build_context", json!({"goal": "What did Dana do in May?", "reference_time": reference})).await;
    assert!(at(&packet, "I started a pottery class") < at(&packet, "I ran a half marathon, what a run"), "{packet}");
    let packet = mcp.ok("build_context", json!({"goal": "What did Dana do in July?", "reference_time": reference})).await;
    assert!(at(&packet, "I ran a half marathon, what a run") < at(&packet, "I started a pottery class"), "{packet}");
    let v = mcp.api.post("/api/ask", &json!({"question": "What did Dana do in May?", "reference_time": reference})).await;
    let v = v.expect(200);
    assert_eq!(v["evidence"][0]["object"], "I started a pottery class", "{v}");
}
