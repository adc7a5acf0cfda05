//! The MCP endpoint (`tempora::http::mcp::transport::handle`): one raw request
//! body, as `POST /mcp` with `Content-Type: application/json`, through the
//! transport's checks, `rmcp`'s JSON-RPC handling and the tool calls into a
//! real service (store, search index) on a temporary directory opened
//! once. The answer must always be one JSON body.
#![no_main]

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use libfuzzer_sys::fuzz_target;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};
use tempora::config::{Config, DurabilitySetting, Overrides};
use tempora::http::{AppState, Shared};
use tempora::http::mcp::transport::{handle, Endpoint};

/// Held by the static for the life of the process (statics are never
/// dropped, so the temporary directory stays behind; it is small).
struct World {
    rt: tokio::runtime::Runtime,
    endpoint: Endpoint,
    max_body: usize,
    _background: tempora::service::Background,
    _stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

/// The service's state as `server::run` builds it, without listeners.
fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let dir = tempfile::tempdir().expect("a temp dir");
        let flags = Overrides {
            data_dir: Some(dir.path().to_path_buf()),
            durability: Some(DurabilitySetting::Relaxed),
            ..Overrides::default()
        };
        let cfg = Config::load(None, &|_| None, flags).expect("the default configuration");
        let (endpoint, background, stop_tx) = rt.block_on(async {
            let store = tempora::server::open_store(&cfg).expect("the store opens");
            let sse = Arc::new(AtomicUsize::new(0));
            let metrics = Arc::new(tempora::metrics::Metrics::new(Arc::clone(&sse)));
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            let (service, background) =
                tempora::service::Service::start(&cfg, store, metrics, stop_rx).await.expect("the service starts");
            let state = AppState::new(Shared {
                service,
                sse_subscribers: sse,
                in_flight: Arc::new(tokio::sync::Semaphore::new(cfg.limits.max_in_flight)),
                mcp_allowed_origins: Arc::new(Vec::new()),
            });
            (Endpoint::new(state), background, stop_tx)
        });
        World { rt, endpoint, max_body: cfg.limits.max_body_bytes, _background: background, _stop: stop_tx, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let req = Request::post("/mcp")
        .header(CONTENT_TYPE, "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(Bytes::copy_from_slice(data)))
        .expect("a request");
    let (status, body) = w.rt.block_on(async {
        let resp = handle(State(w.endpoint.clone()), req).await;
        let status = resp.status();
        (status, axum::body::to_bytes(resp.into_body(), w.max_body * 4).await.expect("the answer is read"))
    });
    // A notification is answered 202 with no body; everything else is JSON.
    if !body.is_empty() {
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{status}: {e}"));
        assert!(answer.is_object(), "{status}: {answer}");
    }
    assert!(!status.is_server_error(), "{status}: {}", String::from_utf8_lossy(&body));
});
