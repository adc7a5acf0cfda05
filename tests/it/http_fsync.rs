//! A durable write is on the drive before the server acknowledges it, not only
//! in the kernel's page cache: with `strace` attached to the real server, every
//! acknowledged write is preceded by an `fdatasync` of the store's log that
//! completed after the previous acknowledgement: `DATA_DIR/tempora.journal` for a
//! redb store (the default), `DATA_DIR/db` (sled's log) for a sled store.
//!
//! sled 0.34's own flush stops at `sync_file_range`, which survives the
//! process being killed but not the machine losing power (the file's size and
//! the drive's cache are not flushed); `SledKv::sync` adds the `fdatasync`.
//! The kill -9 test cannot see the difference, so this test watches the calls.
//!
//! Needs `strace` (scripts/test installs it). Attaching needs ptrace rights
//! over the server: root, or `kernel.yama.ptrace_scope` 0.

use crate::common::*;
use serde_json::json;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sequential writes checked, after the warm-up one.
const WRITES: usize = 5;

/// Where in the trace the store's file (its path ending in `file`) finished
/// an `fdatasync`, and where a `201` response was written; both as line numbers.
fn syncs_and_acks(trace: &str, file: &str) -> (Vec<usize>, Vec<usize>) {
    let file = format!("{file}>");
    let (mut syncs, mut acks) = (Vec::new(), Vec::new());
    // With `-f` a call that blocks is split: `PID fdatasync(9</dir/db> <unfinished ...>`,
    // later `PID <... fdatasync resumed>) = 0`.
    let mut pending: HashMap<&str, bool> = HashMap::new();
    for (i, line) in trace.lines().enumerate() {
        let pid = line.split_whitespace().next().unwrap_or("");
        let on_log = line.contains(&file);
        if line.contains("fdatasync(") {
            if line.contains("<unfinished") {
                pending.insert(pid, on_log);
            } else if on_log && line.trim_end().ends_with("= 0") {
                syncs.push(i);
            }
        } else if line.contains("<... fdatasync resumed>") {
            if pending.remove(pid) == Some(true) && line.trim_end().ends_with("= 0") {
                syncs.push(i);
            }
        } else if line.contains("HTTP/1.1 201") {
            acks.push(i);
        }
    }
    (syncs, acks)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_write_to_a_redb_store_was_fdatasynced_first() {
    engine_only!();
    acknowledged_writes_were_fdatasynced_first("redb", "/tempora.journal").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_acknowledged_write_to_a_sled_store_was_fdatasynced_first() {
    engine_only!();
    acknowledged_writes_were_fdatasynced_first("sled", "/db").await;
}

async fn acknowledged_writes_were_fdatasynced_first(backend: &str, file: &str) {
    let (_dir, server) = fresh(&[("TEMPORA_STORAGE_BACKEND", backend)]);
    let api = Api::new(&server, None);
    let trace_file = tempfile::NamedTempFile::new().unwrap();
    let mut strace = Command::new("strace")
        .args(["-f", "-y", "-s", "48", "-e", "trace=fdatasync,fsync,write,writev,sendto,sendmsg", "-o"])
        .arg(trace_file.path())
        .args(["-p", &server.pid().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace is needed for this test (scripts/test installs it)");
    let trace = || std::fs::read_to_string(trace_file.path()).unwrap_or_default();

    // Attached once a write's acknowledgement shows up in the trace.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    while !trace().contains("HTTP/1.1 201") {
        assert!(Instant::now() < deadline, "strace saw no response; can it attach (ptrace rights)?\n{}", trace());
        n += 1;
        let body = json!({"subject": format!("Warm:{n}"), "predicate": "p", "object": n});
        api.post("/api/facts", &body).await.expect(201);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = syncs_and_acks(&trace(), file).1.len();
    for i in 0..WRITES {
        let body = json!({"subject": format!("Durable:{i}"), "predicate": "p", "object": i});
        api.post("/api/facts", &body).await.expect(201);
    }
    // Let the trace catch up with the last response, then detach.
    let deadline = Instant::now() + Duration::from_secs(10);
    while syncs_and_acks(&trace(), file).1.len() < before + WRITES && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    strace.wait().unwrap();

    let trace = trace();
    let (syncs, acks) = syncs_and_acks(&trace, file);
    assert_eq!(acks.len(), before + WRITES, "responses seen in the trace:\n{trace}");
    for w in before..acks.len() {
        let previous = acks[w - 1];
        assert!(
            syncs.iter().any(|s| *s > previous && *s < acks[w]),
            "write {} was acknowledged (trace line {}) with no fdatasync of the store's file since the previous \
             acknowledgement (line {previous}):\n{trace}",
            w - before,
            acks[w]
        );
    }
    server.stop_ok();
}
