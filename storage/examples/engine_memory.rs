//! The storage engine's heap under a steady stream of supersessions, with no
//! server around it: `cargo run --release -p tempora-storage --example
//! engine_memory -- DIR CACHE_BYTES TRANSACTIONS [redb|sled]` (the backend
//! of a new store; the default's when left out).
//!
//! Each transaction supersedes `works_at` of one of 10,000 people, and every
//! fourth is a batch of five `lives_in` facts; objects are new every time,
//! as in the soak (`tempora-load soak`). Every 20,000 transactions it prints
//! the heap in use (glibc's count: this example runs on the system
//! allocator). docs/performance.md ("Soak and overload") has the figures.

use tempora_storage::{Backend, Engine, EngineConfig, FactInput};

fn heap_mib() -> f64 {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as f64 / (1024.0 * 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, cache, n, backend) = match &args[..] {
        [_, dir, cache, n] => (dir, cache, n, EngineConfig::default().backend),
        [_, dir, cache, n, b] if b == "redb" => (dir, cache, n, Backend::Redb),
        [_, dir, cache, n, b] if b == "sled" => (dir, cache, n, Backend::Sled),
        _ => {
            eprintln!("usage: engine_memory DIR CACHE_BYTES TRANSACTIONS [redb|sled]");
            std::process::exit(2);
        }
    };
    let cache: u64 = cache.parse().expect("CACHE_BYTES is a number");
    let n: usize = n.parse().expect("TRANSACTIONS is a number");
    let engine = Engine::open(EngineConfig::at(dir).cache_bytes(cache).backend(backend)).expect("open the store");
    let started = std::time::Instant::now();
    for i in 0..n {
        let person = i % 10_000;
        if i % 4 == 3 {
            let batch = (0..5)
                .map(|j| {
                    FactInput::new(format!("Person:{}", (person + j) % 10_000), "lives_in", format!("City:{i}x{j}"))
                })
                .collect();
            engine.assert_batch("t", batch).expect("batch");
        } else {
            engine
                .assert("t", FactInput::new(format!("Person:{person}"), "works_at", format!("Org:{i}")))
                .expect("assert");
        }
        if i % 20_000 == 0 {
            println!("{:>6.0}s tx {i:>7} heap {:>8.1} MiB", started.elapsed().as_secs_f64(), heap_mib());
        }
    }
}
