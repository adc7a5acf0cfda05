//! Starting and stopping the service.

use crate::config::{Config, DurabilitySetting, Listen, StorageBackendSetting};
use crate::http::{head_errors, AppState, Shared};
use crate::service::Service;
use crate::metrics::Metrics;
use anyhow::{Context, Result};
use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;
use crate::store::{embedded, MemoryStore};
use tokio::sync::watch;

/// Opens the store the configuration names.
pub fn open_store(cfg: &Config) -> Result<Arc<dyn MemoryStore>> {
    if let crate::config::StoreSetting::Postgres(url) = &cfg.store {
        let store = crate::store::postgres::open(url.secret())
            .with_context(|| format!("cannot open the PostgreSQL store at {url}"))?;
        return Ok(store);
    }
    let options = embedded::Options {
        durable: matches!(cfg.durability, DurabilitySetting::Durable),
        min_free_bytes: cfg.limits.min_free_disk_bytes,
        cache_bytes: cfg.limits.storage_cache_bytes,
        checkpoint_bytes: cfg.limits.storage_checkpoint_bytes,
        warm_cache: cfg.limits.storage_warm_cache,
        redb: matches!(cfg.storage_backend, StorageBackendSetting::Redb),
    };
    let store = embedded::open(&cfg.data_dir, &options)
        .with_context(|| format!("cannot open data directory {}", cfg.data_dir.display()))?;
    Ok(store)
}

/// Runs the service until `shutdown` resolves: binds the listeners, serves,
/// then drains in-flight requests, ends open streams, finishes queued writes,
/// syncs and returns.
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
    let store = open_store(&cfg)?;
    let (tx, at) = store.last_tx();
    let sse_subscribers = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let metrics = Arc::new(Metrics::new(Arc::clone(&sse_subscribers)));
    let (service, background) = Service::start(&cfg, Arc::clone(&store), metrics, stop_rx.clone()).await?;
    let hangup_task = tokio::spawn(reload_on_hangup(service.clone(), stop_rx));
    let state = AppState::new(Shared {
        service: service.clone(),
        sse_subscribers,
        in_flight: Arc::new(tokio::sync::Semaphore::new(cfg.limits.max_in_flight)),
        mcp_allowed_origins: Arc::new(cfg.mcp_allowed_origins.clone()),
    });

    // The listener and the threads its connections are served on, started
    // before the listening line so whoever reads it finds them.
    let http = match cfg.http_addr {
        Listen::Off => None,
        Listen::At(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for HTTP on {addr}"))?;
            let threads = crate::http_threads::HttpThreads::start(state.limits.http_threads)
                .context("cannot start the HTTP threads")?;
            Some((listener, threads))
        }
    };
    let http_local = http.as_ref().map(|(l, _)| l.local_addr()).transpose()?;
    let grpc = match cfg.grpc_addr {
        Listen::Off => None,
        Listen::At(addr) => Some(
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen for gRPC on {addr}"))?,
        ),
    };
    let grpc_local = grpc.as_ref().map(|l| l.local_addr()).transpose()?;
    let tcp = match cfg.tcp_addr {
        Listen::Off => None,
        Listen::At(addr) => Some(
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen for TCP on {addr}"))?,
        ),
    };
    let tcp_local = tcp.as_ref().map(|l| l.local_addr()).transpose()?;
    tracing::info!(
        data_dir = %cfg.data_dir.display(),
        format_found = store.format_found(),
        last_tx = tx,
        last_recorded_at = at,
        tenants = store.tenants().len(),
        mode = if service.is_open() { "open" } else { "keyed" },
        http = %http_local.map(|a| a.to_string()).unwrap_or_else(|| "off".into()),
        grpc = %grpc_local.map(|a| a.to_string()).unwrap_or_else(|| "off".into()),
        tcp = %tcp_local.map(|a| a.to_string()).unwrap_or_else(|| "off".into()),
        "tempora started"
    );
    if let Some(a) = http_local {
        // Tests and scripts read the bound address (port 0 picks a free one).
        tracing::info!("http listening on {a}");
    }
    if let Some(a) = grpc_local {
        tracing::info!("grpc listening on {a}");
    }
    if let Some(a) = tcp_local {
        tracing::info!("tcp listening on {a}");
    }

    let server = http.map(|(listener, threads)| {
        let app = crate::http::router(state.clone());
        tokio::spawn(serve_http(listener, threads, app, state.limits.clone(), stop_tx.subscribe()))
    });

    let grpc_server = grpc.map(|listener| {
        let mut stop = stop_tx.subscribe();
        let stopping = async move {
            let _ = stop.wait_for(|stop| *stop).await;
        };
        tokio::spawn(crate::grpc::serve(listener, service.clone(), state.in_flight.clone(), stopping))
    });

    let tcp_server =
        tcp.map(|listener| tokio::spawn(crate::neurodock::serve(listener, service.clone(), stop_tx.subscribe())));

    shutdown.await;
    tracing::info!("shutting down: draining requests");
    let _ = stop_tx.send(true);
    // The listeners drain at once, within the same 30 s.
    let drain_deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    if let Some(server) = server {
        match tokio::time::timeout_at(drain_deadline, server).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "http server task failed"),
            Err(_) => tracing::warn!("requests still running after 30 s; stopping anyway"),
        }
    }
    if let Some(server) = grpc_server {
        match tokio::time::timeout_at(drain_deadline, server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::error!(error = %e, "grpc server error"),
            Ok(Err(e)) => tracing::error!(error = %e, "grpc server task failed"),
            Err(_) => tracing::warn!("grpc calls still running after 30 s; stopping anyway"),
        }
    }
    if let Some(server) = tcp_server {
        match tokio::time::timeout_at(drain_deadline, server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::error!(error = %e, "tcp server error"),
            Ok(Err(e)) => tracing::error!(error = %e, "tcp server task failed"),
            Err(_) => tracing::warn!("tcp connections still open after 30 s; stopping anyway"),
        }
    }
    drop(state);
    drop(service);
    let _ = hangup_task.await;
    background.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// The HTTP listener. hyper is driven directly (not through `axum::serve`)
/// because the defences against slow and hostile clients are settings of
/// hyper's connection builder that `axum::serve` does not expose: a request
/// head must arrive within `header_read_timeout_secs` (the same timer closes
/// a kept-alive connection that sits idle, and one that never sends a
/// byte), and it may hold at most `max_headers` headers in `max_header_bytes`
/// (431 beyond). Each accepted connection is served on one of `threads`
/// (`crate::http_threads`: an event loop per thread). The answers hyper
/// writes itself for a head it cannot parse or that is over the limits get
/// the error envelope on the way out ([`head_errors`]). On `stop` the
/// listener closes, every connection finishes its in-flight request and
/// closes, the threads stop, then this returns.
async fn serve_http(
    listener: tokio::net::TcpListener,
    threads: crate::http_threads::HttpThreads,
    app: axum::Router,
    limits: crate::config::Limits,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_read_timeout_secs as u64))
        .max_headers(limits.max_headers)
        .max_header_size(limits.max_header_bytes)
        // The read buffer must hold a whole head; hyper's floor is 8 KiB.
        .max_buf_size(limits.max_header_bytes.max(8192) + 1024);
    let envelopes = Arc::new(head_errors::Envelopes::new(limits.max_headers, limits.max_header_bytes));
    // Each connection task holds a receiver; `closed()` resolves when the
    // last one is gone.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Streamed answers (chat turns, SSE) go out in several writes; with
        // Nagle's algorithm on, a write after the first waits for the
        // client's delayed ACK (~40 ms on a kept-alive connection).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let writing = head_errors::Writing::default();
        let service = hyper_util::service::TowerToHyperService::new(
            tower::ServiceExt::<hyper::Request<hyper::body::Incoming>>::map_response(
                app.clone(),
                head_errors::track(&writing),
            ),
        );
        let builder = builder.clone();
        let envelopes = Arc::clone(&envelopes);
        let mut stop = stop.clone();
        let open = open_rx.clone();
        let handed = threads.hand(tcp, move |tcp| async move {
            let io = head_errors::HeadErrorIo::new(tcp, envelopes, writing);
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(io), service).with_upgrades();
            tokio::pin!(conn);
            let stopping = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            let finished = tokio::select! {
                r = conn.as_mut() => Some(r),
                _ = stopping => None,
            };
            let result = match finished {
                Some(r) => r,
                None => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::trace!(error = %e, "connection ended");
            }
            drop(open);
        });
        if let Err(e) = handed {
            tracing::debug!(error = %e, "cannot hand a connection to an HTTP thread");
        }
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
    // Every connection has closed; what requests spawned gets a moment more.
    let _ = tokio::task::spawn_blocking(move || threads.stop()).await;
}

/// SIGHUP reloads the agent networks (the files are read again and the new
/// set swapped in whole; see `crate::agents::registry`).
async fn reload_on_hangup(service: Service, mut stop: watch::Receiver<bool>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
        loop {
            let hangup = tokio::select! {
                got = hup.recv() => got.is_some(),
                _ = stop.wait_for(|s| *s) => false,
            };
            if !hangup {
                return;
            }
            let s = service.clone();
            match tokio::task::spawn_blocking(move || s.reload_networks()).await {
                Ok(report) => report.log(),
                Err(e) => tracing::error!(error = %e, "reloading the agent networks failed"),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (service, stop.wait_for(|s| *s).await);
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled, so a signal that arrives
/// while the server is still starting is not lost (and does not kill it).
/// Call it inside the runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let (mut term, mut int) = {
        use tokio::signal::unix::{signal, SignalKind};
        (signal(SignalKind::terminate()).ok(), signal(SignalKind::interrupt()).ok())
    };
    async move {
        #[cfg(unix)]
        {
            let term = async {
                match term.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let int = async {
                match int.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = term => {},
                _ = int => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
