//! The NeuroDock protocol on the TCP listener of a real server process:
//! framing (raw, gzip, batched, split), tools (built-in and called back on
//! the client), errors and limits, keyed mode, concurrency, restarts, and
//! queries stored as conversations.

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;
use tempora::neurodock::framing::{encode, Decoder, Item};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(30);

struct Nd {
    stream: TcpStream,
    dec: Decoder,
}

impl Nd {
    async fn connect(server: &Server) -> Nd {
        let addr = server.tcp.as_deref().expect("started with the TCP listener");
        Nd { stream: TcpStream::connect(addr).await.expect("connects"), dec: Decoder::default() }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("written");
    }

    async fn send(&mut self, kind: &str, data: Value) {
        self.write(&encode(&json!({"type": kind, "data": data}), false)).await;
    }

    async fn send_gz(&mut self, kind: &str, data: Value) {
        self.write(&encode(&json!({"type": kind, "data": data}), true)).await;
    }

    /// The next packet and whether it came gzip-compressed.
    async fn recv_gz(&mut self) -> (Value, bool) {
        let mut buf = vec![0u8; 8192];
        loop {
            if let Some(item) = self.dec.next_item() {
                match item {
                    Item::Packet { value, gzip } => return (value, gzip),
                    Item::Error { message, .. } => panic!("server sent a bad packet: {message}"),
                }
            }
            let n =
                tokio::time::timeout(WAIT, self.stream.read(&mut buf)).await.expect("a packet in time").expect("read");
            assert!(n > 0, "connection closed while waiting for a packet");
            self.dec.push(&buf[..n]);
        }
    }

    async fn recv(&mut self) -> Value {
        self.recv_gz().await.0
    }

    /// The next packet, which must be of type `kind`; its data.
    async fn expect(&mut self, kind: &str) -> Value {
        let p = self.recv().await;
        assert_eq!(p["type"], kind, "{p}");
        p["data"].clone()
    }

    async fn expect_error(&mut self, code: &str) -> Value {
        let d = self.expect("ERROR").await;
        assert_eq!(d["code"], code, "{d}");
        assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()), "{d}");
        d
    }

    /// Waits for the server to close the connection.
    async fn expect_closed(&mut self) {
        let mut buf = vec![0u8; 8192];
        loop {
            match tokio::time::timeout(WAIT, self.stream.read(&mut buf)).await.expect("closed in time") {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}

fn start(env: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_with_tcp(&tmp.path().join("data"), env);
    (tmp, server)
}

fn weather_tool(timeout_ms: u64) -> Value {
    json!({
        "name": "weather",
        "description": "The weather in a city",
        "arguments": [{"type": "string", "name": "city"}],
        "required": ["city"],
        "response": "string",
        "timeout_ms": timeout_ms
    })
}

#[tokio::test]
async fn raw_and_gzip_packets_batched_and_split() {
    let (_tmp, server) = start(&[]);
    let mut c = Nd::connect(&server).await;
    c.send("ADD_TOOL", weather_tool(5000)).await;
    let (p, gz) = c.recv_gz().await;
    assert_eq!(p["type"], "TOOL_ADDED", "{p}");
    assert!(!gz);
    c.send_gz("ADD_TOOL", json!({"name": "clock", "description": "A clock", "response": "string"})).await;
    let (p, gz) = c.recv_gz().await;
    assert_eq!(p["data"]["name"], "clock", "{p}");
    assert!(gz, "a gzip packet is answered compressed");

    // Three packets in one write, mixed, with \r\n and blanks between.
    let mut batch = Vec::new();
    batch.extend(serde_json::to_vec(&json!({"type": "ADD_TOOL", "data": {"name": "a1", "description": "x"}})).unwrap());
    batch.extend(b" \r\n");
    batch.extend(encode(&json!({"type": "ADD_TOOL", "data": {"name": "a2", "description": "y"}}), true));
    batch.extend(encode(&json!({"type": "QUERY", "data": {"message": "remember Person:ada likes tea"}}), false));
    c.write(&batch).await;
    assert_eq!(c.expect("TOOL_ADDED").await["name"], "a1");
    assert_eq!(c.expect("TOOL_ADDED").await["name"], "a2");
    let r = c.expect("RESPONSE").await;
    assert!(r["message"].as_str().unwrap().starts_with("Remembered"), "{r}");

    // One packet split across many writes, gzip and raw.
    for gz in [false, true] {
        let bytes = encode(&json!({"type": "QUERY", "data": {"message": "what do you know about Person:ada"}}), gz);
        for chunk in bytes.chunks(7) {
            c.write(chunk).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (p, got_gz) = c.recv_gz().await;
        assert_eq!(p["type"], "RESPONSE", "{p}");
        assert_eq!(got_gz, gz);
        assert!(p["data"]["message"].as_str().unwrap().contains("likes"), "{p}");
    }
    let api = Api::new(&server, None);
    let facts = api.list("subject=Person:ada&predicate=likes").await;
    assert_eq!(facts.len(), 1);
    server.stop_ok();
}

#[tokio::test]
async fn percent_n_puts_tool_results_in_the_message() {
    let (_tmp, server) = start(&[]);
    let mut c = Nd::connect(&server).await;
    c.send("QUERY", json!({"message": "what do you know about Person:ada? It is %0.", "tools": ["get_current_date"]}))
        .await;
    let r = c.expect("RESPONSE").await;
    let result = &r["tools"][0];
    assert_eq!(result["tool"], "get_current_date");
    assert!(result["result"].as_str().unwrap().contains("UTC"), "{r}");
    assert_eq!(r["query"], format!("what do you know about Person:ada? It is {result}."));

    // Not referred to: the result leads the message.
    c.send(
        "QUERY",
        json!({"message": "what do you know about Person:ada", "tools": [
            {"name": "remember", "arguments": {"subject": "Person:ada", "predicate": "knows", "object": "Person:alan"}},
            "get_current_date"
        ], "id": 7}),
    )
    .await;
    let r = c.expect("RESPONSE").await;
    assert_eq!(r["id"], 7);
    let q = r["query"].as_str().unwrap();
    let lines: Vec<&str> = q.lines().collect();
    assert_eq!(lines.len(), 3, "{q}");
    assert_eq!(serde_json::from_str::<Value>(lines[0]).unwrap()["tool"], "remember");
    assert_eq!(serde_json::from_str::<Value>(lines[1]).unwrap()["tool"], "get_current_date");
    assert_eq!(lines[2], "what do you know about Person:ada");
    assert!(r["message"].as_str().unwrap().contains("Person:alan"), "{r}");

    c.send("QUERY", json!({"message": "x", "tools": ["nope"]})).await;
    c.expect_error("UnknownTool").await;
    c.send("QUERY", json!({"message": ""})).await;
    c.expect_error("BadRequest").await;
    server.stop_ok();
}

#[tokio::test]
async fn client_tools_are_called_back_and_time_out() {
    let (_tmp, server) = start(&[]);
    let mut a = Nd::connect(&server).await;
    a.send("ADD_TOOL", weather_tool(10_000)).await;
    a.expect("TOOL_ADDED").await;
    a.send("QUERY", json!({"message": "weather: %0", "tools": [{"name": "weather", "arguments": {"city": "Oslo"}}]}))
        .await;
    let call = a.expect("TOOL_CALL").await;
    assert_eq!(call["tool"], "weather");
    assert_eq!(call["arguments"], json!({"city": "Oslo"}));
    a.send("TOOL_RESULT", json!({"id": call["id"], "result": "sunny"})).await;
    let r = a.expect("RESPONSE").await;
    assert_eq!(r["query"], "weather: {\"result\":\"sunny\",\"tool\":\"weather\"}");

    // Another connection of the tenant: the call goes to the one serving the tool.
    let mut b = Nd::connect(&server).await;
    b.send("QUERY", json!({"message": "and %0", "tools": [{"name": "weather", "arguments": {"city": "Bergen"}}]}))
        .await;
    let call = a.expect("TOOL_CALL").await;
    assert_eq!(call["arguments"]["city"], "Bergen");
    a.send("TOOL_RESULT", json!({"id": call["id"], "result": "rain"})).await;
    assert!(b.expect("RESPONSE").await["query"].as_str().unwrap().contains("rain"));

    // Arguments are checked against the definition, results against the response type.
    a.send("QUERY", json!({"message": "x", "tools": ["weather"]})).await;
    a.expect_error("BadRequest").await;
    a.send("QUERY", json!({"message": "x", "tools": [{"name": "weather", "arguments": {"city": "Oslo"}}]})).await;
    let call = a.expect("TOOL_CALL").await;
    a.send("TOOL_RESULT", json!({"id": call["id"], "result": 42})).await;
    a.expect_error("ToolFailed").await;
    a.send("QUERY", json!({"message": "x", "tools": [{"name": "weather", "arguments": {"city": "Oslo"}}]})).await;
    let call = a.expect("TOOL_CALL").await;
    a.send("TOOL_RESULT", json!({"id": call["id"], "error": "no network"})).await;
    assert!(a.expect_error("ToolFailed").await["message"].as_str().unwrap().contains("no network"));

    // A call that is not answered in time.
    a.send("ADD_TOOL", json!({"name": "slow", "description": "never answers", "timeout_ms": 300})).await;
    a.expect("TOOL_ADDED").await;
    a.send("QUERY", json!({"message": "x", "tools": ["slow"]})).await;
    let call = a.expect("TOOL_CALL").await;
    let e = a.expect_error("ToolTimeout").await;
    assert_eq!(e["about"], "QUERY");
    a.send("TOOL_RESULT", json!({"id": call["id"], "result": "late"})).await;
    a.expect_error("UnknownCall").await;
    // The connection goes on.
    a.send("QUERY", json!({"message": "what do you know about Person:x"})).await;
    a.expect("RESPONSE").await;
    server.stop_ok();
}

#[tokio::test]
async fn malformed_and_oversized_packets_and_a_gzip_bomb() {
    let (_tmp, server) = start(&[]);
    let mut other = Nd::connect(&server).await;
    let mut c = Nd::connect(&server).await;
    c.write(b"{\"type\": oops}\r\n").await;
    c.expect_error("BadPacket").await;
    c.write(b"hello\n").await;
    c.expect_error("BadPacket").await;
    c.send("DANCE", json!({})).await;
    c.expect_error("UnknownType").await;
    c.write(b"{\"data\": {}}\n").await;
    c.expect_error("BadPacket").await;
    c.send("ADD_TOOL", json!({"name": "t", "description": "d", "arguments": [{"type": "complex", "name": "z"}]})).await;
    c.expect_error("BadRequest").await;
    c.send("QUERY", json!({"message": "what do you know about Person:ada"})).await;
    c.expect("RESPONSE").await;

    // A gzip bomb: 1 MiB of wire is refused once past 4 MiB decoded.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut enc, b"{\"type\":\"QUERY\",\"data\":{\"message\":\"").unwrap();
    let spaces = vec![b'a'; 1 << 20];
    for _ in 0..64 {
        std::io::Write::write_all(&mut enc, &spaces).unwrap();
    }
    let bomb = enc.finish().unwrap();
    let before = peak_rss_kib(server.pid());
    c.write(&bomb).await;
    assert!(c.expect_error("BadStream").await["message"].as_str().unwrap().contains("decompresses"));
    c.expect_closed().await;
    let grown = peak_rss_kib(server.pid()).saturating_sub(before);
    assert!(grown < 48 * 1024, "peak memory grew by {grown} KiB for a 64 MiB bomb");

    // An oversized raw packet closes that connection only.
    let mut big = Nd::connect(&server).await;
    let mut huge = b"{\"type\": \"QUERY\", \"data\": {\"message\": \"".to_vec();
    huge.extend(vec![b'x'; 2 << 20]);
    let _ = big.stream.write_all(&huge).await;
    big.expect_error("BadStream").await;
    big.expect_closed().await;

    other.send("QUERY", json!({"message": "what do you know about Person:ada"})).await;
    other.expect("RESPONSE").await;
    let mut fresh = Nd::connect(&server).await;
    fresh.send("QUERY", json!({"message": "what do you know about Person:ada"})).await;
    fresh.expect("RESPONSE").await;
    server.stop_ok();
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn keyed_mode_needs_auth_first() {
    let (_tmp, server) = start(&keyed());
    let mut c = Nd::connect(&server).await;
    c.send("QUERY", json!({"message": "what do you know about Person:ada"})).await;
    assert_eq!(c.expect_error("Unauthenticated").await["about"], "QUERY");
    c.expect_closed().await;

    let mut c = Nd::connect(&server).await;
    c.send("AUTH", json!({"key": "wrong"})).await;
    c.expect_error("Unauthenticated").await;
    c.expect_closed().await;

    let mut c = Nd::connect(&server).await;
    c.send_gz("AUTH", json!({"key": NAS_KEY})).await;
    assert_eq!(c.expect("AUTH_OK").await["tenant"], "nas");
    c.send("ADD_TOOL", weather_tool(1000)).await;
    c.expect("TOOL_ADDED").await;
    c.send("QUERY", json!({"message": "remember Person:ada likes tea"})).await;
    c.expect("RESPONSE").await;

    let mut admin = Nd::connect(&server).await;
    admin.send("AUTH", json!({"key": ADMIN, "tenant": "acme"})).await;
    assert_eq!(admin.expect("AUTH_OK").await["tenant"], "acme");
    admin.send("QUERY", json!({"message": "x", "tools": [{"name": "weather", "arguments": {"city": "Oslo"}}]})).await;
    admin.expect_error("UnknownTool").await;

    let nas = Api::new(&server, Some(NAS_KEY));
    let acme = Api::new(&server, Some(ACME_KEY));
    assert_eq!(nas.list("subject=Tool:weather&predicate=tool.description").await.len(), 1);
    assert!(acme.list("subject=Tool:weather").await.is_empty());
    assert_eq!(nas.list("subject=Person:ada&predicate=likes").await.len(), 1);
    assert!(acme.list("subject=Person:ada").await.is_empty());
    server.stop_ok();
}

#[tokio::test]
async fn fifty_clients_at_once() {
    let (_tmp, server) = start(&[]);
    let mut tasks = Vec::new();
    for i in 0..50 {
        let mut c = Nd::connect(&server).await;
        tasks.push(tokio::spawn(async move {
            c.send(
                "QUERY",
                json!({"message": format!("remember Person:p{i} checked_at %0"), "tools": ["get_current_date"]}),
            )
            .await;
            let r = c.expect("RESPONSE").await;
            assert!(r["message"].as_str().unwrap().starts_with("Remembered"), "{r}");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let api = Api::new(&server, None);
    assert_eq!(api.list("predicate=checked_at&limit=100").await.len(), 50);
    server.stop_ok();
}

#[tokio::test]
async fn tools_survive_a_restart_and_queries_are_conversations() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start_with_tcp(&data, &[]);
    let mut c = Nd::connect(&server).await;
    c.send("ADD_TOOL", weather_tool(5000)).await;
    c.expect("TOOL_ADDED").await;
    c.send("QUERY", json!({"message": "remember Person:ada likes tea"})).await;
    let first = c.expect("RESPONSE").await;
    c.send("QUERY", json!({"message": "what do you know about Person:ada"})).await;
    let second = c.expect("RESPONSE").await;
    let id = first["conversation"].as_str().expect("a conversation id").to_string();
    assert_eq!(second["conversation"], id, "one connection is one conversation");
    let api = Api::new(&server, None);
    // Stored as a conversation: one `said` fact a message, of its speaker.
    let mut said: Vec<Value> = api
        .list("predicate=said")
        .await
        .into_iter()
        .filter(|f| f["properties"]["conversation"] == id.as_str())
        .collect();
    said.sort_by_key(|f| f["properties"]["turn"].as_u64().unwrap());
    let turns: Vec<(u64, &str, &Value)> = said
        .iter()
        .map(|f| (f["properties"]["turn"].as_u64().unwrap(), f["subject"].as_str().unwrap(), &f["object"]))
        .collect();
    assert_eq!(turns.len(), 4, "{said:?}");
    assert_eq!(turns[0], (0, "Person:user", &json!("remember Person:ada likes tea")));
    assert_eq!(turns[1].1, "Agent:memory");
    assert_eq!(turns[2], (2, "Person:user", &json!("what do you know about Person:ada")));
    assert_eq!(turns[3], (3, "Agent:memory", &second["message"]));
    drop(c);
    server.stop_ok();

    let server = Server::start_with_tcp(&data, &[]);
    let api = Api::new(&server, None);
    let stored = api.list("subject=Tool:weather").await;
    assert_eq!(stored.len(), 5, "{stored:?}");
    // Nobody serves it now: the querying connection is called.
    let mut c = Nd::connect(&server).await;
    c.send("QUERY", json!({"message": "%0", "tools": [{"name": "weather", "arguments": {"city": "Oslo"}}]})).await;
    let call = c.expect("TOOL_CALL").await;
    c.send("TOOL_RESULT", json!({"id": call["id"], "result": "snow"})).await;
    let r = c.expect("RESPONSE").await;
    assert!(r["query"].as_str().unwrap().contains("snow"));
    assert_ne!(r["conversation"], id, "a new connection is a new conversation");
    // Registering the same tool again writes nothing new.
    c.send("ADD_TOOL", weather_tool(5000)).await;
    c.expect("TOOL_ADDED").await;
    assert_eq!(api.list("subject=Tool:weather").await.len(), 5);
    server.stop_ok();
}

/// The seed's own example of `get_current_date`, sent as the seed writes it.
fn seed_get_current_date() -> Value {
    json!({"name": "get_current_date", "description": "Get the current date", "required": [], "response": "string"})
}

#[tokio::test]
async fn the_seeds_get_current_date_is_taken_as_the_builtin_and_stays_server_side() {
    let (_tmp, server) = start(&[]);
    let mut c = Nd::connect(&server).await;
    c.send("ADD_TOOL", seed_get_current_date()).await;
    let added = c.expect("TOOL_ADDED").await;
    assert_eq!(added["name"], "get_current_date", "{added}");
    assert_eq!(added["builtin"], true, "{added}");
    assert!(added["note"].as_str().unwrap().contains("nothing was stored"), "{added}");
    assert_eq!(added["tool"]["response"], "string", "{added}");
    assert_eq!(added["tool"]["arguments"], json!([]), "{added}");
    assert!(added.get("ignored").is_none(), "{added}");

    // The seed's query: answered by the server's own tool, no TOOL_CALL.
    c.send("QUERY", json!({"message": "This is the current data %0", "tools": ["get_current_date"]})).await;
    let r = c.expect("RESPONSE").await;
    let result = &r["tools"][0];
    assert_eq!(result["tool"], "get_current_date", "{r}");
    assert!(result["result"].as_str().unwrap().contains(" UTC "), "{r}");
    assert_eq!(r["query"], format!("This is the current data {result}"));
    // The same from another connection of the tenant: still not routed to the client.
    let mut other = Nd::connect(&server).await;
    other.send("QUERY", json!({"message": "%0", "tools": ["get_current_date"]})).await;
    assert_eq!(other.expect("RESPONSE").await["tools"][0]["tool"], "get_current_date");
    let api = Api::new(&server, None);
    assert!(api.list("subject=Tool:get_current_date").await.is_empty(), "a built-in is not stored");

    // Declared with another shape, a built-in name is refused, its shape shown.
    c.send("ADD_TOOL", json!({"name": "get_current_date", "description": "in a zone",
        "arguments": [{"type": "string", "name": "zone"}], "response": "string"}))
    .await;
    let e = c.expect_error("BadRequest").await;
    assert_eq!(e["about"], "ADD_TOOL");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("get_current_date is a built-in tool"), "{m}");
    assert!(m.contains(r#"{"arguments":[],"required":[],"response":"string"}"#), "{m}");
    assert!(m.contains("choose another name"), "{m}");
    // So is remember declared with fewer arguments than it takes.
    c.send("ADD_TOOL", json!({"name": "remember", "description": "d",
        "arguments": [{"type": "string", "name": "subject"}], "required": ["subject"]}))
    .await;
    let m = c.expect_error("BadRequest").await["message"].as_str().unwrap().to_string();
    assert!(m.contains(r#""required":["subject","predicate","object"]"#), "{m}");
    // The connection goes on, and the built-in still answers.
    c.send("QUERY", json!({"message": "%0", "tools": ["get_current_date"]})).await;
    assert_eq!(c.expect("RESPONSE").await["tools"][0]["tool"], "get_current_date");
    server.stop_ok();
}

#[tokio::test]
async fn unknown_tool_fields_are_ignored_and_reported() {
    let (_tmp, server) = start(&[]);
    let mut c = Nd::connect(&server).await;
    let mut tool = weather_tool(5000);
    tool["category"] = json!("secret-category-value");
    tool["arguments"][0]["unit"] = json!("celsius");
    c.send("ADD_TOOL", tool).await;
    let added = c.expect("TOOL_ADDED").await;
    assert_eq!(added["ignored"], json!(["category", "arguments[0].unit"]), "{added}");
    assert_eq!(added["builtin"], false, "{added}");
    assert_eq!(added["tool"]["arguments"], json!([{"type": "string", "name": "city"}]), "{added}");

    // The tool works as if the fields were not there.
    c.send("QUERY", json!({"message": "%0", "tools": [{"name": "weather", "arguments": {"city": "Oslo"}}]})).await;
    let call = c.expect("TOOL_CALL").await;
    c.send("TOOL_RESULT", json!({"id": call["id"], "result": "sunny"})).await;
    assert!(c.expect("RESPONSE").await["query"].as_str().unwrap().contains("sunny"));
    let api = Api::new(&server, None);
    assert_eq!(api.list("subject=Tool:weather").await.len(), 5, "nothing stored for the ignored fields");

    // A known field of the wrong type is still refused.
    c.send("ADD_TOOL", json!({"name": "t", "description": ["not", "a", "string"], "category": "x"})).await;
    c.expect_error("BadRequest").await;

    // The log names the fields, never their values.
    let logged = || server.stderr().lines().any(|l| l.contains("ADD_TOOL fields ignored") && l.contains("category"));
    for _ in 0..50 {
        if logged() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(logged(), "{}", server.stderr());
    assert!(!server.stderr().contains("secret-category-value"));
    server.stop_ok();
}

#[tokio::test]
async fn type_names_are_aliases_stored_canonically() {
    let (_tmp, server) = start(&[]);
    let mut c = Nd::connect(&server).await;
    c.send("ADD_TOOL", json!({"name": "lookup", "description": "Looks things up", "response": "Dict",
        "arguments": [
            {"type": "STR", "name": "key"}, {"type": "long", "name": "count"},
            {"type": "list", "name": "tags"}, {"type": "Dict", "name": "filter"}
        ], "required": ["key"]}))
    .await;
    let added = c.expect("TOOL_ADDED").await;
    let canonical = json!([
        {"type": "string", "name": "key"}, {"type": "integer", "name": "count"},
        {"type": "array", "name": "tags"}, {"type": "object", "name": "filter"}
    ]);
    assert_eq!(added["tool"]["arguments"], canonical, "{added}");
    assert_eq!(added["tool"]["response"], "object", "{added}");
    let api = Api::new(&server, None);
    assert_eq!(api.list("subject=Tool:lookup&predicate=tool.arguments").await[0]["object"], canonical);
    assert_eq!(api.list("subject=Tool:lookup&predicate=tool.response").await[0]["object"], "object");

    // Calls are checked against the canonical types.
    let two = json!({"key": "k", "count": "two"});
    c.send("QUERY", json!({"message": "x", "tools": [{"name": "lookup", "arguments": two}]})).await;
    c.expect_error("BadRequest").await;
    let args = json!({"key": "k", "count": 2, "tags": ["a"], "filter": {"a": 1}});
    c.send("QUERY", json!({"message": "%0", "tools": [{"name": "lookup", "arguments": args}]})).await;
    let call = c.expect("TOOL_CALL").await;
    assert_eq!(call["arguments"], args);
    c.send("TOOL_RESULT", json!({"id": call["id"], "result": {"found": true}})).await;
    c.expect("RESPONSE").await;

    // A type no name stands for: refused, with every accepted name listed.
    c.send("ADD_TOOL", json!({"name": "t", "description": "d", "arguments": [{"type": "complex", "name": "z"}]})).await;
    let e = c.expect_error("BadRequest").await;
    let m = e["message"].as_str().unwrap();
    for name in ["string", "str", "text", "integer", "int", "long", "short", "number", "float", "double", "boolean", "bool",
        "object", "dict", "map", "array", "list"]
    {
        assert!(m.contains(name), "{name} missing from: {m}");
    }
    server.stop_ok();
}
