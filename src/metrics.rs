//! Prometheus metrics: requests by route and status, latency histograms,
//! facts by status, stream subscribers, and the engine's commit groups and
//! sync timings, the recall index's lag and throughput, and the embedding
//! worker's progress and failures.

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The metrics are made from constant names, help texts and labels, which
/// prometheus accepts; only a typo there can fail, at start.
const VALID: &str = "a metric of constant, valid name and labels";
use crate::store::MemoryStore;

pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    pub latency: HistogramVec,
    subscribers: IntGauge,
    facts: prometheus::IntGaugeVec,
    groups: IntGauge,
    syncs: IntGauge,
    sync_seconds: prometheus::Gauge,
    last_tx: IntGauge,
    disk_bytes: IntGauge,
    heap_bytes: prometheus::IntGaugeVec,
    cache_bytes: prometheus::IntGaugeVec,
    cache_warm_passes: IntGauge,
    sse_count: Arc<AtomicUsize>,
    search_lag: IntGauge,
    search_docs: prometheus::IntCounter,
    search_watermark: Arc<AtomicU64>,
    embed_facts: prometheus::IntCounter,
    embed_failures: IntCounterVec,
    embed_vectors: IntGauge,
    embed_lag: IntGauge,
    embed_watermark: Arc<AtomicU64>,
    embed_on: std::sync::atomic::AtomicBool,
}

impl Metrics {
    pub fn new(sse_count: Arc<AtomicUsize>) -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("tempora_http_requests_total", "HTTP requests by route, method and status"),
            &["route", "method", "status"],
        )
        .expect(VALID);
        let latency = HistogramVec::new(
            HistogramOpts::new("tempora_http_request_duration_seconds", "HTTP request latency by route")
                .buckets(vec![0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0]),
            &["route", "method"],
        )
        .expect(VALID);
        let subscribers = IntGauge::new("tempora_stream_subscribers", "Open /api/stream subscribers").expect(VALID);
        let facts = prometheus::IntGaugeVec::new(
            Opts::new("tempora_facts", "Facts by latest status, all tenants"),
            &["status"],
        )
        .expect(VALID);
        let groups = IntGauge::new("tempora_commit_groups_total", "Commit groups written").expect(VALID);
        let syncs = IntGauge::new("tempora_syncs_total", "Durability syncs (fsync) of the store").expect(VALID);
        let sync_seconds = prometheus::Gauge::new("tempora_sync_seconds_total", "Time spent in syncs").expect(VALID);
        let last_tx = IntGauge::new("tempora_last_tx", "Last committed transaction").expect(VALID);
        let disk_bytes = IntGauge::new("tempora_disk_bytes", "Bytes the store occupies on disk").expect(VALID);
        let heap_bytes = prometheus::IntGaugeVec::new(
            Opts::new(
                "tempora_heap_bytes",
                "The allocator's figures (jemalloc): allocated (held by the server), active, metadata, \
                 resident (in physical memory), retained (mapped but returned to the kernel)",
            ),
            &["kind"],
        )
        .expect(VALID);
        let cache_bytes = prometheus::IntGaugeVec::new(
            Opts::new(
                "tempora_storage_cache_bytes",
                "The storage engine's page cache (redb): used, and capacity (storage_cache_bytes); \
                 absent on sled",
            ),
            &["kind"],
        )
        .expect(VALID);
        let cache_warm_passes = IntGauge::new(
            "tempora_storage_cache_warm_passes_total",
            "Passes that read the most-read tables into the storage engine's page cache since the store opened \
             (redb, storage_warm_cache)",
        )
        .expect(VALID);
        let search_lag = IntGauge::new(
            "tempora_search_index_lag_tx",
            "Transactions committed but not yet in the recall index (last tx - index watermark)",
        )
        .expect(VALID);
        let search_docs = prometheus::IntCounter::new(
            "tempora_search_indexed_docs_total",
            "Documents written to the recall index (added or replaced)",
        )
        .expect(VALID);
        let embed_facts = prometheus::IntCounter::new(
            "tempora_embeddings_facts_total",
            "Facts embedded and their vectors stored",
        )
        .expect(VALID);
        let embed_failures = IntCounterVec::new(
            Opts::new(
                "tempora_embeddings_failures_total",
                "Failed calls to the embeddings endpoint, by stage (worker: fact batches, retried; query: a search's question)",
            ),
            &["stage"],
        )
        .expect(VALID);
        let embed_vectors = IntGauge::new("tempora_embeddings_vectors", "Fact vectors held in memory, all tenants").expect(VALID);
        let embed_lag = IntGauge::new(
            "tempora_embeddings_lag_tx",
            "Transactions committed but not yet embedded (last tx - embeddings watermark; 0 when embeddings are off)",
        )
        .expect(VALID);
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(embed_facts.clone()),
            Box::new(embed_failures.clone()),
            Box::new(embed_vectors.clone()),
            Box::new(embed_lag.clone()),
            Box::new(latency.clone()),
            Box::new(subscribers.clone()),
            Box::new(facts.clone()),
            Box::new(groups.clone()),
            Box::new(syncs.clone()),
            Box::new(sync_seconds.clone()),
            Box::new(last_tx.clone()),
            Box::new(disk_bytes.clone()),
            Box::new(heap_bytes.clone()),
            Box::new(cache_bytes.clone()),
            Box::new(cache_warm_passes.clone()),
            Box::new(search_lag.clone()),
            Box::new(search_docs.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        Metrics {
            registry,
            requests,
            latency,
            subscribers,
            facts,
            groups,
            syncs,
            sync_seconds,
            last_tx,
            disk_bytes,
            heap_bytes,
            cache_bytes,
            cache_warm_passes,
            sse_count,
            search_lag,
            search_docs,
            search_watermark: Arc::default(),
            embed_facts,
            embed_failures,
            embed_vectors,
            embed_lag,
            embed_watermark: Arc::default(),
            embed_on: Default::default(),
        }
    }

    /// The handles the embedding worker and the vector ranker report
    /// through (and the lag gauge starts following the worker).
    pub fn embedder(&self) -> crate::embed::EmbedMetrics {
        self.embed_on.store(true, Ordering::Relaxed);
        for stage in ["worker", "query"] {
            self.embed_failures.with_label_values(&[stage]);
        }
        crate::embed::EmbedMetrics {
            embedded: self.embed_facts.clone(),
            failures: self.embed_failures.clone(),
            vectors: self.embed_vectors.clone(),
            watermark: Arc::clone(&self.embed_watermark),
        }
    }

    /// The handles the recall indexer reports through.
    pub fn indexer(&self) -> crate::search::IndexerMetrics {
        crate::search::IndexerMetrics {
            docs: self.search_docs.clone(),
            watermark: Arc::clone(&self.search_watermark),
        }
    }

    /// The text exposition; gauges that mirror engine state are read now.
    pub fn render(&self, engine: &dyn MemoryStore) -> String {
        self.subscribers.set(self.sse_count.load(Ordering::Relaxed) as i64);
        let mut totals = [0u64; 4];
        for t in engine.tenants() {
            let s = engine.stats(&t);
            totals[0] += s.active;
            totals[1] += s.candidate;
            totals[2] += s.superseded;
            totals[3] += s.retracted;
        }
        for (name, v) in ["active", "candidate", "superseded", "retracted"].iter().zip(totals) {
            self.facts.with_label_values(&[name]).set(v as i64);
        }
        let io = engine.io_stats();
        self.groups.set(io.groups as i64);
        self.syncs.set(io.syncs as i64);
        self.sync_seconds.set(io.sync_micros as f64 / 1e6);
        let last_tx = engine.last_tx().0;
        self.last_tx.set(last_tx as i64);
        self.search_lag.set(last_tx.saturating_sub(self.search_watermark.load(Ordering::Relaxed)) as i64);
        if self.embed_on.load(Ordering::Relaxed) {
            self.embed_lag.set(last_tx.saturating_sub(self.embed_watermark.load(Ordering::Relaxed)) as i64);
        }
        self.disk_bytes.set(engine.size_on_disk().unwrap_or(0) as i64);
        if let Some(c) = engine.cache_fill() {
            self.cache_bytes.with_label_values(&["used"]).set(c.used as i64);
            self.cache_bytes.with_label_values(&["capacity"]).set(c.capacity as i64);
            self.cache_warm_passes.set(c.warm_passes as i64);
        }
        if let Some(h) = crate::heap::stats() {
            for (kind, v) in [
                ("allocated", h.allocated),
                ("active", h.active),
                ("metadata", h.metadata),
                ("resident", h.resident),
                ("retained", h.retained),
            ] {
                self.heap_bytes.with_label_values(&[kind]).set(v as i64);
            }
        }
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}
