//! The NeuroSan-compatible agent server: neuro-san's HTTP API and its gRPC
//! services over the agent networks of `crate::agents`.
//!
//! A write and a read through it: `POST /api/v1/memory/streaming_chat`
//! ([`http`]) or `/memory.AgentService/StreamingChat` ([`grpc`]) starts a
//! [`turn`]; the turn continues the conversation its
//! `chat_context` carries ([`conversation`]), runs the front man (the
//! model-free grammar of [`frontman`] for `memory`, the tool-calling loop of
//! [`think`] for agents with a model), stores the exchange as facts, and
//! streams the messages back through [`emit`]'s filter.
//!
//! - [`wire`]: the chat messages as they travel (the API's JSON).
//! - [`commands`]: the grammar of the model-free `memory` front man.
//! - [`tools`]: the `memory` network's tools, run for a tenant.
//! - [`grpc`]: the same over gRPC: `ConciergeService`, the agent service
//!   routed by agent name (`/{agent}.AgentService/...`), health and
//!   reflection on the gRPC listener; protobuf converted to and from
//!   [`wire`], turns started with the same [`turn::start`].

pub mod grpc;
pub mod http;

/// neuro-san's OpenAPI document, served at `/api/v1/docs`.
pub const SPEC: &str = include_str!("../../api/neuro-san.openapi.json");
