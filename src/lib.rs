//! # tempora
//!
//! The tempora service: configuration, the memory layer every surface calls,
//! and one thin module per wire surface. The bitemporal engine itself is the
//! `tempora-storage` crate.

pub mod agents;
pub mod auth;
pub mod backup;
pub mod civil;
pub mod config;
pub mod connectors;
pub mod digest;
pub mod embed;
pub mod grpc;
pub mod heap;
pub mod http;
pub mod http_threads;
pub mod json;
pub mod llm;
pub mod neurodock;
pub mod memory;
pub mod metrics;
pub mod monitor;
pub mod outbound;
pub mod recall;
pub mod search;
pub mod server;
pub mod service;
pub mod store;
