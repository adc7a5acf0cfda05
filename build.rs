//! Compiles the neuro-san protos of `proto/` with protox (a Rust protobuf
//! compiler, so no `protoc` is needed) into prost messages and tonic client
//! stubs, and writes the descriptor set that gRPC reflection serves.

use prost::Message;
use std::path::PathBuf;

const PROTOS: [&str; 4] = [
    "proto/neuro_san/api/grpc/mime_data.proto",
    "proto/neuro_san/api/grpc/chat.proto",
    "proto/neuro_san/api/grpc/concierge.proto",
    "proto/neuro_san/api/grpc/agent.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for p in PROTOS {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(PROTOS, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("neuro_san_descriptor.bin"), fds.encode_to_vec())?;
    // The server routes the agent service by name itself (the package in
    // the method path is the agent's name), so only messages and the
    // clients the tests use are generated.
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .compile_fds(fds)?;
    Ok(())
}
