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
//! | `flaky-N`    | the first N requests of this model answer 500, later ones like `ok` |
//! | `garbled-N`  | the first N requests of this model answer 200 with a body that is not JSON, later ones like `ok` |
//! | `junk`       | 200, a well-formed completion whose content is prose ([`JUNK_CONTENT`]) |
//! | `agent-first-tool` | a tool-calling agent: asks for the first offered tool with `{"inquiry": <last user message>}`; once a tool answered, answers `Answer: <tool result>` (with no tools: `Answer: no tools`) |
//! | `agent-remember` | asks for `remember` with `Person:zed likes Thing:jazz` (and a `namespace` of `elsewhere`); once a tool answered, answers like `agent-first-tool` |
//! | `agent-loop` | never answers: asks for the first offered tool (or `nothing`) every time |
//! | `agent-slow-loop` | like `agent-loop`, waiting [`SLOW_STEP`] before each answer |
//!
//! Chat requests whose system prompt is a digest's (`/api/digest`) get a
//! deterministic answer of that role instead of [`OK_CONTENT`]:
//! - extractor ("You extract facts"): [`extracted`] of the user message:
//!   the fixed proposals of [`EXTRACTED`], plus `Person:sarah contact <token>`
//!   for the first masked token (`[...]`) the document holds;
//! - judge ("You judge facts"): `{"scores": [...]}` with one score per
//!   numbered fact line: [`RUMOR_SCORE`] for a line containing `rumor`,
//!   [`JUDGE_SCORE`] for the others.
//!
//! Embeddings are a bag of words (see [`embedding`]): texts that share words,
//! or [`SYNONYMS`] of them, get similar vectors.
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
/// The judge's score of a fact line, and of one about a rumor.
pub const JUDGE_SCORE: f64 = 0.9;
pub const RUMOR_SCORE: f64 = 0.2;
/// The content of the `junk` behaviour.
pub const JUNK_CONTENT: &str = "I am sorry, I cannot help with that.";
/// The extractor's fixed proposals: three usable facts and one without a subject.
pub const EXTRACTED: &str = r#"[
  {"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme", "confidence": 0.95},
  {"subject": "Person:sarah", "predicate": "role", "object": "staff engineer", "confidence": 0.9},
  {"subject": "Person:sarah", "predicate": "rumor", "object": "leaving for Org:globex", "confidence": 0.8},
  {"subject": "", "predicate": "broken", "object": 1}
]"#;

/// The extractor's answer to a user message.
pub fn extracted(user: &str) -> String {
    let mut facts: Vec<Value> = serde_json::from_str(EXTRACTED).unwrap();
    if let Some(start) = user.find('[') {
        if let Some(len) = user[start..].find(']') {
            let token = &user[start..start + len + 1];
            facts.push(json!({"subject": "Person:sarah", "predicate": "contact", "object": token, "confidence": 0.85}));
        }
    }
    json!({"facts": facts}).to_string()
}

/// The judge's answer to a user message.
pub fn judged(user: &str) -> String {
    let scores: Vec<f64> = user
        .lines()
        .filter(|l| l.starts_with('[') && l.split_once(']').is_some_and(|(n, _)| n[1..].parse::<u32>().is_ok()))
        .map(|l| if l.contains("rumor") { RUMOR_SCORE } else { JUDGE_SCORE })
        .collect();
    json!({"scores": scores}).to_string()
}

/// How long `agent-slow-loop` waits before each answer.
pub const SLOW_STEP: Duration = Duration::from_millis(500);

/// How long the `slow` behaviour waits before answering.
pub const SLOW: Duration = Duration::from_secs(3);
/// Length of the vectors the embeddings endpoint returns.
pub const EMBED_DIM: usize = 1024;

/// Words the fake embedding treats as the same word: `(word, stands for)`.
pub const SYNONYMS: &[(&str, &str)] = &[
    ("employer", "works"),
    ("employs", "works"),
    ("workplace", "works"),
    ("job", "works"),
    ("cellist", "cello"),
    ("violoncello", "cello"),
    ("residence", "lives"),
    ("home", "lives"),
    ("spouse", "married"),
];

/// One request the fake endpoint received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

type Log = Arc<Mutex<Vec<Recorded>>>;

/// Requests seen per model name (for `flaky-N` and `garbled-N`).
type Counts = Arc<Mutex<std::collections::HashMap<String, usize>>>;

#[derive(Clone, Default)]
struct Shared {
    log: Log,
    counts: Counts,
}

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
        let shared = Shared::default();
        let requests = Arc::clone(&shared.log);
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings))
            .with_state(shared);
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

    /// Every input of every embeddings request so far (answered or not),
    /// in arrival order.
    pub fn embed_inputs(&self) -> Vec<String> {
        self.requests().iter().filter(|r| r.path == "/v1/embeddings").flat_map(|r| inputs_of(&r.body)).collect()
    }
}

fn inputs_of(body: &Value) -> Vec<String> {
    match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect(),
        _ => Vec::new(),
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

/// The words of `input` as the fake embedding sees them: lower-cased runs
/// of letters and digits, synonyms replaced (see [`SYNONYMS`]).
pub fn embedding_words(input: &str) -> Vec<String> {
    input
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_lowercase();
            SYNONYMS.iter().find(|(s, _)| *s == w).map(|(_, to)| to.to_string()).unwrap_or(w)
        })
        .collect()
}

/// The bucket of a word (FNV-1a).
pub fn bucket(word: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in word.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % EMBED_DIM as u64) as usize
}

/// The deterministic embedding of `input`: a bag of words, each word (after
/// [`SYNONYMS`]) counted in its [`bucket`] of [`EMBED_DIM`], normalised to
/// unit length (the zero vector stays zero).
pub fn embedding(input: &str) -> Vec<f32> {
    let mut v = vec![0f32; EMBED_DIM];
    for w in embedding_words(input) {
        v[bucket(&w)] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Records the request; `None` means answer normally, `Some` is the answer
/// of a failing behaviour.
async fn record_and_misbehave(st: &Shared, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> (Value, Option<Response>) {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(String::from);
    st.log.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        authorization: authorization.clone(),
        body: json.clone(),
    });
    let model = json["model"].as_str().unwrap_or("").to_string();
    let seen = {
        let mut counts = st.counts.lock().unwrap();
        let n = counts.entry(model.clone()).or_insert(0);
        *n += 1;
        *n
    };
    let first_n =
        |prefix: &str| model.strip_prefix(prefix).and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| seen <= n);
    if first_n("flaky-") {
        return (json, Some((StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response()));
    }
    if first_n("garbled-") {
        return (json, Some((StatusCode::OK, [("content-type", "application/json")], "{\"data\": [").into_response()));
    }
    let failure = match model.as_str() {
        "fail-500" => Some((StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response()),
        "malformed" => {
            Some((StatusCode::OK, [("content-type", "application/json")], "{\"choices\": [").into_response())
        }
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

async fn chat(State(st): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, failure) = record_and_misbehave(&st, &uri, &headers, &body).await;
    if let Some(r) = failure {
        return r;
    }
    if req["model"] == "no-choices" {
        return axum::Json(json!({"id": "x", "object": "chat.completion", "usage": {"prompt_tokens": 1}}))
            .into_response();
    }
    if let Some(behaviour) = req["model"].as_str().and_then(|m| m.strip_prefix("agent-")) {
        return agent(behaviour, &req).await;
    }
    let system = req["messages"][0]["content"].as_str().unwrap_or_default();
    let user = req["messages"][1]["content"].as_str().unwrap_or_default();
    let content = if req["model"] == "junk" {
        JUNK_CONTENT.to_string()
    } else if system.starts_with("You extract facts") {
        extracted(user)
    } else if system.starts_with("You judge facts") {
        judged(user)
    } else {
        OK_CONTENT.to_string()
    };
    axum::Json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": req["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 3, "total_tokens": 53},
    }))
    .into_response()
}

/// The tool-calling behaviours (`agent-*`).
async fn agent(behaviour: &str, req: &Value) -> Response {
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let first_tool = req["tools"][0]["function"]["name"].as_str().map(str::to_string);
    let last_user =
        messages.iter().rev().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()).unwrap_or("");
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let call = |name: &str, args: Value| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{}", messages.len()), "type": "function", "function": {"name": name, "arguments": args.to_string()}}
        ]})
    };
    let message = match behaviour {
        "first-tool" => match (&first_tool, last["role"].as_str()) {
            (_, Some("tool")) => {
                json!({"role": "assistant", "content": format!("Answer: {}", last["content"].as_str().unwrap_or(""))})
            }
            (Some(tool), _) => call(tool, json!({"inquiry": last_user})),
            (None, _) => json!({"role": "assistant", "content": "Answer: no tools"}),
        },
        "remember" => match last["role"].as_str() {
            Some("tool") => {
                json!({"role": "assistant", "content": format!("Answer: {}", last["content"].as_str().unwrap_or(""))})
            }
            _ => call(
                "remember",
                json!({"subject": "Person:zed", "predicate": "likes", "object": "Thing:jazz", "namespace": "elsewhere"}),
            ),
        },
        "loop" => call(first_tool.as_deref().unwrap_or("nothing"), json!({"inquiry": "again"})),
        "slow-loop" => {
            tokio::time::sleep(SLOW_STEP).await;
            call(first_tool.as_deref().unwrap_or("nothing"), json!({"inquiry": "again"}))
        }
        other => json!({"role": "assistant", "content": format!("unknown agent behaviour {other}")}),
    };
    axum::Json(json!({
        "id": "chatcmpl-agent",
        "object": "chat.completion",
        "model": req["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }))
    .into_response()
}

async fn embeddings(State(st): State<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let (req, failure) = record_and_misbehave(&st, &uri, &headers, &body).await;
    if let Some(r) = failure {
        return r;
    }
    if req["model"] == "no-choices" {
        return axum::Json(json!({"object": "list"})).into_response();
    }
    let inputs = inputs_of(&req);
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
