//! The root crate's integration tests, in one test binary: each of them links
//! the whole server, and one binary links it once instead of once per file.
//! One module per area (`http_api`, `tenant_matrix`, ...), helpers in
//! `common`. Run one area with its module path as the filter, e.g.
//! `cargo test --test it http_api::` or `cargo test --test it tenant_matrix::`.
//!
//! No test here needs a process of its own: they drive the real `tempora`
//! binary as a child process, open stores in their own temporary
//! directories, or read files, and change no process-wide state. A test that
//! did (a global allocator, environment variables set, a signal handler)
//! would get its own file under `tests/`.

/// Ends a test of the embedded engine's own files (its data directory, its
/// backups, its cache) when the suite runs with its servers on PostgreSQL
/// (`TEMPORA_TEST_STORE=postgres`, `common::on_postgres`).
macro_rules! engine_only {
    () => {
        if crate::common::on_postgres() {
            eprintln!("skipped on PostgreSQL: a test of the embedded engine's own files");
            return;
        }
    };
}

mod common;

mod agent_protocol;
mod backup;
mod compact;
mod console;
mod format_compat;
mod hostile_clients;
mod http_alerts;
mod http_api;
mod http_connectors;
mod http_conversations;
mod http_digest;
mod http_disk_faults;
mod http_durability;
mod http_embeddings;
mod http_fsync;
mod http_overload;
mod http_recall;
mod http_reports;
mod http_search;
mod http_stream;
mod http_tenancy;
mod http_threads;
mod layering;
mod mcp_transport;
mod neurodock_tcp;
mod neurosan_chat;
mod neurosan_grpc;
mod neurosan_http;
mod openapi_doc;
mod postgres_backup;
mod postgres_replicas;
mod postgres_schema;
mod postgres_sse_resume;
mod postgres_store;
mod postgres_tls;
mod serve;
mod size;
mod storage_checkpoint;
mod storage_warm;
mod store_model;
mod store_semantics;
mod tenant_matrix;
