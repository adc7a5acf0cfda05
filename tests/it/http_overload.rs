//! Overload: requests beyond `max_in_flight` are answered 503 with the error
//! envelope and `Retry-After` at once, over all routes together; nothing
//! hangs; the server serves normally once the load is gone; open SSE
//! streams do not hold request places, and streams beyond their own cap get
//! 429. Bounds here are generous on purpose: speed figures belong to
//! `tempora-load overload`, not to a test.

use crate::common;
use crate::common::*;
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A request whose head is sent but whose body is not: the server has
/// admitted it and it holds its place while it waits for the body.
async fn slow_post(server: &Server, body: &str) -> TcpStream {
    let mut s = TcpStream::connect(server.authority()).await.unwrap();
    let head = format!(
        "POST /api/facts HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        server.authority(),
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body.as_bytes()[..1]).await.unwrap();
    s.flush().await.unwrap();
    s
}

/// Sends the rest of the body and reads the status line of the answer.
async fn finish(mut s: TcpStream, body: &str) -> String {
    s.write_all(&body.as_bytes()[1..]).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(2).any(|w| w == b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await.expect("an answer").unwrap();
        assert!(n > 0, "connection closed without an answer");
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    text.lines().next().unwrap().to_string()
}

/// Two writes held open to fill `max_in_flight = 2`. A probe that reaches
/// the server while it is still reading their heads takes a place first, and
/// then one held write is turned away (503) instead of held, so a probe after
/// it finds a place free for good. [`Held::refill`] sends such a write again.
struct Held {
    conns: Vec<TcpStream>,
    body: String,
}

impl Held {
    async fn open(server: &Server, body: &str) -> Held {
        Held { conns: vec![slow_post(server, body).await, slow_post(server, body).await], body: body.to_string() }
    }

    /// Replaces each held write the server has already answered; that answer
    /// may only be the request limit's 503.
    async fn refill(&mut self, server: &Server) {
        for s in &mut self.conns {
            let mut buf = [0u8; 4096];
            match s.try_read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Ok(n) => {
                    let got = String::from_utf8_lossy(&buf[..n]).into_owned();
                    assert!(got.starts_with("HTTP/1.1 503"), "a held write was answered with {got:?}");
                    *s = slow_post(server, &self.body).await;
                }
                Err(e) => panic!("a held write's connection failed: {e}"),
            }
        }
    }

    /// Sends the rest of both bodies; both writes must succeed.
    async fn finish(self) {
        for s in self.conns {
            let status = finish(s, &self.body).await;
            assert!(status.starts_with("HTTP/1.1 20"), "a held write finished with {status}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_beyond_max_in_flight_get_503_at_once_on_every_route() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_IN_FLIGHT", "2")]);
    let api = Api::new(&server, None);
    api.get("/api/health").await.expect(200);

    // Two writes whose bodies have not arrived take both places.
    let body = json!({"subject": "Person:slow", "predicate": "works_at", "object": "Org:acme"}).to_string();
    let mut held = Held::open(&server, &body).await;

    // Any other request, on any route, is turned away (once the server has
    // read the two heads), with the envelope and a hint when to retry.
    let deadline = Instant::now() + Duration::from_secs(10);
    let rejected = loop {
        let started = Instant::now();
        let r = api.get("/api/health").await;
        if r.status.as_u16() == 503 {
            break (r, started.elapsed());
        }
        assert_eq!(r.status.as_u16(), 200, "{}", r.text);
        assert!(Instant::now() < deadline, "two held writes never filled max_in_flight = 2; log:\n{}", server.stderr());
        held.refill(&server).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    rejected.0.expect_error(503, "Unavailable");
    assert_eq!(rejected.0.header("retry-after"), Some("1"));
    // Rejected, not queued: it did not wait for the held requests (which
    // would never finish on their own).
    assert!(rejected.1 < Duration::from_secs(5), "the rejection took {:?}", rejected.1);
    for path in ["/api/facts?subject=Person:slow", "/api/stats", "/openapi.json"] {
        api.get(path).await.expect_error(503, "Unavailable");
    }
    api.post("/api/facts", &json!({"subject": "Person:x", "predicate": "p", "object": 1}))
        .await
        .expect_error(503, "Unavailable");

    // The held requests complete, and their places are free again.
    held.finish().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = api.get("/api/facts?subject=Person:slow&predicate=works_at").await;
        if r.status.as_u16() == 200 {
            assert_eq!(r.json.as_array().unwrap().len(), 1, "{}", r.text);
            break;
        }
        assert!(Instant::now() < deadline, "still {} after the held requests finished", r.status);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop_ok();
}

/// `max_in_flight` is the server's limit, not one per listener: two HTTP
/// requests that hold both places turn gRPC calls away (UNAVAILABLE, at
/// once), and gRPC is served again once they finish.
#[tokio::test(flavor = "multi_thread")]
async fn http_and_grpc_share_the_request_limit() {
    use tempora::grpc::pb::concierge::{ConciergeRequest, ConciergeResponse};
    use tempora::grpc::routing::CONCIERGE_LIST as LIST;
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_with_grpc(&tmp.path().join("data"), &[("TEMPORA_MAX_IN_FLIGHT", "2")]);
    let api = Api::new(&server, None);
    let ch = common::grpc::channel(&server).await;
    let list = || common::grpc::unary::<_, ConciergeResponse>(&ch, LIST, ConciergeRequest {}, None, None);
    let listed = list().await.expect("List is served while places are free");
    assert!(listed.agents.iter().any(|a| a.agent_name == "memory"), "{listed:?}");

    let body = json!({"subject": "Person:slow", "predicate": "works_at", "object": "Org:acme"}).to_string();
    let mut held = Held::open(&server, &body).await;
    // Once the server has read both heads, a gRPC call finds no place.
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let started = Instant::now();
        match list().await {
            Err(s) => break (s, started.elapsed()),
            Ok(_) => assert!(Instant::now() < deadline, "two held HTTP writes never took the gRPC places"),
        }
        held.refill(&server).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused.0.code(), tonic::Code::Unavailable, "{:?}", refused.0);
    assert!(refused.0.message().contains("request limit"), "{:?}", refused.0);
    // Refused, not queued behind the held requests (which never finish alone).
    assert!(refused.1 < Duration::from_secs(5), "the refusal took {:?}", refused.1);

    held.finish().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(s) = list().await {
        assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}");
        assert!(Instant::now() < deadline, "gRPC still refused after the held requests finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.get("/api/health").await.expect(200);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_gets_answers_admitted_or_503_and_none_hangs() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_IN_FLIGHT", "4")]);
    let api = Api::new(&server, None);
    let mut tasks = Vec::new();
    for c in 0..64 {
        let (http, url) = (client(), server.url("/api/facts/batch"));
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for n in 0..4 {
                let facts: Vec<_> = (0..200)
                    .map(|i| {
                        json!({"subject": format!("Person:{}", (c * 200 + i) % 1000), "predicate": "works_at",
                                    "object": format!("Org:c{c}n{n}")})
                    })
                    .collect();
                let started = Instant::now();
                // The client's own timeout (30 s) turns a hang into an error.
                let r = send(http.post(&url).json(&json!({ "facts": facts }))).await;
                out.push((r, started.elapsed()));
            }
            out
        }));
    }
    let (mut admitted, mut rejected) = (0, 0);
    for t in tasks {
        for (r, took) in t.await.unwrap() {
            assert!(took < Duration::from_secs(30), "a request took {took:?}");
            match r.status.as_u16() {
                200 | 201 => admitted += 1,
                _ => {
                    r.expect_error(503, "Unavailable");
                    assert_eq!(r.header("retry-after"), Some("1"));
                    rejected += 1;
                }
            }
        }
    }
    assert_eq!(admitted + rejected, 256);
    assert!(admitted > 0, "nothing was admitted");
    // Each admitted batch committed one transaction; a rejected one wrote
    // nothing. Then the server serves normally.
    assert_eq!(api.stats().await["last_tx"], admitted, "admitted {admitted}, rejected {rejected}");
    api.get("/api/facts?subject=Person:1&predicate=works_at").await.expect(200);
    api.get("/api/health").await.expect(200);
    server.stop_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn open_streams_hold_no_request_place_and_the_stream_cap_answers_429() {
    let (_tmp, server) = fresh(&[("TEMPORA_MAX_IN_FLIGHT", "2"), ("TEMPORA_MAX_SSE_SUBSCRIBERS", "3")]);
    let api = Api::new(&server, None);
    let mut streams = Vec::new();
    for _ in 0..3 {
        let s = Sse::open(api.req(Method::GET, "/api/stream")).await;
        assert_eq!(s.status.as_u16(), 200);
        streams.push(s);
    }
    // Three open streams, two request places: requests are still served.
    for _ in 0..5 {
        api.get("/api/health").await.expect(200);
    }
    let f = api.assert_fact(json!({"subject": "Person:s", "predicate": "works_at", "object": "Org:o"})).await;
    for s in &mut streams {
        assert_eq!(s.next_event(Duration::from_secs(10)).await.unwrap().1["fact"]["id"], f["id"]);
    }
    // A fourth stream is over the stream cap, not the request limit.
    send(api.req(Method::GET, "/api/stream")).await.expect_error(429, "RateLimited");
    server.stop_ok();
}
