//! NeuroDock packet decoding on the TCP stream (`tempora::neurodock::framing::Decoder`),
//! raw and gzip, then the packet checks the session applies
//! (`packets::parse`, `client_tools::check_tool`, `client_tools::check_args`,
//! `packets::compose`).
//!
//! The first input byte picks how the rest is sent: as it is, or as the
//! content of one gzip member (so the fuzzer reaches the JSON inside gzip,
//! which it could not by guessing deflate streams), and where the stream is
//! cut into writes. The same stream decoded in one piece and in pieces must
//! give the same packets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use std::io::Write;
use tempora::neurodock::framing::{Decoder, Item};
use tempora::neurodock::packets;
use tempora::service::client_tools;

fn gzip(content: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(content).expect("writing to a Vec");
    enc.finish().expect("writing to a Vec")
}

/// Every item of `stream` written in pieces of `step` bytes, up to the first
/// fatal error (after which the connection is closed).
fn decode(stream: &[u8], step: usize, max_packet: usize, max_decoded: usize) -> Vec<Item> {
    let mut d = Decoder::new(max_packet, max_decoded);
    let mut items = Vec::new();
    for piece in stream.chunks(step.max(1)) {
        d.push(piece);
        while let Some(item) = d.next_item() {
            let fatal = matches!(item, Item::Error { fatal: true, .. });
            items.push(item);
            if fatal {
                return items;
            }
        }
    }
    items
}

fn session_checks(value: Value) {
    let Ok(p) = packets::parse(value) else { return };
    match p.kind.as_str() {
        packets::ADD_TOOL => {
            if let Ok(checked) = client_tools::check_tool(&p.data) {
                if let client_tools::Registration::Client(spec) = checked.registration {
                    let args = p.data.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default();
                    let _ = client_tools::check_args(&spec, &args);
                }
            }
        }
        _ => {
            if let Some(Value::String(m)) = p.data.get("message") {
                let _ = packets::compose(m, &[json!({"tool": "a", "result": 1}), json!("x")]);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let stream = if mode & 1 == 1 { gzip(rest) } else { rest.to_vec() };
    let step = (mode >> 1) as usize;
    let whole = decode(&stream, stream.len(), 4096, 16 * 1024);
    if step > 0 {
        assert_eq!(decode(&stream, step, 4096, 16 * 1024), whole, "cut every {step} bytes");
    }
    for item in whole {
        if let Item::Packet { value, .. } = item {
            session_checks(value);
        }
    }
    // The raw input too, with the server's own limits.
    for item in
        decode(data, data.len(), tempora::neurodock::framing::MAX_PACKET, tempora::neurodock::framing::MAX_DECODED)
    {
        if let Item::Packet { value, .. } = item {
            session_checks(value);
        }
    }
});
