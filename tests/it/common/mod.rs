//! Shared helpers for the HTTP integration tests: the real `tempora` binary
//! started as a child process on a free loopback port, plain reqwest calls
//! over a real socket, a small SSE frame reader, and a local
//! OpenAI-compatible model endpoint (`fake_llm`).
//!
//! Declared once in `tests/it/main.rs`; each test module uses a different subset of it.
#![allow(dead_code)]

pub mod fake_llm;
pub mod grpc;
pub mod postgres;

use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The `tempora` binary, without the `TEMPORA_*` settings of the shell
/// that runs the tests: each test sets the ones it means.
pub fn tempora_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tempora"));
    for (k, _) in std::env::vars() {
        if k.starts_with("TEMPORA_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// With `TEMPORA_TEST_STORE=postgres`, every server the tests start keeps
/// its memory in PostgreSQL (a database of the test cluster per data
/// directory, the same again when a test restarts the server on it), so
/// the whole suite runs against both stores. A test that sets its own
/// `TEMPORA_STORE` keeps it.
fn test_store(data_dir: &Path, env: &[(&str, &str)]) -> Option<String> {
    if std::env::var("TEMPORA_TEST_STORE").ok().as_deref() != Some("postgres")
        || env.iter().any(|(k, _)| *k == "TEMPORA_STORE")
    {
        return None;
    }
    let marker = data_dir.join(".test-postgres-url");
    if let Ok(url) = std::fs::read_to_string(&marker) {
        return Some(url);
    }
    // The tests run on tokio runtimes; the database is made on a thread of its own.
    let url = std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(postgres::database())
    })
    .join()
    .expect("a test database");
    std::fs::create_dir_all(data_dir).expect("the data directory");
    std::fs::write(&marker, &url).expect("remember the test database");
    Some(url)
}

/// Whether the servers of this run keep their memory in PostgreSQL (see
/// [`test_store`]); tests of the embedded engine's files skip themselves.
pub fn on_postgres() -> bool {
    std::env::var("TEMPORA_TEST_STORE").ok().as_deref() == Some("postgres")
}

/// The wall clock, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Keys of the keyed-mode servers.
pub const NAS_KEY: &str = "nas-key-1";
pub const ACME_KEY: &str = "acme-key-1";
pub const ADMIN: &str = "adm-secret-1";

/// `TEMPORA_*` settings of a keyed server with tenants `nas` and `acme`.
pub fn keyed() -> Vec<(&'static str, &'static str)> {
    vec![("TEMPORA_TENANT_KEYS", "nas=nas-key-1,acme=acme-key-1"), ("TEMPORA_ADMIN_TOKENS", ADMIN)]
}

/// Unix ms of 1 January of `year` (UTC), for valid times.
pub fn year(y: i64) -> i64 {
    // Days from 1970-01-01 to y-01-01.
    let days: i64 = (1970..y).map(|yy| if (yy % 4 == 0 && yy % 100 != 0) || yy % 400 == 0 { 366 } else { 365 }).sum();
    days * 86_400_000
}

/// A running `tempora serve` child process. Dropping it sends SIGTERM and
/// waits (SIGKILL after 10 s), so a failing test leaves no server behind.
pub struct Server {
    child: Option<Child>,
    pub base: String,
    /// `host:port` of the gRPC listener, when started with one.
    pub grpc: Option<String>,
    /// `host:port` of the TCP (NeuroDock) listener, when started with one.
    pub tcp: Option<String>,
    pub data_dir: PathBuf,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts a server on `data_dir` with only the given `TEMPORA_*`
    /// variables set (any inherited ones are removed).
    pub fn start(data_dir: &Path, env: &[(&str, &str)]) -> Server {
        Server::launch(data_dir, env, false)
    }

    /// Like [`Server::start`], with the gRPC listener on a free port too
    /// ([`Server::grpc`]).
    pub fn start_with_grpc(data_dir: &Path, env: &[(&str, &str)]) -> Server {
        Server::launch(data_dir, env, true)
    }

    /// Like [`Server::start`], with the TCP (NeuroDock) listener on a free
    /// port too ([`Server::tcp`]).
    pub fn start_with_tcp(data_dir: &Path, env: &[(&str, &str)]) -> Server {
        Server::launch_with(data_dir, env, false, true)
    }

    fn launch(data_dir: &Path, env: &[(&str, &str)], grpc: bool) -> Server {
        Server::launch_with(data_dir, env, grpc, false)
    }

    fn launch_with(data_dir: &Path, env: &[(&str, &str)], grpc: bool, tcp: bool) -> Server {
        let mut cmd = tempora_command();
        cmd.args(["serve", "--data-dir"]).arg(data_dir).args([
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            if grpc { "127.0.0.1:0" } else { "off" },
            "--tcp-addr",
            if tcp { "127.0.0.1:0" } else { "off" },
        ]);
        cmd.env("NO_COLOR", "1").env("TEMPORA_LOG", "info");
        if let Some(url) = test_store(data_dir, env) {
            cmd.env("TEMPORA_STORE", url);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("tempora starts");
        let stderr = child.stderr.take().expect("piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let sink = Arc::clone(&log);
        // Keeps draining stderr for the life of the process, so the server
        // never blocks on (or writes into) a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let listening = |line: &str, what: &str| {
            line.split(what).nth(1).map(|rest| {
                rest.chars().take_while(|c| c.is_ascii_digit() || matches!(c, '.' | ':' | '[' | ']')).collect::<String>()
            })
        };
        let (mut addr, mut grpc_addr, mut tcp_addr) = (None, None, None);
        while addr.is_none() || (grpc && grpc_addr.is_none()) || (tcp && tcp_addr.is_none()) {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    addr = addr.or_else(|| listening(&line, "http listening on "));
                    grpc_addr = grpc_addr.or_else(|| listening(&line, "grpc listening on "));
                    tcp_addr = tcp_addr.or_else(|| listening(&line, "tcp listening on "));
                }
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait();
                    panic!("server did not report its port ({status:?}); stderr:\n{}", log.lock().unwrap().join("\n"));
                }
            }
        }
        let addr = addr.expect("read above");
        Server { child: Some(child), base: format!("http://{addr}"), grpc: grpc_addr, tcp: tcp_addr, data_dir: data_dir.to_path_buf(), log }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `host:port` of the listener.
    pub fn authority(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn sigterm(&self) {
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill -TERM failed");
    }

    /// Waits up to `within` for the process to exit.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut().expect("running");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then the exit status (the server must exit within 10 s).
    pub fn stop(mut self) -> ExitStatus {
        self.sigterm();
        match self.wait_exit(Duration::from_secs(10)) {
            Some(s) => s,
            None => panic!("server did not exit within 10 s of SIGTERM; stderr:\n{}", self.stderr()),
        }
    }

    /// SIGTERM and assert a clean exit (status 0).
    pub fn stop_ok(self) {
        let log = Arc::clone(&self.log);
        let status = self.stop();
        assert!(status.success(), "exit status {status:?}; stderr:\n{}", log.lock().unwrap().join("\n"));
    }

    /// kill -9: no chance to flush or clean up.
    pub fn kill9(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
    }

    pub fn stderr(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            if self.wait_exit(Duration::from_secs(10)).is_none() {
                if let Some(mut c) = self.child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }
}

/// A fresh temporary data directory and a server on it.
pub fn fresh(env: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), env);
    (tmp, server)
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

/// A finished response: status, headers and the body parsed as JSON (or
/// `Value::Null` when it is not JSON; `text` keeps the raw body).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the status and, for errors, the `{"error":{"code","message"}}` envelope.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "unexpected status; body: {}", self.text);
        &self.json
    }

    /// Asserts an error response with the envelope and the given code.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "unexpected status; body: {}", self.text);
        let err = self.json.get("error").unwrap_or_else(|| panic!("no error envelope: {}", self.text));
        assert_eq!(err["code"], code, "wrong code: {}", self.text);
        assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()), "no message: {}", self.text);
        let obj = self.json.as_object().unwrap();
        assert_eq!(obj.len(), 1, "envelope has extra fields: {}", self.text);
        assert_eq!(err.as_object().unwrap().len(), 2, "error has extra fields: {}", self.text);
        let ct = self.header("content-type").unwrap_or("");
        assert!(ct.starts_with("application/json"), "error content type {ct:?}");
    }

    /// The non-disclosure answer: exactly `404 {"error":{"code":"NotFound","message":"not found"}}`.
    #[track_caller]
    pub fn expect_hidden(&self) {
        assert_eq!(self.status.as_u16(), 404, "expected 404 non-disclosure; body: {}", self.text);
        assert_eq!(self.json, serde_json::json!({"error": {"code": "NotFound", "message": "not found"}}), "{}", self.text);
    }
}

pub async fn send(req: reqwest::RequestBuilder) -> Resp {
    let resp = req.send().await.expect("request sent");
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body read");
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp { status, headers, text, json }
}

/// A thin client of one server, optionally with a bearer key.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub key: Option<String>,
}

impl Api {
    pub fn new(server: &Server, key: Option<&str>) -> Api {
        Api { http: client(), base: server.base.clone(), key: key.map(String::from) }
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, format!("{}{}", self.base, path));
        match &self.key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        send(self.req(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        send(self.req(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        send(self.req(reqwest::Method::POST, path).json(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        send(self.req(reqwest::Method::PUT, path).json(body)).await
    }

    /// POST /api/facts, asserting 201; the created fact.
    pub async fn assert_fact(&self, body: Value) -> Value {
        let r = self.post("/api/facts", &body).await;
        r.expect(201).clone()
    }

    /// GET /api/facts with a query string; the list.
    /// Every fact of the tenant, any status, page by page.
    pub async fn all_facts(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let q = match &cursor {
                Some(c) => format!("/api/facts?status=all&limit=1000&cursor={}", enc(c)),
                None => "/api/facts?status=all&limit=1000".to_string(),
            };
            let r = self.get(&q).await;
            out.extend(r.expect(200).as_array().unwrap().iter().cloned());
            match r.header("x-next-cursor") {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    pub async fn list(&self, query: &str) -> Vec<Value> {
        let r = self.get(&format!("/api/facts?{query}")).await;
        r.expect(200).as_array().unwrap_or_else(|| panic!("not a list: {}", r.text)).clone()
    }

    pub async fn stats(&self) -> Value {
        self.get("/api/stats").await.expect(200).clone()
    }
}

/// Ids of a list of facts.
pub fn ids(facts: &[Value]) -> Vec<String> {
    facts.iter().map(|f| f["id"].as_str().expect("fact id").to_string()).collect()
}

pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// One Server-Sent Events frame.
#[derive(Debug, Clone)]
pub enum Frame {
    Event { id: Option<String>, data: Value },
    Comment(String),
}

/// A subscriber of `/api/stream`, reading the raw byte stream in a task.
pub struct Sse {
    rx: tokio::sync::mpsc::UnboundedReceiver<Option<Frame>>,
    pub status: StatusCode,
    pub headers: HeaderMap,
    task: tokio::task::JoinHandle<()>,
}

impl Sse {
    /// Opens the stream; returns once the response headers arrived (the
    /// server subscribes before answering, so every later write is seen).
    pub async fn open(req: reqwest::RequestBuilder) -> Sse {
        Sse::from_response(req.send().await.expect("stream request"))
    }

    /// Reads the stream of a response already received.
    pub fn from_response(resp: reqwest::Response) -> Sse {
        let status = resp.status();
        let headers = resp.headers().clone();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut bytes = resp.bytes_stream();
            let mut buf = String::new();
            while let Some(chunk) = bytes.next().await {
                let Ok(chunk) = chunk else { break };
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let block: String = buf[..end].to_string();
                    buf.drain(..end + 2);
                    if let Some(f) = parse_block(&block) {
                        if tx.send(Some(f)).is_err() {
                            return;
                        }
                    }
                }
            }
            if status.is_success() {
                assert!(buf.trim().is_empty(), "stream ended inside a frame: {buf:?}");
            }
            let _ = tx.send(None);
        });
        Sse { rx, status, headers, task }
    }

    /// The next data event (comments such as keepalives are skipped); `None`
    /// when the stream ended. Panics after `within`.
    pub async fn next_event(&mut self, within: Duration) -> Option<(Option<String>, Value)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => panic!("no SSE event within {within:?}"),
                Ok(None) | Ok(Some(None)) => return None,
                Ok(Some(Some(Frame::Comment(_)))) => continue,
                Ok(Some(Some(Frame::Event { id, data }))) => return Some((id, data)),
            }
        }
    }

    /// Asserts that no data event arrives within `quiet`.
    pub async fn expect_quiet(&mut self, quiet: Duration) {
        let deadline = tokio::time::Instant::now() + quiet;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => return,
                Ok(Some(Some(Frame::Comment(_)))) => continue,
                Ok(other) => panic!("expected no event, got {other:?}"),
            }
        }
    }

    /// Waits for the stream to end (server closed it); panics after `within`.
    pub async fn expect_end(&mut self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => panic!("stream still open after {within:?}"),
                Ok(None) | Ok(Some(None)) => return,
                Ok(Some(Some(Frame::Comment(_)))) => continue,
                Ok(Some(Some(f))) => panic!("expected the stream to end, got {f:?}"),
            }
        }
    }
}

impl Drop for Sse {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn parse_block(block: &str) -> Option<Frame> {
    let mut id = None;
    let mut data: Vec<&str> = Vec::new();
    let mut comment = None;
    for line in block.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(c) = line.strip_prefix(':') {
            comment = Some(c.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v));
        } else if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.strip_prefix(' ').unwrap_or(v).to_string());
        } else if line.is_empty() {
        } else {
            panic!("unexpected SSE line {line:?} in {block:?}");
        }
    }
    if data.is_empty() {
        return comment.map(Frame::Comment);
    }
    let joined = data.join("\n");
    let data: Value = serde_json::from_str(&joined).unwrap_or_else(|e| panic!("frame data is not JSON ({e}): {joined}"));
    Some(Frame::Event { id, data })
}

/// Copies a directory tree (fixtures into a test's temporary directory).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
