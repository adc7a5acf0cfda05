//! `tempora-load`: drives a tempora server over HTTP with N concurrent
//! connections and reports throughput and latency percentiles.
//!
//! Workloads (each over `--keys` subjects `Person:<n>` with predicate
//! `works_at`, a functional `one` predicate):
//! - `assert`: every request asserts a new employer for a random key, so every
//!   assert after the first on a key supersedes the previous fact (durable).
//! - `read`: current point read `GET /api/facts?subject=..&predicate=..`.
//! - `asof`: the same read rewound with `as_of_tx` to a transaction of the
//!   preload, i.e. before later supersessions.
//! - `validat`: the same read at a valid time inside the preloaded intervals.
//! - `chat`: one neuro-san `POST /api/v1/memory/streaming_chat` turn per
//!   request (MINIMAL filter) to the built-in `memory` network without a
//!   model. Each connection alternates `remember Person:<k> works_at Org:<j>`
//!   (a random key, a new employer: it supersedes) and `what do you know
//!   about Person:<k>` (the same key), the question continuing the remember's
//!   conversation with its `chat_context`. Besides the command, every turn
//!   stores its two messages as conversation facts (one more transaction).
//!   A turn counts as ok when the status is 200 and the body's last line is
//!   an `AGENT_FRAMEWORK` response without `structure.error`.
//!
//! Before the timed run, `--preload` asserts every key once (in batches), so
//! reads find data and asserts supersede from the first request.
//!
//!     tempora-load --url http://127.0.0.1:8080 --workload assert --connections 64 --duration 20
//!     tempora-load --url http://127.0.0.1:8080 --workload chat --connections 16 --duration 10
//!
//! Two subcommands compare tempora with PostgreSQL and MariaDB doing the same
//! bitemporal job (`compare`, see `compare/mod.rs`) and draw the results
//! (`plot`):
//!
//!     tempora-load compare --size 100000 --out target/compare/results.jsonl
//!     tempora-load plot --input target/compare/results.jsonl --out-dir docs/perf
//!
//! Two more check a server's behaviour under sustained and excessive load,
//! each ending in PASS or FAIL (`soak.rs`, `overload.rs`):
//!
//!     tempora-load soak --url http://127.0.0.1:8080 --duration 30m --server-pid 1234
//!     tempora-load overload --url http://127.0.0.1:8081 --concurrency 256 --sse-cap 8

mod compare;
mod overload;
mod plot;
mod soak;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum Workload {
    Assert,
    Read,
    Asof,
    Validat,
    /// neuro-san `streaming_chat` turns to the `memory` network.
    Chat,
    /// Not a request loop: `keys` records as one JSON Lines connector
    /// delivery, against the same facts through `/api/facts/batch` (its
    /// peer, in the same run), then the same delivery again (all unchanged).
    Ingest,
}

#[derive(Parser, Debug)]
#[command(about = "Load generator for tempora's HTTP API", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    args: Args,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// The same bitemporal workloads against tempora, PostgreSQL and MariaDB.
    Compare(compare::CompareArgs),
    /// PNG plots of `compare` results: throughput and p99 against data size.
    Plot(plot::PlotArgs),
    /// A long run of mixed reads and writes with SSE subscribers: no errors,
    /// nothing lost on the streams, memory flat after the warm-up.
    Soak(soak::SoakArgs),
    /// A flood far above the server's max_in_flight: the excess gets 503 at
    /// once, streams beyond the cap 429.
    Overload(overload::OverloadArgs),
}

#[derive(clap::Args, Debug)]
struct Args {
    /// Base URL of the server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    #[arg(long, value_enum, default_value = "assert")]
    workload: Workload,
    /// Concurrent connections (one in-flight request each).
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds to run (after a short warm-up).
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Distinct keys (subjects).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Assert every key once before the run (batches of 1000).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    preload: bool,
    /// Bearer key, for keyed mode.
    #[arg(long)]
    key: Option<String>,
    /// Print the result as one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

const VALID_FROM: i64 = 1_577_836_800_000; // 2020-01-01

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Compare(a)) => return compare::compare(a).await,
        Some(Command::Plot(a)) => return plot::plot(a),
        Some(Command::Soak(a)) => return soak::soak(a).await,
        Some(Command::Overload(a)) => return overload::overload(a).await,
        None => cli.args,
    };
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(k) = &args.key {
        headers.insert("authorization", format!("Bearer {k}").parse()?);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(args.connections)
        .tcp_nodelay(true)
        .build()?;
    let base = args.url.trim_end_matches('/').to_string();
    if args.workload == Workload::Ingest {
        return ingest(&client, &base, args.keys, args.json).await;
    }

    let preload_tx = if args.preload { preload(&client, &base, args.keys).await? } else { 0 };

    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..args.connections {
        let (client, base, stop, measuring, errors) =
            (client.clone(), base.clone(), stop.clone(), measuring.clone(), errors.clone());
        let (workload, keys) = (args.workload, args.keys);
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            let mut rng = compare::data::Rng::seeded(c as u64);
            let mut n = 0u64;
            // chat: the key and conversation of the last remember turn.
            let mut key = 0;
            let mut context = None;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // A chat question asks about the key its remember just set.
                if workload != Workload::Chat || n % 2 == 1 {
                    key = rng.next() % keys;
                }
                let started = Instant::now();
                let ok = if workload == Workload::Chat {
                    chat_turn(&client, &base, key, c, n, &mut context).await
                } else {
                    request(&client, &base, workload, key, c, n, preload_tx).await
                };
                let micros = started.elapsed().as_micros() as u64;
                if measuring.load(Ordering::Relaxed) {
                    if ok {
                        let _ = hist.record(micros.max(1));
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            hist
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        total.add(t.await?)?;
    }
    let errors = errors.load(Ordering::Relaxed);
    let ops = total.len();
    let result = json!({
        "workload": format!("{:?}", args.workload).to_lowercase(),
        "connections": args.connections,
        "keys": args.keys,
        "seconds": elapsed,
        "ok": ops,
        "errors": errors,
        "throughput_per_s": ops as f64 / elapsed,
        "p50_ms": total.value_at_quantile(0.50) as f64 / 1000.0,
        "p99_ms": total.value_at_quantile(0.99) as f64 / 1000.0,
        "max_ms": total.max() as f64 / 1000.0,
    });
    if args.json {
        println!("{result}");
    } else {
        println!(
            "{:<8} conns={:<4} keys={:<8} ok={:<8} errors={:<5} {:>9.0}/s  p50={:.2}ms p99={:.2}ms max={:.2}ms",
            result["workload"].as_str().unwrap_or(""),
            args.connections,
            args.keys,
            ops,
            errors,
            ops as f64 / elapsed,
            result["p50_ms"].as_f64().unwrap_or(0.0),
            result["p99_ms"].as_f64().unwrap_or(0.0),
            result["max_ms"].as_f64().unwrap_or(0.0),
        );
    }
    if errors > 0 {
        bail!("{errors} requests failed");
    }
    Ok(())
}

/// The ingest comparison: each record is two facts (a name and an edge).
async fn ingest(client: &reqwest::Client, base: &str, keys: u64, as_json: bool) -> Result<()> {
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis();
    let name = format!("load-{run}");
    let resp = client
        .post(format!("{base}/api/connectors"))
        .json(&json!({"name": name, "subject": format!("Item{run}:{{id}}"), "mask": "none"}))
        .send()
        .await?;
    if !resp.status().is_success() {
        bail!("registering the connector failed: {} {}", resp.status(), resp.text().await.unwrap_or_default());
    }
    let mut body = String::new();
    for k in 0..keys {
        body.push_str(&format!("{{\"id\":{k},\"name\":\"item {k}\",\"team\":\"Team:t{}\"}}\n", k % 50));
    }
    let deliver = |body: String| {
        let (client, url) = (client.clone(), format!("{base}/api/connectors/{name}/events"));
        async move {
            let started = Instant::now();
            let resp = client.post(url).header("content-type", "application/x-ndjson").body(body).send().await?;
            if !resp.status().is_success() {
                bail!("delivery failed: {} {}", resp.status(), resp.text().await.unwrap_or_default());
            }
            let receipt: serde_json::Value = resp.json().await?;
            Ok::<_, anyhow::Error>((started.elapsed().as_secs_f64(), receipt))
        }
    };
    let (webhook_s, receipt) = deliver(body.clone()).await?;
    if receipt["asserted"].as_u64() != Some(keys * 2) {
        bail!("the delivery did not assert every fact: {receipt}");
    }

    let started = Instant::now();
    for chunk_start in (0..keys).step_by(500) {
        let facts: Vec<_> = (chunk_start..(chunk_start + 500).min(keys))
            .flat_map(|k| {
                let s = format!("Batch{run}:{k}");
                [
                    json!({"subject": s, "predicate": "name", "object": format!("item {k}"), "source": "load"}),
                    json!({"subject": s, "predicate": "team", "object": format!("Team:t{}", k % 50), "source": "load"}),
                ]
            })
            .collect();
        let resp = client.post(format!("{base}/api/facts/batch")).json(&json!({ "facts": facts })).send().await?;
        if !resp.status().is_success() {
            bail!("batch failed: {} {}", resp.status(), resp.text().await.unwrap_or_default());
        }
    }
    let batch_s = started.elapsed().as_secs_f64();

    let (again_s, receipt) = deliver(body).await?;
    if receipt["unchanged"].as_u64() != Some(keys) {
        bail!("the repeated delivery was not all unchanged: {receipt}");
    }
    let facts = (keys * 2) as f64;
    let result = json!({
        "workload": "ingest",
        "records": keys,
        "facts": keys * 2,
        "webhook_facts_per_s": facts / webhook_s,
        "batch_facts_per_s": facts / batch_s,
        "webhook_vs_batch": batch_s / webhook_s,
        "redelivery_records_per_s": keys as f64 / again_s,
    });
    if as_json {
        println!("{result}");
    } else {
        println!(
            "ingest   records={keys} webhook {:.0} facts/s, batch {:.0} facts/s (webhook/batch {:.2}x), unchanged re-delivery {:.0} records/s",
            facts / webhook_s,
            facts / batch_s,
            batch_s / webhook_s,
            keys as f64 / again_s
        );
    }
    Ok(())
}

/// Asserts every key once; returns the last transaction of the preload.
async fn preload(client: &reqwest::Client, base: &str, keys: u64) -> Result<u64> {
    let started = Instant::now();
    let mut last_tx = 0;
    for chunk_start in (0..keys).step_by(1000) {
        let facts: Vec<_> = (chunk_start..(chunk_start + 1000).min(keys))
            .map(|k| {
                json!({"subject": format!("Person:{k}"), "predicate": "works_at",
                       "object": "Org:seed", "valid_from": VALID_FROM})
            })
            .collect();
        let resp = client
            .post(format!("{base}/api/facts/batch"))
            .json(&json!({ "facts": facts }))
            .send()
            .await
            .context("preload request")?;
        if !resp.status().is_success() {
            bail!("preload failed: {} {}", resp.status(), resp.text().await.unwrap_or_default());
        }
        let body: serde_json::Value = resp.json().await?;
        last_tx = body["tx"].as_u64().unwrap_or(last_tx);
    }
    eprintln!("preloaded {keys} keys in {:.1}s (last tx {last_tx})", started.elapsed().as_secs_f64());
    Ok(last_tx)
}

async fn request(
    client: &reqwest::Client,
    base: &str,
    workload: Workload,
    key: u64,
    conn: usize,
    n: u64,
    preload_tx: u64,
) -> bool {
    let subject = format!("Person:{key}");
    let req = match workload {
        Workload::Assert => client.post(format!("{base}/api/facts")).json(&json!({
            "subject": subject, "predicate": "works_at", "object": format!("Org:c{conn}n{n}"),
        })),
        Workload::Read => client.get(format!("{base}/api/facts?subject={subject}&predicate=works_at")),
        Workload::Asof => {
            client.get(format!("{base}/api/facts?subject={subject}&predicate=works_at&as_of_tx={preload_tx}"))
        }
        Workload::Validat => client
            .get(format!("{base}/api/facts?subject={subject}&predicate=works_at&valid_at={}", VALID_FROM + 86_400_000)),
        Workload::Chat => unreachable!("chat turns go through chat_turn"),
        Workload::Ingest => unreachable!("ingest is not a request loop"),
    };
    match req.send().await {
        Ok(r) if r.status().is_success() => {
            // Read the body: a response only counts once it is all here.
            r.bytes().await.is_ok()
        }
        Ok(r) => {
            eprintln!("error: {} {}", r.status(), r.text().await.unwrap_or_default());
            false
        }
        Err(e) => {
            eprintln!("error: {e}");
            false
        }
    }
}

/// One `streaming_chat` turn of the `chat` workload: on odd `n` a remember
/// (starting a new conversation), on even `n` a question about the same key
/// continuing it with `context`. Ok when the status is 200 and the body's
/// last line is an `AGENT_FRAMEWORK` response without `structure.error`.
async fn chat_turn(
    client: &reqwest::Client,
    base: &str,
    key: u64,
    conn: usize,
    n: u64,
    context: &mut Option<serde_json::Value>,
) -> bool {
    let remember = n % 2 == 1;
    let text = if remember {
        format!("remember Person:{key} works_at Org:c{conn}n{n}")
    } else {
        format!("what do you know about Person:{key}")
    };
    let mut body = json!({
        "user_message": {"type": "HUMAN", "text": text},
        "chat_filter": {"chat_filter_type": "MINIMAL"},
    });
    let continued = if remember { None } else { context.take() };
    if let Some(ctx) = continued {
        body["chat_context"] = ctx;
    }
    let resp = match client.post(format!("{base}/api/v1/memory/streaming_chat")).json(&body).send().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return false;
        }
    };
    let status = resp.status();
    let bytes = match resp.bytes().await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return false;
        }
    };
    let last = bytes.split(|&b| b == b'\n').rev().find(|l| !l.iter().all(u8::is_ascii_whitespace)).unwrap_or_default();
    let parsed: Option<serde_json::Value> = serde_json::from_slice(last).ok();
    let response = parsed.as_ref().map(|v| &v["response"]);
    let ok = status == reqwest::StatusCode::OK
        && response.is_some_and(|r| r["type"] == "AGENT_FRAMEWORK" && r["structure"].get("error").is_none());
    if !ok {
        eprintln!("error: {status} {}", String::from_utf8_lossy(last));
        return false;
    }
    if remember {
        *context = response.map(|r| r["chat_context"].clone()).filter(|c| c.is_object());
    }
    true
}
