//! Starting the service over a store, and stopping what it runs in the
//! background: the search indexer and the embedding worker (both follow the
//! store's change log), the connectors' schedule and the monitor.

use super::{Parts, Service};
use crate::auth::Auth;
use crate::config::Config;
use crate::memory::Memory;
use crate::metrics::Metrics;
use crate::store::MemoryStore;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

fn failed(what: &str) -> impl FnOnce(anyhow::Error) -> StartError + '_ {
    move |e| StartError(format!("{what}: {e:#}"))
}

/// What the service runs in the background, stopped in order by [`Background::stop`].
pub struct Background {
    store: Arc<dyn MemoryStore>,
    indexer: crate::search::IndexerHandle,
    embedder: Option<crate::embed::WorkerHandle>,
    schedule: JoinHandle<()>,
    monitor: Option<JoinHandle<()>>,
}

impl Service {
    /// Starts the service over `store` as `cfg` says. Its background work
    /// ends when `stop` turns true; then call [`Background::stop`].
    pub async fn start(
        cfg: &Config,
        store: Arc<dyn MemoryStore>,
        metrics: Arc<Metrics>,
        stop: watch::Receiver<bool>,
    ) -> Result<(Service, Background), StartError> {
        let memory = Memory::new(Arc::clone(&store));
        let (mut search, indexer) = crate::search::Search::start(&cfg.data_dir, &memory, Some(metrics.indexer()))
            .map_err(failed("cannot open the search index"))?;
        // The embeddings endpoint is the operator's, but it is called under the
        // same outbound policy as every other.
        let llm = Arc::new(crate::llm::Client::new(cfg.outbound.clone()));
        let embedder = match &cfg.embeddings {
            None => {
                tracing::info!("embeddings off (no [embeddings] base_url and model): search uses full text and the graph");
                None
            }
            Some(e) => {
                tracing::info!(
                    base_url = %e.base_url,
                    model = %e.model,
                    batch_size = e.batch_size,
                    key = if e.api_key.is_some() { "set" } else { "none" },
                    "embeddings on"
                );
                let (ranker, worker) = crate::embed::start(e, &memory, Arc::clone(&llm), Some(metrics.embedder()))
                    .map_err(failed("cannot start the embedding worker"))?;
                search = search.with_ranker(ranker);
                Some(worker)
            }
        };
        let connectors = Arc::new(crate::connectors::schedule::Runtime::new(
            cfg.outbound.clone(),
            cfg.connectors.pull,
            cfg.connectors.bounds,
            cfg.connectors.min_every_secs,
        ));
        let scheduled = {
            let (rt, store) = (Arc::clone(&connectors), Arc::clone(&store));
            tokio::task::spawn_blocking(move || crate::connectors::schedule::load(&rt, &*store))
                .await
                .map_err(|e| StartError(format!("cannot read the connectors' schedules: {e}")))?
                .map_err(|e| StartError(format!("cannot read the connectors' schedules: {e}")))?
        };
        if scheduled > 0 {
            tracing::info!(connectors = scheduled, "scheduled pulls loaded");
        }
        let schedule =
            tokio::spawn(crate::connectors::schedule::run(Arc::clone(&connectors), memory.clone(), stop.clone()));
        let agents = {
            let dir = cfg.agents_dir.clone();
            let (registry, report) = tokio::task::spawn_blocking(move || crate::agents::Registry::new(dir))
                .await
                .map_err(|e| StartError(format!("cannot read the agent networks: {e}")))?;
            report.log();
            registry
        };
        let monitor = crate::monitor::Monitor::new(cfg.monitor.clone());
        // Alert evaluation and scheduled reports, every [monitor] interval_secs.
        let monitor_task = crate::monitor::scheduler::start(memory.clone(), monitor.clone(), stop.clone());
        let service = Service::new(Parts {
            agents,
            memory_llm: cfg.memory_llm.clone().map(Arc::new),
            connectors,
            memory,
            auth: Arc::new(Auth::new(&cfg.auth)),
            limits: cfg.limits.clone(),
            metrics,
            search,
            shutdown: stop,
            llm,
            monitor,
        });
        Ok((service, Background { store, indexer, embedder, schedule, monitor: monitor_task }))
    }
}

impl Background {
    /// Finishes the background work once `stop` is true and the surfaces
    /// are done: the monitor's pass, the schedule, the embeddings and the
    /// search index catch up and stop, then the store finishes its queued
    /// writes and closes.
    pub async fn stop(self) {
        if let Some(task) = self.monitor {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "monitor task failed");
            }
        }
        let _ = self.schedule.await;
        if let Some(worker) = self.embedder {
            tracing::info!("stopping the embedding worker");
            worker.stop().await;
        }
        tracing::info!("finishing the search index");
        self.indexer.stop().await;
        tracing::info!("finishing queued writes");
        let store = self.store;
        if let Err(e) = tokio::task::spawn_blocking(move || store.close()).await {
            tracing::error!(error = %e, "closing the store failed");
        }
    }
}
