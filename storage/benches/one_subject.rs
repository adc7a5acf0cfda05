//! Asserts on one subject that already holds many values of a `many`
//! predicate (an agent's `User:me`, a conversation stored turn by turn):
//! the cost of one more value must not grow with the values already there.
//!
//! ```text
//! cargo bench -p tempora-storage --bench one_subject
//! ```
//!
//! Each iteration is one transaction of 100 asserts on a subject that held
//! `n` values (10, 1k, 100k) when the benchmark began, reported per assert;
//! relaxed durability, so the figure is the engine's work and not the
//! disk's flush.
//!
//! - `one_subject/reassert_x100/<n>`: reasserting 100 of its values, each
//!   superseding its older copy, so `n` stays the same; at n = 10 each value
//!   is reasserted many times over, and still found by one prefix read of
//!   the live facts by value (`idx_spo`).
//! - `one_subject/new_value_x100/<n>`: 100 values the subject never had (a
//!   conversation's turns), after the above. The subject gains them as the
//!   benchmark runs.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use tempora_storage::{Cardinality, Durability, Engine, EngineConfig, FactInput};

/// The allocator the `tempora` binary ships with.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const TENANT: &str = "bench";
const SUBJECT: &str = "User:me";
const PREDICATE: &str = "said";
const SIZES: [usize; 3] = [10, 1_000, 100_000];
const BATCH: usize = 100;

fn said(text: String) -> FactInput {
    FactInput::new(SUBJECT, PREDICATE, json!(text))
}

/// A relaxed store whose subject holds `n` values of the `many` predicate.
fn preloaded(n: usize) -> (Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = Engine::open(EngineConfig::at(dir.path()).durability(Durability::Relaxed)).expect("open engine");
    engine.set_cardinality(TENANT, PREDICATE, Cardinality::Many).expect("many");
    for start in (0..n).step_by(1000) {
        let batch = (start..n.min(start + 1000)).map(|i| said(format!("turn {i}"))).collect();
        engine.assert_batch(TENANT, batch).expect("preload");
    }
    (engine, dir)
}

fn one_subject(c: &mut Criterion) {
    let mut g = c.benchmark_group("one_subject");
    g.throughput(Throughput::Elements(BATCH as u64));
    for n in SIZES {
        let (engine, _dir) = preloaded(n);
        let next = AtomicU64::new(0);
        g.bench_with_input(BenchmarkId::new("reassert_x100", n), &n, |b, &n| {
            b.iter(|| {
                let batch = (0..BATCH)
                    .map(|_| said(format!("turn {}", next.fetch_add(1, Ordering::Relaxed) as usize % n)))
                    .collect();
                black_box(engine.assert_batch(TENANT, batch).expect("assert"))
            })
        });
        let fresh = AtomicU64::new(0);
        g.bench_with_input(BenchmarkId::new("new_value_x100", n), &n, |b, _| {
            b.iter(|| {
                let batch =
                    (0..BATCH).map(|_| said(format!("new turn {}", fresh.fetch_add(1, Ordering::Relaxed)))).collect();
                black_box(engine.assert_batch(TENANT, batch).expect("assert"))
            })
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    one_subject(&mut c);
    c.final_summary();
}
