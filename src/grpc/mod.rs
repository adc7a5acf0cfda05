//! neuro-san's gRPC API on the gRPC listener (`--grpc-addr`, default
//! `127.0.0.1:30011`):
//!
//! - `ConciergeService/List` at
//!   `/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/List`;
//! - the agent service routed by agent name:
//!   `/{agent_name}.AgentService/{Function|Connectivity|StreamingChat}`
//!   (names may contain `/`; an unknown network answers UNIMPLEMENTED);
//! - `grpc.health.v1.Health` and server reflection (`grpc.reflection.v1`
//!   and `v1alpha`).
//!
//! The messages are the project's own protos (`proto/neuro_san/...`,
//! compiled by `build.rs`). The answers are those of the HTTP routes, and a
//! chat turn is the same [`crate::service::chat::turn`]. The caller is resolved
//! from the metadata exactly as over HTTP (`authorization: Bearer <key>`,
//! `x-tempora-tenant` for admins); health and reflection need no key.

pub mod convert;
pub mod error;
pub mod routing;
pub mod server;
pub mod structs;

/// The generated messages (and client stubs), one module per proto package.
pub mod pb {
    pub mod mime_data {
        include!(concat!(env!("OUT_DIR"), "/dev.cognizant_ai.neuro_san.api.grpc.mime_data.rs"));
    }
    pub mod chat {
        include!(concat!(env!("OUT_DIR"), "/dev.cognizant_ai.neuro_san.api.grpc.chat.rs"));
    }
    pub mod concierge {
        include!(concat!(env!("OUT_DIR"), "/dev.cognizant_ai.neuro_san.api.grpc.concierge.rs"));
    }
    pub mod agent {
        include!(concat!(env!("OUT_DIR"), "/dev.cognizant_ai.neuro_san.api.grpc.agent.rs"));
    }
}

/// The encoded `FileDescriptorSet` of the protos (with their imports), for
/// reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/neuro_san_descriptor.bin"));

pub use routing::{AGENT_SERVICE, CONCIERGE_SERVICE};
pub use server::serve;

