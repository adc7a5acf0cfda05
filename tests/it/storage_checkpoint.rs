//! `[limits] storage_checkpoint_bytes` (env `TEMPORA_STORAGE_CHECKPOINT_BYTES`)
//! on the real server: a redb store's journal files never hold much more than
//! the setting (at most `DEFER_UP_TO` times it while a checkpoint is slow)
//! before their writes are checkpointed into the store file and the file
//! starts over, written again from its start, and a kill -9 after many
//! checkpoints loses no acknowledged write.

use crate::common::*;
use serde_json::json;
use std::path::Path;

const CHECKPOINT: u64 = 1 << 20;
const BATCHES: usize = 120;
const FACTS_PER_BATCH: usize = 100;

const FILES: [&str; 2] = ["tempora.journal", "tempora.journal.2"];

fn journal_sizes(data: &Path) -> [u64; 2] {
    FILES.map(|f| std::fs::metadata(data.join(f)).map(|m| m.len()).unwrap_or(0))
}

/// The number of the first record in each journal file (bytes 12..20: after
/// the record's length and checksum), if it holds one. A file that started
/// over gets a higher one at its next write, over the old records.
fn first_records(data: &Path) -> [Option<u64>; 2] {
    FILES.map(|f| {
        let bytes = std::fs::read(data.join(f)).ok()?;
        Some(u64::from_le_bytes(bytes.get(12..20)?.try_into().ok()?))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_journal_is_checkpointed_at_the_configured_size_and_a_kill_9_loses_nothing() {
    engine_only!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = Server::start(&data, &[("TEMPORA_STORAGE_CHECKPOINT_BYTES", &CHECKPOINT.to_string())]);
    let api = Api::new(&server, None);

    // Every batch is one journal record of ~100 facts with long objects.
    let filler = "x".repeat(400);
    let (mut largest, mut restarts, mut before) = (0u64, 0usize, [0u64; 2]);
    let (mut largest_step, mut firsts) = (0u64, [None; 2]);
    for b in 0..BATCHES {
        let facts: Vec<_> = (0..FACTS_PER_BATCH)
            .map(|i| {
                json!({"subject": format!("Doc:{b}"), "predicate": format!("line_{i}"), "object": format!("{i} {filler}")})
            })
            .collect();
        api.post("/api/facts/batch", &json!({ "facts": facts })).await.expect(201);
        let (now, first) = (journal_sizes(&data), first_records(&data));
        for f in 0..2 {
            if first[f] > firsts[f] && firsts[f].is_some() {
                restarts += 1;
            }
            largest_step = largest_step.max(now[f].saturating_sub(before[f]));
            largest = largest.max(now[f]);
        }
        (before, firsts) = (now, first);
    }
    // Over 10 MiB in all, over the default 8 MiB and many times the
    // setting: files started over again and again, and none grew past the
    // setting (times DEFER_UP_TO, while a checkpoint is slow) by more than a
    // record or two.
    assert!(restarts >= 3, "journal files started over {restarts} times; first records now {firsts:?}");
    let bound = tempora_storage::kv::DEFER_UP_TO * CHECKPOINT + 2 * largest_step;
    assert!(
        largest <= bound,
        "a journal file reached {largest} bytes with checkpoints every {CHECKPOINT} (largest record {largest_step})"
    );

    server.kill9();
    let server = Server::start(&data, &[]);
    let api = Api::new(&server, None);
    for b in 0..BATCHES {
        let r = api.get(&format!("/api/facts?subject=Doc:{b}&limit=1000")).await;
        let facts = r.expect(200).as_array().unwrap();
        assert_eq!(facts.len(), FACTS_PER_BATCH, "Doc:{b} after kill -9");
    }
    server.stop_ok();
}

/// A setting out of bounds stops the server at start, naming it.
#[test]
fn a_checkpoint_size_out_of_bounds_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["serve", "--data-dir"])
        .arg(tmp.path().join("data"))
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "off", "--tcp-addr", "off"])
        .env("TEMPORA_STORAGE_CHECKPOINT_BYTES", "4096")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TEMPORA_STORAGE_CHECKPOINT_BYTES"), "{err}");
    assert!(!tmp.path().join("data").join("tempora.redb").exists(), "nothing was created");
}
