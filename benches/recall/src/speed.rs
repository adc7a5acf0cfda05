//! `speed`: latency of recall at scale, in process (no HTTP).
//!
//! The store: `--facts` facts (default 1M) in tenant `bench`, an entity
//! graph of people, orgs and cities plus text facts. Per person
//! `Person:p<n>` (one person per 10 facts): `works_at Org:o<k>` (one org per
//! 50 people), `lives_in City:c<k>` (500 cities), `knows` two other people,
//! `age`, `hobby` (a short phrase) and four `note`s (8-14 words drawn from a
//! 5000-word vocabulary with a Zipf-like skew). `knows` and `note` are `many`.
//! Loaded with `assert_batch` of 1000 facts, relaxed durability; then the
//! search index is built by the indexer's catch-up. The data dir (default
//! `target/recall-bench-<facts>`) is kept and reused by the next run.
//!
//! Measured, each over `--queries` random requests after a warm-up, every
//! call timed with `Instant`:
//!
//! - `search`: `Search::recall`, a 3-word question, `top_k` 8, no seeds
//!   (what `/api/search` and `/api/ask` do after the freshness check);
//! - `search+seed`: the same with a person as seed (BM25 and graph lists);
//! - `context`: what `/api/context` does without a model: the goal's recall
//!   (16 facts) and `context::build` for one seed person;
//! - `walk d2`: `walk::walk` from a person, depth 2, out;
//! - peers: a raw engine `query` by subject (one person's facts), a raw
//!   tantivy term query (one term over the object field, top 8, ids read),
//!   a raw engine `get` by id.

use crate::gen::Rng;
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempora::memory::Memory;
use tempora::recall::{context, walk};
use tempora::search::{Search, SearchRequest};
use tempora_storage::{Cardinality, Durability, Engine, EngineConfig, FactId, FactInput, FactQuery};

const TENANT: &str = "bench";
const FACTS_PER_PERSON: usize = 10;

struct Vocab {
    words: Vec<String>,
}

impl Vocab {
    fn new() -> Vocab {
        let onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "st", "tr", "pl"];
        let vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"];
        let codas = ["", "n", "r", "l", "m", "x", "rd", "nt", "sk"];
        let mut rng = Rng::new(99);
        let mut words = Vec::new();
        while words.len() < 5000 {
            let syl = rng.range(2, 3);
            let mut w = String::new();
            for _ in 0..syl {
                w.push_str(rng.pick::<&str>(&onsets[..]));
                w.push_str(rng.pick::<&str>(&vowels[..]));
            }
            w.push_str(rng.pick::<&str>(&codas[..]));
            if !words.contains(&w) {
                words.push(w);
            }
        }
        Vocab { words }
    }
    /// Zipf-like: small indexes are much more likely.
    fn word(&self, rng: &mut Rng) -> &str {
        let u = (rng.next() % 1_000_000) as f64 / 1_000_000.0;
        let i = ((self.words.len() as f64).powf(u) - 1.0) as usize;
        &self.words[i.min(self.words.len() - 1)]
    }
    fn sentence(&self, rng: &mut Rng, n: usize) -> String {
        (0..n).map(|_| self.word(rng)).collect::<Vec<_>>().join(" ")
    }
}

fn person_facts(p: usize, people: usize, vocab: &Vocab, rng: &mut Rng) -> Vec<FactInput> {
    let me = format!("Person:p{p}");
    let mut v = vec![
        FactInput::new(&me, "works_at", format!("Org:o{}", p / 50)),
        FactInput::new(&me, "lives_in", format!("City:c{}", rng.range(0, 499))),
        FactInput::new(&me, "knows", format!("Person:p{}", rng.range(0, people - 1))),
        FactInput::new(&me, "knows", format!("Person:p{}", rng.range(0, people - 1))),
        FactInput::new(&me, "age", json!(rng.range(18, 90))),
        FactInput::new(&me, "hobby", vocab.sentence(rng, 3)),
    ];
    for _ in 0..4 {
        let n = rng.range(8, 14);
        v.push(FactInput::new(&me, "note", vocab.sentence(rng, n)));
    }
    let at = 1_577_836_800_000 + (p as i64 % 1000) * 86_400_000;
    v.into_iter().map(|f| f.valid_from(at)).collect()
}

fn pct(mut v: Vec<Duration>) -> [f64; 5] {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)].as_secs_f64() * 1000.0;
    let mean = v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len() as f64 * 1000.0;
    [at(0.5), at(0.9), at(0.99), at(0.999), mean]
}

fn measure(name: &str, n: usize, mut op: impl FnMut(usize) -> Result<usize>) -> Result<()> {
    let mut sizes = 0usize;
    for i in 0..(n / 10).max(10) {
        op(i + 1_000_000)?;
    }
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        sizes += op(i)?;
        times.push(t.elapsed());
    }
    let p = pct(times);
    println!(
        "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} |",
        p[0],
        p[1],
        p[2],
        p[3],
        p[4],
        sizes as f64 / n as f64
    );
    Ok(())
}

pub fn run(facts: usize, queries: usize, dir: Option<PathBuf>) -> Result<()> {
    let dir = dir.unwrap_or_else(|| PathBuf::from(format!("target/recall-bench-{facts}")));
    let people = (facts / FACTS_PER_PERSON).max(100);
    let vocab = Vocab::new();
    let marker = dir.join("loaded");
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let engine = Engine::open(EngineConfig::at(&dir).durability(Durability::Relaxed))?;
        engine.set_cardinality(TENANT, "knows", Cardinality::Many)?;
        engine.set_cardinality(TENANT, "note", Cardinality::Many)?;
        let started = Instant::now();
        let mut rng = Rng::new(7);
        let mut batch = Vec::with_capacity(1000);
        for p in 0..people {
            batch.extend(person_facts(p, people, &vocab, &mut rng));
            if batch.len() >= 1000 {
                engine.assert_batch(TENANT, std::mem::take(&mut batch))?;
            }
            if p % 20_000 == 0 && p > 0 {
                eprintln!("  {} facts, {:.0} s", p * FACTS_PER_PERSON, started.elapsed().as_secs_f64());
            }
        }
        if !batch.is_empty() {
            engine.assert_batch(TENANT, batch)?;
        }
        engine.close();
        println!("loaded {} facts in {:.1} s", people * FACTS_PER_PERSON, started.elapsed().as_secs_f64());
    }

    let rt = tokio::runtime::Runtime::new()?;
    let engine = Arc::new(Engine::open(EngineConfig::at(&dir))?);
    let memory = Memory::new(Arc::clone(&engine) as Arc<dyn tempora::store::MemoryStore>);
    let started = Instant::now();
    let search = rt.block_on(async {
        let (search, handle) = Search::start(&dir, &memory, None)?;
        let target = engine.last_tx().0;
        while search.watermark() < target {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::Ok((search, handle))
    })?;
    let (search, handle) = search;
    std::fs::write(&marker, "")?;
    println!(
        "store: {} facts of {} people; index {} documents, ready in {:.1} s",
        engine.stats(TENANT).active,
        people,
        search.documents(),
        started.elapsed().as_secs_f64()
    );

    // Peers read the same index directly.
    let index = tantivy::Index::open_in_dir(dir.join("search")).context("opening the index")?;
    let reader = index.reader()?;
    let fields = tempora::search::schema::Fields::new();
    let object = fields.object;

    let mut rng = Rng::new(1234);
    let n = queries;
    let persons: Vec<String> = (0..n * 2).map(|_| format!("Person:p{}", rng.range(0, people - 1))).collect();
    // Question words: skip the 20 most common (the stopwords of this vocabulary).
    let questions: Vec<String> = (0..n * 2)
        .map(|_| (0..3).map(|_| vocab.words[rng.range(20, 2000)].clone()).collect::<Vec<_>>().join(" "))
        .collect();
    let req = |i: usize, top_k: usize, seeds: Vec<String>| SearchRequest {
        question: questions[i % questions.len()].clone(),
        top_k,
        seeds,
        ..Default::default()
    };

    println!("\n| operation | p50 ms | p90 ms | p99 ms | p99.9 ms | mean ms | results |");
    println!("|---|---|---|---|---|---|---|");
    measure("search (recall, top 8)", n, |i| Ok(search.recall(TENANT, &req(i, 8, vec![]))?.0.len()))?;
    measure("search + seed person", n, |i| {
        Ok(search.recall(TENANT, &req(i, 8, vec![persons[i % persons.len()].clone()]))?.0.len())
    })?;
    measure("context (goal recall 16 + build)", n, |i| {
        let goal = questions[i % questions.len()].clone();
        let recalled: Vec<_> =
            search.recall(TENANT, &req(i, 16, vec![]))?.0.into_iter().map(|f| f.fact).collect();
        let creq = context::ContextRequest {
            seeds: vec![persons[i % persons.len()].clone()],
            goal,
            max_facts: context::DEFAULT_MAX_FACTS,
            max_pages: context::DEFAULT_MAX_PAGES,
            ..Default::default()
        };
        Ok(context::build(&*engine, TENANT, &creq, recalled, vec![], None)?.facts.len())
    })?;
    measure("context build only (no goal)", n, |i| {
        let creq = context::ContextRequest {
            seeds: vec![persons[i % persons.len()].clone()],
            max_facts: context::DEFAULT_MAX_FACTS,
            max_pages: context::DEFAULT_MAX_PAGES,
            ..Default::default()
        };
        Ok(context::build(&*engine, TENANT, &creq, vec![], vec![], None)?.facts.len())
    })?;
    measure("walk depth 2 (out)", n, |i| {
        let w = walk::WalkRequest {
            start: persons[i % persons.len()].clone(),
            depth: 2,
            direction: walk::Direction::Out,
            edge_types: vec![],
            as_of: None,
            max_nodes: walk::DEFAULT_MAX_NODES,
        };
        Ok(walk::walk(&*engine, TENANT, &w)?.reached.len())
    })?;
    measure("peer: engine query by subject", n, |i| {
        let q = FactQuery { subject: Some(persons[i % persons.len()].clone()), ..Default::default() };
        Ok(engine.query(TENANT, &q)?.facts.len())
    })?;
    measure("peer: tantivy term query (top 8, ids)", n, |i| {
        let searcher = reader.searcher();
        let word = questions[i % questions.len()].split(' ').next().unwrap_or("a").to_string();
        let q = tantivy::query::TermQuery::new(
            tantivy::Term::from_field_text(object, &word),
            tantivy::schema::IndexRecordOption::WithFreqs,
        );
        let top = searcher.search(&q, &tantivy::collector::TopDocs::with_limit(8))?;
        let mut got = 0;
        for (_, addr) in top {
            let d: tantivy::TantivyDocument = searcher.doc(addr)?;
            fields.stored_id(&d).context("a search hit without an id")?;
            got += 1;
        }
        Ok(got)
    })?;
    let ids: Vec<FactId> = persons
        .iter()
        .take(200)
        .filter_map(|p| {
            let q = FactQuery { subject: Some(p.clone()), ..Default::default() };
            engine.query(TENANT, &q).ok().and_then(|pg| pg.facts.first().map(|f| f.id))
        })
        .collect();
    measure("peer: engine get by id", n, |i| Ok(engine.get(TENANT, ids[i % ids.len()], None)?.is_some() as usize))?;
    rt.block_on(handle.stop());
    engine.close();
    Ok(())
}
