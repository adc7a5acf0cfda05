//! What sled 0.34 itself keeps in memory per key written, with no tempora
//! code around it: `cargo run --release -p tempora-storage --example
//! sled_key_memory -- DIR seq|rand KEYS VALUE_BYTES`.
//!
//! Writes KEYS keys (a fixed 26-byte prefix and a `u64`, ascending with
//! `seq`, in pseudo-random order with `rand`) in batches of 100 into a store
//! with a 4 MiB cache, and prints the resident memory at each quarter and
//! per key over the second half, when the cache has long been full. What
//! remains then is sled's bookkeeping of every page it has written, which the
//! cache does not bound. docs/performance.md ("Soak and overload") has the
//! figures.

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: sled_key_memory DIR seq|rand KEYS VALUE_BYTES";
    let [_, dir, order, keys, value_bytes] = &args[..] else { panic!("{usage}") };
    let random = match order.as_str() {
        "seq" => false,
        "rand" => true,
        _ => panic!("{usage}"),
    };
    let keys: u64 = keys.parse().expect("KEYS");
    let value = vec![7u8; value_bytes.parse().expect("VALUE_BYTES")];
    const BATCH: u64 = 100;
    assert!(keys >= 4 * BATCH && keys.is_multiple_of(4 * BATCH), "KEYS must be a multiple of 400");

    let db = sled::Config::new().path(dir).cache_capacity(4 << 20).flush_every_ms(None).open().expect("open");
    let tree = db.open_tree("t").expect("tree");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let start = rss_kib();
    let mut quarters = Vec::new();
    for b in 0..keys / BATCH {
        let mut batch = sled::Batch::default();
        for i in 0..BATCH {
            let n = if random {
                // xorshift64: every key distinct, in no order.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            } else {
                b * BATCH + i
            };
            let mut key = b"tenant-and-subject-prefix/".to_vec();
            key.extend_from_slice(&n.to_be_bytes());
            batch.insert(key, value.clone());
        }
        tree.apply_batch(batch).expect("apply");
        if b % 50 == 0 {
            db.flush().expect("flush");
        }
        if ((b + 1) * BATCH).is_multiple_of(keys / 4) {
            quarters.push(rss_kib());
        }
    }
    db.flush().expect("flush");
    let mib = |k: u64| k / 1024;
    println!(
        "{order}, {keys} keys, {} B values: resident {} MiB at start, {:?} MiB at each quarter; {:.1} B per key over the second half",
        value.len(),
        mib(start),
        quarters.iter().map(|q| mib(*q)).collect::<Vec<_>>(),
        (quarters[3] - quarters[1]) as f64 * 1024.0 / (keys / 2) as f64
    );
}
