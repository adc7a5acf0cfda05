//! Agent Protocol artifact uploads: the multipart body of
//! `POST /ap/v1/agent/tasks/{task_id}/artifacts`, through
//! `tempora::http::agent_protocol::upload::parse_upload`: the handler's own
//! `Multipart` extraction and `read_upload` (fields, file name and relative
//! path checks, chunking, the size limit).
//!
//! The input's first line is the `Content-Type`; the rest is the body.
#![no_main]

use axum::body::Bytes;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tempora::http::agent_protocol::upload as artifacts;
use tempora::service::tasks::artifacts::CHUNK;

/// Small, so that the limit is reached by inputs the fuzzer can write.
const MAX: usize = 4096;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("a runtime"))
}

fuzz_target!(|data: &[u8]| {
    let (ctype, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let ctype = ctype.strip_suffix(b"\r").unwrap_or(ctype);
    let got = runtime().block_on(artifacts::parse_upload(ctype, Bytes::copy_from_slice(body), MAX));
    if let Ok(up) = got {
        let size: usize = up.chunks.iter().map(Vec::len).sum();
        assert!(size <= MAX);
        assert!(up.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
        assert!(!up.file_name.is_empty() && !up.file_name.contains(['/', '\\']));
        if let Some(p) = &up.relative_path {
            assert!(!p.split(['/', '\\']).any(|c| c == ".."));
        }
        let _ = artifacts::content_disposition(&up.file_name);
    }
});
