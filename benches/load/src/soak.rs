//! `tempora-load soak`: a long run of mixed reads and writes over many
//! connections with SSE subscribers, against a running server, that ends in
//! PASS or FAIL.
//!
//! Every connection loops over a weighted mix: asserts on the functional
//! (`one`) predicate `works_at` (so nearly every one supersedes), batches of
//! `lives_in` facts, a rare retraction of the connection's own latest fact,
//! current point reads, reads as of a record time (`as_of_tx`) and at a valid
//! time, a fact by id and its history, lists with filters (object, status,
//! limit) and full-text searches. `--subscribers` clients follow
//! `/api/stream` from the transaction before the run; each one drops its
//! connection every `--resubscribe-every` and resumes with `Last-Event-ID`.
//!
//! Every `--interval` one JSON line goes to `series.jsonl`: requests and
//! errors (by status) in the interval, p50/p99, the server's resident memory,
//! SSE events received so far. The verdict:
//! - any non-2xx answer or transport error fails the run;
//! - every subscriber must have received every transaction written during the
//!   run exactly once, in increasing order (counted: transactions, events and
//!   an XOR of the transaction numbers, against what the writers were told;
//!   transactions the server writes itself, such as alert evaluations, are
//!   told apart by their subjects and only checked for order);
//! - resident memory must be flat after the warm-up. The warm-up lasts
//!   `--warmup` and, when the server exports `tempora_storage_cache_bytes`,
//!   until the storage engine's page cache is full as well: memory that grows
//!   while the cache fills towards its configured ceiling is the cache doing
//!   its job, and how long that takes depends on the write rate, not the
//!   clock. The memory judged is the anonymous part of the resident set
//!   (`RssAnon`: the heap, where a leak shows) when `--server-pid` is given;
//!   the file-backed part (`RssFile`: the search index's memory-mapped
//!   segments, pages of the kernel's cache that it drops under pressure)
//!   grows with the data on disk and is reported beside it. The median of
//!   the last quarter of the post-warm-up window may exceed the median of
//!   its first quarter by at most `max(--rss-growth-pct, --rss-growth-mib)`.
//!   Medians,
//!   because jemalloc returns dirty pages in steps (decay of ~10 s) and a
//!   single sample can sit on either side of one. The percentage covers
//!   caches that fill in proportion to the store; the absolute floor covers
//!   allocator arenas and thread caches that move by tens of MiB on a small
//!   heap. A window shorter than `--min-flat-window` is too short to tell
//!   growth from warm-up, so a short run reports the memory without a verdict.

use crate::compare::data::Rng;
use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// How long to run (`30m`, `90s`, `1h`; a bare number is seconds).
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Memory before this is not judged. Default: 20 % of the duration, at
    /// least 60 s when the run is 5 minutes or longer. The warm-up goes on
    /// past it until the server's storage cache is full (see the module doc).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Concurrent connections, one request in flight each.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// SSE clients following `/api/stream`.
    #[arg(long, default_value_t = 16)]
    pub subscribers: usize,
    /// Each subscriber drops its stream this often and resumes with
    /// `Last-Event-ID` (0 never).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub resubscribe_every: Duration,
    /// Distinct subjects `Person:<n>`.
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Facts per batch write.
    #[arg(long, default_value_t = 20)]
    pub batch: u64,
    /// Sampling interval of the time series.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// The server's process, for its resident memory (`/proc/PID/status`
    /// VmRSS). Without it, `process_resident_memory_bytes` from `/metrics`
    /// if the server exports it; else memory is not judged.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Allowed RSS growth after the warm-up, percent (see the module doc).
    #[arg(long, default_value_t = 10.0)]
    pub rss_growth_pct: f64,
    /// Allowed RSS growth after the warm-up, MiB, when larger than the percentage.
    #[arg(long, default_value_t = 32.0)]
    pub rss_growth_mib: f64,
    /// Shortest post-warm-up window on which flatness is judged.
    #[arg(long, default_value = "4m", value_parser = parse_duration)]
    pub min_flat_window: Duration,
    /// Where `series.jsonl`, `summary.json` and `soak.png` go.
    #[arg(long, default_value = "target/soak")]
    pub out_dir: PathBuf,
    /// A TrueType font for the plot's labels; the plot is skipped without one.
    #[arg(long, default_value = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")]
    pub font: PathBuf,
    /// Bearer key, for keyed mode.
    #[arg(long)]
    pub key: Option<String>,
}

/// `30m`, `90s`, `1h`, `500ms`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("not a duration: {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit in {s:?} (ms, s, m, h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// The default warm-up of a run of `d`.
pub fn default_warmup(d: Duration) -> Duration {
    let w = d.mul_f64(0.2);
    if d >= Duration::from_secs(300) {
        w.max(Duration::from_secs(60))
    } else {
        w
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Assert,
    Batch,
    Retract,
    Current,
    AsOf,
    ValidAt,
    ById,
    History,
    List,
    Search,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Assert => "assert",
            Op::Batch => "batch",
            Op::Retract => "retract",
            Op::Current => "current",
            Op::AsOf => "as_of",
            Op::ValidAt => "valid_at",
            Op::ById => "by_id",
            Op::History => "history",
            Op::List => "list",
            Op::Search => "search",
        }
    }
}

/// Weights out of 100: a third writes, the rest reads of every kind.
const MIX: [(Op, u64); 10] = [
    (Op::Assert, 24),
    (Op::Batch, 6),
    (Op::Retract, 1),
    (Op::Current, 20),
    (Op::AsOf, 10),
    (Op::ValidAt, 10),
    (Op::ById, 8),
    (Op::History, 6),
    (Op::List, 10),
    (Op::Search, 5),
];

fn pick(r: u64) -> Op {
    let mut r = r % MIX.iter().map(|m| m.1).sum::<u64>();
    for (op, w) in MIX {
        if r < w {
            return op;
        }
        r -= w;
    }
    unreachable!("r is below the sum of the weights")
}

const VALID_FROM: i64 = 1_577_836_800_000; // 2020-01-01

/// What the interval sampler swaps out: requests since the last sample.
struct Window {
    hist: Histogram<u64>,
    ok: u64,
    writes: u64,
    errors: BTreeMap<String, u64>,
}

impl Window {
    fn new() -> Window {
        Window {
            hist: Histogram::new_with_bounds(1, 120_000_000, 3).expect("bounds"),
            ok: 0,
            writes: 0,
            errors: BTreeMap::new(),
        }
    }
}

/// Transactions the writers were told about (tx > the subscribers' start).
#[derive(Default, Clone, Copy, Debug)]
struct Ledger {
    txs: u64,
    events: u64,
    xor: u64,
    max_tx: u64,
}

impl Ledger {
    fn add(&mut self, tx: u64, events: u64) {
        self.txs += 1;
        self.events += events;
        self.xor ^= tx;
        self.max_tx = self.max_tx.max(tx);
    }
}

/// What one subscriber saw.
#[derive(Default, Debug)]
struct Seen {
    ledger: Ledger,
    /// Frames whose tx was not above the last whole transaction, or an `id:`
    /// that did not match its frames.
    order_violations: u64,
    /// Reconnects we made on purpose, and ones after the server ended the stream.
    resumes: u64,
    server_drops: u64,
    /// Transactions the run did not write (the server's alert evaluation
    /// writes facts of its own); they are checked for order, not counted.
    foreign: u64,
    /// Failed connection attempts (each is an error of the run).
    connect_errors: u64,
    first_problem: Option<String>,
}

struct Shared {
    args: SoakArgs,
    client: reqwest::Client,
    base: String,
    stop: AtomicBool,
    window: Mutex<Window>,
    ledger: Mutex<Ledger>,
    start_tx: u64,
    problems: Mutex<Vec<String>>,
    /// Each subscriber's last whole transaction, for the drain at the end.
    subs_at: Mutex<Vec<u64>>,
    /// Subscribers' events received so far, for the series.
    sse_events: AtomicU64,
}

impl Shared {
    fn record(&self, micros: u64, outcome: std::result::Result<bool, String>) {
        let mut w = self.window.lock().expect("window lock");
        match outcome {
            Ok(write) => {
                w.ok += 1;
                w.writes += write as u64;
                let _ = w.hist.record(micros.max(1));
            }
            Err(kind) => *w.errors.entry(kind).or_default() += 1,
        }
    }
    fn problem(&self, p: String) {
        let mut ps = self.problems.lock().expect("problems lock");
        if ps.len() < 20 {
            eprintln!("problem: {p}");
            ps.push(p);
        }
    }
}

pub async fn soak(args: SoakArgs) -> Result<()> {
    let warmup = args.warmup.unwrap_or_else(|| default_warmup(args.duration));
    if warmup >= args.duration {
        bail!("the warm-up ({warmup:?}) must be shorter than the run ({:?})", args.duration);
    }
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(k) = &args.key {
        headers.insert("authorization", format!("Bearer {k}").parse()?);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(args.connections + args.subscribers)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()?;
    let stream_client = reqwest::Client::builder()
        .default_headers(client_headers(&args)?)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let base = args.url.trim_end_matches('/').to_string();
    std::fs::create_dir_all(&args.out_dir).with_context(|| format!("creating {}", args.out_dir.display()))?;

    let start_tx = prepare(&client, &base, &args).await?;
    let preload_tx = start_tx;
    eprintln!(
        "soak: {:?} ({:?} warm-up), {} connections, {} subscribers, {} keys, against {base}",
        args.duration, warmup, args.connections, args.subscribers, args.keys
    );
    let shared = Arc::new(Shared {
        args: args.clone(),
        client,
        base,
        stop: AtomicBool::new(false),
        window: Mutex::new(Window::new()),
        ledger: Mutex::new(Ledger::default()),
        start_tx,
        problems: Mutex::new(Vec::new()),
        subs_at: Mutex::new(vec![start_tx; args.subscribers]),
        sse_events: AtomicU64::new(0),
    });

    let sub_stop = Arc::new(AtomicBool::new(false));
    let mut subs = Vec::new();
    for s in 0..args.subscribers {
        let (shared, client, stop) = (shared.clone(), stream_client.clone(), sub_stop.clone());
        subs.push(tokio::spawn(async move { subscriber(s, shared, client, stop).await }));
    }
    // Let the subscribers connect before the first write, so a slow start is
    // not mistaken for resumption (it would be correct either way).
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut conns = Vec::new();
    for c in 0..args.connections {
        let shared = shared.clone();
        conns.push(tokio::spawn(async move { connection(c, shared, preload_tx).await }));
    }

    let started = Instant::now();
    let series_path = args.out_dir.join("series.jsonl");
    let mut series = std::fs::File::create(&series_path)?;
    let mut samples: Vec<Sample> = Vec::new();
    let mut total_ok = 0u64;
    let mut total_writes = 0u64;
    let mut total_errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut all = Histogram::<u64>::new_with_bounds(1, 120_000_000, 3)?;
    let mut tick = tokio::time::interval(args.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut last = Instant::now();
    let mut last_print = Instant::now();
    // When the warm-up ended: `--warmup` elapsed and the storage cache full.
    let mut measure_from: Option<f64> = None;
    loop {
        tick.tick().await;
        let now = Instant::now();
        let w = std::mem::replace(&mut *shared.window.lock().expect("window lock"), Window::new());
        let secs = now.duration_since(last).as_secs_f64();
        last = now;
        let t = started.elapsed();
        let metrics = metrics_text(&shared).await;
        let rss = rss_bytes(&metrics, args.server_pid);
        let (anon, file) = rss_split(args.server_pid);
        let heap = labelled_mib(&metrics, "tempora_heap_bytes");
        let cache = labelled_mib(&metrics, "tempora_storage_cache_bytes");
        let cache_full = match (cache.get("used"), cache.get("capacity")) {
            (Some(used), Some(cap)) if *cap > 0.0 => *used >= CACHE_FULL * cap,
            // A server that does not tell: the warm-up is the clock's alone.
            _ => true,
        };
        if measure_from.is_none() && t >= warmup && cache_full {
            measure_from = Some(t.as_secs_f64());
        }
        let errors: u64 = w.errors.values().sum();
        let sample = Sample {
            t: t.as_secs_f64(),
            rps: w.ok as f64 / secs,
            wps: w.writes as f64 / secs,
            rss_mib: rss.map(|b| b as f64 / (1024.0 * 1024.0)),
            anon_mib: anon,
        };
        let line = json!({
            "t_s": round2(sample.t),
            "phase": if measure_from.is_none() { "warmup" } else { "measure" },
            "ok": w.ok,
            "writes": w.writes,
            "rps": round2(sample.rps),
            "writes_per_s": round2(sample.wps),
            "errors": errors,
            "errors_by_kind": w.errors,
            "p50_ms": ms(w.hist.value_at_quantile(0.5)),
            "p99_ms": ms(w.hist.value_at_quantile(0.99)),
            "max_ms": ms(w.hist.max()),
            "rss_mib": sample.rss_mib.map(round2),
            "rss_anon_mib": anon.map(round2),
            "rss_file_mib": file.map(round2),
            "heap_allocated_mib": heap.get("allocated").copied().map(round2),
            "heap_resident_mib": heap.get("resident").copied().map(round2),
            "heap_active_mib": heap.get("active").copied().map(round2),
            "heap_metadata_mib": heap.get("metadata").copied().map(round2),
            "storage_cache_used_mib": cache.get("used").copied().map(round2),
            "storage_cache_capacity_mib": cache.get("capacity").copied().map(round2),
            "sse_events": shared.sse_events.load(Ordering::Relaxed),
        });
        writeln!(series, "{line}")?;
        total_ok += w.ok;
        total_writes += w.writes;
        for (k, v) in &w.errors {
            *total_errors.entry(k.clone()).or_default() += v;
        }
        all.add(&w.hist)?;
        samples.push(sample);
        if now.duration_since(last_print) >= Duration::from_secs(10) || t >= args.duration {
            last_print = now;
            eprintln!(
                "{:>6.0}s {:>8.0} req/s {:>7.0} writes/s p50 {:>6.2} ms p99 {:>7.2} ms errors {:<4} rss {} sse events {}",
                t.as_secs_f64(),
                sample.rps,
                sample.wps,
                ms(w.hist.value_at_quantile(0.5)),
                ms(w.hist.value_at_quantile(0.99)),
                total_errors.values().sum::<u64>(),
                sample.rss_mib.map(|m| format!("{m:.1} MiB")).unwrap_or_else(|| "?".into()),
                shared.sse_events.load(Ordering::Relaxed),
            );
        }
        if t >= args.duration {
            break;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    shared.stop.store(true, Ordering::Relaxed);
    let mut per_op: BTreeMap<Op, Histogram<u64>> = BTreeMap::new();
    for c in conns {
        for (op, h) in c.await? {
            per_op
                .entry(op)
                .or_insert_with(|| Histogram::new_with_bounds(1, 120_000_000, 3).expect("bounds"))
                .add(h)?;
        }
    }
    // Requests finishing after the last sample still count.
    let w = std::mem::replace(&mut *shared.window.lock().expect("window lock"), Window::new());
    total_ok += w.ok;
    total_writes += w.writes;
    for (k, v) in &w.errors {
        *total_errors.entry(k.clone()).or_default() += v;
    }
    all.add(&w.hist)?;

    // The subscribers catch up with the last write, then stop.
    let written = *shared.ledger.lock().expect("ledger lock");
    let drain_started = Instant::now();
    let caught_up = loop {
        let behind = subs.len() as u64
            - shared.subs_at.lock().expect("subs lock").iter().filter(|&&t| t >= written.max_tx).count() as u64;
        if behind == 0 || drain_started.elapsed() > Duration::from_secs(60) {
            break behind == 0;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let drain_s = drain_started.elapsed().as_secs_f64();
    sub_stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for s in subs {
        seen.push(s.await?);
    }

    // The verdict.
    let mut fail: Vec<String> = Vec::new();
    let errors: u64 = total_errors.values().sum();
    if errors > 0 {
        fail.push(format!("{errors} failed requests ({total_errors:?})"));
    }
    if total_writes == 0 {
        fail.push("no write succeeded".into());
    }
    if !caught_up {
        fail.push(format!("subscribers did not reach tx {} within 60 s of the last write", written.max_tx));
    }
    let mut sse = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        let lost = written.txs as i64 - s.ledger.txs as i64;
        let ok = s.order_violations == 0
            && s.connect_errors == 0
            && s.ledger.txs == written.txs
            && s.ledger.events == written.events
            && s.ledger.xor == written.xor;
        if !ok {
            fail.push(format!(
                "subscriber {i}: {} transactions / {} events received, {} / {} written (xor {}), {} out of order, {} failed connects{}",
                s.ledger.txs,
                s.ledger.events,
                written.txs,
                written.events,
                if s.ledger.xor == written.xor { "matches" } else { "differs" },
                s.order_violations,
                s.connect_errors,
                s.first_problem.as_ref().map(|p| format!(": {p}")).unwrap_or_default()
            ));
        }
        sse.push(json!({
            "subscriber": i, "transactions": s.ledger.txs, "events": s.ledger.events, "missing_transactions": lost,
            "order_violations": s.order_violations, "foreign_transactions": s.foreign, "resumes": s.resumes, "server_drops": s.server_drops,
            "connect_errors": s.connect_errors,
        }));
    }
    let rss = judge_rss(&samples, measure_from, &args);
    if let Some(reason) = rss.get("fail").and_then(Value::as_str) {
        fail.push(reason.to_string());
    }
    let verdict = if fail.is_empty() { "PASS" } else { "FAIL" };
    let ops: BTreeMap<&str, Value> = per_op
        .iter()
        .map(|(op, h)| {
            (
                op.name(),
                json!({"ok": h.len(), "p50_ms": ms(h.value_at_quantile(0.5)), "p99_ms": ms(h.value_at_quantile(0.99))}),
            )
        })
        .collect();
    let summary = json!({
        "verdict": verdict,
        "reasons": fail,
        "seconds": round2(elapsed),
        "warmup_s": measure_from.map(round2),
        "connections": args.connections,
        "subscribers": args.subscribers,
        "keys": args.keys,
        "requests_ok": total_ok,
        "writes_ok": total_writes,
        "throughput_per_s": round2(total_ok as f64 / elapsed),
        "writes_per_s": round2(total_writes as f64 / elapsed),
        "errors": errors,
        "errors_by_kind": total_errors,
        "p50_ms": ms(all.value_at_quantile(0.5)),
        "p99_ms": ms(all.value_at_quantile(0.99)),
        "max_ms": ms(all.max()),
        "ops": ops,
        "written": {"transactions": written.txs, "events": written.events, "first_tx": shared.start_tx + 1, "last_tx": written.max_tx},
        "sse": sse,
        "sse_drain_s": round2(drain_s),
        "rss": rss,
        "problems": *shared.problems.lock().expect("problems lock"),
    });
    // How big the store grew, for reading the memory figures.
    let store = match shared.client.get(format!("{}/api/stats", shared.base)).send().await {
        Ok(r) => r
            .json::<Value>()
            .await
            .map(|v| json!({"facts": v["facts"], "last_tx": v["last_tx"]}))
            .unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    let mut summary = summary;
    summary["store"] = store;
    let summary_path = args.out_dir.join("summary.json");
    std::fs::write(&summary_path, serde_json::to_string_pretty(&summary)?)?;
    let png = args.out_dir.join("soak.png");
    match draw(&png, &samples, measure_from.unwrap_or(elapsed), &args.font) {
        Ok(()) => eprintln!("wrote {}", png.display()),
        Err(e) => eprintln!("no plot: {e:#}"),
    }
    print_summary(&summary, &series_path, &summary_path);
    if verdict == "FAIL" {
        bail!("soak FAILED");
    }
    Ok(())
}

fn client_headers(args: &SoakArgs) -> Result<reqwest::header::HeaderMap> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(k) = &args.key {
        headers.insert("authorization", format!("Bearer {k}").parse()?);
    }
    Ok(headers)
}

/// Seeds every key (so reads find data from the start) and returns the
/// seed's last tx: the subscribers start after it (everything after it is
/// the run's) and the `as_of` reads rewind to it.
async fn prepare(client: &reqwest::Client, base: &str, args: &SoakArgs) -> Result<u64> {
    let started = Instant::now();
    let mut last_tx = 0;
    for chunk in (0..args.keys).step_by(1000) {
        let facts: Vec<_> = (chunk..(chunk + 1000).min(args.keys))
            .map(|k| json!({"subject": format!("Person:{k}"), "predicate": "works_at", "object": "Org:seed", "valid_from": VALID_FROM}))
            .collect();
        let body = post_ok(client, &format!("{base}/api/facts/batch"), &json!({ "facts": facts })).await?;
        last_tx = body["tx"].as_u64().context("a batch answer without tx")?;
    }
    eprintln!("seeded {} keys in {:.1} s (tx {last_tx})", args.keys, started.elapsed().as_secs_f64());
    Ok(last_tx)
}

async fn post_ok(client: &reqwest::Client, url: &str, body: &Value) -> Result<Value> {
    let resp = client.post(url).json(body).send().await.with_context(|| format!("POST {url}"))?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("POST {url}: {status} {text}");
    }
    Ok(serde_json::from_str(&text)?)
}

/// One connection's request loop; returns its latencies by operation.
async fn connection(c: usize, sh: Arc<Shared>, preload_tx: u64) -> BTreeMap<Op, Histogram<u64>> {
    let mut hists: BTreeMap<Op, Histogram<u64>> = BTreeMap::new();
    let mut rng = Rng::seeded(0x50a4 ^ (c as u64) << 20);
    let keys = sh.args.keys;
    // Ids of this connection's recent writes, for reads by id, history and retraction.
    let mut mine: Vec<String> = Vec::new();
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        n += 1;
        let op = pick(rng.next());
        let key = rng.next() % keys;
        let subject = format!("Person:{key}");
        let base = &sh.base;
        let req = match op {
            Op::Assert => sh.client.post(format!("{base}/api/facts")).json(&json!({
                "subject": subject, "predicate": "works_at", "object": format!("Org:c{c}n{n}"),
                "source": "soak", "confidence": 0.9,
            })),
            Op::Batch => {
                let facts: Vec<Value> = (0..sh.args.batch)
                    .map(|i| {
                        json!({"subject": format!("Person:{}", (key + i) % keys), "predicate": "lives_in",
                               "object": format!("City:c{c}n{n}i{i}"), "properties": {"n": n}})
                    })
                    .collect();
                sh.client.post(format!("{base}/api/facts/batch")).json(&json!({ "facts": facts }))
            }
            Op::Retract => match mine.pop() {
                Some(id) => sh.client.delete(format!("{base}/api/facts/{id}")),
                None => continue,
            },
            Op::Current => sh.client.get(format!("{base}/api/facts?subject={subject}&predicate=works_at")),
            Op::AsOf => {
                sh.client.get(format!("{base}/api/facts?subject={subject}&predicate=works_at&as_of_tx={preload_tx}"))
            }
            Op::ValidAt => sh.client.get(format!(
                "{base}/api/facts?subject={subject}&predicate=works_at&valid_at={}",
                VALID_FROM + 86_400_000
            )),
            Op::ById | Op::History => match mine.get(rng.next() as usize % mine.len().max(1)) {
                Some(id) if op == Op::ById => sh.client.get(format!("{base}/api/facts/{id}")),
                Some(id) => sh.client.get(format!("{base}/api/facts/{id}/history")),
                None => continue,
            },
            Op::List => match rng.next() % 3 {
                0 => sh.client.get(format!(
                    "{base}/api/facts?predicate=works_at&object=Org:c{c}n{}&limit=20",
                    n.saturating_sub(50)
                )),
                1 => sh.client.get(format!("{base}/api/facts?subject={subject}&status=superseded&limit=20")),
                _ => sh.client.get(format!("{base}/api/facts?subject={subject}&include_retracted=true&limit=50")),
            },
            Op::Search => sh.client.get(format!("{base}/api/search?question=where+does+{subject}+work&top_k=5")),
        };
        let write = matches!(op, Op::Assert | Op::Batch | Op::Retract);
        let started = Instant::now();
        let outcome = match req.send().await {
            Err(e) => Err(("transport".to_string(), format!("{} {e}", op.name()))),
            Ok(resp) => {
                let status = resp.status();
                match resp.bytes().await {
                    Err(e) => Err(("transport".to_string(), format!("{} body: {e}", op.name()))),
                    Ok(body) if !status.is_success() => Err((
                        status.as_u16().to_string(),
                        format!("{} {status} {}", op.name(), String::from_utf8_lossy(&body[..body.len().min(300)])),
                    )),
                    Ok(body) => Ok(body),
                }
            }
        };
        let micros = started.elapsed().as_micros() as u64;
        match outcome {
            Err((kind, detail)) => {
                sh.problem(detail);
                sh.record(micros, Err(kind));
            }
            Ok(body) => {
                if write {
                    match account(op, &body) {
                        Ok((tx, events, id)) => {
                            if tx > sh.start_tx {
                                sh.ledger.lock().expect("ledger lock").add(tx, events);
                            }
                            if let Some(id) = id {
                                mine.push(id);
                                if mine.len() > 32 {
                                    mine.remove(0);
                                }
                            }
                        }
                        Err(e) => {
                            sh.problem(format!("{}: {e}", op.name()));
                            sh.record(micros, Err("bad answer".into()));
                            continue;
                        }
                    }
                }
                sh.record(micros, Ok(write));
                let _ = hists
                    .entry(op)
                    .or_insert_with(|| Histogram::new_with_bounds(1, 120_000_000, 3).expect("bounds"))
                    .record(micros.max(1));
            }
        }
    }
    hists
}

/// The transaction a write's answer names, the events it makes on the
/// stream, and a fact id to read later.
fn account(op: Op, body: &[u8]) -> Result<(u64, u64, Option<String>)> {
    let v: Value = serde_json::from_slice(body)?;
    let tx = v["tx"].as_u64().context("no tx in the answer")?;
    Ok(match op {
        Op::Batch => {
            let facts = v["facts"].as_array().context("no facts in a batch answer")?;
            (tx, facts.len() as u64, facts.first().and_then(|f| f["id"].as_str()).map(String::from))
        }
        Op::Retract => (tx, 1, None),
        _ => (tx, 1, v["id"].as_str().map(String::from)),
    })
}

/// Follows `/api/stream` from the run's start, checking order and counting
/// what arrives; drops and resumes every `resubscribe_every`.
async fn subscriber(i: usize, sh: Arc<Shared>, client: reqwest::Client, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut last = sh.start_tx;
    let every = sh.args.resubscribe_every;
    // Stagger the planned reconnects so they do not all land at once.
    let mut first = true;
    'outer: while !stop.load(Ordering::Relaxed) {
        let resp = client
            .get(format!("{}/api/stream", sh.base))
            .header("last-event-id", last.to_string())
            .header("accept", "text/event-stream")
            .send()
            .await;
        let resp = match resp {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                seen.connect_errors += 1;
                let p = format!("subscriber {i}: {} on connect", r.status());
                seen.first_problem.get_or_insert(p.clone());
                sh.problem(p);
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => {
                seen.connect_errors += 1;
                let p = format!("subscriber {i}: connect: {e}");
                seen.first_problem.get_or_insert(p.clone());
                sh.problem(p);
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        let lifetime = if every.is_zero() {
            Duration::MAX
        } else if first {
            every.mul_f64((i as f64 + 1.0) / (sh.args.subscribers as f64 + 1.0))
        } else {
            every
        };
        first = false;
        let until = Instant::now().checked_add(lifetime);
        let mut resp = resp;
        let mut buf: Vec<u8> = Vec::new();
        // The transaction whose frames are arriving, and their count.
        let mut cur: Option<(u64, u64, bool)> = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            let wait = until.map(|u| u.saturating_duration_since(Instant::now())).unwrap_or(Duration::from_secs(3600));
            if wait.is_zero() {
                // A planned drop: resume from the last whole transaction.
                seen.resumes += 1;
                continue 'outer;
            }
            let chunk = match tokio::time::timeout(wait.min(Duration::from_millis(250)), resp.chunk()).await {
                Err(_) => continue,
                Ok(Ok(None)) => {
                    seen.server_drops += 1;
                    continue 'outer;
                }
                Ok(Err(e)) => {
                    // The connection broke: resume like a browser would.
                    seen.server_drops += 1;
                    sh.problem(format!("subscriber {i}: stream broke: {e}"));
                    continue 'outer;
                }
                Ok(Ok(Some(c))) => c,
            };
            buf.extend_from_slice(&chunk);
            while let Some(end) = find_blank_line(&buf) {
                let event: Vec<u8> = buf.drain(..end.1).collect();
                let text = String::from_utf8_lossy(&event[..end.0]);
                let (mut frame, mut id) = (None, None);
                for line in text.lines() {
                    if let Some(d) = line.strip_prefix("data:") {
                        frame = serde_json::from_str::<Frame>(d.trim_start()).ok();
                        if frame.is_none() {
                            seen.order_violations += 1;
                            seen.first_problem.get_or_insert(format!("a frame without tx: {}", &d[..d.len().min(200)]));
                        }
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse::<u64>().ok();
                    }
                }
                let Some(frame) = frame else { continue };
                let (tx, ours) = (frame.tx, frame.fact.is_some_and(|f| f.subject.starts_with("Person:")));
                match cur {
                    Some((t, n, o)) if t == tx => cur = Some((t, n + 1, o && ours)),
                    Some((t, _, _)) => {
                        seen.order_violations += 1;
                        seen.first_problem.get_or_insert(format!("tx {tx} began before tx {t} was whole"));
                        cur = Some((tx, 1, ours));
                    }
                    None if tx <= last => {
                        seen.order_violations += 1;
                        seen.first_problem.get_or_insert(format!("tx {tx} after tx {last} (resent or out of order)"));
                        cur = Some((tx, 1, ours));
                    }
                    None => cur = Some((tx, 1, ours)),
                }
                if let Some(id) = id {
                    let (t, n, ours) = cur.take().expect("set above");
                    if id != t {
                        seen.order_violations += 1;
                        seen.first_problem.get_or_insert(format!("id {id} closed frames of tx {t}"));
                    }
                    if ours {
                        seen.ledger.add(t, n);
                    } else {
                        // Written by the server itself (alert evaluation), not by this run.
                        seen.foreign += 1;
                    }
                    sh.sse_events.fetch_add(n, Ordering::Relaxed);
                    last = t;
                    sh.subs_at.lock().expect("subs lock")[i] = last;
                }
            }
        }
    }
    seen
}

/// What a frame must say: its transaction, and whose subject it is about.
#[derive(serde::Deserialize)]
struct Frame {
    tx: u64,
    fact: Option<FrameFact>,
}

#[derive(serde::Deserialize)]
struct FrameFact {
    subject: String,
}

/// The end of the first event in `buf`: (where its text ends, where the next begins).
fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|p| (p, p + 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| (p, p + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The server's `/metrics` text, empty if it cannot be read.
async fn metrics_text(sh: &Shared) -> String {
    match sh.client.get(format!("{}/metrics", sh.base)).send().await {
        Ok(resp) => resp.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

fn rss_bytes(metrics: &str, pid: Option<u32>) -> Option<u64> {
    match pid {
        Some(pid) => vm_rss(pid),
        None => metrics
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64),
    }
}

/// The storage cache counts as full from this fraction of its capacity on
/// (it evicts to stay under the ceiling, so it hovers just below it).
const CACHE_FULL: f64 = 0.9;

/// A gauge of the server's labelled by `kind` (`tempora_heap_bytes`,
/// jemalloc's own figures; `tempora_storage_cache_bytes`), in MiB by kind;
/// empty when the server does not export it.
fn labelled_mib(metrics: &str, name: &str) -> BTreeMap<String, f64> {
    let prefix = format!("{name}{{kind=\"");
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .filter_map(|l| {
            let (kind, rest) = l.split_once("\"}")?;
            Some((kind.to_string(), rest.trim().parse::<f64>().ok()? / (1024.0 * 1024.0)))
        })
        .collect()
}

/// `VmRSS` of `/proc/PID/status`, in bytes.
pub fn vm_rss(pid: u32) -> Option<u64> {
    status_kb(pid, "VmRSS:").map(|kb| kb * 1024)
}

/// A `kB` field of `/proc/PID/status`.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(field))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Resident memory split as the kernel reports it: anonymous (the heap, what
/// a leak grows) and file-backed (mapped files such as the search index's
/// segments, which the kernel can drop), in MiB.
fn rss_split(pid: Option<u32>) -> (Option<f64>, Option<f64>) {
    let mib = |f| pid.and_then(|p| status_kb(p, f)).map(|kb| kb as f64 / 1024.0);
    (mib("RssAnon:"), mib("RssFile:"))
}

#[derive(Clone, Copy)]
struct Sample {
    t: f64,
    rps: f64,
    wps: f64,
    rss_mib: Option<f64>,
    anon_mib: Option<f64>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

/// The memory verdict (see the module doc). `measure_from` is when the
/// warm-up ended, `None` if it never did.
fn judge_rss(samples: &[Sample], measure_from: Option<f64>, args: &SoakArgs) -> Value {
    // Anonymous memory where every sample has it, else the whole VmRSS.
    let anon_everywhere = !samples.is_empty() && samples.iter().all(|s| s.anon_mib.is_some());
    let judged_of = |s: &Sample| if anon_everywhere { s.anon_mib } else { s.rss_mib };
    let all: Vec<(f64, f64)> = samples.iter().filter_map(|s| judged_of(s).map(|r| (s.t, r))).collect();
    if all.is_empty() {
        return json!({"judged": false, "note": "no memory samples (give --server-pid)"});
    }
    let end = samples.last().map(|s| s.t).unwrap_or(0.0);
    let Some(w) = measure_from else {
        return json!({
            "judged": false,
            "start_mib": round2(all[0].1),
            "end_mib": round2(all[all.len() - 1].1),
            "note": "the warm-up never ended: the storage cache did not fill during the run, so memory still \
                     grew with it (a longer run, or a smaller storage_cache_bytes)",
        });
    };
    let window = end - w;
    let quarter = window / 4.0;
    let median_of = |pick: &dyn Fn(&Sample) -> Option<f64>, from: f64, to: f64| {
        median(samples.iter().filter(|s| s.t >= from && s.t < to).filter_map(pick).collect())
    };
    let first_q = median_of(&judged_of, w, w + quarter);
    let last_q = median_of(&judged_of, end - quarter, f64::INFINITY);
    let rss = |s: &Sample| s.rss_mib;
    let mut v = json!({
        "measured": if anon_everywhere { "RssAnon" } else { "VmRSS" },
        "start_mib": round2(all[0].1),
        "warmup_end_mib": all.iter().find(|s| s.0 >= w).map(|s| round2(s.1)),
        "end_mib": round2(all[all.len() - 1].1),
        "peak_mib": round2(all.iter().map(|s| s.1).fold(0.0, f64::max)),
        "first_quarter_median_mib": first_q.map(round2),
        "last_quarter_median_mib": last_q.map(round2),
        "vmrss_first_quarter_median_mib": median_of(&rss, w, w + quarter).map(round2),
        "vmrss_last_quarter_median_mib": median_of(&rss, end - quarter, f64::INFINITY).map(round2),
    });
    let (Some(a), Some(b)) = (first_q, last_q) else {
        v["judged"] = json!(false);
        v["note"] = json!("no samples after the warm-up");
        return v;
    };
    let growth = b - a;
    let bound = (a * args.rss_growth_pct / 100.0).max(args.rss_growth_mib);
    v["growth_mib"] = json!(round2(growth));
    v["bound_mib"] = json!(round2(bound));
    if window < args.min_flat_window.as_secs_f64() {
        v["judged"] = json!(false);
        v["note"] = json!(format!(
            "the post-warm-up window ({window:.0} s) is shorter than --min-flat-window ({:.0} s): memory reported, not judged",
            args.min_flat_window.as_secs_f64()
        ));
        return v;
    }
    v["judged"] = json!(true);
    if growth > bound {
        v["fail"] = json!(format!(
            "resident memory ({}) grew {growth:.1} MiB after the warm-up (median {a:.1} -> {b:.1} MiB; bound {bound:.1} MiB)",
            v["measured"].as_str().unwrap_or("")
        ));
    }
    v
}

fn ms(micros: u64) -> f64 {
    round2(micros as f64 / 1000.0)
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn print_summary(s: &Value, series: &std::path::Path, summary: &std::path::Path) {
    println!(
        "soak {}  ({} s, {} connections, {} subscribers)",
        s["verdict"].as_str().unwrap_or("?"),
        s["seconds"],
        s["connections"],
        s["subscribers"]
    );
    println!(
        "  requests ok {}  ({} /s), writes {} ({} /s), errors {}, p50 {} ms, p99 {} ms, max {} ms",
        s["requests_ok"],
        s["throughput_per_s"],
        s["writes_ok"],
        s["writes_per_s"],
        s["errors"],
        s["p50_ms"],
        s["p99_ms"],
        s["max_ms"]
    );
    if let Some(ops) = s["ops"].as_object() {
        for (name, o) in ops {
            println!("    {name:<9} ok {:<9} p50 {:>7} ms  p99 {:>7} ms", o["ok"], o["p50_ms"], o["p99_ms"]);
        }
    }
    let w = &s["written"];
    let subs = s["sse"].as_array().map(|a| a.len()).unwrap_or(0);
    let resumes: u64 = s["sse"].as_array().map(|a| a.iter().filter_map(|x| x["resumes"].as_u64()).sum()).unwrap_or(0);
    let drops: u64 =
        s["sse"].as_array().map(|a| a.iter().filter_map(|x| x["server_drops"].as_u64()).sum()).unwrap_or(0);
    let events: u64 = s["sse"].as_array().map(|a| a.iter().filter_map(|x| x["events"].as_u64()).sum()).unwrap_or(0);
    println!(
        "  written {} transactions / {} events; {subs} subscribers received {events} events in all, {resumes} planned resumes, {drops} server drops",
        w["transactions"], w["events"]
    );
    let r = &s["rss"];
    println!(
        "  memory ({}): warm-up ended at {} s; start {} MiB, warm-up end {} MiB, end {} MiB, peak {} MiB; medians {} -> {} MiB (growth {} MiB, bound {} MiB){}",
        r["measured"], s["warmup_s"], r["start_mib"], r["warmup_end_mib"], r["end_mib"], r["peak_mib"], r["first_quarter_median_mib"],
        r["last_quarter_median_mib"], r["growth_mib"], r["bound_mib"],
        if r["judged"] == true { String::new() } else { format!(" — not judged: {}", r["note"].as_str().unwrap_or("")) }
    );
    println!(
        "  VmRSS (with the index's mapped files): medians {} -> {} MiB; store at the end: {}",
        r["vmrss_first_quarter_median_mib"], r["vmrss_last_quarter_median_mib"], s["store"]
    );
    for reason in s["reasons"].as_array().into_iter().flatten() {
        println!("  FAIL: {}", reason.as_str().unwrap_or(""));
    }
    println!("  series {} summary {}", series.display(), summary.display());
}

/// Resident memory and throughput over time, the warm-up (until `w` s) shaded.
fn draw(path: &std::path::Path, samples: &[Sample], w: f64, font: &std::path::Path) -> Result<()> {
    use plotters::prelude::*;
    crate::plot::register_font(font)?;
    let end = samples.last().map(|s| s.t).unwrap_or(1.0).max(1.0);
    let root = BitMapBackend::new(path, (1200, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    let blue = RGBColor(0, 114, 178);
    let orange = RGBColor(213, 94, 0);
    // (area, title, unit, points, colour)
    type Panel<'a, 'b> = (&'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>, &'a str, &'a str, Vec<(f64, f64)>, RGBColor);
    let panels: [Panel; 2] = [
        (
            &top,
            "server resident memory (VmRSS, and RssAnon in green)",
            "MiB",
            samples.iter().filter_map(|s| s.rss_mib.map(|r| (s.t, r))).collect(),
            blue,
        ),
        (
            &bottom,
            "throughput (all requests, and writes)",
            "requests/s",
            samples.iter().map(|s| (s.t, s.rps)).collect(),
            orange,
        ),
    ];
    for (area, title, unit, pts, color) in panels {
        let y1 = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..end, 0f64..y1)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("seconds")
            .y_desc(unit)
            .label_style(("sans-serif", 12))
            .draw()?;
        chart.draw_series(std::iter::once(Rectangle::new([(0.0, 0.0), (w, y1)], RGBColor(230, 230, 230).filled())))?;
        chart.draw_series(LineSeries::new(pts, color.stroke_width(2)))?;
        // The second line: writes under the throughput, the anonymous part
        // (what the verdict judges) under the resident memory.
        let second: Vec<(f64, f64)> = if title.starts_with("throughput") {
            samples.iter().map(|s| (s.t, s.wps)).collect()
        } else {
            samples.iter().filter_map(|s| s.anon_mib.map(|a| (s.t, a))).collect()
        };
        chart.draw_series(LineSeries::new(second, RGBColor(0, 158, 115).stroke_width(2)))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn warmup_is_a_fifth_and_a_minute_at_least_on_long_runs() {
        assert_eq!(default_warmup(Duration::from_secs(1800)), Duration::from_secs(360));
        assert_eq!(default_warmup(Duration::from_secs(300)), Duration::from_secs(60));
        assert_eq!(default_warmup(Duration::from_secs(60)), Duration::from_secs(12));
    }

    fn samples(rss: impl Fn(f64) -> f64) -> Vec<Sample> {
        (1..=600)
            .map(|t| Sample { t: t as f64, rps: 1.0, wps: 1.0, rss_mib: Some(rss(t as f64)), anon_mib: None })
            .collect()
    }

    fn args() -> SoakArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: SoakArgs,
        }
        P::parse_from(["soak"]).a
    }

    #[test]
    fn flat_memory_with_noise_passes_and_steady_growth_fails() {
        let a = args();
        // Warm-up growth, then a plateau with 20 MiB of sawtooth: flat.
        let flat =
            judge_rss(&samples(|t| if t < 100.0 { 100.0 + t } else { 200.0 + (t % 7.0) * 3.0 }), Some(120.0), &a);
        assert_eq!(flat["judged"], true);
        assert_eq!(flat["measured"], "VmRSS");
        assert!(flat.get("fail").is_none(), "{flat}");
        // 0.2 MiB/s after the warm-up: ~72 MiB between the quarters' medians.
        let leak = judge_rss(&samples(|t| 200.0 + t * 0.2), Some(120.0), &a);
        assert!(leak["fail"].as_str().unwrap().contains("grew"), "{leak}");
        // A short window is reported, not judged.
        let short = judge_rss(&samples(|t| 200.0 + t), Some(500.0), &a);
        assert_eq!(short["judged"], false);
        assert!(short.get("fail").is_none());
        // A warm-up that never ended (the cache still filling): not judged.
        let filling = judge_rss(&samples(|t| 200.0 + t), None, &a);
        assert_eq!(filling["judged"], false);
        assert!(filling["note"].as_str().unwrap().contains("cache"), "{filling}");
    }

    #[test]
    fn anonymous_memory_is_judged_when_the_split_is_known() {
        let a = args();
        // Mapped index files grow 0.2 MiB/s, the heap is flat: a pass.
        let mut s = samples(|t| 500.0 + t * 0.2);
        for x in &mut s {
            x.anon_mib = Some(400.0 + (x.t % 5.0));
        }
        let v = judge_rss(&s, Some(120.0), &a);
        assert_eq!(v["measured"], "RssAnon");
        assert!(v.get("fail").is_none(), "{v}");
        // The heap growing 0.2 MiB/s fails whatever the total does.
        for x in &mut s {
            x.anon_mib = Some(400.0 + x.t * 0.2);
        }
        let v = judge_rss(&s, Some(120.0), &a);
        assert!(v["fail"].as_str().unwrap().contains("RssAnon"), "{v}");
    }

    #[test]
    fn the_mix_picks_every_operation() {
        let mut seen = std::collections::BTreeSet::new();
        for r in 0..100 {
            seen.insert(pick(r));
        }
        assert_eq!(seen.len(), MIX.len());
    }

    #[test]
    fn events_split_on_blank_lines() {
        assert_eq!(find_blank_line(b"data: x\nid: 3\n\ndata: y"), Some((13, 15)));
        assert_eq!(find_blank_line(b"data: x\r\n\r\n"), Some((7, 11)));
        assert_eq!(find_blank_line(b"data: x\n"), None);
    }
}
