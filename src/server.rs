//! Starting and stopping the service.

use crate::config::{Config, DurabilitySetting};
use anyhow::{Context, Result};
use std::future::Future;
use std::sync::Arc;
use tempora_storage::{Durability, Engine, EngineConfig};

/// Opens the engine the configuration names.
pub fn open_engine(cfg: &Config) -> Result<Arc<Engine>> {
    let durability = match cfg.durability {
        DurabilitySetting::Durable => Durability::Durable,
        DurabilitySetting::Relaxed => Durability::Relaxed,
    };
    let engine = Engine::open(EngineConfig::at(&cfg.data_dir).durability(durability))
        .with_context(|| format!("cannot open data directory {}", cfg.data_dir.display()))?;
    Ok(Arc::new(engine))
}

/// Runs the service until `shutdown` resolves, then closes the engine (which
/// finishes queued writes and syncs).
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> Result<()> {
    let engine = open_engine(&cfg)?;
    let (tx, at) = engine.last_tx();
    tracing::info!(
        data_dir = %cfg.data_dir.display(),
        format_found = engine.format_found(),
        last_tx = tx,
        last_recorded_at = at,
        tenants = engine.tenants().len(),
        http = %cfg.http_addr,
        grpc = %cfg.grpc_addr,
        tcp = %cfg.tcp_addr,
        "tempora started"
    );
    shutdown.await;
    tracing::info!("shutting down: finishing queued writes");
    let closing = Arc::clone(&engine);
    tokio::task::spawn_blocking(move || closing.close()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
