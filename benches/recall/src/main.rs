//! `tempora-recall-bench`: how well and how fast tempora recalls.
//!
//! - `quality`: evidence recall@1/5/10 and MRR of `/api/search` on
//!   generated long multi-session conversations (`gen.rs`), loaded into a
//!   real `tempora serve` over HTTP, next to a plain BM25 floor over the same
//!   turns (`quality.rs`).
//! - `conversations`: evidence recall@1/5/10 of `/api/search` by question
//!   category (single-hop, multi-hop, temporal, open-domain) on generated
//!   conversations between two named people (`people.rs`), each session
//!   stored with `POST /api/conversations`, for BM25 alone, BM25 plus each
//!   ranking signal (graph, time, entity, diverse) and all of them
//!   (`conversations.rs`).
//! - `speed`: in-process latency percentiles of search, context packets and
//!   walks over an engine preloaded with 1M facts, next to raw engine and
//!   raw tantivy peers (`speed.rs`).
//!
//! ```text
//! cargo build --release -p tempora -p tempora-recall-bench
//! target/release/tempora-recall-bench quality
//! target/release/tempora-recall-bench conversations
//! target/release/tempora-recall-bench conversations --misses --config all --kind temporal
//! target/release/tempora-recall-bench speed --facts 1000000
//! ```

mod conversations;
mod gen;
mod people;
mod quality;
mod speed;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(about = "Recall quality and speed benchmarks for tempora")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Evidence recall on generated conversations: tempora vs a BM25 floor.
    Quality {
        /// The tempora binary to serve with.
        #[arg(long, default_value = "target/release/tempora")]
        tempora: PathBuf,
        /// Conversations (even ids are the tuning half, odd the held-out).
        #[arg(long, default_value_t = 50)]
        conversations: usize,
        #[arg(long, default_value_t = 20260101)]
        seed: u64,
        /// Print every question tempora misses at 5 (with the top hits).
        #[arg(long)]
        misses: bool,
        /// Only this split (`tune` or `held-out`) in the miss listing.
        #[arg(long)]
        split: Option<String>,
        /// A miss is a question with gold outside the top `miss_k` (1, 5 or 10).
        #[arg(long, default_value_t = 5)]
        miss_k: usize,
        /// Only this question type in the miss listing.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Evidence recall by category on conversations between two people, per
    /// ranking signal.
    Conversations {
        /// The tempora binary to serve with.
        #[arg(long, default_value = "target/release/tempora")]
        tempora: PathBuf,
        #[arg(long, default_value_t = 20)]
        conversations: usize,
        #[arg(long, default_value_t = 20260101)]
        seed: u64,
        /// Print every question missed at `miss_k` (with the top hits).
        #[arg(long)]
        misses: bool,
        /// The configuration whose misses are listed: bm25, +graph, +time,
        /// +entity, +diverse or all.
        #[arg(long, default_value = "all", allow_hyphen_values = true)]
        config: String,
        /// A miss is a question with gold outside the top `miss_k` (1, 5 or 10).
        #[arg(long, default_value_t = 5)]
        miss_k: usize,
        /// Only this category in the miss listing.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Latency of search, context and walk at scale, in process.
    Speed {
        /// Facts in the store.
        #[arg(long, default_value_t = 1_000_000)]
        facts: usize,
        /// Queries per measured operation.
        #[arg(long, default_value_t = 2000)]
        queries: usize,
        /// Data directory, reused when it already holds the store.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

fn main() -> Result<()> {
    let args = Args::parse();
    match args.cmd {
        Cmd::Quality { tempora, conversations, seed, misses, split, miss_k, kind } => {
            let filter = Misses { on: misses, split, k: miss_k, kind };
            tokio::runtime::Runtime::new()?.block_on(run_quality(tempora, conversations, seed, filter))
        }
        Cmd::Conversations { tempora, conversations, seed, misses, config, miss_k, kind } => {
            let filter = conversations::Misses { on: misses, config, k: miss_k, category: kind };
            tokio::runtime::Runtime::new()?.block_on(conversations::run(tempora, conversations, seed, filter))
        }
        Cmd::Speed { facts, queries, data_dir } => speed::run(facts, queries, data_dir),
    }
}

/// Which misses to list.
struct Misses {
    on: bool,
    split: Option<String>,
    k: usize,
    kind: Option<String>,
}

async fn run_quality(binary: PathBuf, n: usize, seed: u64, misses: Misses) -> Result<()> {
    let convs = gen::dataset(seed, n);
    let turns: usize = convs.iter().map(|c| c.turns.len()).sum();
    let questions: usize = convs.iter().map(|c| c.questions.len()).sum();
    let sessions: usize = convs.iter().map(|c| c.sessions()).sum();
    println!("dataset: {n} conversations, {sessions} sessions, {turns} turns, {questions} questions (seed {seed})");
    let dir = std::env::temp_dir().join(format!("tempora-recall-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ids: Vec<usize> = convs.iter().map(|c| c.id).collect();
    let server = quality::Server::start(&binary, &dir, &ids)?;
    let client = reqwest::Client::new();
    let started = std::time::Instant::now();
    let facts = quality::load(&client, &server.base, &convs).await?;
    println!("loaded {facts} facts in {:.1} s", started.elapsed().as_secs_f64());
    let mut table = quality::Table::default();
    for c in &convs {
        let floor = quality::Floor::build(c)?;
        let split = quality::split_of(c);
        for q in &c.questions {
            let t = quality::tempora_hits(&client, &server.base, c, &q.text, 10).await?;
            let f = floor.hits(&q.text, 10)?;
            let st = quality::score(&t, &q.gold);
            table.add(split, "tempora", q.kind, st);
            table.add(split, "bm25", q.kind, quality::score(&f, &q.gold));
            let at = quality::K.iter().position(|k| *k == misses.k).unwrap_or(1);
            if misses.on
                && st.recall[at] < 1.0
                && misses.split.as_deref().is_none_or(|s| s == split)
                && misses.kind.as_deref().is_none_or(|k| k == q.kind.name())
            {
                let text = |k: &(usize, usize)| {
                    c.turns.iter().find(|t| t.key() == *k).map(|t| format!("{}: {}", t.speaker, t.text)).unwrap_or_default()
                };
                println!("\n[{}] c{} {}  R@{} {:.2}", q.kind.name(), c.id, q.text, misses.k, st.recall[at]);
                for g in &q.gold {
                    let rank = t.iter().position(|h| h == g).map(|p| (p + 1).to_string()).unwrap_or("-".into());
                    println!("  gold (rank {rank}) {}", text(g));
                }
                for h in t.iter().take(3) {
                    println!("  hit  {}", text(h));
                }
            }
        }
    }
    println!("{}", table.render(&["tune", "held-out"], &["tempora", "bm25"]));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
