//! Agent conversations: chat turns on the agent networks of
//! `crate::agents`, for the NeuroSan API (HTTP and gRPC), the Agent
//! Protocol's steps and NeuroDock's queries alike.
//!
//! A [`turn`] continues the conversation its `chat_context` carries
//! ([`conversation`]), runs the front man (the model-free grammar of
//! [`frontman`] for `memory`, the tool-calling loop of [`think`] for agents
//! with a model), stores the exchange as facts, and streams the messages
//! back through [`emit`]'s filter.
//!
//! - [`wire`]: the chat messages (neuro-san's shapes, which every surface
//!   that chats converts to and from).
//! - [`commands`]: the grammar of the model-free `memory` front man.
//! - [`tools`]: the `memory` network's tools, run for a tenant.

/// The agent networks chats run on, as the NeuroSan API describes them.
pub use crate::agents::{AgentNetwork, ConnectivityInfo, FunctionSpec, NetworkInfo};

pub mod commands;
pub mod conversation;
pub mod emit;
pub mod frontman;
pub mod think;
pub mod tools;
pub mod turn;
pub mod wire;
