//! The NeuroSan-compatible agent server: neuro-san's HTTP API and its gRPC
//! services over the agent networks of `crate::agents`.
//!
//! - [`wire`]: the chat messages as they travel (the API's JSON).
//! - [`turn`]: one chat turn, run once for HTTP and gRPC.
//! - [`commands`]: the grammar of the model-free `memory` front man.
//! - [`http`]: the `/api/v1` routes.
//! - [`grpc`]: `ConciergeService`, the agent service routed by agent name
//!   (`/{agent}.AgentService/...`), health and reflection on the gRPC
//!   listener; protobuf converted to and from [`wire`].

pub mod commands;
pub mod grpc;
pub mod http;
pub mod turn;
pub mod wire;

/// neuro-san's OpenAPI document, served at `/api/v1/docs`.
pub const SPEC: &str = include_str!("../../api/neuro-san.openapi.json");
