//! Engine benchmarks, with raw sled 0.34 measured beside them as the limit.
//!
//! Run everything (about 10-15 minutes on 2 cores):
//!
//! ```text
//! cargo bench -p tempora-storage --bench engine
//! ```
//!
//! or a part, by criterion filter (a regex on the benchmark id):
//!
//! ```text
//! cargo bench -p tempora-storage --bench engine -- write/
//! cargo bench -p tempora-storage --bench engine -- raw_write/
//! cargo bench -p tempora-storage --bench engine -- import/
//! cargo bench -p tempora-storage --bench engine -- 'read/.*1M'
//! cargo bench -p tempora-storage --bench engine -- latency
//! TEMPORA_BENCH_10M=1 cargo bench -p tempora-storage --bench engine -- read
//! ```
//!
//! Groups:
//! - `write/*`: engine writes on a fresh store (durable unless the id says
//!   `relaxed`): single asserts, supersession, 16 concurrent writers (group
//!   commit), `assert_batch` of 100.
//! - `import/*`: `assert_batch` of 1000, relaxed vs durable.
//! - `raw_write/*`: sled 0.34 directly, same config as the engine's backend:
//!   plain inserts (41-byte keys, 200-byte values) on 1 and 2 threads, with
//!   and without a flush per insert; and the exact key writes of engine
//!   asserts (same trees, key layouts and value sizes) as one multi-tree
//!   transaction: one assert of a new fact (7 writes in 6 trees), one
//!   superseding assert (11 writes in 8 trees), a commit group of 16 asserts,
//!   a 1000-fact batch; with and without a flush. Also the same writes in a
//!   single tree with one `apply_batch` (what a one-tree layout would cost).
//! - `read/*/<size>` and `raw_read/*/<size>`: reads on preloaded stores of
//!   100k and 1M facts (10M with `TEMPORA_BENCH_10M=1`). Each store is built
//!   once (relaxed `assert_batch` of 1000), closed, reopened, and shared by all
//!   read groups of that size.
//! - `latency`: not a criterion group; p50/p90/p99/p99.9 of point reads over
//!   100k random reads at 1M facts (and of current reads while another thread
//!   imports), printed at the end with the preload figures (lines starting
//!   with `[tempora-bench]`). `TEMPORA_BENCH_LATENCY_SIZE=100000` for a
//!   quick run. `TEMPORA_BENCH_CACHE_MB` sets the sled cache of the preloaded
//!   stores (default: the engine's 512 MB).

use criterion::{black_box, BatchSize, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tempfile::TempDir;
/// The allocator the `tempora` binary ships with, so the figures are the
/// service's (glibc malloc was up to 3x slower; docs/performance.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use tempora_storage::{AsOf, Backend, Durability, Engine, EngineConfig, FactId, FactInput, FactQuery, Tx};

const TENANT: &str = "bench";
const PREDICATES: [&str; 4] = ["works_at", "lives_in", "age", "email"];
/// 2020-01-01, 2022-01-01, 2024-01-01 (Unix ms): valid_from of the first
/// facts, the valid instant read, valid_from of the superseding facts.
const T_OLD: i64 = 1_577_836_800_000;
const T_MID: i64 = 1_640_995_200_000;
const T_NEW: i64 = 1_704_067_200_000;
/// Single-fact transactions appended after the bulk load (for changes-since
/// on small transactions).
const TAIL: usize = 1000;
const IMPORT_BATCH: usize = 1000;

// ---------------------------------------------------------------------------
// small helpers

/// Notes printed at the very end (after criterion's output), so they are easy
/// to find.
fn notes() -> &'static Mutex<Vec<String>> {
    static N: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    N.get_or_init(Mutex::default)
}

fn note(s: String) {
    eprintln!("[tempora-bench] {s}");
    notes().lock().unwrap().push(s);
}

/// Fixtures of finished benchmarks, kept open until the end of the run:
/// dropping a sled store mid-run leaves work (flushes, deferred frees of its
/// pages) that slowed the next benchmarks down by up to 3x.
fn kept() -> &'static Mutex<Vec<Box<dyn std::any::Any + Send>>> {
    static K: OnceLock<Mutex<Vec<Box<dyn std::any::Any + Send>>>> = OnceLock::new();
    K.get_or_init(Mutex::default)
}

fn keep<T: Send + 'static>(x: T) {
    kept().lock().unwrap().push(Box::new(x));
}

/// Resident memory of this process (all stores it holds open), for the notes.
fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| st.lines().find(|l| l.starts_with("VmRSS:")).map(|l| l[6..].trim().to_string()))
        .unwrap_or_else(|| "?".into())
}

/// splitmix64: a bijective mixer, used as a tiny PRNG and to scatter keys.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn object(pred: usize, subject: usize, generation: usize) -> Value {
    match pred {
        0 => json!(format!("Org:{}", (subject * 7 + generation) % 5000)),
        1 => json!(format!("City:{}", (subject + generation * 13) % 1000)),
        2 => json!(20 + (subject + generation) % 60),
        _ => json!(format!("person{subject}.{generation}@example.com")),
    }
}

fn fmt_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.0} /s")
    }
}

fn size_label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1000 && n % 1000 == 0 => format!("{}k", n / 1000),
        n => n.to_string(),
    }
}

fn sizes() -> Vec<usize> {
    let mut v = vec![100_000, 1_000_000];
    if std::env::var("TEMPORA_BENCH_10M").as_deref() == Ok("1") {
        v.push(10_000_000);
    }
    v
}

/// Runs `iters` calls of `op(i)` spread over `threads` threads and returns the
/// wall time from a common start (thread start-up excluded) to the last one.
fn spread<F: Fn(u64) + Sync>(threads: usize, iters: u64, op: F) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    barrier.wait();
                    let mut i = t;
                    while i < iters {
                        op(i);
                        i += threads as u64;
                    }
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for h in handles {
            h.join().expect("bench thread");
        }
        start.elapsed()
    })
}

/// The backend of every store the benchmarks create: the default, or the one
/// `TEMPORA_BENCH_BACKEND` (`redb` or `sled`) names, to compare the two.
fn bench_backend() -> Backend {
    match std::env::var("TEMPORA_BENCH_BACKEND").as_deref() {
        Ok("sled") => Backend::Sled,
        Ok("redb") => Backend::Redb,
        Ok(other) => panic!("TEMPORA_BENCH_BACKEND={other}: expected redb or sled"),
        Err(_) => EngineConfig::default().backend,
    }
}

fn fresh_engine(durability: Durability) -> (Arc<Engine>, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = EngineConfig::at(dir.path()).durability(durability).backend(bench_backend());
    let engine = Engine::open(config).expect("open engine");
    (Arc::new(engine), dir)
}

/// The same sled configuration `SledKv::open` uses.
fn raw_db(path: &std::path::Path) -> sled::Db {
    sled::Config::new()
        .path(path)
        .cache_capacity(512 << 20)
        .flush_every_ms(None)
        .mode(sled::Mode::HighThroughput)
        .open()
        .expect("open sled")
}

/// 41-byte key for raw sled: scattered order, unique per `i`.
fn raw_key(i: u64) -> [u8; 41] {
    let mut k = [b'k'; 41];
    k[1..9].copy_from_slice(&mix(i).to_be_bytes());
    k[33..41].copy_from_slice(&i.to_be_bytes());
    k
}

const RAW_VALUE: [u8; 200] = [0x5a; 200];

fn filter_arg() -> Option<String> {
    // `cargo bench -- <filter>` passes `--bench` and the filter; take the
    // last free argument.
    std::env::args().skip(1).rfind(|a| !a.starts_with('-'))
}

// ---------------------------------------------------------------------------
// engine writes (each function is one benchmark; `main` runs every engine
// write next to its raw sled counterpart, so the two see the same machine
// load and the same process history)

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn group<'a>(c: &'a mut Criterion, name: &str, elements: u64) -> Group<'a> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(elements));
    g
}

fn w_assert_single(c: &mut Criterion, durability: Durability) {
    let mut g = group(c, "write", 1);
    let name = if durability == Durability::Durable { "assert_single/durable" } else { "assert_single/relaxed" };
    let mut fx: Option<(Arc<Engine>, TempDir)> = None;
    let n = AtomicU64::new(0);
    g.bench_function(name, |b| {
        let (e, _) = fx.get_or_insert_with(|| fresh_engine(durability));
        b.iter(|| {
            let i = n.fetch_add(1, Ordering::Relaxed) as usize;
            let input = FactInput::new(format!("Person:w{i}"), "works_at", object(0, i, 0));
            black_box(e.assert(TENANT, input).expect("assert"));
        })
    });
    keep(fx);
    g.finish();
}

/// Supersession: 16 keys, every assert closes the key's previous fact.
fn w_assert_supersede(c: &mut Criterion, durability: Durability) {
    let mut g = group(c, "write", 1);
    let name = if durability == Durability::Durable { "assert_supersede/durable" } else { "assert_supersede/relaxed" };
    let mut fx: Option<(Arc<Engine>, TempDir)> = None;
    let n = AtomicU64::new(0);
    g.bench_function(name, |b| {
        let (e, _) = fx.get_or_insert_with(|| fresh_engine(durability));
        b.iter(|| {
            let i = n.fetch_add(1, Ordering::Relaxed) as usize;
            let input = FactInput::new(format!("Person:s{}", i % 16), "works_at", object(0, i, i));
            let a = e.assert(TENANT, input).expect("assert");
            debug_assert!(i < 16 || a.superseded.len() == 1);
            black_box(a);
        })
    });
    keep(fx);
    g.finish();
}

/// 16 writer threads sharing one engine; group commit.
fn w_assert_16_writers(c: &mut Criterion, durability: Durability) {
    let mut g = group(c, "write", 1);
    let name = if durability == Durability::Durable { "assert_16_writers/durable" } else { "assert_16_writers/relaxed" };
    let mut fx: Option<(Arc<Engine>, TempDir)> = None;
    let n = AtomicU64::new(0);
    g.bench_function(name, |b| {
        let (e, _) = fx.get_or_insert_with(|| fresh_engine(durability));
        b.iter_custom(|iters| {
            spread(16, iters, |_| {
                let i = n.fetch_add(1, Ordering::Relaxed) as usize;
                let input = FactInput::new(format!("Person:c{i}"), "works_at", object(0, i, 0));
                e.assert(TENANT, input).expect("assert");
            })
        })
    });
    keep(fx);
    g.finish();
}

/// `assert_batch` of `len` new facts; group `write` for 100, `import` for 1000.
fn w_assert_batch(c: &mut Criterion, len: usize, durability: Durability) {
    let (gname, tag) = if len == IMPORT_BATCH { ("import", "i") } else { ("write", "b") };
    let mut g = group(c, gname, len as u64);
    let d = if durability == Durability::Durable { "durable" } else { "relaxed" };
    let name = if len == IMPORT_BATCH { format!("batch{len}/{d}") } else { format!("assert_batch{len}/{d}") };
    let mut fx: Option<(Arc<Engine>, TempDir)> = None;
    let mut n = 0usize;
    g.bench_function(name, |b| {
        let (e, _) = fx.get_or_insert_with(|| fresh_engine(durability));
        b.iter_batched(
            || {
                n += 1;
                batch_inputs(tag, n, len)
            },
            |inputs| black_box(e.assert_batch(TENANT, inputs).expect("batch")),
            BatchSize::SmallInput,
        )
    });
    keep(fx);
    g.finish();
}

/// `len` new facts: `len / 4` new subjects x the 4 predicates.
fn batch_inputs(tag: &str, batch_no: usize, len: usize) -> Vec<FactInput> {
    (0..len)
        .map(|j| {
            let s = batch_no * len + j / 4;
            let p = j % 4;
            FactInput::new(format!("Person:{tag}{s}"), PREDICATES[p], object(p, s, 0)).valid_from(T_OLD)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// raw sled writes

/// Byte sizes of what one engine assert writes, measured on a real engine.
struct AssertShape {
    fact_value: usize,
    closed_value: usize,
}

fn assert_shape() -> &'static AssertShape {
    static S: OnceLock<AssertShape> = OnceLock::new();
    S.get_or_init(|| {
        let (e, _d) = fresh_engine(Durability::Relaxed);
        e.assert(TENANT, FactInput::new("Person:w1", "works_at", object(0, 1, 0))).unwrap();
        let a = e.assert(TENANT, FactInput::new("Person:w1", "works_at", object(0, 1, 1))).unwrap();
        // Stored records are one version byte + the MessagePack of the Fact.
        let shape = AssertShape {
            fact_value: 1 + rmp_serde::to_vec(&a.fact).unwrap().len(),
            closed_value: 1 + rmp_serde::to_vec(&a.superseded[0]).unwrap().len(),
        };
        note(format!(
            "engine record sizes used for the raw-equivalent transactions: fact {} B, closing version {} B",
            shape.fact_value, shape.closed_value
        ));
        shape
    })
}

struct RawTrees {
    db: sled::Db,
    meta: sled::Tree,
    versions: sled::Tree,
    sp: sled::Tree,
    closed: sled::Tree,
    valid: sled::Tree,
    ps: sled::Tree,
    os: sled::Tree,
    log: sled::Tree,
}

impl RawTrees {
    fn open(path: &std::path::Path) -> Self {
        Self::from_db(raw_db(path))
    }
    fn from_db(db: sled::Db) -> Self {
        let t = |n: &str| db.open_tree(n).unwrap();
        RawTrees {
            meta: t("meta"),
            versions: t("versions"),
            sp: t("idx_sp"),
            closed: t("idx_closed"),
            valid: t("idx_valid"),
            ps: t("idx_ps"),
            os: t("idx_os"),
            log: t("log"),
            db,
        }
    }
}

fn enc_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(&[0, 1]);
}

/// The keys and value sizes one engine assert of a new fact writes:
/// versions, idx_sp, idx_ps, idx_os, log, meta clock, meta stats (7 writes in
/// 6 trees). Same layout and sizes as the engine's (see `keys.rs`).
struct AssertKeys {
    id: [u8; 16],
    version: Vec<u8>,
    sp: Vec<u8>,
    ps: Vec<u8>,
    os: Vec<u8>,
    log: Vec<u8>,
}

fn assert_keys(tx: u64, input: &FactInput) -> AssertKeys {
    let (subject, predicate) = (input.subject.as_str(), input.predicate.as_str());
    let id = *uuid::Uuid::now_v7().as_bytes();
    let tenant = 1u32.to_be_bytes();
    let mut version = id.to_vec();
    version.extend_from_slice(&tx.to_be_bytes());
    let mut sp = tenant.to_vec();
    enc_str(&mut sp, subject);
    enc_str(&mut sp, predicate);
    sp.extend_from_slice(&id);
    let mut ps = tenant.to_vec();
    enc_str(&mut ps, predicate);
    enc_str(&mut ps, subject);
    let mut os = tenant.to_vec();
    enc_str(&mut os, &format!("v{}", input.object));
    enc_str(&mut os, predicate);
    enc_str(&mut os, subject);
    os.extend_from_slice(&id);
    let mut log = tenant.to_vec();
    log.extend_from_slice(&tx.to_be_bytes());
    AssertKeys { id, version, sp, ps, os, log }
}

/// Engine-equivalent asserts as one multi-tree sled transaction (what the
/// engine's writer does with one commit group). Each assert writes versions,
/// idx_sp, idx_ps (the first fact of its pair only), idx_os and its own log
/// entry; the group writes the meta clock and stats once. With `prev` (the
/// live fact it supersedes, of the same pair) an assert writes no idx_ps key
/// but the closing version, deletes the idx_sp entry and puts idx_closed and
/// idx_valid (10 writes in 7 trees for a group of one).
fn raw_group_txn(t: &RawTrees, asserts: &[(&AssertKeys, Option<&AssertKeys>)], tx: u64) {
    use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
    let shape = assert_shape();
    let fact = vec![0x42u8; shape.fact_value];
    let closed = vec![0x43u8; shape.closed_value];
    let mut b: Vec<sled::Batch> = (0..8).map(|_| sled::Batch::default()).collect();
    let (meta, versions, sp, ps, os, log, closed_t, valid) = (0, 1, 2, 3, 4, 5, 6, 7);
    let mut superseding = false;
    for (j, (k, prev)) in asserts.iter().enumerate() {
        b[versions].insert(k.version.clone(), fact.clone());
        b[sp].insert(k.sp.clone(), fact.clone());
        // The pair's idx_ps key: a supersession's pair has it already.
        if prev.is_none() {
            b[ps].insert(k.ps.clone(), Vec::<u8>::new());
        }
        b[os].insert(k.os.clone(), Vec::<u8>::new());
        let mut log_key = k.log.clone();
        log_key.extend_from_slice(&(j as u64).to_be_bytes());
        b[log].insert(log_key, vec![0x44u8; if prev.is_some() { 52 } else { 35 }]);
        if let Some(p) = prev {
            superseding = true;
            let mut pv = p.id.to_vec();
            pv.extend_from_slice(&tx.to_be_bytes());
            b[versions].insert(pv, closed.clone());
            b[sp].remove(p.sp.clone());
            b[closed_t].insert(p.sp.clone(), closed.clone());
            let mut vk = p.sp[..p.sp.len() - 16].to_vec();
            vk.extend_from_slice(&tx.to_be_bytes());
            vk.extend_from_slice(&p.id);
            b[valid].insert(vk, Vec::<u8>::new());
        }
    }
    b[meta].insert(vec![0x02], vec![0x45u8; 12]);
    b[meta].insert(vec![0x07, 0, 0, 0, 1], vec![0x46u8; 14]);
    let mut trees = vec![t.meta.clone(), t.versions.clone(), t.sp.clone(), t.ps.clone(), t.os.clone(), t.log.clone()];
    if superseding {
        trees.push(t.closed.clone());
        trees.push(t.valid.clone());
    } else {
        b.truncate(6);
    }
    let r: Result<(), TransactionError<()>> = trees.as_slice().transaction(|views| {
        for (v, b) in views.iter().zip(&b) {
            v.apply_batch(b)?;
        }
        Ok::<(), ConflictableTransactionError<()>>(())
    });
    r.expect("raw transaction");
}

/// The writes of a 1000-fact engine batch (1000 x versions/sp/ps/os, one log
/// entry, clock, stats) as one multi-tree transaction.
fn raw_batch_txn(t: &RawTrees, first: u64, len: usize) {
    use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
    let fact = vec![0x42u8; assert_shape().fact_value];
    let mut vb = sled::Batch::default();
    let mut spb = sled::Batch::default();
    let mut psb = sled::Batch::default();
    let mut osb = sled::Batch::default();
    for input in batch_inputs("r", (first / len as u64) as usize, len) {
        let k = assert_keys(first, &input);
        vb.insert(k.version, fact.clone());
        spb.insert(k.sp, fact.clone());
        psb.insert(k.ps, Vec::<u8>::new());
        osb.insert(k.os, Vec::<u8>::new());
    }
    let mut logb = sled::Batch::default();
    logb.insert(first.to_be_bytes().to_vec(), vec![0x44u8; 20 + 19 * len]);
    let mut metab = sled::Batch::default();
    metab.insert(vec![0x02], vec![0x45u8; 12]);
    metab.insert(vec![0x07, 0, 0, 0, 1], vec![0x46u8; 14]);
    let trees = [t.meta.clone(), t.versions.clone(), t.sp.clone(), t.ps.clone(), t.os.clone(), t.log.clone()];
    let batches = [metab, vb, spb, psb, osb, logb];
    let r: Result<(), TransactionError<()>> = trees.as_slice().transaction(|views| {
        for (v, b) in views.iter().zip(&batches) {
            v.apply_batch(b)?;
        }
        Ok::<(), ConflictableTransactionError<()>>(())
    });
    r.expect("raw batch transaction");
}

/// The writes of `len` engine asserts of new facts in ONE sled tree (each
/// key prefixed with its keyspace byte), applied with `Tree::apply_batch`,
/// which sled makes atomic without a transaction. Not what the engine does:
/// it measures what a single-tree layout would cost.
fn raw_single_tree_batch(t: &sled::Tree, first: u64, len: usize) {
    let fact = vec![0x42u8; assert_shape().fact_value];
    let pre = |ks: u8, k: &[u8]| {
        let mut v = Vec::with_capacity(k.len() + 1);
        v.push(ks);
        v.extend_from_slice(k);
        v
    };
    let mut b = sled::Batch::default();
    for input in batch_inputs("r", (first / len as u64) as usize, len) {
        let k = assert_keys(first, &input);
        b.insert(pre(1, &k.version), fact.clone());
        b.insert(pre(2, &k.sp), fact.clone());
        b.insert(pre(4, &k.ps), Vec::<u8>::new());
        b.insert(pre(5, &k.os), Vec::<u8>::new());
    }
    b.insert(pre(6, &first.to_be_bytes()), vec![0x44u8; 20 + 19 * len]);
    b.insert(vec![0, 0x02], vec![0x45u8; 12]);
    b.insert(vec![0, 0x07, 0, 0, 0, 1], vec![0x46u8; 14]);
    t.apply_batch(b).expect("single-tree batch");
}

/// Plain inserts, 41-byte keys, 200-byte values, on `threads` threads, with
/// or without a flush after each.
fn r_insert(c: &mut Criterion, threads: usize, flush: bool) {
    let mut g = group(c, "raw_write", 1);
    let name = format!("insert{}/{threads}thread{}", if flush { "_flush" } else { "" }, if threads > 1 { "s" } else { "" });
    let mut fx: Option<(sled::Db, sled::Tree, TempDir)> = None;
    let n = AtomicU64::new(0);
    g.bench_function(name, |b| {
        let (db, tree, _) = fx.get_or_insert_with(|| {
            let d = tempfile::tempdir().unwrap();
            let db = raw_db(d.path());
            let tree = db.open_tree("t").unwrap();
            (db, tree, d)
        });
        let op = |_| {
            let i = n.fetch_add(1, Ordering::Relaxed);
            tree.insert(raw_key(i), &RAW_VALUE[..]).unwrap();
            if flush {
                db.flush().unwrap();
            }
        };
        if threads == 1 {
            b.iter(|| op(0))
        } else {
            b.iter_custom(|iters| spread(threads, iters, op))
        }
    });
    keep(fx);
    g.finish();
}

/// The exact writes of one engine assert (of a new fact, or superseding the
/// key's live fact), as one multi-tree transaction, with or without a flush.
fn r_assert_txn(c: &mut Criterion, threads: usize, supersede: bool, flush: bool) {
    let mut g = group(c, "raw_write", 1);
    let name = format!(
        "{}_equiv_txn/{}{}",
        if supersede { "supersede" } else { "assert" },
        if flush { "flush" } else { "nosync" },
        if threads > 1 { format!("_{threads}threads") } else { String::new() }
    );
    let mut fx: Option<(RawTrees, TempDir)> = None;
    let n = AtomicU64::new(0);
    // The live fact of each of the 16 superseded keys.
    let live: Mutex<HashMap<u64, AssertKeys>> = Mutex::default();
    g.bench_function(name, |b| {
        let (t, _) = fx.get_or_insert_with(|| {
            let d = tempfile::tempdir().unwrap();
            let t = RawTrees::open(d.path());
            (t, d)
        });
        let op = |_| {
            let i = n.fetch_add(1, Ordering::Relaxed);
            if supersede {
                let key = i % 16;
                let input = FactInput::new(format!("Person:s{key}"), "works_at", object(0, i as usize, i as usize));
                let k = assert_keys(i, &input);
                let prev = live.lock().unwrap().remove(&key);
                raw_group_txn(t, &[(&k, prev.as_ref())], i);
                live.lock().unwrap().insert(key, k);
            } else {
                let input = FactInput::new(format!("Person:w{i}"), "works_at", object(0, i as usize, 0));
                raw_group_txn(t, &[(&assert_keys(i, &input), None)], i);
            }
            if flush {
                t.db.flush().unwrap();
            }
        };
        if threads == 1 {
            b.iter(|| op(0))
        } else {
            b.iter_custom(|iters| spread(threads, iters, op))
        }
    });
    keep(fx);
    g.finish();
}

/// The engine's best case with 16 writers: a commit group of 16 asserts is
/// one transaction and one flush.
fn r_group16_txn(c: &mut Criterion) {
    let mut g = group(c, "raw_write", 16);
    let mut fx: Option<(RawTrees, TempDir)> = None;
    let mut n = 0u64;
    g.bench_function("group16_equiv_txn/flush", |b| {
        let (t, _) = fx.get_or_insert_with(|| {
            let d = tempfile::tempdir().unwrap();
            let t = RawTrees::open(d.path());
            (t, d)
        });
        b.iter(|| {
            let keys: Vec<AssertKeys> = (0..16)
                .map(|j| {
                    let i = (n * 16 + j) as usize;
                    assert_keys(n, &FactInput::new(format!("Person:c{i}"), "works_at", object(0, i, 0)))
                })
                .collect();
            let group: Vec<(&AssertKeys, Option<&AssertKeys>)> = keys.iter().map(|k| (k, None)).collect();
            raw_group_txn(t, &group, n);
            t.db.flush().unwrap();
            n += 1;
        })
    });
    keep(fx);
    g.finish();
}

/// The writes of a 1000-fact engine batch as one multi-tree transaction.
fn r_batch_txn(c: &mut Criterion, flush: bool) {
    let mut g = group(c, "raw_write", IMPORT_BATCH as u64);
    let name = if flush { "batch1000_equiv_txn/flush" } else { "batch1000_equiv_txn/nosync" };
    let mut fx: Option<(RawTrees, TempDir)> = None;
    let mut n = 0u64;
    g.bench_function(name, |b| {
        let (t, _) = fx.get_or_insert_with(|| {
            let d = tempfile::tempdir().unwrap();
            let t = RawTrees::open(d.path());
            (t, d)
        });
        b.iter(|| {
            n += 1;
            raw_batch_txn(t, n * IMPORT_BATCH as u64, IMPORT_BATCH);
            if flush {
                t.db.flush().unwrap();
            }
        })
    });
    keep(fx);
    g.finish();
}

/// The same writes (one assert, or a 1000-fact batch) in ONE tree with one
/// `apply_batch`, no sync: what a single-tree layout would cost.
fn r_single_tree(c: &mut Criterion, len: usize) {
    let mut g = group(c, "raw_write", len as u64);
    let name = if len == 1 { "assert_equiv_1tree_batch/nosync" } else { "batch1000_equiv_1tree_batch/nosync" };
    let mut fx: Option<(sled::Tree, TempDir)> = None;
    let mut n = 0u64;
    g.bench_function(name, |b| {
        let (t, _) = fx.get_or_insert_with(|| {
            let d = tempfile::tempdir().unwrap();
            let t = raw_db(d.path()).open_tree("all").unwrap();
            (t, d)
        });
        b.iter(|| {
            n += 1;
            raw_single_tree_batch(t, n * len as u64, len);
        })
    });
    keep(fx);
    g.finish();
}

fn bench_writes(c: &mut Criterion) {
    use Durability::{Durable, Relaxed};
    w_assert_single(c, Durable);
    r_assert_txn(c, 1, false, true);
    w_assert_single(c, Relaxed);
    r_assert_txn(c, 1, false, false);
    w_assert_supersede(c, Durable);
    r_assert_txn(c, 1, true, true);
    w_assert_supersede(c, Relaxed);
    r_assert_txn(c, 1, true, false);
    w_assert_16_writers(c, Durable);
    r_group16_txn(c);
    r_assert_txn(c, 16, false, true);
    w_assert_16_writers(c, Relaxed);
    w_assert_batch(c, 100, Durable);
    w_assert_batch(c, IMPORT_BATCH, Relaxed);
    r_batch_txn(c, false);
    r_single_tree(c, IMPORT_BATCH);
    w_assert_batch(c, IMPORT_BATCH, Durable);
    r_batch_txn(c, true);
    r_single_tree(c, 1);
    for (threads, flush) in [(1, false), (2, false), (1, true), (2, true), (16, true)] {
        r_insert(c, threads, flush);
    }
}

// ---------------------------------------------------------------------------
// preloaded stores

struct Preloaded {
    subjects: usize,
    engine: Engine,
    /// Last tx of the first pass (before any supersession).
    t1: Tx,
    /// First tx of the single-fact tail.
    tail_first: Tx,
    /// First tx of the bulk load.
    bulk_first: Tx,
    /// (subject, predicate index) of keys superseded once.
    superseded: Vec<(usize, usize)>,
    /// A sample of fact ids (at most 200k).
    ids: Vec<FactId>,
    /// Last: removed after the engine is closed.
    _dir: TempDir,
}

fn engine_stores() -> &'static Mutex<HashMap<usize, Arc<Preloaded>>> {
    static STORES: OnceLock<Mutex<HashMap<usize, Arc<Preloaded>>>> = OnceLock::new();
    STORES.get_or_init(Mutex::default)
}

fn raw_stores() -> &'static Mutex<HashMap<usize, Arc<RawStore>>> {
    static STORES: OnceLock<Mutex<HashMap<usize, Arc<RawStore>>>> = OnceLock::new();
    STORES.get_or_init(Mutex::default)
}

fn preloaded(size: usize) -> Arc<Preloaded> {
    let mut map = engine_stores().lock().unwrap();
    map.entry(size).or_insert_with(|| Arc::new(build_preloaded(size))).clone()
}

fn is_superseded(s: usize, p: usize) -> bool {
    (s * 4 + p).is_multiple_of(5)
}

/// `size` facts: subjects x 4 predicates, 20% of the keys superseded once
/// (pairs + pairs/5 = 1.2 * pairs = size), in relaxed batches of 1000, then
/// 1000 single-fact transactions; then closed and reopened (durable).
fn build_preloaded(size: usize) -> Preloaded {
    let dir = tempfile::tempdir().expect("temp dir");
    let pairs = size * 5 / 6;
    let subjects = pairs.div_ceil(4);
    let id_stride = (pairs / 200_000).max(1);
    let mut ids = Vec::new();
    let mut superseded = Vec::new();
    let start = Instant::now();
    let engine = Engine::open(preload_config(dir.path()).durability(Durability::Relaxed)).expect("open");
    let mut last_report = (Instant::now(), 0usize);

    let mut batch = Vec::with_capacity(IMPORT_BATCH);
    let mut facts = 0usize;
    let mut bulk_first = None;
    let mut flush = |batch: &mut Vec<FactInput>, ids: &mut Vec<FactId>, collect_ids: bool| -> Tx {
        let (tx, out) = engine.assert_batch(TENANT, std::mem::take(batch)).expect("preload batch");
        if (facts + out.len()) / 100_000 > facts / 100_000 && size >= 1_000_000 {
            let (t, n) = last_report;
            eprintln!(
                "[tempora-bench] preload {}: {} facts, last {} at {}",
                size_label(size),
                facts + out.len(),
                facts + out.len() - n,
                fmt_rate((facts + out.len() - n) as f64 / t.elapsed().as_secs_f64())
            );
            last_report = (Instant::now(), facts + out.len());
        }
        if collect_ids {
            for a in out {
                if facts.is_multiple_of(id_stride) {
                    ids.push(a.fact.id);
                }
                facts += 1;
            }
        } else {
            facts += out.len();
        }
        tx
    };
    // Pass 1: every key, valid from 2020.
    let mut t1 = 0;
    for s in 0..subjects {
        #[allow(clippy::needless_range_loop)] // p is also part of the key arithmetic
        for p in 0..4 {
            if s * 4 + p >= pairs {
                break;
            }
            batch.push(FactInput::new(format!("Person:{s}"), PREDICATES[p], object(p, s, 0)).valid_from(T_OLD));
            if batch.len() == IMPORT_BATCH {
                t1 = flush(&mut batch, &mut ids, true);
                bulk_first.get_or_insert(t1);
            }
        }
    }
    if !batch.is_empty() {
        t1 = flush(&mut batch, &mut ids, true);
        bulk_first.get_or_insert(t1);
    }
    let pass1 = start.elapsed();
    // Pass 2: 20% of the keys get a new value from 2024 (supersedes).
    for s in 0..subjects {
        #[allow(clippy::needless_range_loop)] // p is also part of the key arithmetic
        for p in 0..4 {
            if s * 4 + p < pairs && is_superseded(s, p) {
                superseded.push((s, p));
                batch.push(FactInput::new(format!("Person:{s}"), PREDICATES[p], object(p, s, 1)).valid_from(T_NEW));
                if batch.len() == IMPORT_BATCH {
                    flush(&mut batch, &mut ids, false);
                }
            }
        }
    }
    if !batch.is_empty() {
        flush(&mut batch, &mut ids, false);
    }
    let bulk = start.elapsed();
    let bulk_facts = facts;
    // Tail: single-fact transactions.
    let mut tail_first = None;
    for i in 0..TAIL {
        let a = engine.assert(TENANT, FactInput::new(format!("Tail:{i}"), "note", json!(i))).expect("tail");
        tail_first.get_or_insert(a.fact.tx);
    }
    let stats = engine.stats(TENANT);
    engine.close();
    let loaded = start.elapsed();
    drop(engine);

    let t = Instant::now();
    let engine = Engine::open(preload_config(dir.path())).expect("reopen");
    let reopen = t.elapsed();
    assert_eq!(engine.stats(TENANT), stats);
    assert_eq!(stats.superseded as usize, superseded.len());
    let disk = engine.size_on_disk().unwrap_or(0);
    // Warm the page cache like the raw store's full scan does: the live
    // index (a paged scan of the whole tenant), then random reads of every
    // kind.
    let t = Instant::now();
    let mut cursor = None;
    loop {
        let q = FactQuery { limit: 1000, cursor, ..Default::default() };
        let page = engine.query(TENANT, &q).expect("scan");
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut rng = Rng::new(42);
    for _ in 0..(size / 10).min(100_000) {
        let (s, p) = superseded[rng.below(superseded.len())];
        black_box(engine.query(TENANT, &FactQuery { as_of: Some(AsOf::Tx(t1)), ..q_current(s, p) }).unwrap());
        black_box(engine.get(TENANT, ids[rng.below(ids.len())], None).unwrap());
    }
    eprintln!("[tempora-bench] preload {}: warm-up {:.1}s", size_label(size), t.elapsed().as_secs_f64());
    note(format!(
        "preload {}: {} facts ({} keys, {} superseded) in {:.1}s = {} facts/s bulk ({:.1}s pass 1, {:.1}s pass 2), \
         incl. {} single-fact txs and final sync {:.1}s total; reopen {:.2}s; {:.0} MB on disk; process RSS after reopen and warm-up {}",
        size_label(size),
        bulk_facts + TAIL,
        pairs,
        superseded.len(),
        bulk.as_secs_f64(),
        fmt_rate(bulk_facts as f64 / bulk.as_secs_f64()),
        pass1.as_secs_f64(),
        (bulk - pass1).as_secs_f64(),
        TAIL,
        loaded.as_secs_f64(),
        reopen.as_secs_f64(),
        disk as f64 / 1e6,
        rss(),
    ));
    Preloaded {
        subjects,
        _dir: dir,
        engine,
        t1,
        tail_first: tail_first.expect("tail"),
        bulk_first: bulk_first.expect("bulk"),
        superseded,
        ids,
    }
}

/// Engine config of the preloaded stores: the default (512 MB cache)
/// unless `TEMPORA_BENCH_CACHE_MB` says otherwise.
fn preload_config(path: &std::path::Path) -> EngineConfig {
    let mut cfg = EngineConfig::at(path).backend(bench_backend());
    if let Some(mb) = std::env::var("TEMPORA_BENCH_CACHE_MB").ok().and_then(|v| v.parse::<u64>().ok()) {
        cfg.cache_bytes = mb << 20;
    }
    cfg
}

struct RawStore {
    db: sled::Db,
    tree: sled::Tree,
    n: u64,
    _dir: TempDir,
}

fn raw_preloaded(size: usize) -> Arc<RawStore> {
    let mut map = raw_stores().lock().unwrap();
    map.entry(size)
        .or_insert_with(|| {
            let dir = tempfile::tempdir().unwrap();
            let start = Instant::now();
            {
                let db = raw_db(dir.path());
                let tree = db.open_tree("t").unwrap();
                for chunk in (0..size as u64).collect::<Vec<_>>().chunks(10_000) {
                    let mut b = sled::Batch::default();
                    for &i in chunk {
                        b.insert(&raw_key(i)[..], &RAW_VALUE[..]);
                    }
                    tree.apply_batch(b).unwrap();
                }
                db.flush().unwrap();
            }
            let loaded = start.elapsed();
            let db = raw_db(dir.path());
            let tree = db.open_tree("t").unwrap();
            // Warm the page cache: one full pass over the keys.
            let t = Instant::now();
            assert_eq!(tree.iter().count(), size);
            eprintln!("[tempora-bench] raw sled {}: warm-up scan {:.1}s", size_label(size), t.elapsed().as_secs_f64());
            note(format!(
                "raw sled preload {}: {} keys (41 B / 200 B) in {:.1}s = {} keys/s (batches of 10k); {:.0} MB on disk; process RSS {}",
                size_label(size),
                size,
                loaded.as_secs_f64(),
                fmt_rate(size as f64 / loaded.as_secs_f64()),
                db.size_on_disk().unwrap_or(0) as f64 / 1e6,
                rss()
            ));
            Arc::new(RawStore { _dir: dir, db, tree, n: size as u64 })
        })
        .clone()
}

// ---------------------------------------------------------------------------
// reads

fn q_current(s: usize, p: usize) -> FactQuery {
    FactQuery { subject: Some(format!("Person:{s}")), predicate: Some(PREDICATES[p].into()), ..Default::default() }
}

fn q_as_of(s: usize, p: usize, t1: Tx) -> FactQuery {
    FactQuery { as_of: Some(AsOf::Tx(t1)), ..q_current(s, p) }
}

fn q_valid_at(s: usize, p: usize) -> FactQuery {
    FactQuery { valid_at: Some(T_MID), ..q_current(s, p) }
}

/// Checks once that each read path returns what it should on this store.
fn check_reads(st: &Preloaded) {
    let e = &st.engine;
    let (s, p) = st.superseded[st.superseded.len() / 2];
    let now = e.query(TENANT, &q_current(s, p)).unwrap();
    assert_eq!(now.facts.len(), 1);
    assert_eq!(now.facts[0].object, object(p, s, 1));
    let old = e.query(TENANT, &q_as_of(s, p, st.t1)).unwrap();
    assert_eq!(old.facts.len(), 1);
    assert_eq!(old.facts[0].object, object(p, s, 0));
    assert_eq!(old.facts[0].valid_until, None);
    let then = e.query(TENANT, &q_valid_at(s, p)).unwrap();
    assert_eq!(then.facts.len(), 1);
    assert_eq!(then.facts[0].object, object(p, s, 0));
    assert!(e.get(TENANT, st.ids[st.ids.len() / 2], None).unwrap().is_some());
}

fn bench_reads(c: &mut Criterion) {
    for size in sizes() {
        let label = size_label(size);
        let mut g = c.benchmark_group("read");
        g.throughput(Throughput::Elements(1));

        let mut rng = Rng::new(1);
        g.bench_function(BenchmarkId::new("current", &label), |b| {
            let st = preloaded(size);
            check_reads(&st);
            b.iter_batched(
                || q_current(rng.below(st.subjects), rng.below(4)),
                |q| black_box(st.engine.query(TENANT, &q).unwrap()),
                BatchSize::SmallInput,
            )
        });
        let mut rng = Rng::new(2);
        g.bench_function(BenchmarkId::new("as_of", &label), |b| {
            let st = preloaded(size);
            b.iter_batched(
                || {
                    let (s, p) = st.superseded[rng.below(st.superseded.len())];
                    q_as_of(s, p, st.t1)
                },
                |q| black_box(st.engine.query(TENANT, &q).unwrap()),
                BatchSize::SmallInput,
            )
        });
        let mut rng = Rng::new(3);
        g.bench_function(BenchmarkId::new("valid_at", &label), |b| {
            let st = preloaded(size);
            b.iter_batched(
                || {
                    let (s, p) = st.superseded[rng.below(st.superseded.len())];
                    q_valid_at(s, p)
                },
                |q| black_box(st.engine.query(TENANT, &q).unwrap()),
                BatchSize::SmallInput,
            )
        });
        let mut rng = Rng::new(4);
        g.bench_function(BenchmarkId::new("get_by_id", &label), |b| {
            let st = preloaded(size);
            b.iter_batched(
                || st.ids[rng.below(st.ids.len())],
                |id| black_box(st.engine.get(TENANT, id, None).unwrap()),
                BatchSize::SmallInput,
            )
        });
        let mut rng = Rng::new(5);
        g.bench_function(BenchmarkId::new("subject_history", &label), |b| {
            let st = preloaded(size);
            b.iter_batched(
                || format!("Person:{}", rng.below(st.subjects)),
                |s| black_box(st.engine.subject_history(TENANT, &s, None).unwrap()),
                BatchSize::SmallInput,
            )
        });
        // changes-since over the single-fact tail: 100 txs = 100 facts.
        let mut rng = Rng::new(6);
        g.throughput(Throughput::Elements(100));
        g.bench_function(BenchmarkId::new("changes_since_100_single_txs", &label), |b| {
            let st = preloaded(size);
            b.iter_batched(
                || st.tail_first - 1 + rng.below(TAIL - 100) as Tx,
                |after| {
                    let ch = st.engine.changes(TENANT, after, 100).unwrap();
                    debug_assert_eq!(ch.len(), 100);
                    black_box(ch)
                },
                BatchSize::SmallInput,
            )
        });
        // changes-since over the bulk: each tx is a 1000-fact batch, and the
        // limit counts transactions, so one page is up to 100k facts. Timed
        // per call (criterion throughput = calls/s).
        g.throughput(Throughput::Elements(1));
        let mut noted = false;
        g.bench_function(BenchmarkId::new("changes_since_100_bulk_txs", &label), |b| {
            let st = preloaded(size);
            if !noted {
                noted = true;
                let ch = st.engine.changes(TENANT, st.bulk_first - 1, 100).unwrap();
                let events: usize = ch.iter().map(|c| c.events.len()).sum();
                note(format!(
                    "read/changes_since_100_bulk_txs/{label}: one call returns {} txs with {events} events (facts)",
                    ch.len()
                ));
            }
            b.iter(|| black_box(st.engine.changes(TENANT, st.bulk_first - 1, 100).unwrap()))
        });
        g.finish();

        let mut g = c.benchmark_group("raw_read");
        g.throughput(Throughput::Elements(1));
        let mut rng = Rng::new(7);
        g.bench_function(BenchmarkId::new("get", &label), |b| {
            let r = raw_preloaded(size);
            b.iter_batched(
                || raw_key(rng.next() % r.n),
                |k| black_box(r.tree.get(k).unwrap().expect("present")),
                BatchSize::SmallInput,
            )
        });
        let mut rng = Rng::new(8);
        g.bench_function(BenchmarkId::new("scan_prefix_1", &label), |b| {
            let r = raw_preloaded(size);
            b.iter_batched(
                || raw_key(rng.next() % r.n),
                |k| {
                    let v: Vec<_> = r.tree.scan_prefix(&k[..33]).collect::<Result<_, _>>().unwrap();
                    debug_assert_eq!(v.len(), 1);
                    black_box(v)
                },
                BatchSize::SmallInput,
            )
        });
        g.finish();
    }
}

// ---------------------------------------------------------------------------
// latency percentiles

fn percentiles(name: &str, mut ns: Vec<u64>) {
    ns.sort_unstable();
    let pick = |q: f64| ns[((ns.len() as f64 * q) as usize).min(ns.len() - 1)] as f64 / 1000.0;
    let mean = ns.iter().sum::<u64>() as f64 / ns.len() as f64 / 1000.0;
    note(format!(
        "latency {name:<28} n={:<7} mean {mean:>7.1} us  p50 {:>7.1} us  p90 {:>7.1} us  p99 {:>7.1} us  p99.9 {:>7.1} us  max {:>8.1} us",
        ns.len(),
        pick(0.50),
        pick(0.90),
        pick(0.99),
        pick(0.999),
        *ns.last().unwrap() as f64 / 1000.0
    ));
}

fn time_each<T>(n: usize, mut make: impl FnMut() -> T, mut op: impl FnMut(T)) -> Vec<u64> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let input = make();
        let t = Instant::now();
        op(input);
        out.push(t.elapsed().as_nanos() as u64);
    }
    out
}

fn latency_report(size: usize, reads: usize) {
    let st = preloaded(size);
    let raw = raw_preloaded(size);
    check_reads(&st);
    let label = size_label(size);
    let e = &st.engine;
    let mut rng = Rng::new(99);
    // Warm the caches like the criterion warm-up would.
    for _ in 0..reads / 2 {
        let (s, p) = (rng.below(st.subjects), rng.below(4));
        black_box(e.query(TENANT, &q_current(s, p)).unwrap());
        black_box(e.query(TENANT, &q_valid_at(s, p)).unwrap());
    }
    let lat = time_each(
        reads,
        || q_current(rng.below(st.subjects), rng.below(4)),
        |q| {
            black_box(e.query(TENANT, &q).unwrap());
        },
    );
    percentiles(&format!("current/{label}"), lat);
    let lat = time_each(
        reads,
        || {
            let (s, p) = st.superseded[rng.below(st.superseded.len())];
            q_as_of(s, p, st.t1)
        },
        |q| {
            black_box(e.query(TENANT, &q).unwrap());
        },
    );
    percentiles(&format!("as_of/{label}"), lat);
    let lat = time_each(
        reads,
        || {
            let (s, p) = st.superseded[rng.below(st.superseded.len())];
            q_valid_at(s, p)
        },
        |q| {
            black_box(e.query(TENANT, &q).unwrap());
        },
    );
    percentiles(&format!("valid_at/{label}"), lat);
    let lat = time_each(
        reads,
        || st.ids[rng.below(st.ids.len())],
        |id| {
            black_box(e.get(TENANT, id, None).unwrap());
        },
    );
    percentiles(&format!("get_by_id/{label}"), lat);
    for _ in 0..reads / 2 {
        black_box(raw.tree.get(raw_key(rng.next() % raw.n)).unwrap());
    }
    let lat = time_each(
        reads,
        || raw_key(rng.next() % raw.n),
        |k| {
            black_box(raw.tree.get(k).unwrap());
        },
    );
    percentiles(&format!("raw sled get/{label}"), lat);

    // The same reads while one thread imports durable 1000-fact batches into
    // the same store: a read holds the engine's snapshot lock, which the
    // writer takes exclusively while it applies a group. Raw sled beside it:
    // gets while another thread applies the equivalent transactions to the
    // same sled Db (CPU and IO contention, no lock).
    let stop = std::sync::atomic::AtomicBool::new(false);
    let batches = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                e.assert_batch(TENANT, batch_inputs("load", n, IMPORT_BATCH)).expect("load batch");
                batches.fetch_add(1, Ordering::Relaxed);
            }
        });
        let t = Instant::now();
        let lat = time_each(
            reads / 2,
            || q_current(rng.below(st.subjects), rng.below(4)),
            |q| {
                black_box(e.query(TENANT, &q).unwrap());
            },
        );
        let secs = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        percentiles(&format!("current/{label} +import"), lat);
        note(format!(
            "  (during those reads the importer committed {} durable batches of 1000 in {secs:.1}s)",
            batches.load(Ordering::Relaxed)
        ));
    });
    let stop = std::sync::atomic::AtomicBool::new(false);
    let batches = AtomicU64::new(0);
    let trees = RawTrees::from_db(raw.db.clone());
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                raw_batch_txn(&trees, n * IMPORT_BATCH as u64, IMPORT_BATCH);
                raw.db.flush().unwrap();
                batches.fetch_add(1, Ordering::Relaxed);
            }
        });
        let t = Instant::now();
        let lat = time_each(
            reads / 2,
            || raw_key(rng.next() % raw.n),
            |k| {
                black_box(raw.tree.get(k).unwrap());
            },
        );
        let secs = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        percentiles(&format!("raw sled get/{label} +import"), lat);
        note(format!(
            "  (during those reads the raw importer committed {} flushed 1000-fact transactions in {secs:.1}s)",
            batches.load(Ordering::Relaxed)
        ));
    });
}

// ---------------------------------------------------------------------------

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    note(format!(
        "machine: {} cpus, {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().next().map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" ")))
            .map(|m| format!("MemTotal {m}"))
            .unwrap_or_default()
    ));
    let loadavg = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    note(format!(
        "allocator: {}; load average at start: {}",
        "jemalloc (tikv-jemallocator, the global allocator of this bench and of the tempora binary)",
        loadavg()
    ));
    bench_writes(&mut c);
    note(format!("process RSS after the write benchmarks: {}", rss()));
    bench_reads(&mut c);
    c.final_summary();

    let run_latency = match filter_arg() {
        None => true,
        Some(f) => f.contains("latency") || "latency/1M".contains(f.as_str()),
    };
    if run_latency && std::env::args().all(|a| a != "--list" && a != "--test") {
        // TEMPORA_BENCH_LATENCY_SIZE=100000 for a quick run.
        let size = std::env::var("TEMPORA_BENCH_LATENCY_SIZE").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
        latency_report(size, 100_000);
    }
    note(format!("load average at end: {}", loadavg()));
    // Close every store (engines first, then their temp dirs go).
    kept().lock().unwrap().clear();
    engine_stores().lock().unwrap().clear();
    raw_stores().lock().unwrap().clear();
    eprintln!("\n==== tempora bench notes ====");
    for n in notes().lock().unwrap().iter() {
        eprintln!("[tempora-bench] {n}");
    }
}
