//! `tempora-load compare`: the same bitemporal workloads, with the same
//! driver, concurrency and key choices, against tempora over HTTP and against
//! PostgreSQL and MariaDB over their own wire protocols.
//!
//! Per system, in this order (each system's store is independent, and the
//! systems take turns workload by workload so drift on a noisy machine hits
//! all of them alike):
//! 1. `hotkey`: from an empty store, `--hot-writers` writers supersede values
//!    of only `--hot-keys` keys, then the correctness check.
//! 2. `w5`: bulk import of `--size` facts (see `data`) through each system's
//!    own bulk path.
//! 3. `w0` round trip (the smallest request each system answers: the floor
//!    under every read), `w2` current point read, `w4` subject history.
//! 4. `w1` assert with supersession, then the correctness check over the
//!    whole store: no key with two active values, no inverted interval, no
//!    overlapping current intervals.
//! 5. `w3` point read as of a record time before `w1` and a valid time in 2021.
//!
//! Every step starts once the machine is quiet again (`measure::settle`: CPU,
//! disks and page cache), so the work a step leaves behind (index merges,
//! vacuum, purge, flushes) is not timed as part of another system's step;
//! each step's wait is recorded with it, and so are the CPU cores and the
//! share of time the busiest disk was busy while the step was measured.
//!
//! With `--rounds N` each read step runs N times, the systems taking turns
//! within each round, and the summary (and `tempora-load plot`) takes each
//! system's median round: on this kind of machine one 10 s step moves by a
//! fifth from run to run, more than some of the ratios it is meant to show.
//! The writes (hot-key run, W5, W1) change the stores and run once.
//!
//! Every result is one JSON line appended to `--out`, with the run it belongs
//! to (`run`, the run's start in unix ms) and its round; `tempora-load plot`
//! draws them.

pub mod data;
pub mod http1;
pub mod mariadb;
pub mod measure;
pub mod postgres;
pub mod system;
pub mod tempora;

use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use system::{Kind, Op, System};

/// Times a peer may start one supersession again before it counts as an error.
pub const MAX_RETRIES: u32 = 100;

/// Randomised exponential backoff before a retry, capped at ~50 ms.
pub async fn backoff(retries: u32) {
    let seed = Instant::now().elapsed().as_nanos() as u64 ^ std::process::id() as u64 ^ (retries as u64) << 32;
    let cap = 200u64 << retries.min(8);
    let micros = data::Rng::seeded(seed).next() % cap;
    tokio::time::sleep(Duration::from_micros(micros)).await;
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Systems to run, in turn.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tempora,postgres,mariadb")]
    pub systems: Vec<Kind>,
    /// Facts in the store (the bulk import of W5).
    #[arg(long, default_value_t = 100_000)]
    pub size: u64,
    /// Concurrent connections of W1-W4 (one request in flight each).
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// Measured seconds of each timed workload.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Warm-up seconds before each timed workload (not measured).
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Concurrent bulk streams of W5 (batches for tempora, COPY / LOAD DATA for the peers).
    #[arg(long, default_value_t = 2)]
    pub bulk_streams: usize,
    /// Writers of the hot-key run (0 skips it).
    #[arg(long, default_value_t = 16)]
    pub hot_writers: usize,
    /// Keys of the hot-key run.
    #[arg(long, default_value_t = 100)]
    pub hot_keys: u64,
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub tempora_url: String,
    /// tempora-pg: the replicas serving from one PostgreSQL database
    /// (comma-separated; connections are spread over them in turn).
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:28081")]
    pub tempora_pg_url: Vec<String>,
    /// tempora-pg: the replicas' processes (comma-separated). Their CPU is
    /// counted with the database server's (`--postgres-pid`), which does
    /// the store's work.
    #[arg(long, value_delimiter = ',')]
    pub tempora_pg_pid: Vec<u32>,
    /// tempora-pg: the store URL the replicas use, for the size of their
    /// database (`pg_database_size`).
    #[arg(long)]
    pub tempora_pg_store: Option<String>,
    /// Bearer key, when tempora runs in keyed mode.
    #[arg(long)]
    pub tempora_key: Option<String>,
    #[arg(long, default_value = "host=127.0.0.1 port=55432 user=bench dbname=bench")]
    pub postgres: String,
    #[arg(long, default_value = "mysql://bench@127.0.0.1:53306/bench")]
    pub mariadb: String,
    /// Data directories, for the size on disk (optional).
    #[arg(long)]
    pub tempora_data: Option<std::path::PathBuf>,
    #[arg(long)]
    pub postgres_data: Option<std::path::PathBuf>,
    #[arg(long)]
    pub mariadb_data: Option<std::path::PathBuf>,
    /// Server processes, for their memory and CPU time (with their
    /// children's); without one, every process named `tempora`, `postgres`
    /// or `mariadbd` counts.
    #[arg(long)]
    pub tempora_pid: Option<u32>,
    #[arg(long)]
    pub postgres_pid: Option<u32>,
    #[arg(long)]
    pub mariadb_pid: Option<u32>,
    /// JSON Lines file the results are appended to.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Only the reads (W0, W2, W4, then W3 as of now), against stores an earlier
    /// run left holding `--size` facts: no set-up, hot-key run, import or
    /// W1. For comparing builds of the read path, and for profiling it.
    #[arg(long)]
    pub reads_only: bool,
    /// Only W1 and the check after it, against a store an earlier run left
    /// holding `--size` facts: no set-up, hot-key run, import or reads. For
    /// comparing builds of the write path, and for profiling it (W1 changes
    /// the store: start each run from a copy).
    #[arg(long, conflicts_with = "reads_only")]
    pub writes_only: bool,
    /// With `--reads-only`: W3's record time (unix ms) instead of now. The
    /// full run reads as of the instant before W1, where the facts W1
    /// superseded answer with an earlier version; pass that instant (or
    /// any after the import, before later writes) to measure the same read.
    #[arg(long, requires = "reads_only")]
    pub w3_as_of: Option<i64>,
    /// Before each read step, read the system's data directory once through
    /// the page cache (`--*-data` needed): the step then measures a server
    /// whose data is in memory, whatever the machine's page cache kept of
    /// it since the steps before. InnoDB reads with `O_DIRECT` and gains
    /// nothing from it: its cache is its buffer pool.
    #[arg(long)]
    pub warm: bool,
    /// Longest wait, before each step, for the machine to be quiet again
    /// (see `measure::settle`); 0 does not wait.
    #[arg(long, default_value_t = 300)]
    pub settle_max_secs: u64,
    /// Times each read step (W0, W2, W3, W4) runs, the systems taking turns
    /// in each round; the summary shows each system's median round and the
    /// range of all of them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub rounds: u32,
}

impl CompareArgs {
    fn data_dir(&self, k: Kind) -> Option<&std::path::Path> {
        match k {
            Kind::Tempora => self.tempora_data.as_deref(),
            // Its database shares the server's data directory with the
            // peer's: its size is asked of the server instead.
            Kind::TemporaPg => None,
            Kind::Postgres => self.postgres_data.as_deref(),
            Kind::Mariadb => self.mariadb_data.as_deref(),
        }
    }

    fn pid(&self, k: Kind) -> Option<u32> {
        match k {
            Kind::Tempora => self.tempora_pid,
            Kind::TemporaPg => None,
            Kind::Postgres => self.postgres_pid,
            Kind::Mariadb => self.mariadb_pid,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Workload {
    W0,
    W1,
    W2,
    W3 { as_of_ms: i64 },
    W4,
    Hot,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::W0 => "w0",
            Workload::W1 => "w1",
            Workload::W2 => "w2",
            Workload::W3 { .. } => "w3",
            Workload::W4 => "w4",
            Workload::Hot => "hotkey",
        }
    }
    fn reads(self) -> bool {
        matches!(self, Workload::W0 | Workload::W2 | Workload::W3 { .. } | Workload::W4)
    }
    /// Whether a read returned what the data set says it must.
    fn rows_ok(self, rows: usize) -> bool {
        match self {
            Workload::W0 | Workload::W1 | Workload::Hot => true,
            Workload::W2 | Workload::W3 { .. } => rows == 1,
            Workload::W4 => rows >= data::VERSIONS as usize,
        }
    }
}

struct Run<'a> {
    args: &'a CompareArgs,
    out: Option<std::fs::File>,
    results: Vec<Value>,
    /// The run's start (unix ms), recorded with each result.
    id: i64,
}

impl Run<'_> {
    /// A read workload `--rounds` times, each round on every system in turn.
    async fn rounds(&mut self, systems: &[System], w: Workload) -> Result<()> {
        for round in 1..=self.args.rounds {
            self.each_system(systems, w, round).await?;
        }
        Ok(())
    }

    /// One timed workload on each system in turn, recorded.
    async fn each_system(&mut self, systems: &[System], w: Workload, round: u32) -> Result<()> {
        for s in systems {
            let dir = self.args.data_dir(s.kind());
            if self.args.warm && w.reads() {
                if let Some(d) = dir {
                    measure::warm(d)?;
                    self.settle().await;
                }
            }
            // What the step starts with in the page cache: a read step on a
            // store the cache does not hold measures the disk, not the system.
            let cached = dir.map(measure::cached_bytes).transpose()?;
            let mut r = timed(s, w, self.args).await?;
            r["cached_bytes"] = json!(cached);
            r["round"] = json!(round);
            self.record_settled(s.kind(), w.name(), r).await?;
        }
        Ok(())
    }

    /// Records a step once the machine is quiet again, with the wait
    /// (`settle_s`): what the system went on doing after the step ended.
    async fn record_settled(&mut self, system: Kind, workload: &str, mut v: Value) -> Result<()> {
        v["settle_s"] = json!(self.settle().await);
        self.record(system, workload, v)
    }

    async fn settle(&self) -> f64 {
        measure::settle(Duration::from_secs(self.args.settle_max_secs)).await
    }

    fn record(&mut self, system: Kind, workload: &str, mut v: Value) -> Result<()> {
        v["system"] = json!(system.name());
        v["workload"] = json!(workload);
        v["size"] = json!(self.args.size);
        v["run"] = json!(self.id);
        if let Some(n) = replicas(system, self.args) {
            v["replicas"] = json!(n);
        }
        if let Some(f) = &mut self.out {
            writeln!(f, "{v}")?;
        }
        eprintln!("{v}");
        self.results.push(v);
        Ok(())
    }
}

/// W1 on each system in turn, each followed by its check.
async fn w1_and_check(run: &mut Run<'_>, systems: &[System]) -> Result<()> {
    for s in systems {
        let r = timed(s, Workload::W1, run.args).await?;
        run.record(s.kind(), "w1", r)?;
        let v = s.check().await?;
        run.record_settled(s.kind(), "check_w1", serde_json::to_value(v)?).await?;
    }
    Ok(())
}

pub async fn compare(args: CompareArgs) -> Result<()> {
    let mut systems = Vec::new();
    for &k in &args.systems {
        systems.push(match k {
            Kind::Tempora => System::Tempora(tempora::Tempora::new(
                std::slice::from_ref(&args.tempora_url),
                args.tempora_key.clone(),
                Kind::Tempora,
            )),
            Kind::TemporaPg => {
                System::Tempora(tempora::Tempora::new(&args.tempora_pg_url, args.tempora_key.clone(), Kind::TemporaPg))
            }
            Kind::Postgres => System::Postgres(postgres::Postgres::new(&args.postgres)),
            Kind::Mariadb => System::Mariadb(mariadb::Mariadb::new(&args.mariadb)?),
        });
    }
    let out = match &args.out {
        Some(p) => Some(std::fs::OpenOptions::new().create(true).append(true).open(p)?),
        None => None,
    };
    let mut run = Run { args: &args, out, results: Vec::new(), id: data::now_ms() };
    run.settle().await;
    if args.reads_only {
        let as_of_ms = args.w3_as_of.unwrap_or_else(data::now_ms);
        for w in [Workload::W0, Workload::W2, Workload::W4, Workload::W3 { as_of_ms }] {
            run.rounds(&systems, w).await?;
        }
        summarise(&run.results);
        return verdict(&run.results);
    }
    if args.writes_only {
        w1_and_check(&mut run, &systems).await?;
        summarise(&run.results);
        return verdict(&run.results);
    }
    for s in &systems {
        s.setup().await?;
    }

    if args.hot_writers > 0 {
        for s in &systems {
            let r = timed(s, Workload::Hot, &args).await?;
            run.record(s.kind(), "hotkey", r)?;
            let v = s.check().await?;
            run.record_settled(s.kind(), "check_hotkey", serde_json::to_value(v)?).await?;
        }
    }
    for s in &systems {
        let (started, before, cpu_before) = (Instant::now(), measure::Activity::now(), Cpu::now(s.kind(), &args));
        s.bulk_load(args.size, args.bulk_streams).await?;
        let secs = started.elapsed().as_secs_f64();
        let busy = measure::Activity::now().since(&before);
        let cpu = Cpu::now(s.kind(), &args).since(&cpu_before);
        let v = json!({"facts": args.size, "seconds": secs, "throughput_per_s": args.size as f64 / secs,
            "cpu_cores": busy.cores, "disk_busy": busy.disk, "server_cpu_s": cpu.server, "tool_cpu_s": cpu.tool,
            "database_cpu_s": cpu.database});
        run.record_settled(s.kind(), "w5", v).await?;
    }
    for w in [Workload::W0, Workload::W2, Workload::W4] {
        run.rounds(&systems, w).await?;
    }
    // W3 rewinds to just before W1: keys W1 touched are read from their history.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let before_w1 = data::now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    w1_and_check(&mut run, &systems).await?;
    run.rounds(&systems, Workload::W3 { as_of_ms: before_w1 }).await?;
    for s in &systems {
        let k = s.kind();
        s.settle().await?;
        let (disk, memory) = match k {
            Kind::TemporaPg => (
                match &args.tempora_pg_store {
                    Some(url) => Some(postgres::database_size(url).await?),
                    None => None,
                },
                args.tempora_pg_pid.iter().map(|p| measure::memory_bytes(Some(*p), k.process())).sum(),
            ),
            _ => (args.data_dir(k).map(measure::disk_bytes).transpose()?, measure::memory_bytes(args.pid(k), k.process())),
        };
        // tempora's search index on a line of its own: the peers have none.
        let index = match (k, args.data_dir(k)) {
            (Kind::Tempora, Some(dir)) if dir.join("search").is_dir() => Some(measure::disk_bytes(&dir.join("search"))?),
            _ => None,
        };
        let versions = run.results.iter().rev().find(|r| r["system"] == k.name() && r["workload"] == "check_w1");
        run.record(
            k,
            "footprint",
            json!({"disk_bytes": disk, "index_bytes": index, "memory_bytes": memory, "replicas": replicas(k, &args),
                "versions": versions.and_then(|r| r["versions"].as_u64()).filter(|v| *v > 0)}),
        )?;
    }
    summarise(&run.results);
    verdict(&run.results)
}

/// How many tempora processes serve the system (tempora-pg's replicas).
fn replicas(k: Kind, args: &CompareArgs) -> Option<usize> {
    (k == Kind::TemporaPg).then_some(args.tempora_pg_url.len())
}

/// The tool's own verdict: tempora must hold its guarantees and answer every
/// request with what the data set says.
fn verdict(results: &[Value]) -> Result<()> {
    let mut failures = Vec::new();
    for r in results {
        let tempora = r["system"] == "tempora" || r["system"] == "tempora-pg";
        let workload = r["workload"].as_str().unwrap_or("");
        if tempora && workload.starts_with("check") {
            let v: system::Violations = serde_json::from_value(r.clone()).unwrap_or_default();
            if v.total() > 0 {
                failures.push(format!("{workload}: {r}"));
            }
        }
        if tempora && r["errors"].as_u64().unwrap_or(0) > 0 {
            failures.push(format!("{workload}: {} errors", r["errors"]));
        }
        if tempora && r["wrong_rows"].as_u64().unwrap_or(0) > 0 {
            failures.push(format!("{workload}: {} reads answered the wrong rows", r["wrong_rows"]));
        }
    }
    if !failures.is_empty() {
        bail!("tempora failed its checks:\n{}", failures.join("\n"));
    }
    Ok(())
}

/// One timed workload: `connections` tasks (or `hot_writers` for the
/// hot-key run), each with its own connection and one operation in flight.
async fn timed(system: &System, w: Workload, args: &CompareArgs) -> Result<Value> {
    let connections = if w == Workload::Hot { args.hot_writers } else { args.connections };
    let keys = if w == Workload::Hot { args.hot_keys } else { data::subjects(args.size) };
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let (errors, retries, wrong) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for c in 0..connections {
        let mut conn = system.connect().await?;
        let (stop, measuring) = (stop.clone(), measuring.clone());
        let (errors, retries, wrong) = (errors.clone(), retries.clone(), wrong.clone());
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            let mut rng = data::Rng::seeded(c as u64);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let key = rng.next() % keys;
                let subject = if w == Workload::Hot { format!("Hot:{key}") } else { data::subject(key) };
                let object = format!("Org:c{c}n{n}");
                let op = match w {
                    Workload::W0 => Op::RoundTrip,
                    Workload::W1 | Workload::Hot => Op::Supersede { subject: &subject, object: &object },
                    Workload::W2 => Op::Current { subject: &subject },
                    Workload::W3 { as_of_ms } => Op::AsOf { subject: &subject, as_of_ms, valid_ms: data::W3_VALID_AT },
                    Workload::W4 => Op::History { subject: &subject },
                };
                let started = Instant::now();
                let result = conn.run(&op).await;
                let micros = started.elapsed().as_micros() as u64;
                let counting = measuring.load(Ordering::Relaxed);
                match result {
                    Ok(done) if w.rows_ok(done.rows) => {
                        if counting {
                            let _ = hist.record(micros.max(1));
                            retries.fetch_add(done.retries as u64, Ordering::Relaxed);
                        }
                    }
                    Ok(done) => {
                        if wrong.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("{}: {subject} read {} rows", w.name(), done.rows);
                        }
                    }
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                            eprintln!("{}: {subject}: {e:#}", w.name());
                        }
                    }
                }
            }
            hist
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    let (errors_before, wrong_before) = (errors.load(Ordering::Relaxed), wrong.load(Ordering::Relaxed));
    measuring.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let before = measure::Activity::now();
    let cpu_before = Cpu::now(system.kind(), args);
    let threads_before = thread_cpu(system.kind(), args);
    tokio::time::sleep(Duration::from_secs(args.duration)).await;
    measuring.store(false, Ordering::Relaxed);
    let busy = measure::Activity::now().since(&before);
    let cpu = Cpu::now(system.kind(), args).since(&cpu_before);
    let by_thread = threads_before.zip(thread_cpu(system.kind(), args)).map(|(before, after)| {
        after
            .into_iter()
            .map(|(kind, s)| (kind.clone(), s - before.get(&kind).copied().unwrap_or(0.0)))
            .filter(|(_, s)| *s > 0.0)
            .collect::<std::collections::BTreeMap<_, _>>()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let (errors_after, wrong_after) = (errors.load(Ordering::Relaxed), wrong.load(Ordering::Relaxed));
    stop.store(true, Ordering::Relaxed);
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for t in tasks {
        total.add(t.await?)?;
    }
    let ops = total.len();
    Ok(json!({
        "connections": connections,
        "keys": keys,
        "seconds": elapsed,
        "ok": ops,
        "errors": (errors_after - errors_before) + (wrong_after - wrong_before),
        "wrong_rows": wrong_after - wrong_before,
        "retries": retries.load(Ordering::Relaxed),
        "throughput_per_s": ops as f64 / elapsed,
        "p50_ms": total.value_at_quantile(0.50) as f64 / 1000.0,
        "p99_ms": total.value_at_quantile(0.99) as f64 / 1000.0,
        "max_ms": total.max() as f64 / 1000.0,
        "cpu_cores": busy.cores,
        "disk_busy": busy.disk,
        "server_cpu_s": cpu.server,
        "tool_cpu_s": cpu.tool,
        "database_cpu_s": cpu.database,
        "server_cpu_s_by_thread": by_thread,
    }))
}

/// The embedded server's CPU so far by kind of thread (`--tempora-pid`
/// given): the split of its CPU per request by stage.
fn thread_cpu(k: Kind, args: &CompareArgs) -> Option<std::collections::BTreeMap<String, f64>> {
    match k {
        Kind::Tempora => measure::thread_cpu_seconds(args.pid(k)?),
        _ => None,
    }
}

/// CPU seconds used so far by a system's server processes and by this tool.
/// Over a step they split the machine's busy time between the server and
/// the client: on two cores shared by both, every CPU-second a client
/// spends on its protocol is one its server does not get.
#[derive(Clone, Copy, Default)]
struct Cpu {
    server: Option<f64>,
    /// The database server's part (tempora-pg's PostgreSQL, the peer
    /// itself): with replicas on machines of their own, what bounds writes.
    database: Option<f64>,
    tool: Option<f64>,
}

impl Cpu {
    fn now(k: Kind, args: &CompareArgs) -> Cpu {
        let database = match k {
            Kind::TemporaPg | Kind::Postgres => measure::server_cpu_seconds(args.postgres_pid, Kind::Postgres.process()),
            Kind::Tempora | Kind::Mariadb => None,
        };
        let server = match k {
            // The replicas and the database server they keep their store on.
            Kind::TemporaPg => {
                let replicas: Option<f64> = args
                    .tempora_pg_pid
                    .iter()
                    .map(|p| measure::server_cpu_seconds(Some(*p), k.process()))
                    .sum();
                let database = measure::server_cpu_seconds(args.postgres_pid, Kind::Postgres.process());
                replicas.zip(database).map(|(a, b)| a + b)
            }
            _ => measure::server_cpu_seconds(args.pid(k), k.process()),
        };
        Cpu { server, database, tool: measure::own_cpu_seconds() }
    }

    fn since(&self, earlier: &Cpu) -> Cpu {
        let diff = |a: Option<f64>, b: Option<f64>| Some(a? - b?);
        Cpu {
            server: diff(self.server, earlier.server),
            database: diff(self.database, earlier.database),
            tool: diff(self.tool, earlier.tool),
        }
    }
}

/// The rounds of one step on one system: the median round (by throughput;
/// of an even number, the lower of the middle two) and the range of all.
pub struct Rounds<'a> {
    pub median: &'a Value,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl<'a> Rounds<'a> {
    pub fn of(mut rounds: Vec<&'a Value>) -> Option<Rounds<'a>> {
        let tput = |r: &Value| r["throughput_per_s"].as_f64().unwrap_or(0.0);
        rounds.sort_by(|a, b| tput(a).total_cmp(&tput(b)));
        let (first, last) = (*rounds.first()?, *rounds.last()?);
        Some(Rounds { median: rounds[(rounds.len() - 1) / 2], min: tput(first), max: tput(last), n: rounds.len() })
    }

    /// "48.1k-55.5k" over several rounds, "-" for one.
    fn range(&self) -> String {
        let k = |v: f64| if v >= 1e4 { format!("{:.1}k", v / 1e3) } else { format!("{v:.0}") };
        if self.n > 1 { format!("{}-{}", k(self.min), k(self.max)) } else { "-".into() }
    }
}

/// The table printed at the end: each workload, each system (its median
/// round, and the range over the rounds), and tempora's throughput as a
/// multiple of the peer's, medians from this run.
const ALL_SYSTEMS: [&str; 4] = ["tempora", "tempora-pg", "postgres", "mariadb"];

fn summarise(results: &[Value]) {
    let get =
        |system: &str, workload: &str| results.iter().find(|r| r["system"] == system && r["workload"] == workload);
    let rounds = |system: &str, workload: &str| {
        Rounds::of(results.iter().filter(|r| r["system"] == system && r["workload"] == workload).collect())
    };
    println!(
        "{:<8} {:<10} {:>12} {:>13} {:>9} {:>9} {:>8} {:>8} {:>14} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>10}",
        "workload", "system", "per s", "range per s", "p50 ms", "p99 ms", "errors", "retries", "first/this",
        "server us", "db us", "tool us", "settle s", "cores", "disk %", "cached MB"
    );
    // Ratios are against the run's first system (`--systems`).
    let first = results.first().and_then(|r| r["system"].as_str()).unwrap_or("tempora");
    for w in ["hotkey", "w5", "w0", "w2", "w4", "w1", "w3"] {
        let base = rounds(first, w).and_then(|r| r.median["throughput_per_s"].as_f64());
        for s in ALL_SYSTEMS {
            let Some(all) = rounds(s, w) else { continue };
            let r = all.median;
            let tput = r["throughput_per_s"].as_f64().unwrap_or(0.0);
            let ratio = base.filter(|_| tput > 0.0).map(|b| format!("{:.2}x", b / tput)).unwrap_or_default();
            let f = |k: &str| r[k].as_f64().map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
            // The writes settle after their check, which is recorded apart.
            let settled = get(s, &format!("check_{w}")).unwrap_or(r)["settle_s"].as_f64();
            // CPU microseconds per operation (per fact for W5) over the step.
            let per_op = |k: &str| {
                let ops = tput * r["seconds"].as_f64().unwrap_or(0.0);
                r[k].as_f64().filter(|_| ops > 0.0).map(|cpu| format!("{:.1}", cpu * 1e6 / ops))
            };
            println!(
                "{w:<8} {s:<10} {tput:>12.0} {:>13} {:>9} {:>9} {:>8} {:>8} {ratio:>14} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>10}",
                all.range(),
                f("p50_ms"),
                f("p99_ms"),
                r["errors"].as_u64().map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
                r["retries"].as_u64().map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
                per_op("server_cpu_s").unwrap_or_else(|| "-".into()),
                per_op("database_cpu_s").unwrap_or_else(|| "-".into()),
                per_op("tool_cpu_s").unwrap_or_else(|| "-".into()),
                settled.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
                f("cpu_cores"),
                r["disk_busy"].as_f64().map(|v| format!("{:.0}", v * 100.0)).unwrap_or_else(|| "-".into()),
                r["cached_bytes"].as_u64().map(|b| format!("{:.0}", b as f64 / 1e6)).unwrap_or_else(|| "-".into()),
            );
        }
    }
    // Where tempora's server CPU per request went, by kind of thread.
    for w in ["hotkey", "w5", "w0", "w2", "w4", "w1", "w3"] {
        let Some(all) = rounds("tempora", w) else { continue };
        let r = all.median;
        let ops = r["throughput_per_s"].as_f64().unwrap_or(0.0) * r["seconds"].as_f64().unwrap_or(0.0);
        let Some(split) = r["server_cpu_s_by_thread"].as_object().filter(|_| ops > 0.0) else { continue };
        let mut parts: Vec<(String, f64)> =
            split.iter().filter_map(|(k, v)| Some((k.clone(), v.as_f64()? * 1e6 / ops))).collect();
        // Threads that ended during the step (a checkpoint's, a merge's)
        // took their time out of the per-thread figures; the process kept it.
        let total = r["server_cpu_s"].as_f64().unwrap_or(0.0) * 1e6 / ops;
        let live: f64 = parts.iter().map(|p| p.1).sum();
        parts.push(("threads that ended".into(), total - live));
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        let text: Vec<String> = parts.iter().filter(|p| p.1 >= 0.05).map(|(k, us)| format!("{k} {us:.1}")).collect();
        println!("{:<12} {w:<8} server us by thread: {}", "cpu_split", text.join(", "));
    }
    for s in ALL_SYSTEMS {
        for c in ["check_hotkey", "check_w1"] {
            if let Some(r) = get(s, c) {
                println!(
                    "{c:<12} {s:<10} facts={} duplicate_active={} inverted={} overlapping={}",
                    r["facts"], r["duplicate_active"], r["inverted"], r["overlapping"]
                );
            }
        }
        if let Some(r) = get(s, "footprint") {
            let mb = |b: Option<u64>| b.map(|b| format!("{:.1} MB", b as f64 / 1e6)).unwrap_or_else(|| "-".into());
            let (disk, index) = (r["disk_bytes"].as_u64(), r["index_bytes"].as_u64());
            // The store apart from the search index, and per fact version.
            let store = disk.map(|d| d - index.unwrap_or(0));
            let per_version = store
                .zip(r["versions"].as_u64())
                .map(|(b, v)| format!(" ({:.0} B per version, {v} versions)", b as f64 / v as f64))
                .unwrap_or_default();
            let index = index.map(|i| format!(" search_index={}", mb(Some(i)))).unwrap_or_default();
            println!(
                "{:<12} {s:<10} disk={}{per_version}{index} memory={}",
                "footprint",
                mb(store),
                mb(r["memory_bytes"].as_u64())
            );
        }
    }
}
