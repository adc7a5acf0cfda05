//! `tempora-load overload`: floods a server started with a small
//! `max_in_flight` (and `max_sse_subscribers`) with far more concurrent
//! requests than it admits, and checks that the excess is turned away at
//! once instead of queueing:
//! - every answer is a 2xx (admitted) or a 503 with the error envelope
//!   `{"error":{"code":"Unavailable",..}}`; anything else, or a transport
//!   error, fails;
//! - some requests are rejected (else the flood did not overload anything);
//! - the rejections' p99 latency stays under `--max-reject-p99-ms`: a
//!   rejection that waited for a slot would take as long as the admitted
//!   requests ahead of it. Timed on a probe beside the flood (see [`probe`]):
//!   the flood's own latencies measure its closed loop, not the server;
//! - with `--sse-cap N` (the server's `max_sse_subscribers`), N streams
//!   open and hold, every one beyond gets 429 `RateLimited`, and once the
//!   held ones close a new one is admitted again;
//! - afterwards the server answers normally.
//!
//! The requests are deliberately slow-ish: batches of durable writes and
//! lists of many facts, so the admitted ones hold their slots long enough
//! for the flood to pile up behind them.

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct OverloadArgs {
    /// Base URL of the server (started with a small max_in_flight).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Concurrent clients, far above the server's max_in_flight.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// How long to flood.
    #[arg(long, default_value = "10s", value_parser = crate::soak::parse_duration)]
    pub duration: Duration,
    /// Facts per batch write (the slow requests).
    #[arg(long, default_value_t = 200)]
    pub batch: u64,
    /// The server's max_sse_subscribers; 0 skips the stream check.
    #[arg(long, default_value_t = 0)]
    pub sse_cap: usize,
    /// Streams opened beyond the cap (each must get 429).
    #[arg(long, default_value_t = 16)]
    pub sse_extra: usize,
    /// Largest acceptable p99 latency of a 503 rejection.
    #[arg(long, default_value_t = 250.0)]
    pub max_reject_p99_ms: f64,
    /// The result as one JSON line appended to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Bearer key, for keyed mode.
    #[arg(long)]
    pub key: Option<String>,
}

struct Tally {
    admitted: Histogram<u64>,
    rejected: Histogram<u64>,
    retry_after: u64,
    errors: BTreeMap<String, u64>,
    first_errors: Vec<String>,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("bounds")
}

fn ms(micros: u64) -> f64 {
    (micros as f64 / 10.0).round() / 100.0
}

pub async fn overload(args: OverloadArgs) -> Result<()> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(k) = &args.key {
        headers.insert("authorization", format!("Bearer {k}").parse()?);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(args.concurrency)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(120))
        .build()?;
    let base = args.url.trim_end_matches('/').to_string();
    let mut fail: Vec<String> = Vec::new();

    // Something for the lists to return.
    let seed: Vec<Value> = (0..1000)
        .map(|k| json!({"subject": format!("Flood:{k}"), "predicate": "works_at", "object": format!("Org:{}", k % 7)}))
        .collect();
    let resp = client.post(format!("{base}/api/facts/batch")).json(&json!({ "facts": seed })).send().await?;
    if !resp.status().is_success() {
        bail!("seeding failed: {} {}", resp.status(), resp.text().await.unwrap_or_default());
    }

    let tally = Arc::new(Mutex::new(Tally {
        admitted: hist(),
        rejected: hist(),
        retry_after: 0,
        errors: BTreeMap::new(),
        first_errors: Vec::new(),
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..args.concurrency {
        let (client, base, tally, stop) = (client.clone(), base.clone(), tally.clone(), stop.clone());
        let batch = args.batch;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let req = if n.is_multiple_of(2) {
                    let facts: Vec<Value> = (0..batch)
                        .map(|i| {
                            json!({"subject": format!("Flood:{}", (c as u64 * 31 + n * 7 + i) % 1000),
                                        "predicate": "works_at", "object": format!("Org:c{c}n{n}")})
                        })
                        .collect();
                    client.post(format!("{base}/api/facts/batch")).json(&json!({ "facts": facts }))
                } else {
                    client.get(format!("{base}/api/facts?predicate=works_at&limit=1000"))
                };
                let started = Instant::now();
                let result = match req.send().await {
                    Ok(r) => {
                        let status = r.status();
                        let retry_after = r.headers().contains_key("retry-after");
                        r.bytes().await.map(|b| (status, retry_after, b)).map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e.to_string()),
                };
                let micros = (started.elapsed().as_micros() as u64).max(1);
                let mut t = tally.lock().expect("tally lock");
                match result {
                    Ok((s, _, _)) if s.is_success() => {
                        let _ = t.admitted.record(micros);
                    }
                    Ok((s, retry_after, body)) if s == reqwest::StatusCode::SERVICE_UNAVAILABLE => {
                        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        if v["error"]["code"] == "Unavailable" && v["error"]["message"].is_string() {
                            let _ = t.rejected.record(micros);
                            t.retry_after += retry_after as u64;
                        } else {
                            *t.errors.entry("503 without the error envelope".into()).or_default() += 1;
                            if t.first_errors.len() < 5 {
                                t.first_errors.push(format!("503 {}", String::from_utf8_lossy(&body)));
                            }
                        }
                    }
                    Ok((s, _, body)) => {
                        *t.errors.entry(s.as_u16().to_string()).or_default() += 1;
                        if t.first_errors.len() < 5 {
                            t.first_errors
                                .push(format!("{s} {}", String::from_utf8_lossy(&body[..body.len().min(300)])));
                        }
                    }
                    Err(e) => {
                        *t.errors.entry("transport".into()).or_default() += 1;
                        if t.first_errors.len() < 5 {
                            t.first_errors.push(e);
                        }
                    }
                }
            }
        }));
    }
    let started = Instant::now();
    let probe = {
        let (url, key, stop) = (args.url.clone(), args.key.clone(), stop.clone());
        std::thread::spawn(move || probe(&url, key.as_deref(), &stop))
    };
    tokio::time::sleep(args.duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await?;
    }
    let probe = probe.join().map_err(|_| anyhow::anyhow!("the probe thread panicked"))??;
    let flood_s = started.elapsed().as_secs_f64();
    // Every flood task has ended, so the tally is the last handle.
    let t = Arc::try_unwrap(tally)
        .map_err(|_| anyhow::anyhow!("a flood task still holds the tally"))?
        .into_inner()
        .expect("tally lock");
    let errors: u64 = t.errors.values().sum();
    if errors > 0 {
        fail.push(format!(
            "{errors} answers neither 2xx nor a 503 with the envelope: {:?} {:?}",
            t.errors, t.first_errors
        ));
    }
    if t.rejected.is_empty() {
        fail.push(format!("no request was rejected: {} clients did not overload the server", args.concurrency));
    }
    let reject_p99 = ms(t.rejected.value_at_quantile(0.99));
    let probe_p99 = ms(probe.rejected.value_at_quantile(0.99));
    if probe.rejected.is_empty() {
        fail.push(format!("the probe was never rejected ({} admitted, {:?})", probe.admitted.len(), probe.errors));
    } else if probe_p99 > args.max_reject_p99_ms {
        fail.push(format!("rejections are slow: the probe's p99 {probe_p99} ms > {} ms", args.max_reject_p99_ms));
    }
    if !probe.errors.is_empty() {
        fail.push(format!("the probe got answers neither 2xx nor 503: {:?}", probe.errors));
    }

    // After the flood: the server answers normally.
    let after = client.get(format!("{base}/api/facts?subject=Flood:1&predicate=works_at")).send().await;
    let after_ok = matches!(&after, Ok(r) if r.status().is_success());
    if !after_ok {
        fail.push(format!("after the flood a read failed: {:?}", after.map(|r| r.status())));
    }

    let sse = if args.sse_cap > 0 { Some(sse_cap(&client, &base, &args, &mut fail).await?) } else { None };

    let total = t.admitted.len() + t.rejected.len();
    let result = json!({
        "verdict": if fail.is_empty() { "PASS" } else { "FAIL" },
        "reasons": fail,
        "concurrency": args.concurrency,
        "seconds": (flood_s * 100.0).round() / 100.0,
        "requests": total,
        "admitted": t.admitted.len(),
        "admitted_per_s": (t.admitted.len() as f64 / flood_s).round(),
        "admitted_p50_ms": ms(t.admitted.value_at_quantile(0.5)),
        "admitted_p99_ms": ms(t.admitted.value_at_quantile(0.99)),
        "rejected": t.rejected.len(),
        "rejected_share": if total > 0 { (t.rejected.len() as f64 / total as f64 * 1000.0).round() / 1000.0 } else { 0.0 },
        "rejected_p50_ms": ms(t.rejected.value_at_quantile(0.5)),
        "rejected_p99_ms": reject_p99,
        "rejected_max_ms": ms(t.rejected.max()),
        "rejected_with_retry_after": t.retry_after,
        "probe": {
            "admitted": probe.admitted.len(),
            "rejected": probe.rejected.len(),
            "rejected_p50_ms": ms(probe.rejected.value_at_quantile(0.5)),
            "rejected_p99_ms": probe_p99,
            "rejected_max_ms": ms(probe.rejected.max()),
            "admitted_p50_ms": ms(probe.admitted.value_at_quantile(0.5)),
            "errors": probe.errors,
        },
        "errors": t.errors,
        "sse": sse,
    });
    if let Some(path) = &args.out {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("{}", path.display()))?;
        writeln!(f, "{result}")?;
    }
    println!(
        "overload {}: {} clients for {:.0} s: {} admitted ({}/s, p50 {} ms, p99 {} ms), {} rejected 503 ({:.1} %, p50 {} ms, p99 {} ms, max {} ms), {} other errors",
        result["verdict"].as_str().unwrap_or("?"),
        args.concurrency,
        flood_s,
        result["admitted"],
        result["admitted_per_s"],
        result["admitted_p50_ms"],
        result["admitted_p99_ms"],
        result["rejected"],
        result["rejected_share"].as_f64().unwrap_or(0.0) * 100.0,
        result["rejected_p50_ms"],
        result["rejected_p99_ms"],
        result["rejected_max_ms"],
        errors,
    );
    println!("  probe: {}", result["probe"]);
    if let Some(s) = result.get("sse").filter(|s| !s.is_null()) {
        println!("  sse: {s}");
    }
    for r in result["reasons"].as_array().into_iter().flatten() {
        println!("  FAIL: {}", r.as_str().unwrap_or(""));
    }
    if !result["reasons"].as_array().is_some_and(|r| r.is_empty()) {
        bail!("overload FAILED");
    }
    Ok(())
}

/// Fills the subscriber cap, checks the excess gets 429 `RateLimited` fast,
/// then frees the cap and checks a stream is admitted again.
async fn sse_cap(client: &reqwest::Client, base: &str, args: &OverloadArgs, fail: &mut Vec<String>) -> Result<Value> {
    let open = || async {
        let started = Instant::now();
        let r = client.get(format!("{base}/api/stream")).header("accept", "text/event-stream").send().await;
        (r, started.elapsed())
    };
    let mut held = Vec::new();
    for i in 0..args.sse_cap {
        match open().await {
            (Ok(r), _) if r.status().is_success() => held.push(r),
            (Ok(r), _) => {
                fail.push(format!("stream {i} of {} (within the cap) got {}", args.sse_cap, r.status()));
                break;
            }
            (Err(e), _) => {
                fail.push(format!("stream {i} (within the cap): {e}"));
                break;
            }
        }
    }
    let mut rejected = hist();
    let mut wrong = 0;
    for _ in 0..args.sse_extra {
        let (r, took) = open().await;
        match r {
            Ok(r) if r.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
                let v: Value = r.json().await.unwrap_or(Value::Null);
                if v["error"]["code"] == "RateLimited" {
                    let _ = rejected.record((took.as_micros() as u64).max(1));
                } else {
                    wrong += 1;
                }
            }
            Ok(r) => {
                wrong += 1;
                fail.push(format!("a stream beyond the cap got {}", r.status()));
                held.push(r);
            }
            Err(e) => {
                wrong += 1;
                fail.push(format!("a stream beyond the cap: {e}"));
            }
        }
    }
    let p99 = ms(rejected.value_at_quantile(0.99));
    if rejected.len() as usize != args.sse_extra {
        fail.push(format!(
            "{} of {} streams beyond the cap got 429 RateLimited ({wrong} did not)",
            rejected.len(),
            args.sse_extra
        ));
    }
    if p99 > args.max_reject_p99_ms {
        fail.push(format!("stream rejections are slow: p99 {p99} ms"));
    }
    // Closing the held streams frees their places (the server notices a
    // closed stream when it next writes to it: a keep-alive or an event).
    drop(held);
    let write = json!({"subject": "Flood:sse", "predicate": "works_at", "object": "Org:again"});
    let deadline = Instant::now() + Duration::from_secs(30);
    let readmitted = loop {
        let _ = client.post(format!("{base}/api/facts")).json(&write).send().await;
        match open().await {
            (Ok(r), _) if r.status().is_success() => break true,
            _ if Instant::now() > deadline => break false,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    if !readmitted {
        fail.push("no stream was admitted within 30 s of the held ones closing".into());
    }
    Ok(json!({
        "cap": args.sse_cap,
        "beyond_cap": args.sse_extra,
        "rejected_429": rejected.len(),
        "rejected_p50_ms": ms(rejected.value_at_quantile(0.5)),
        "rejected_p99_ms": p99,
        "readmitted_after_close": readmitted,
    }))
}

/// What the probe saw.
struct Probe {
    admitted: Histogram<u64>,
    rejected: Histogram<u64>,
    errors: BTreeMap<String, u64>,
}

/// One request every 20 ms during the flood, from its own OS thread over a
/// blocking socket, timed from the request's first byte to its answer's last.
///
/// The flood's own latencies cannot show whether a rejection is quick: its
/// clients are a closed loop sharing the machine with the server, so each
/// waits its turn behind the others (latency = clients / throughput, whatever
/// the server does), and every answer also waits for the flooding process to
/// get round to reading it. The probe does not queue behind the flood on the
/// client side, so its 503s time the server's turn-around alone.
fn probe(url: &str, key: Option<&str>, stop: &AtomicBool) -> Result<Probe> {
    use std::io::{BufRead, BufReader, Read, Write};
    let host = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_string();
    let auth = key.map(|k| format!("authorization: Bearer {k}\r\n")).unwrap_or_default();
    let request = format!("GET /api/facts?predicate=works_at&limit=1000 HTTP/1.1\r\nhost: {host}\r\n{auth}\r\n");
    let mut p = Probe { admitted: hist(), rejected: hist(), errors: BTreeMap::new() };
    let mut conn: Option<BufReader<std::net::TcpStream>> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        let answer = (|| -> std::io::Result<u16> {
            if conn.is_none() {
                let s = std::net::TcpStream::connect(&host)?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(30)))?;
                conn = Some(BufReader::new(s));
            }
            let c = conn.as_mut().expect("connected");
            c.get_mut().write_all(request.as_bytes())?;
            let mut line = String::new();
            c.read_line(&mut line)?;
            let status: u16 = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            let (mut length, mut close) = (0usize, false);
            loop {
                line.clear();
                if c.read_line(&mut line)? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                let l = line.trim_end().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                close |= l == "connection: close";
            }
            let mut body = vec![0u8; length];
            c.read_exact(&mut body)?;
            if close {
                conn = None;
            }
            Ok(status)
        })();
        let micros = (started.elapsed().as_micros() as u64).max(1);
        match answer {
            Ok(s) if (200..300).contains(&s) => {
                let _ = p.admitted.record(micros);
            }
            Ok(503) => {
                let _ = p.rejected.record(micros);
            }
            Ok(other) => *p.errors.entry(other.to_string()).or_default() += 1,
            Err(e) => {
                conn = None;
                *p.errors.entry(format!("transport: {}", e.kind())).or_default() += 1;
            }
        }
    }
    Ok(p)
}
