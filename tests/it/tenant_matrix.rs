//! Tenant isolation as a matrix: tenant A (`nas`) makes one of everything
//! on every surface, then tenant B (`acme`), callers with no key or a wrong
//! key, and (with host binding) A's own key on B's host try every route of
//! every surface against A's ids and names: the REST API, the SSE change
//! feed, MCP, NeuroSan over HTTP and gRPC, the Agent Protocol and NeuroDock
//! over TCP. Each cell asserts its precise answer (the non-disclosure 404,
//! the Agent Protocol's 404, `Unauthenticated`, or B's own empty view), that
//! no answer carries A's data, and that A's view is the same afterwards.
//!
//! The route table is checked against the router's source and the OpenAPI
//! document: a route added without a row here fails
//! `every_route_has_a_matrix_row`.

use crate::common;
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// A string found only in tenant A's data.
const MARK: &str = "nassecret7f3";
const AP: &str = "/ap/v1/agent/tasks";
const UNKNOWN_ID: &str = "0190a5d2-0000-7000-8000-000000000000";

/// One caller: a key (bearer), and the `Host` it sends.
#[derive(Clone, Debug)]
struct Who {
    name: &'static str,
    key: Option<String>,
    host: Option<String>,
}

impl Who {
    fn new(name: &'static str, key: Option<&str>, host: Option<&str>) -> Who {
        Who { name, key: key.map(String::from), host: host.map(String::from) }
    }
}

#[derive(Clone)]
enum Body {
    None,
    Json(Value),
    /// Content type and bytes.
    Raw(String, Vec<u8>),
}

/// What a caller gets.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// Public: 200 for everyone.
    Public,
    /// The REST non-disclosure 404 for everyone but A: A's ids and names.
    Hidden,
    /// B gets this status about its own tenant; outsiders the REST 404.
    Own(u16),
    /// The Agent Protocol's 404 (`{"message"}`) for everyone but A.
    ApHidden,
    /// B gets this status about its own tenant; outsiders the Agent Protocol's 404.
    ApOwn(u16),
    /// `POST /api/session`: the key is in the body; B logs in as B, an
    /// outsider's key is the API's one 401.
    Session,
    /// B gets this status; outsiders too (the route answers before auth).
    Everyone(u16),
}

struct Row {
    method: Method,
    /// The route as the router declares it.
    route: &'static str,
    path: String,
    body: Body,
    expect: Expect,
}

fn row(method: Method, route: &'static str, path: impl Into<String>, body: Body, expect: Expect) -> Row {
    Row { method, route, path: path.into(), body, expect }
}

fn j(v: Value) -> Body {
    Body::Json(v)
}

/// What tenant A made, by id and name.
#[derive(Debug, Clone, Default)]
struct Made {
    fact: String,
    candidate: String,
    alert: String,
    report: String,
    task: String,
    step: String,
    artifact: String,
    chat_context: Value,
}

impl Made {
    fn ids(&self) -> Vec<&str> {
        vec![&self.fact, &self.candidate, &self.alert, &self.report, &self.task, &self.step, &self.artifact]
    }
}

/// Every HTTP route of the server, against A's ids.
fn rows(a: &Made) -> Vec<Row> {
    use Expect::*;
    let (g, p, u, d) = (Method::GET, Method::POST, Method::PUT, Method::DELETE);
    let fact = json!({"subject": "Person:nasx", "predicate": "motto", "object": "b's own", "tenant": "nas"});
    let ndjson = Body::Raw("application/x-ndjson".into(), b"{\"id\":\"nasx\",\"note\":\"b\"}\n".to_vec());
    let (ct, artifact) = multipart("b.txt", b"b's bytes");
    let mcp = |method: &str, params: Value| j(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    vec![
        row(g.clone(), "/api/health", "/api/health", Body::None, Public),
        row(g.clone(), "/api/stats", "/api/stats?tenant=nas", Body::None, Own(200)),
        row(
            g.clone(),
            "/api/facts",
            "/api/facts?subject=Person:nasx&status=all&include_retracted=true&tenant=nas",
            Body::None,
            Own(200),
        ),
        row(p.clone(), "/api/facts", "/api/facts?tenant=nas", j(fact.clone()), Own(201)),
        row(p.clone(), "/api/facts/batch", "/api/facts/batch?tenant=nas", j(json!({"facts": [fact]})), Own(201)),
        row(g.clone(), "/api/facts/{id}", format!("/api/facts/{}", a.fact), Body::None, Hidden),
        row(g.clone(), "/api/facts/{id}", format!("/api/facts/{}?tenant=nas", a.fact), Body::None, Hidden),
        row(d.clone(), "/api/facts/{id}", format!("/api/facts/{}", a.fact), Body::None, Hidden),
        row(g.clone(), "/api/facts/{id}/history", format!("/api/facts/{}/history", a.fact), Body::None, Hidden),
        row(g.clone(), "/api/predicates/{name}", "/api/predicates/rank", Body::None, Own(200)),
        row(u.clone(), "/api/predicates/{name}", "/api/predicates/rank", j(json!({"cardinality": "strict"})), Own(200)),
        row(g.clone(), "/api/walk", "/api/walk?start=Person:nasx&depth=2", Body::None, Own(200)),
        row(g.clone(), "/api/graph", "/api/graph?tenant=nas", Body::None, Own(200)),
        row(p.clone(), "/api/context", "/api/context", j(json!({"seeds": ["Person:nasx"]})), Own(200)),
        row(p.clone(), "/api/ask", "/api/ask", j(json!({"question": "What is the motto of Person:nasx?"})), Own(200)),
        row(p.clone(), "/api/digest", "/api/digest", j(json!({"content": "Person:nasx likes Thing:b."})), Own(200)),
        // A's conversation id, in B's tenant: B's own conversation, numbered from 0.
        row(
            p.clone(),
            "/api/conversations",
            "/api/conversations",
            j(json!({"conversation": "nas-talk", "turns": [{"speaker": "Person:nasx", "text": "b's own words"}]})),
            Own(201),
        ),
        row(g.clone(), "/api/connectors", "/api/connectors", Body::None, Own(200)),
        row(
            p.clone(),
            "/api/connectors",
            "/api/connectors",
            j(json!({"name": "b_feed", "subject": "Person:{id}"})),
            Own(200),
        ),
        row(p.clone(), "/api/connectors/{name}/events", "/api/connectors/hr/events", ndjson, Hidden),
        row(p.clone(), "/api/connectors/{name}/pull", "/api/connectors/hr/pull", j(json!({})), Hidden),
        row(g.clone(), "/api/search", "/api/search?question=nasx%20motto&tenant=nas", Body::None, Own(200)),
        row(
            p.clone(),
            "/api/search",
            "/api/search",
            j(json!({"question": "nasx motto", "seeds": ["Person:nasx"]})),
            Own(200),
        ),
        row(p.clone(), "/api/session", "/api/session", Body::None, Session),
        row(d.clone(), "/api/session", "/api/session", Body::None, Public),
        row(g.clone(), "/api/v1/list", "/api/v1/list", Body::None, Own(200)),
        row(g.clone(), "/api/v1/docs", "/api/v1/docs", Body::None, Public),
        row(g.clone(), "/api/v1/{*rest}", "/api/v1/memory/function", Body::None, Own(200)),
        row(g.clone(), "/api/v1/{*rest}", "/api/v1/memory/connectivity", Body::None, Own(200)),
        row(
            p.clone(),
            "/api/v1/{*rest}",
            "/api/v1/memory/streaming_chat",
            j(
                json!({"user_message": {"type": "HUMAN", "text": "what do you know about Person:nasx"}, "chat_context": a.chat_context}),
            ),
            Own(200),
        ),
        row(g.clone(), "/api/stream", "/api/stream?tenant=nas", Body::None, Own(200)),
        row(g.clone(), "/api/alerts", "/api/alerts?state=all", Body::None, Own(200)),
        row(p.clone(), "/api/alerts/evaluate", "/api/alerts/evaluate", j(json!({})), Own(200)),
        row(g.clone(), "/api/alerts/rules", "/api/alerts/rules", Body::None, Own(200)),
        row(u.clone(), "/api/alerts/rules", "/api/alerts/rules", j(json!({"drift": {"enabled": false}})), Own(200)),
        row(g.clone(), "/api/alerts/usage", "/api/alerts/usage", Body::None, Own(200)),
        row(p.clone(), "/api/alerts/{id}/ack", format!("/api/alerts/{}/ack", a.alert), j(json!({})), Hidden),
        row(g.clone(), "/api/reports", "/api/reports", Body::None, Own(200)),
        row(
            p.clone(),
            "/api/reports",
            "/api/reports",
            j(json!({"name": "b", "blocks": [{"type": "stats"}]})),
            Own(201),
        ),
        row(g.clone(), "/api/reports/{id}", format!("/api/reports/{}", a.report), Body::None, Hidden),
        row(p.clone(), "/api/reports/{id}/run", format!("/api/reports/{}/run", a.report), j(json!({})), Hidden),
        row(g.clone(), "/api/reports/{id}/runs", format!("/api/reports/{}/runs", a.report), Body::None, Hidden),
        row(g.clone(), "/healthz", "/healthz", Body::None, Public),
        row(g.clone(), "/livez", "/livez", Body::None, Public),
        row(g.clone(), "/readyz", "/readyz", Body::None, Public),
        // Whole-server metrics are for admins only.
        row(g.clone(), "/metrics", "/metrics", Body::None, Hidden),
        row(g.clone(), "/api/admin/backup", "/api/admin/backup", Body::None, Hidden),
        row(g.clone(), "/openapi.json", "/openapi.json", Body::None, Public),
        row(
            p.clone(),
            "/mcp",
            "/mcp",
            mcp("tools/call", json!({"name": "explain_fact", "arguments": {"id": a.fact}})),
            Own(200),
        ),
        row(
            p.clone(),
            "/mcp",
            "/mcp",
            mcp("tools/call", json!({"name": "recall", "arguments": {"question": "nasx motto", "namespace": "nas"}})),
            Own(200),
        ),
        row(
            p.clone(),
            "/mcp",
            "/mcp",
            mcp("tools/call", json!({"name": "recall", "arguments": {"question": "nasx motto"}})),
            Own(200),
        ),
        row(
            p.clone(),
            "/mcp",
            "/mcp",
            mcp(
                "tools/call",
                json!({"name": "recall_as_of", "arguments": {"question": "nasx", "as_of": 4102444800000u64}}),
            ),
            Own(200),
        ),
        row(p.clone(), "/mcp", "/mcp", mcp("tools/call", json!({"name": "whats_changed", "arguments": {}})), Own(200)),
        row(
            p.clone(),
            "/mcp",
            "/mcp",
            mcp("tools/call", json!({"name": "build_context", "arguments": {"seeds": ["Person:nasx"]}})),
            Own(200),
        ),
        row(g.clone(), "/mcp", "/mcp", Body::None, Own(405)),
        // No sessions are issued, so ending one (A's id included) ends nothing.
        row(d.clone(), "/mcp", "/mcp", Body::None, Own(204)),
        row(g.clone(), "/.well-known/mcp.json", "/.well-known/mcp.json", Body::None, Public),
        row(g.clone(), "/", "/", Body::None, Public),
        row(g.clone(), "/console", "/console", Body::None, Public),
        row(g.clone(), "/console/", "/console/", Body::None, Public),
        row(g.clone(), "/console/{file}", "/console/app.js", Body::None, Public),
        row(g.clone(), "/ap/v1/agent/tasks", AP, Body::None, ApOwn(200)),
        row(p.clone(), "/ap/v1/agent/tasks", AP, j(json!({"input": "what do you know about Person:nasx"})), ApOwn(200)),
        row(g.clone(), "/ap/v1/agent/tasks/{task_id}", format!("{AP}/{}", a.task), Body::None, ApHidden),
        row(g.clone(), "/ap/v1/agent/tasks/{task_id}/steps", format!("{AP}/{}/steps", a.task), Body::None, ApHidden),
        row(p.clone(), "/ap/v1/agent/tasks/{task_id}/steps", format!("{AP}/{}/steps", a.task), j(json!({})), ApHidden),
        row(
            g.clone(),
            "/ap/v1/agent/tasks/{task_id}/steps/{step_id}",
            format!("{AP}/{}/steps/{}", a.task, a.step),
            Body::None,
            ApHidden,
        ),
        row(
            g.clone(),
            "/ap/v1/agent/tasks/{task_id}/artifacts",
            format!("{AP}/{}/artifacts", a.task),
            Body::None,
            ApHidden,
        ),
        row(
            p.clone(),
            "/ap/v1/agent/tasks/{task_id}/artifacts",
            format!("{AP}/{}/artifacts", a.task),
            Body::Raw(ct, artifact),
            ApHidden,
        ),
        row(
            g.clone(),
            "/ap/v1/agent/tasks/{task_id}/artifacts/{artifact_id}",
            format!("{AP}/{}/artifacts/{}", a.task, a.artifact),
            Body::None,
            ApHidden,
        ),
        // Routes no one has: the same 404 as a hidden one.
        row(g.clone(), "", "/api/nope", Body::None, Everyone(404)),
        row(g, "", format!("/api/facts/{UNKNOWN_ID}"), Body::None, Hidden),
    ]
}

/// A multipart/form-data body with one `file` part.
fn multipart(file_name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----tempora-matrix-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

struct Http {
    client: reqwest::Client,
    base: String,
}

/// A finished answer; a stream is read for a moment and cut.
#[derive(Debug)]
struct Got {
    status: u16,
    text: String,
    json: Value,
}

impl Http {
    fn new(server: &Server) -> Http {
        Http { client: client(), base: server.base.clone() }
    }

    fn req(&self, who: &Who, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.client.request(method, format!("{}{}", self.base, path));
        if let Some(k) = &who.key {
            r = r.bearer_auth(k);
        }
        if let Some(h) = &who.host {
            r = r.header("host", h);
        }
        r
    }

    async fn call(&self, who: &Who, method: Method, path: &str, body: &Body) -> Got {
        let mut r = self.req(who, method, path);
        if path == "/mcp" {
            // A session id is not a credential (the endpoint issues none).
            r = r.header("accept", "application/json, text/event-stream").header("mcp-session-id", "nas-session-1");
        }
        if path.starts_with("/api/stream") {
            r = r.header("last-event-id", "0");
        }
        r = match body {
            Body::None => r,
            Body::Json(v) => r.json(v),
            Body::Raw(ct, bytes) => r.header("content-type", ct).body(bytes.clone()),
        };
        let mut resp = r.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let mut bytes = Vec::new();
        // Streams do not end by themselves: read what comes within a moment.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
        loop {
            match tokio::time::timeout_at(deadline, resp.chunk()).await {
                Err(_) | Ok(Ok(None)) | Ok(Err(_)) => break,
                Ok(Ok(Some(c))) => bytes.extend_from_slice(&c),
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Got { status, text, json }
    }

    async fn get(&self, who: &Who, path: &str) -> Got {
        self.call(who, Method::GET, path, &Body::None).await
    }

    async fn post(&self, who: &Who, path: &str, body: Value) -> Got {
        self.call(who, Method::POST, path, &Body::Json(body)).await
    }
}

#[track_caller]
fn ok(g: &Got, status: u16) -> &Value {
    assert_eq!(g.status, status, "{}", g.text);
    &g.json
}

#[track_caller]
fn is_rest_hidden(g: &Got) -> bool {
    g.status == 404 && g.json == json!({"error": {"code": "NotFound", "message": "not found"}})
}

#[track_caller]
fn is_ap_hidden(g: &Got) -> bool {
    g.status == 404
        && g.json.as_object().is_some_and(|o| o.len() == 1)
        && g.json["message"].as_str().is_some_and(|m| !m.is_empty())
}

/// Tenant A makes one of everything that has an id or a name, over HTTP.
async fn make_everything(http: &Http, a: &Who) -> Made {
    let mut made = Made::default();
    let f = http
        .post(
            a,
            "/api/facts",
            json!({"subject": "Person:nasx", "predicate": "motto", "object": format!("{MARK} first")}),
        )
        .await;
    made.fact = ok(&f, 201)["id"].as_str().unwrap().to_string();
    ok(&http.call(a, Method::PUT, "/api/predicates/rank", &j(json!({"cardinality": "many"}))).await, 200);
    let c = http
        .post(a, "/api/facts", json!({"subject": "Person:nasx", "predicate": "rumor", "object": format!("{MARK} rumor"), "confidence": 0.2}))
        .await;
    made.candidate = ok(&c, 201)["id"].as_str().unwrap().to_string();
    ok(&http.post(a, "/api/connectors", json!({"name": "hr", "subject": "Person:{id}", "mask": "none"})).await, 200);
    let nd =
        Body::Raw("application/x-ndjson".into(), format!("{{\"id\":\"nasy\",\"note\":\"{MARK}\"}}\n").into_bytes());
    ok(&http.call(a, Method::POST, "/api/connectors/hr/events", &nd).await, 200);
    // An open alert: any candidate fires.
    let rules = j(json!({"confidence": {"max_share": 0.0, "min_facts": 1}, "drift": {"enabled": false}}));
    ok(&http.call(a, Method::PUT, "/api/alerts/rules", &rules).await, 200);
    let e = http.post(a, "/api/alerts/evaluate", json!({})).await;
    made.alert = ok(&e, 200)["fired"][0]["id"].as_str().unwrap().to_string();
    let r = http
        .post(a, "/api/reports", json!({"name": "weekly", "blocks": [{"type": "facts", "subject": "Person:nasx"}]}))
        .await;
    made.report = ok(&r, 201)["id"].as_str().unwrap().to_string();
    ok(&http.post(a, &format!("/api/reports/{}/run", made.report), json!({})).await, 200);
    // A transcript stored as a conversation.
    let talk = json!({"conversation": "nas-talk", "turns": [{"speaker": "Person:nasx", "text": format!("{MARK} said")}]});
    ok(&http.post(a, "/api/conversations", talk).await, 201);
    // A NeuroSan conversation; its chat_context names it.
    let chat = http
        .post(
            a,
            "/api/v1/memory/streaming_chat",
            json!({"user_message": {"type": "HUMAN", "text": format!("remember Person:nasx likes Thing:{MARK}")}}),
        )
        .await;
    assert_eq!(chat.status, 200, "{}", chat.text);
    let last: Value = serde_json::from_str(chat.text.lines().last().unwrap()).unwrap();
    made.chat_context = last["response"]["chat_context"].clone();
    assert!(made.chat_context.is_object(), "{last}");
    // An Agent Protocol task with a step and an artifact.
    let t = http
        .post(
            a,
            AP,
            json!({"input": format!("remember Person:nasx hobby Thing:{MARK}\nwhat do you know about Person:nasx")}),
        )
        .await;
    made.task = ok(&t, 200)["task_id"].as_str().unwrap().to_string();
    let s = http.post(a, &format!("{AP}/{}/steps", made.task), json!({})).await;
    made.step = ok(&s, 200)["step_id"].as_str().unwrap().to_string();
    let (ct, bytes) = multipart("nas.txt", MARK.as_bytes());
    let up = http.call(a, Method::POST, &format!("{AP}/{}/artifacts", made.task), &Body::Raw(ct, bytes)).await;
    made.artifact = ok(&up, 200)["artifact_id"].as_str().unwrap().to_string();
    // MCP: a fact remembered through a tool.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember", "arguments": {
        "subject": "Person:nasx", "predicate": "pet", "object": format!("{MARK} cat")}}});
    let m = http.call(a, Method::POST, "/mcp", &j(body)).await;
    assert_eq!(ok(&m, 200)["result"]["isError"], false, "{}", m.text);
    made
}

/// Everything tenant A can see of what it made.
async fn snapshot(http: &Http, a: &Who, made: &Made) -> Value {
    let mut out = serde_json::Map::new();
    let mut paths = vec![
        "/api/facts?status=all&include_retracted=true&limit=1000".to_string(),
        "/api/stats".into(),
        "/api/predicates/rank".into(),
        "/api/predicates/motto".into(),
        "/api/connectors".into(),
        "/api/alerts?state=all".into(),
        "/api/alerts/rules".into(),
        "/api/reports".into(),
        format!("/api/facts/{}/history", made.fact),
        format!("/api/reports/{}", made.report),
        format!("/api/reports/{}/runs", made.report),
        format!("{AP}/{}", made.task),
        format!("{AP}/{}/steps", made.task),
        format!("{AP}/{}/artifacts", made.task),
        format!("{AP}/{}/artifacts/{}", made.task, made.artifact),
    ];
    paths.sort();
    for p in paths {
        let g = http.get(a, &p).await;
        assert_eq!(g.status, 200, "A reads {p}: {}", g.text);
        let mut v = if g.json.is_null() { Value::String(g.text) } else { g.json };
        if p == "/api/stats" {
            // The log's head is the whole server's: tx numbers are global,
            // so they move with any tenant's writes (see docs/security.md).
            let o = v.as_object_mut().unwrap();
            o.remove("last_tx");
            o.remove("last_recorded_at");
        }
        out.insert(p, v);
    }
    Value::Object(out)
}

/// Asserts A's view unchanged, naming what changed.
#[track_caller]
fn same(after: &Value, before: &Value) {
    for (k, v) in before.as_object().unwrap() {
        assert_eq!(&after[k], v, "A's view of {k} changed");
    }
    assert_eq!(after, before);
}

/// Runs every row for every caller; asserts each answer and that none of
/// them carries A's data.
async fn run_matrix(http: &Http, made: &Made, b: &Who, outsiders: &[Who]) {
    let a_ids = made.ids();
    for r in rows(made) {
        let mut callers = vec![(b.clone(), true)];
        callers.extend(outsiders.iter().map(|o| (o.clone(), false)));
        for (who, is_b) in callers {
            let body = match (r.expect, &r.body) {
                // The key to log in with is the caller's, in the body.
                (Expect::Session, _) => j(json!({"key": who.key.clone().unwrap_or_default()})),
                (_, body) => body.clone(),
            };
            let g = http.call(&who, r.method.clone(), &r.path, &body).await;
            let cell = format!("{} {} as {}: {} {}", r.method, r.path, who.name, g.status, g.text);
            let visible = without_echo(&g.text);
            assert!(!visible.contains(MARK), "A's data leaked: {cell}");
            // An id the caller named may be echoed back (MCP says "no fact
            // <id>"); any other id of A's may not appear.
            let asked = match &body {
                Body::Json(v) => format!("{} {v}", r.path),
                _ => r.path.clone(),
            };
            if (200..300).contains(&g.status) {
                for id in a_ids.iter().filter(|id| !asked.contains(**id)) {
                    assert!(!visible.contains(id), "A's id {id} leaked: {cell}");
                }
            }
            match (r.expect, is_b) {
                (Expect::Public, _) => assert_eq!(g.status, 200, "{cell}"),
                (Expect::Everyone(s), _) => assert_eq!(g.status, s, "{cell}"),
                (Expect::Hidden, _) | (Expect::Own(_), false) => assert!(is_rest_hidden(&g), "{cell}"),
                (Expect::ApHidden, _) | (Expect::ApOwn(_), false) => assert!(is_ap_hidden(&g), "{cell}"),
                (Expect::Own(s), true) | (Expect::ApOwn(s), true) => assert_eq!(g.status, s, "{cell}"),
                (Expect::Session, true) => assert_eq!(g.json, json!({"scope": "tenant", "tenant": "acme"}), "{cell}"),
                (Expect::Session, false) => {
                    assert_eq!((g.status, &g.json["error"]["code"]), (401, &json!("Unauthorized")), "{cell}")
                }
            }
            if is_b && r.path == "/mcp" && r.method == Method::POST {
                let result = &g.json["result"];
                assert!(result.is_object(), "{cell}");
                if r.text_contains("explain_fact") || r.text_contains("\"namespace\":\"nas\"") {
                    assert_eq!(result["isError"], true, "B reached A's data through MCP: {cell}");
                }
            }
            if is_b && g.status == 200 && r.path.starts_with("/api/stream") {
                // B's replay from the start of the log holds B's facts only.
                for line in g.text.lines().filter_map(|l| l.strip_prefix("data:")) {
                    let frame: Value = serde_json::from_str(line.trim()).unwrap();
                    for f in frame.as_object().unwrap().values().filter(|v| v.get("tenant").is_some()) {
                        assert_eq!(f["tenant"], "acme", "{frame}");
                    }
                }
            }
        }
    }
}

/// A NeuroSan answer without the `chat_context` it hands back: that is the
/// history the caller sent (continuing a conversation is stateless), so it
/// holds whatever the caller put in it and says nothing of the server's.
fn without_echo(text: &str) -> String {
    text.lines()
        .map(|line| match serde_json::from_str::<Value>(line) {
            Ok(mut v) if v["response"].get("chat_context").is_some() => {
                v["response"].as_object_mut().unwrap().remove("chat_context");
                v.to_string()
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Row {
    fn text_contains(&self, needle: &str) -> bool {
        match &self.body {
            Body::Json(v) => v.to_string().contains(needle),
            _ => false,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_of_every_http_surface_keeps_tenants_apart() {
    let (_tmp, server) = fresh(&keyed());
    let http = Http::new(&server);
    let a = Who::new("A (nas)", Some(NAS_KEY), None);
    let b = Who::new("B (acme)", Some(ACME_KEY), None);
    let made = make_everything(&http, &a).await;
    let before = snapshot(&http, &a, &made).await;
    assert!(before.to_string().contains(MARK), "the snapshot shows A's data");

    // B listens to the change feed while the matrix runs.
    let mut feed = Sse::open(http.req(&b, Method::GET, "/api/stream")).await;
    assert_eq!(feed.status.as_u16(), 200);

    let outsiders = [Who::new("no key", None, None), Who::new("a wrong key", Some("nas-key-1-but-wrong"), None)];
    run_matrix(&http, &made, &b, &outsiders).await;

    // A's view is unchanged by all of it.
    same(&snapshot(&http, &a, &made).await, &before);

    // B's feed carried B's own writes of the matrix and nothing of A's,
    // including a write A makes now.
    let late =
        http.post(&a, "/api/facts", json!({"subject": "Person:nasx", "predicate": "late", "object": MARK})).await;
    let a_tx = ok(&late, 201)["tx"].as_u64().unwrap();
    let mut seen = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(2), feed.next_event(Duration::from_secs(60))).await {
            Err(_) => break,
            Ok(None) => panic!("B's feed ended"),
            Ok(Some((_, data))) => {
                for f in data.as_object().unwrap().values().filter(|v| v.get("tenant").is_some()) {
                    assert_eq!(f["tenant"], "acme", "{data}");
                }
                assert!(!data.to_string().contains(MARK), "{data}");
                seen += 1;
            }
        }
    }
    assert!(seen > 0, "B's feed carried none of B's writes");
    drop(feed);

    // Whatever Last-Event-ID B names (A's transactions included), the
    // replay is B's log only; B's own writes show that it is a replay.
    for last in ["-1", "nas:0"] {
        let r = send(http.req(&b, Method::GET, "/api/stream").header("last-event-id", last)).await;
        r.expect_error(400, "SchemaInvalid");
    }
    for last in ["0".to_string(), (a_tx - 1).to_string(), a_tx.to_string()] {
        let mut r =
            http.req(&b, Method::GET, "/api/stream").header("last-event-id", last.clone()).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "Last-Event-ID {last}");
        let mut text = String::new();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
        while let Ok(Ok(Some(c))) = tokio::time::timeout_at(deadline, r.chunk()).await {
            text.push_str(&String::from_utf8_lossy(&c));
        }
        assert!(!text.contains(MARK), "Last-Event-ID {last}: {text}");
        for line in text.lines().filter_map(|l| l.strip_prefix("data:")) {
            let frame: Value = serde_json::from_str(line.trim()).unwrap();
            for f in frame.as_object().unwrap().values().filter(|v| v.get("tenant").is_some()) {
                assert_eq!(f["tenant"], "acme", "Last-Event-ID {last}: {frame}");
            }
        }
        if last == "0" {
            assert!(text.contains("data:"), "B's replay from 0 holds B's writes");
        }
    }

    // MCP's answer about A's fact is word for word its answer about a fact
    // that does not exist.
    let explain = |id: &str| {
        j(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "explain_fact", "arguments": {"id": id}}}),
        )
    };
    let theirs = http.call(&b, Method::POST, "/mcp", &explain(&made.fact)).await;
    let nobodys = http.call(&b, Method::POST, "/mcp", &explain(UNKNOWN_ID)).await;
    assert_eq!(theirs.text.replace(&made.fact, "ID"), nobodys.text.replace(UNKNOWN_ID, "ID"));

    // Admins read a named tenant and nothing without one.
    let admin = Who::new("admin", Some(ADMIN), None);
    let g = http.get(&admin, &format!("/api/facts/{}?tenant=nas", made.fact)).await;
    assert_eq!(ok(&g, 200)["object"], format!("{MARK} first"));
    assert!(is_rest_hidden(&http.get(&admin, &format!("/api/facts/{}?tenant=acme", made.fact)).await));
    assert_eq!(http.get(&admin, "/api/facts").await.status, 400);
    assert_eq!(http.get(&admin, "/metrics").await.status, 200);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn with_host_binding_a_key_on_another_tenants_host_is_nobody() {
    let mut env = keyed();
    env.push(("TEMPORA_TENANT_HOST", "{tenant}.example.com"));
    let (_tmp, server) = fresh(&env);
    let http = Http::new(&server);
    let a = Who::new("A on its host", Some(NAS_KEY), Some("nas.example.com"));
    let b = Who::new("B on its host", Some(ACME_KEY), Some("acme.example.com"));
    let made = make_everything(&http, &a).await;
    let before = snapshot(&http, &a, &made).await;

    let outsiders = [
        Who::new("A's key on B's host", Some(NAS_KEY), Some("acme.example.com")),
        Who::new("A's key on the bare address", Some(NAS_KEY), None),
        Who::new("A's key on a look-alike host", Some(NAS_KEY), Some("nas.example.com.evil.org")),
        Who::new("no key on A's host", None, Some("nas.example.com")),
    ];
    run_matrix(&http, &made, &b, &outsiders).await;
    same(&snapshot(&http, &a, &made).await, &before);
    server.stop_ok();
}

/// The routes the router declares, `(METHOD, path)`, from its own table
/// (`tempora::http::route_table`, the one the router is built from).
fn declared_routes() -> BTreeSet<(String, String)> {
    tempora::http::route_table().into_iter().map(|(m, p)| (m.to_string(), p.to_string())).collect()
}

#[tokio::test]
async fn every_route_has_a_matrix_row() {
    let made = Made::default();
    let covered: BTreeSet<(String, String)> =
        rows(&made).iter().map(|r| (r.method.to_string(), r.route.to_string())).collect();
    let declared = declared_routes();
    assert!(declared.len() >= 50, "the router's source was not read: {declared:?}");
    let missing: Vec<_> = declared.difference(&covered).collect();
    assert!(missing.is_empty(), "routes without a tenant-matrix row: {missing:?}");
    let stale: Vec<_> = covered.iter().filter(|c| !c.1.is_empty() && !declared.contains(c)).collect();
    assert!(stale.is_empty(), "matrix rows for routes the router does not have: {stale:?}");

    // Every operation the OpenAPI document lists has a row too (path
    // parameters compared by position, not name).
    let (_tmp, server) = fresh(&[]);
    let doc = Api::new(&server, None).get("/openapi.json").await.expect(200).clone();
    let shape = |p: &str| {
        let mut out = String::new();
        let mut in_param = false;
        for c in p.chars() {
            match c {
                '{' => {
                    in_param = true;
                    out.push_str("{}");
                }
                '}' => in_param = false,
                _ if in_param => {}
                _ => out.push(c),
            }
        }
        out
    };
    let covered_shapes: BTreeSet<(String, String)> = covered.iter().map(|(m, p)| (m.clone(), shape(p))).collect();
    let mut undocumented_rows = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for m in ops.as_object().unwrap().keys() {
            if !["get", "post", "put", "delete", "patch"].contains(&m.as_str()) {
                continue;
            }
            let key = (m.to_uppercase(), shape(path));
            let catch_all =
                path.starts_with("/api/v1/") && covered_shapes.contains(&(key.0.clone(), "/api/v1/{}".into()));
            if !covered_shapes.contains(&key) && !catch_all {
                undocumented_rows.push(key);
            }
        }
    }
    assert!(undocumented_rows.is_empty(), "OpenAPI operations without a matrix row: {undocumented_rows:?}");
    server.stop_ok();
}

mod grpc {
    use super::*;
    use crate::common::grpc::{channel, streaming};
    use tempora::grpc::pb;
    use tonic::transport::Channel;
    use tonic::{Code, Status};

    const HUMAN: i32 = 2;

    /// A unary call as tenant `nas`'s header says (the key decides).
    async fn unary<Req, Resp>(ch: &Channel, path: &str, msg: Req, key: Option<&str>) -> Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        common::grpc::unary(ch, path, msg, key, Some("nas")).await
    }

    async fn chat(
        ch: &Channel,
        text: &str,
        context: Option<pb::chat::ChatContext>,
        key: Option<&str>,
        tenant: Option<&str>,
    ) -> Result<Vec<pb::agent::ChatResponse>, Status> {
        let req = pb::agent::ChatRequest {
            sly_data: None,
            user_message: Some(pb::chat::ChatMessage { r#type: HUMAN, text: text.into(), ..Default::default() }),
            chat_context: context,
            chat_filter: None,
        };
        streaming(ch, "/memory.AgentService/StreamingChat", req, key, tenant).await
    }

    #[track_caller]
    fn unauthenticated<T: std::fmt::Debug>(r: Result<T, Status>, cell: &str) {
        match r {
            Err(s) => {
                assert_eq!(s.code(), Code::Unauthenticated, "{cell}: {s:?}");
                assert!(!s.message().contains(MARK), "{cell}: {s:?}");
            }
            Ok(v) => panic!("{cell}: expected Unauthenticated, got {v:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grpc_calls_keep_tenants_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let server = Server::start_with_grpc(&tmp.path().join("data"), &keyed());
        let ch = channel(&server).await;
        let nas = Api::new(&server, Some(NAS_KEY));

        // A's conversation over gRPC; its chat_context names it.
        let said =
            chat(&ch, &format!("remember Person:nasx likes Thing:{MARK}"), None, Some(NAS_KEY), None).await.unwrap();
        let context = said.last().unwrap().response.as_ref().unwrap().chat_context.clone().expect("a chat_context");
        let before = nas.list("status=all&include_retracted=true&limit=1000").await;
        assert!(format!("{before:?}").contains(MARK));

        let list = "/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/List";
        for (name, key) in [("no key", None), ("a wrong key", Some("nas-key-1-but-wrong"))] {
            let r: Result<pb::concierge::ConciergeResponse, _> =
                unary(&ch, list, pb::concierge::ConciergeRequest {}, key).await;
            unauthenticated(r, &format!("List as {name}"));
            let r: Result<pb::agent::FunctionResponse, _> =
                unary(&ch, "/memory.AgentService/Function", pb::agent::FunctionRequest {}, key).await;
            unauthenticated(r, &format!("Function as {name}"));
            let r: Result<pb::agent::ConnectivityResponse, _> =
                unary(&ch, "/memory.AgentService/Connectivity", pb::agent::ConnectivityRequest {}, key).await;
            unauthenticated(r, &format!("Connectivity as {name}"));
            let r = chat(&ch, "what do you know about Person:nasx", Some(context.clone()), key, Some("nas")).await;
            unauthenticated(r, &format!("StreamingChat as {name}"));
        }

        // B: the shared catalogue, and its own memory only, even when it
        // continues A's conversation and names A's tenant in the metadata.
        let r: pb::concierge::ConciergeResponse =
            unary(&ch, list, pb::concierge::ConciergeRequest {}, Some(ACME_KEY)).await.unwrap();
        assert!(r.agents.iter().any(|a| a.agent_name == "memory"), "{r:?}");
        let r: pb::agent::FunctionResponse =
            unary(&ch, "/memory.AgentService/Function", pb::agent::FunctionRequest {}, Some(ACME_KEY)).await.unwrap();
        assert!(!format!("{r:?}").contains(MARK));
        // (The chat_context B sends back is B's to hold, so only the
        // answers' own text is looked at.)
        let texts = |r: &[pb::agent::ChatResponse]| -> String {
            r.iter().filter_map(|m| m.response.as_ref()).map(|m| m.text.clone()).collect::<Vec<_>>().join("\n")
        };
        for tenant in [None, Some("nas")] {
            let r = chat(&ch, "what do you know about Person:nasx", Some(context.clone()), Some(ACME_KEY), tenant)
                .await
                .unwrap();
            assert!(!texts(&r).contains(MARK), "B's turn saw A's memory: {r:?}");
            assert!(texts(&r).contains("don't know"), "{r:?}");
        }
        let r = chat(&ch, "remember Person:nasx likes Thing:b", Some(context.clone()), Some(ACME_KEY), Some("nas"))
            .await
            .unwrap();
        assert!(!texts(&r).contains(MARK), "{r:?}");
        assert!(!Api::new(&server, Some(ACME_KEY)).list("subject=Person:nasx").await.is_empty(), "B wrote to B");

        // A's memory is as it was.
        assert_eq!(nas.list("status=all&include_retracted=true&limit=1000").await, before);
        // An admin names the tenant.
        let r = chat(&ch, "what do you know about Person:nasx", None, Some(ADMIN), Some("nas")).await.unwrap();
        assert!(texts(&r).contains(MARK), "the admin reads A when naming it: {r:?}");
        drop(ch);
        server.stop_ok();
    }
}

mod neurodock {
    use super::*;
    use tempora::neurodock::framing::{encode, Decoder, Item};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    struct Nd {
        stream: TcpStream,
        dec: Decoder,
    }

    impl Nd {
        async fn connect(server: &Server) -> Nd {
            Nd { stream: TcpStream::connect(server.tcp.as_deref().unwrap()).await.unwrap(), dec: Decoder::default() }
        }

        async fn send(&mut self, kind: &str, data: Value) {
            self.stream.write_all(&encode(&json!({"type": kind, "data": data}), false)).await.unwrap();
        }

        /// The next packet; `None` when the server closed the connection.
        async fn recv(&mut self) -> Option<Value> {
            let mut buf = vec![0u8; 8192];
            loop {
                if let Some(item) = self.dec.next_item() {
                    match item {
                        Item::Packet { value, .. } => {
                            assert!(!value.to_string().contains(MARK), "A's data on another connection: {value}");
                            return Some(value);
                        }
                        Item::Error { message, .. } => panic!("server sent a bad packet: {message}"),
                    }
                }
                let n = tokio::time::timeout(Duration::from_secs(30), self.stream.read(&mut buf))
                    .await
                    .expect("a packet in time")
                    .unwrap_or(0);
                if n == 0 {
                    return None;
                }
                self.dec.push(&buf[..n]);
            }
        }

        async fn expect(&mut self, kind: &str) -> Value {
            let p = self.recv().await.unwrap_or_else(|| panic!("closed while waiting for {kind}"));
            assert_eq!(p["type"], kind, "{p}");
            p["data"].clone()
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn neurodock_connections_keep_tenants_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let server = Server::start_with_tcp(&tmp.path().join("data"), &keyed());
        let nas = Api::new(&server, Some(NAS_KEY));
        nas.assert_fact(json!({"subject": "Person:nasx", "predicate": "motto", "object": format!("{MARK} first")}))
            .await;

        // A: authenticated, with a tool of its own registered.
        let mut a = Nd::connect(&server).await;
        a.send("AUTH", json!({"key": NAS_KEY})).await;
        let mut got = a.recv_raw().await;
        assert_eq!(got["type"], "AUTH_OK", "{got}");
        a.send("ADD_TOOL", json!({"name": "nas_tool", "description": "A's", "response": "string"})).await;
        got = a.recv_raw().await;
        assert_eq!(got["type"], "TOOL_ADDED", "{got}");
        let before = nas.list("status=all&include_retracted=true&limit=1000").await;

        // No AUTH, or a wrong key: nothing is answered but Unauthenticated.
        let mut anon = Nd::connect(&server).await;
        anon.send("QUERY", json!({"message": "what do you know about Person:nasx", "tools": ["nas_tool"]})).await;
        assert_eq!(anon.expect("ERROR").await["code"], "Unauthenticated");
        let mut wrong = Nd::connect(&server).await;
        wrong.send("AUTH", json!({"key": "nas-key-1-but-wrong", "tenant": "nas"})).await;
        assert_eq!(wrong.expect("ERROR").await["code"], "Unauthenticated");
        assert!(wrong.recv().await.is_none(), "a wrong key closes the connection");

        // B: its own memory only; A's tool is not B's to call; naming A's
        // tenant in AUTH changes nothing for a tenant key.
        let mut b = Nd::connect(&server).await;
        b.send("AUTH", json!({"key": ACME_KEY, "tenant": "nas"})).await;
        assert_eq!(b.expect("AUTH_OK").await["tenant"], "acme");
        b.send("QUERY", json!({"message": "what do you know about Person:nasx"})).await;
        let r = b.expect("RESPONSE").await;
        assert!(!r.to_string().contains("first"), "{r}");
        b.send("QUERY", json!({"message": "x", "tools": ["nas_tool"]})).await;
        assert_eq!(b.expect("ERROR").await["code"], "UnknownTool");
        b.send("QUERY", json!({"message": "remember Person:nasx motto Thing:b"})).await;
        b.expect("RESPONSE").await;

        // A's memory is unchanged, and A's connection saw none of it (no
        // call of its tool came before the answer to its own query).
        assert_eq!(nas.list("status=all&include_retracted=true&limit=1000").await, before);
        a.send("QUERY", json!({"message": "what do you know about Person:nasx"})).await;
        got = a.recv_raw().await;
        assert_eq!(got["type"], "RESPONSE", "A got something else first: {got}");
        assert!(got.to_string().contains(MARK), "A reads its own memory: {got}");

        // An admin acts for the tenant it names.
        let mut admin = Nd::connect(&server).await;
        admin.send("AUTH", json!({"key": ADMIN, "tenant": "nas"})).await;
        assert_eq!(admin.expect("AUTH_OK").await["tenant"], "nas");
        server.stop_ok();
    }

    impl Nd {
        /// Like `recv`, for A's own connection (its packets may carry A's data).
        async fn recv_raw(&mut self) -> Value {
            let mut buf = vec![0u8; 8192];
            loop {
                if let Some(Item::Packet { value, .. }) = self.dec.next_item() {
                    return value;
                }
                let n =
                    tokio::time::timeout(Duration::from_secs(30), self.stream.read(&mut buf)).await.unwrap().unwrap();
                assert!(n > 0, "closed");
                self.dec.push(&buf[..n]);
            }
        }
    }
}
