//! Agent networks: neuro-san style definitions of cooperating LLM agents,
//! read from HOCON files listed in a manifest (docs/agents.md).
//!
//! - [`hocon`] reads the HOCON subset network files use into JSON values.
//! - [`network`] turns one file's value into a validated [`AgentNetwork`].
//! - [`registry`] loads a manifest's networks next to the built-in `memory`
//!   network and swaps them atomically on reload.
//!
//! This layer only defines and checks networks; running them is done by the
//! surfaces that serve them.

pub mod hocon;
pub mod network;
pub mod registry;

pub use network::{AgentKind, AgentNetwork, AgentSpec, ConnectivityInfo, FunctionSpec, LlmConfig, MemoryTool, ToolRef};
pub use registry::{LoadError, NetworkInfo, Registry, ReloadReport, Snapshot};
