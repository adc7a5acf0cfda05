//! # tempora
//!
//! The tempora service: configuration, the memory layer every surface calls,
//! and (in later modules) one thin module per wire surface. The bitemporal
//! engine itself is the `tempora-storage` crate.

pub mod config;
pub mod server;
