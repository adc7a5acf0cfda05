//! A local OpenAI-compatible endpoint for tests of the model-calling routes.
//!
//! `FakeLlm::start()` serves `POST /v1/chat/completions` and
//! `POST /v1/embeddings` on `127.0.0.1:<free port>` from its own thread and
//! runtime, so it works under any test runtime. Every request is recorded
//! (path, `Authorization` header, JSON body) for assertions.
//!
//! The `model` named in a request body picks the behaviour:
//!
//! | model        | answer |
//! |--------------|--------|
//! | `ok` (or any other name) | 200: chat content [`OK_CONTENT`] with usage `{prompt_tokens: 50, completion_tokens: 3}`; embeddings: one [`EMBED_DIM`]-float vector per input (see [`embedding`]) |
//! | `fail-500`   | 500 with a plain-text body |
//! | `slow`       | sleeps [`SLOW`], then answers like `ok` |
//! | `malformed`  | 200 with a body that is not JSON |
//! | `no-choices` | 200 with JSON lacking `choices` (chat) / `data` (embeddings) |
//! | `echo-key`   | 401 whose body quotes the `Authorization` header back, as some providers do |
//!
//! Dropping the handle stops the server.
#![allow(dead_code)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The chat content of a successful answer.
pub const OK_CONTENT: &str = "Acme.\nConfidence: 0.9";
/// How long the `slow` behaviour waits before answering.
pub const SLOW: Duration = Duration::from_secs(3);
/// Length of the vectors the embeddings endpoint returns.
pub const EMBED_DIM: usize = 8;

/// One request the fake endpoint received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

type Log = Arc<Mutex<Vec<Recorded>>>;

pub struct FakeLlm {
    /// e.g. `http://127.0.0.1:41234/v1`: what a model config's `base_url` takes.
    pub base_url: String,
    requests: Log,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeLlm {
    pub fn start() -> FakeLlm {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake model endpoint");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let requests: Log = Arc::default();
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings))
            .with_state(Arc::clone(&requests));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                // Not a graceful shutdown: a `slow` request in flight must not
                // hold the test up; dropping the runtime cancels it.
                tokio::select! {
                    r = axum::serve(listener, app) => r.expect("fake model endpoint serves"),
                    _ = stopped => {}
                }
            });
        });
        FakeLlm { base_url: format!("http://{addr}/v1"), requests, stop: Some(stop), thread: Some(thread) }
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The deterministic embedding of `input`: byte sums in [`EMBED_DIM`]
/// buckets, normalised to unit length (the zero vector stays zero).
pub fn embedding(input: &str) -> Vec<f32> {
    let mut v = vec![0f32; EMBED_DIM];
    for (i, b) in input.bytes().enumerate() {
        v[i % EMBED_DIM] += b as f32;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Records the request; `None` means answer normally, `Some` is the answer
/// of a failing behaviour.
async fn record_and_misbehave(log: &Log, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> (Value, Option<Response>) {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(String::from);
    log.lock().unwrap().push(Recorded { path: uri.path().to_string(), authorization: authorization.clone(), body: json.clone() });
    let failure = match json["model"].as_str().unwrap_or("") {
        "fail-500" => Some((StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response()),
        "malformed" => Some((StatusCode::OK, [("content-type", "application/json")], "{\"choices\": [").into_response()),
        "echo-key" => {
            let msg = format!("Incorrect API key provided: {}", authorization.unwrap_or_default());
            Some((StatusCode::UNAUTHORIZED, axum::Json(json!({"error": {"message": msg}}))).into_response())
        }
        "slow" => {
            tokio::time::sleep(SLOW).await;
            None
        }
        _ => None,
    };
    (json, failure)
}

async fn chat(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, failure) = record_and_misbehave(&log, &uri, &headers, &body).await;
    if let Some(r) = failure {
        return r;
    }
    if req["model"] == "no-choices" {
        return axum::Json(json!({"id": "x", "object": "chat.completion", "usage": {"prompt_tokens": 1}})).into_response();
    }
    axum::Json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": req["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": OK_CONTENT}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53},
    }))
    .into_response()
}

async fn embeddings(State(log): State<Log>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, failure) = record_and_misbehave(&log, &uri, &headers, &body).await;
    if let Some(r) = failure {
        return r;
    }
    if req["model"] == "no-choices" {
        return axum::Json(json!({"object": "list"})).into_response();
    }
    let inputs: Vec<String> = match &req["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"object": "embedding", "index": i, "embedding": embedding(s)}))
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "model": req["model"],
        "usage": {"prompt_tokens": inputs.len(), "total_tokens": inputs.len()},
    }))
    .into_response()
}
