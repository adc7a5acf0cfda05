//! The NeuroSan-compatible agent server: neuro-san's HTTP API (and, to come,
//! its gRPC services) over the agent networks of `crate::agents`.
//!
//! - [`wire`]: the chat messages as they travel (the API's JSON).
//! - [`turn`]: one chat turn, run once for HTTP and gRPC.
//! - [`commands`]: the grammar of the model-free `memory` front man.
//! - [`http`]: the `/api/v1` routes.

pub mod commands;
pub mod http;
pub mod turn;
pub mod wire;

/// neuro-san's OpenAPI document, served at `/api/v1/docs`.
pub const SPEC: &str = include_str!("../../api/neuro-san.openapi.json");
