//! Slow and hostile clients against a real server process, over raw
//! sockets: a client trickling its request head (slowloris) is cut off after
//! `header_read_timeout_secs`, so is an idle kept-alive connection; an
//! oversized head or too many headers get 431, and every answer to a head
//! the server refuses (431, 400, 414) carries the error envelope; two hundred slow clients do
//! not keep a normal one from being served; a request that outlives
//! `request_timeout_secs` gets 503 while streams are exempt; and a NeuroDock
//! packet that never ends, or a silent NeuroDock connection, is dropped.
//!
//! Timeouts are configured small and the assertions give them generous
//! room: what is tested is that the server closes, not how punctually.

use crate::common::fake_llm::{FakeLlm, SLOW};
use crate::common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tempora::neurodock::framing::{encode, Decoder, Item};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a socket the server should close may stay open in these tests.
const CLOSED_WITHIN: Duration = Duration::from_secs(10);

/// Reads until the server closes the connection (EOF or reset); everything
/// it sent first. Panics if the socket is still open after `within`.
async fn read_until_closed(sock: &mut (impl AsyncRead + Unpin), within: Duration) -> Vec<u8> {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, sock.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open for {within:?}; it sent {:?}", text(&got)),
            Ok(Ok(0)) | Ok(Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A client that starts a request head and sends one more header line every
/// `every`, never finishing it. Stops when the server closes the socket.
async fn trickle(mut sock: TcpStream, every: Duration) -> Result<Vec<u8>, String> {
    sock.write_all(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n").await.map_err(|e| e.to_string())?;
    let deadline = Instant::now() + CLOSED_WITHIN;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    let mut i = 0u32;
    loop {
        if Instant::now() > deadline {
            return Err(format!("still open after {CLOSED_WITHIN:?}"));
        }
        match tokio::time::timeout(every, sock.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(got),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => {
                i += 1;
                if sock.write_all(format!("X-Slow-{i}: a\r\n").as_bytes()).await.is_err() {
                    return Ok(got);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_headers_and_idle_connections_are_cut_off_while_others_are_served() {
    let (_tmp, server) = fresh(&[("TEMPORA_HEADER_READ_TIMEOUT_SECS", "1")]);
    let addr = server.authority().to_string();

    // One slowloris client: a header line every 200 ms never finishes the head.
    let started = Instant::now();
    let got = trickle(TcpStream::connect(&addr).await.unwrap(), Duration::from_millis(200)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900), "closed before the timeout: {:?}", started.elapsed());
    assert!(!text(&got).contains("200 OK"), "a head that never ended was answered: {}", text(&got));

    // A client that connects and sends nothing is closed too.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    read_until_closed(&mut silent, CLOSED_WITHIN).await;

    // A kept-alive connection that goes idle after its request is closed.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    let answer = read_until_closed(&mut kept, CLOSED_WITHIN).await;
    assert!(text(&answer).starts_with("HTTP/1.1 200"), "{}", text(&answer));

    // Two hundred slow clients at once: a normal client is still served
    // while they hang on, and every one of them is cut off.
    let mut slow = Vec::new();
    for _ in 0..200 {
        let sock = TcpStream::connect(&addr).await.unwrap();
        slow.push(tokio::spawn(trickle(sock, Duration::from_millis(300))));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let api = Api::new(&server, None);
    api.get("/api/health").await.expect(200);
    api.assert_fact(json!({"subject": "Person:ok", "predicate": "p", "object": 1})).await;
    for t in slow {
        t.await.unwrap().expect("a slow client was cut off");
    }
    api.get("/api/health").await.expect(200);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_heads_get_431() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_HEADER_BYTES", "16384"), ("TEMPORA_MAX_HEADERS", "50")]);
    let addr = server.authority().to_string();

    // One header larger than the whole head may be.
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let big = format!("GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "a".repeat(64 * 1024));
    // The server may answer and close before reading all of it.
    let _ = sock.write_all(big.as_bytes()).await;
    let got = text(&read_until_closed(&mut sock, CLOSED_WITHIN).await);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "{got}");

    // Many small headers that add up past the limit.
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let mut head = String::from("GET /api/health HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..40 {
        head.push_str(&format!("X-H{i}: {}\r\n", "b".repeat(1000)));
    }
    head.push_str("\r\n");
    let _ = sock.write_all(head.as_bytes()).await;
    let got = text(&read_until_closed(&mut sock, CLOSED_WITHIN).await);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "{got}");

    // More headers than allowed, each tiny.
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let mut head = String::from("GET /api/health HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..80 {
        head.push_str(&format!("X-H{i}: c\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await.unwrap();
    let got = text(&read_until_closed(&mut sock, CLOSED_WITHIN).await);
    assert!(got.starts_with("HTTP/1.1 431"), "{got}");

    // A head within the limits is served.
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let mut head = String::from("GET /api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for i in 0..20 {
        head.push_str(&format!("X-H{i}: {}\r\n", "d".repeat(200)));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await.unwrap();
    let got = text(&read_until_closed(&mut sock, CLOSED_WITHIN).await);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    server.stop_ok();
}

/// One raw HTTP/1.1 answer: its status, its header lines and its body.
struct RawAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawAnswer {
    /// The first answer in `bytes`, whose body is `content-length` long; the
    /// bytes after it.
    fn parse(bytes: &[u8]) -> (RawAnswer, &[u8]) {
        let end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| panic!("no head: {}", text(bytes)));
        let head = std::str::from_utf8(&bytes[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| l.split_once(':').unwrap())
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers.iter().find(|(k, _)| k == "content-length").expect("content-length").1.parse().unwrap();
        let rest = &bytes[end + 4..];
        assert!(rest.len() >= length, "body shorter than its content-length: {}", text(bytes));
        (RawAnswer { status, headers, body: rest[..length].to_vec() }, &rest[length..])
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Asserts the status and the `{"error":{"code","message"}}` envelope.
    #[track_caller]
    fn expect_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{}", text(&self.body));
        assert_eq!(self.header("content-type"), Some("application/json"));
        let v: Value = serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", text(&self.body)));
        assert_eq!(v["error"]["code"], code, "{v}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        assert_eq!(v.as_object().unwrap().len(), 1, "{v}");
        assert_eq!(v["error"].as_object().unwrap().len(), 2, "{v}");
    }
}

/// Sends `request` whole on a new connection and reads until the server closes it.
async fn exchange(addr: &str, request: &[u8]) -> Vec<u8> {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    sock.write_all(request).await.unwrap();
    read_until_closed(&mut sock, CLOSED_WITHIN).await
}

/// The answers hyper itself writes for heads it refuses (over the limits,
/// unparsable, a URI too long) carry the error envelope like every other
/// error, with their status kept; the connection is then closed.
#[tokio::test(flavor = "multi_thread")]
async fn refused_heads_are_answered_with_the_envelope() {
    // A head may be 80 000 bytes: a URI of 70 000 fits in it but is too long for a URI.
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_HEADER_BYTES", "80000"), ("TEMPORA_MAX_HEADERS", "50")]);
    let addr = server.authority().to_string();

    let big = format!("GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "a".repeat(100 * 1024));
    let got = exchange(&addr, big.as_bytes()).await;
    let (answer, _) = RawAnswer::parse(&got);
    answer.expect_error(431, "HeadersTooLarge");
    assert_eq!(answer.header("connection"), Some("close"));
    let message = serde_json::from_slice::<Value>(&answer.body).unwrap()["error"]["message"].to_string();
    assert!(message.contains("80000") && message.contains("max_header_bytes"), "{message}");

    let mut many = String::from("GET /api/health HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..200 {
        many.push_str(&format!("X-H{i}: c\r\n"));
    }
    many.push_str("\r\n");
    RawAnswer::parse(&exchange(&addr, many.as_bytes()).await).0.expect_error(431, "HeadersTooLarge");

    for garbage in [&b"GARBAGE\r\n\r\n"[..], b"GET /api/health HTTP/1.1\r\nHost: localhost\r\nBad Header: 1\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n"] {
        let got = exchange(&addr, garbage).await;
        RawAnswer::parse(&got).0.expect_error(400, "BadRequest");
    }

    let long_uri = format!("GET /api/health?q={} HTTP/1.1\r\nHost: localhost\r\n\r\n", "u".repeat(70_000));
    RawAnswer::parse(&exchange(&addr, long_uri.as_bytes()).await).0.expect_error(414, "UriTooLong");

    // On a kept-alive connection: the app's answer goes out untouched, then
    // the refused head that follows it gets the envelope.
    let two = [b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(), b"NOT HTTP AT ALL\r\n\r\n".to_vec()].concat();
    let got = exchange(&addr, &two).await;
    let (first, rest) = RawAnswer::parse(&got);
    assert_eq!(first.status, 200, "{}", text(&got));
    assert_eq!(serde_json::from_slice::<Value>(&first.body).unwrap(), json!({"ok": true}));
    let (second, rest) = RawAnswer::parse(rest);
    second.expect_error(400, "BadRequest");
    assert!(rest.is_empty(), "{}", text(rest));

    // The app's own errors are its own, and normal requests are served.
    let api = Api::new(&server, None);
    api.get("/api/health").await.expect(200);
    api.get("/api/nope").await.expect_error(404, "NotFound");
    api.post("/api/facts", &json!({"subject": ""})).await.expect_error(400, "SchemaInvalid");
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_past_its_time_gets_503_and_streams_are_exempt() {
    let fake = FakeLlm::start();
    let (_tmp, server) = fresh(&[("TEMPORA_REQUEST_TIMEOUT_SECS", "1"), ("TEMPORA_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let api = Api::new(&server, None);
    api.assert_fact(json!({"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme"})).await;

    // The model endpoint takes SLOW (3 s) to answer; the request may take 1 s.
    let model = json!({"base_url": fake.base_url, "model": "slow", "timeout_ms": 60_000});
    let started = Instant::now();
    let r = api.post("/api/ask", &json!({"question": "Where does Person:sarah work?", "model": model})).await;
    let took = started.elapsed();
    r.expect_error(503, "Unavailable");
    assert!(r.json["error"]["message"].as_str().unwrap().contains("request_timeout_secs"), "{}", r.text);
    assert!(took < SLOW, "the request timeout was not applied: {took:?}");
    // The same call with a prompt model is answered: the limit is per request.
    let ok = json!({"base_url": fake.base_url, "model": "ok", "timeout_ms": 60_000});
    api.post("/api/ask", &json!({"question": "Where does Person:sarah work?", "model": ok})).await.expect(200);

    // The change feed stays open past the request timeout and still delivers.
    let mut sse = Sse::open(api.req(reqwest::Method::GET, "/api/stream")).await;
    assert_eq!(sse.status.as_u16(), 200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let f = api.assert_fact(json!({"subject": "Person:late", "predicate": "p", "object": 2})).await;
    let (_, event) = sse.next_event(Duration::from_secs(10)).await.expect("the stream is still open");
    assert_eq!(event["fact"]["id"], f["id"], "{event}");
    drop(sse);
    server.stop_ok();
}

/// Packets a NeuroDock server sent before it closed the connection.
fn packets(bytes: &[u8]) -> Vec<Value> {
    let mut dec = Decoder::default();
    dec.push(bytes);
    let mut out = Vec::new();
    while let Some(item) = dec.next_item() {
        match item {
            Item::Packet { value, .. } => out.push(value),
            Item::Error { message, .. } => panic!("server sent a bad packet: {message}"),
        }
    }
    out
}

/// Writes `bytes` one every 200 ms while reading what the server sends;
/// returns the packets it sent before closing the connection. (Reading as
/// it comes matters: a write after the close would reset the connection and
/// could lose the last packet unread.)
async fn trickle_packets(server: &Server, bytes: Vec<u8>) -> Vec<Value> {
    let stream = TcpStream::connect(server.tcp.as_deref().unwrap()).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let writer = tokio::spawn(async move {
        for b in bytes {
            if wr.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Holds the connection open without ever finishing the packet.
        std::future::pending::<()>().await;
    });
    let got = read_until_closed(&mut rd, CLOSED_WITHIN).await;
    writer.abort();
    packets(&got)
}

#[tokio::test(flavor = "multi_thread")]
async fn neurodock_drops_unfinished_packets_and_idle_connections() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_with_tcp(
        &tmp.path().join("data"),
        &[("TEMPORA_TCP_PACKET_TIMEOUT_SECS", "1"), ("TEMPORA_TCP_IDLE_TIMEOUT_SECS", "3")],
    );

    // A packet trickled a byte every 200 ms, never ending: every byte resets
    // the idle timer, so only the packet timer can end it.
    let opening =
        br#"{"type": "QUERY", "data": {"message": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"#.to_vec();
    let got = trickle_packets(&server, opening).await;
    assert_eq!(got.last().map(|p| p["data"]["code"].clone()), Some(json!("SlowPacket")), "{got:?}");

    // A junk line trickled without its newline never ends either.
    let got = trickle_packets(&server, vec![b'x'; 50]).await;
    let codes: Vec<Value> = got.iter().map(|p| p["data"]["code"].clone()).collect();
    assert_eq!(codes.last(), Some(&json!("SlowPacket")), "{got:?}");

    // A connection that works, then says nothing, is closed as idle.
    let mut c = TcpStream::connect(server.tcp.as_deref().unwrap()).await.unwrap();
    let query = encode(&json!({"type": "QUERY", "data": {"message": "remember Person:ada likes tea"}}), false);
    c.write_all(&query).await.unwrap();
    let got = packets(&read_until_closed(&mut c, CLOSED_WITHIN).await);
    assert_eq!(got.first().map(|p| p["type"].clone()), Some(json!("RESPONSE")), "{got:?}");
    assert_eq!(got.last().map(|p| p["data"]["code"].clone()), Some(json!("Idle")), "{got:?}");

    // Whitespace between packets is not a packet: a connection that only
    // sends blank lines is idle, not slow, and gets the idle timeout.
    let started = Instant::now();
    let got = trickle_packets(&server, vec![b'\n'; 12]).await;
    assert_eq!(got.last().map(|p| p["data"]["code"].clone()), Some(json!("Idle")), "{got:?}");
    assert!(started.elapsed() >= Duration::from_secs(2), "closed before its blank lines ended");
    server.stop_ok();
}
