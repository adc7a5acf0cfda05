//! The NeuroSan-compatible agent server: neuro-san's HTTP API (and, to come,
//! its gRPC services) over the agent networks of `crate::agents`.
//!
//! Served now: `GET /api/v1/list`, `GET /api/v1/{agent}/function`,
//! `GET /api/v1/{agent}/connectivity` and the API's own document at
//! `GET /api/v1/docs`. Networks reload on SIGHUP. `streaming_chat` (the
//! agents' turns, stored as conversations in memory) is not served yet;
//! `commands` is the grammar its model-free `memory` front man will read.

pub mod commands;
pub mod http;

/// neuro-san's OpenAPI document, served at `/api/v1/docs`.
pub const SPEC: &str = include_str!("../../api/neuro-san.openapi.json");
