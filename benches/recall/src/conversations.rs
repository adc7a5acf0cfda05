//! `conversations`: evidence recall of `/api/search` on the people dataset
//! (`people.rs`), for BM25 alone and with each ranking signal on top.
//!
//! Mapping (what an agent that keeps a group chat in tempora would write):
//! one tenant per conversation (`conv-<id>`, the keys of `quality`); every
//! session is one `POST /api/conversations` with transcript id
//! `c<conv>-s<session>` and every turn's speaker, text and time, which the
//! server stores as one fact per turn (`Person:<name> said "<text>"`, with
//! properties `{conversation, turn, speaker}`). A hit maps back to its turn
//! through `properties.conversation` and `properties.turn`.
//!
//! Every question is asked with `top_k` 10 and the conversation's reference
//! time, once per configuration: `bm25` (`signals: []`), `+graph`, `+time`,
//! `+entity`, `+diverse` (that signal alone on top of BM25) and `all` (no
//! `signals` field: the server's default).

use crate::people::{self, Category, Conversation, Question};
use crate::quality::{self, Score, K};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Configuration name and the `signals` sent (`None`: the field is left out).
pub const CONFIGS: [(&str, Option<&[&str]>); 6] = [
    ("bm25", Some(&[])),
    ("+graph", Some(&["graph"])),
    ("+time", Some(&["time"])),
    ("+entity", Some(&["entity"])),
    ("+diverse", Some(&["diverse"])),
    ("all", None),
];

/// Conversations searched at once.
const PARALLEL: usize = 4;

/// What one search answered.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// (session, turn) of the answer facts, best first.
    pub hits: Vec<(usize, usize)>,
    /// The grounded interval: from, until (unix ms, when given), words.
    pub time: Option<(Option<i64>, Option<i64>, String)>,
    pub stale: bool,
}

/// Which misses to list.
pub struct Misses {
    pub on: bool,
    /// The configuration whose misses are listed.
    pub config: String,
    pub k: usize,
    pub category: Option<String>,
}

/// Writes every session of every conversation as one transcript.
pub async fn load(client: &reqwest::Client, base: &str, convs: &[Conversation]) -> Result<usize> {
    let mut n = 0;
    for c in convs {
        let auth = format!("Bearer {}", quality::key_of(c.id));
        for s in 0..c.sessions() {
            let turns: Vec<Value> = c
                .turns
                .iter()
                .filter(|t| t.session == s)
                .map(|t| json!({"speaker": t.speaker, "text": t.text, "at": t.at}))
                .collect();
            let r = client
                .post(format!("{base}/api/conversations"))
                .header("authorization", &auth)
                .json(&json!({"conversation": c.transcript(s), "turns": turns}))
                .send()
                .await?;
            let status = r.status();
            if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::METHOD_NOT_ALLOWED {
                bail!("POST /api/conversations answered {status}: this tempora has no conversations endpoint");
            }
            if !status.is_success() {
                bail!("transcript {}: {status} {}", c.transcript(s), r.text().await?);
            }
            let body: Value = r.json().await?;
            let facts = body["facts"].as_array().map(|f| f.len()).unwrap_or(0);
            if facts != turns.len() {
                bail!("transcript {}: {facts} facts stored for {} turns", c.transcript(s), turns.len());
            }
            n += facts;
        }
    }
    Ok(n)
}

/// The session of a transcript id of conversation `id` (`c03-s07` -> 7).
pub fn session_of(transcript: &str, id: usize) -> Option<usize> {
    transcript.strip_prefix(&format!("c{id:02}-s"))?.parse().ok()
}

/// Asks one question with one configuration.
pub async fn search(
    client: &reqwest::Client,
    base: &str,
    c: &Conversation,
    question: &str,
    signals: Option<&[&str]>,
) -> Result<Answer> {
    let mut body = json!({"question": question, "top_k": 10, "reference_time": c.reference_time});
    if let Some(s) = signals {
        body["signals"] = json!(s);
    }
    let r = client
        .post(format!("{base}/api/search"))
        .header("authorization", format!("Bearer {}", quality::key_of(c.id)))
        .json(&body)
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("search {body}: {} {}", r.status(), r.text().await?);
    }
    let v: Value = r.json().await?;
    let facts = v["answer_facts"].as_array().context("answer_facts")?;
    let hits = facts
        .iter()
        .filter_map(|f| {
            let p = &f["properties"];
            Some((session_of(p["conversation"].as_str()?, c.id)?, p["turn"].as_u64()? as usize))
        })
        .collect();
    let time = v.get("time").filter(|t| t.is_object()).map(|t| {
        (t["from"].as_i64(), t["until"].as_i64(), t["text"].as_str().unwrap_or_default().to_string())
    });
    Ok(Answer { hits, time, stale: v["stale"].as_bool().unwrap_or(false) })
}

/// Every question of `c` with every configuration: `[question][config]`.
async fn ask_all(client: reqwest::Client, base: String, c: Arc<Conversation>) -> Result<Vec<Vec<Answer>>> {
    let mut out = Vec::with_capacity(c.questions.len());
    for q in &c.questions {
        let mut row = Vec::with_capacity(CONFIGS.len());
        for (_, signals) in CONFIGS {
            row.push(search(&client, &base, &c, &q.text, signals).await?);
        }
        out.push(row);
    }
    Ok(out)
}

/// Sums of scores by (configuration, category).
#[derive(Default)]
pub struct Table {
    cells: BTreeMap<(usize, &'static str), (Score, usize)>,
}

impl Table {
    pub fn add(&mut self, config: usize, category: Category, s: Score) {
        for c in [category.name(), "overall"] {
            let e = self.cells.entry((config, c)).or_default();
            for i in 0..K.len() {
                e.0.recall[i] += s.recall[i];
            }
            e.0.rr += s.rr;
            e.1 += 1;
        }
    }

    fn mean(&self, config: usize, category: &str) -> Option<([f64; 3], usize)> {
        self.cells.get(&(config, category)).map(|(s, n)| {
            let d = *n as f64;
            ([s.recall[0] / d, s.recall[1] / d, s.recall[2] / d], *n)
        })
    }

    /// Recall by category for every configuration, then each configuration
    /// against `bm25`.
    pub fn render(&self) -> String {
        let rows: Vec<&str> = Category::ALL.iter().map(|c| c.name()).chain(["overall"]).collect();
        let mut out = String::from("\n| category | n |");
        for (name, _) in CONFIGS {
            out.push_str(&format!(" {name} R@1 | {name} R@5 | {name} R@10 |"));
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---|---|---|".repeat(CONFIGS.len()));
        out.push('\n');
        for row in &rows {
            let Some((_, n)) = self.mean(0, row) else { continue };
            out.push_str(&format!("| {row} | {n} |"));
            for i in 0..CONFIGS.len() {
                let (m, _) = self.mean(i, row).unwrap_or_default();
                out.push_str(&format!(" {:.3} | {:.3} | {:.3} |", m[0], m[1], m[2]));
            }
            out.push('\n');
        }
        out.push_str("\nagainst bm25\n\n| category |");
        for (name, _) in &CONFIGS[1..] {
            out.push_str(&format!(" {name} R@1 | {name} R@5 | {name} R@10 |"));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|---|---|".repeat(CONFIGS.len() - 1));
        out.push('\n');
        for row in &rows {
            let Some((base, _)) = self.mean(0, row) else { continue };
            out.push_str(&format!("| {row} |"));
            for i in 1..CONFIGS.len() {
                let (m, _) = self.mean(i, row).unwrap_or_default();
                for k in 0..3 {
                    out.push_str(&format!(" {:+.3} |", m[k] - base[k]));
                }
            }
            out.push('\n');
        }
        out
    }
}

/// How the `all` configuration grounded time.
#[derive(Default)]
struct Grounding {
    /// Questions that name an interval: exact, another interval, none.
    exact: usize,
    other: usize,
    none: usize,
    /// Questions that name no interval, and of those, grounded one anyway.
    unnamed: usize,
    spurious: usize,
}

impl Grounding {
    fn add(&mut self, q: &Question, a: &Answer) {
        match (q.interval, &a.time) {
            (Some(_), None) => self.none += 1,
            (Some((from, until)), Some((f, u, _))) => {
                // `until` is exclusive here; an inclusive end is accepted too.
                if *f == Some(from) && (*u == Some(until) || *u == Some(until - 1)) {
                    self.exact += 1;
                } else {
                    self.other += 1;
                }
            }
            (None, t) => {
                self.unnamed += 1;
                if t.is_some() {
                    self.spurious += 1;
                }
            }
        }
    }
}

pub fn summary(convs: &[Conversation], seed: u64) -> String {
    let turns: usize = convs.iter().map(|c| c.turns.len()).sum();
    let sessions: usize = convs.iter().map(|c| c.sessions()).sum();
    let questions: Vec<&Question> = convs.iter().flat_map(|c| &c.questions).collect();
    let by: Vec<String> = Category::ALL
        .iter()
        .map(|cat| format!("{} {}", cat.name(), questions.iter().filter(|q| q.category == *cat).count()))
        .collect();
    let named = questions.iter().filter(|q| q.interval.is_some()).count();
    format!(
        "dataset: {} conversations between two people, {sessions} sessions, {turns} turns, {} questions (seed {seed}): {} ({named} temporal name an interval)",
        convs.len(),
        questions.len(),
        by.join(", ")
    )
}

pub async fn run(binary: PathBuf, n: usize, seed: u64, misses: Misses) -> Result<()> {
    let miss_config = CONFIGS
        .iter()
        .position(|(name, _)| *name == misses.config)
        .with_context(|| format!("--config: one of {}", CONFIGS.map(|c| c.0).join(", ")))?;
    let miss_at = K.iter().position(|k| *k == misses.k).context("--miss-k: 1, 5 or 10")?;
    let convs = people::dataset(seed, n);
    println!("{}", summary(&convs, seed));
    let dir = std::env::temp_dir().join(format!("tempora-recall-bench-people-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ids: Vec<usize> = convs.iter().map(|c| c.id).collect();
    let server = quality::Server::start(&binary, &dir, &ids)?;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let facts = load(&client, &server.base, &convs).await?;
    println!("loaded {facts} facts in {:.1} s", started.elapsed().as_secs_f64());

    let started = Instant::now();
    let convs: Vec<Arc<Conversation>> = convs.into_iter().map(Arc::new).collect();
    let mut answers: Vec<Option<Vec<Vec<Answer>>>> = vec![None; convs.len()];
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0;
    while next < convs.len() || !tasks.is_empty() {
        while next < convs.len() && tasks.len() < PARALLEL {
            let (client, base, c) = (client.clone(), server.base.clone(), convs[next].clone());
            let i = next;
            tasks.spawn(async move { (i, ask_all(client, base, c).await) });
            next += 1;
        }
        if let Some(done) = tasks.join_next().await {
            let (i, a) = done?;
            answers[i] = Some(a?);
        }
    }
    let searches: usize = convs.iter().map(|c| c.questions.len()).sum::<usize>() * CONFIGS.len();
    println!("{searches} searches in {:.1} s", started.elapsed().as_secs_f64());

    let mut table = Table::default();
    let mut grounding = Grounding::default();
    let mut stale = 0;
    // Per configuration: top-5 hits, those spoken by the person asked
    // about, those that are the other speaker's reply to a gold turn.
    let mut top = [[0usize; 3]; CONFIGS.len()];
    for (c, answers) in convs.iter().zip(&answers) {
        let answers = answers.as_ref().expect("every conversation answered");
        for (q, row) in c.questions.iter().zip(answers) {
            let replies = replies_to(c, q);
            for (i, a) in row.iter().enumerate() {
                table.add(i, q.category, quality::score(&q.credited(&a.hits), &q.gold));
                stale += a.stale as usize;
                for h in a.hits.iter().take(5) {
                    top[i][0] += 1;
                    top[i][1] += c.turn(*h).is_some_and(|t| t.speaker == q.person) as usize;
                    top[i][2] += replies.contains(h) as usize;
                }
            }
            grounding.add(q, &row[CONFIGS.len() - 1]);
            let a = &row[miss_config];
            let s = quality::score(&q.credited(&a.hits), &q.gold);
            if misses.on && s.recall[miss_at] < 1.0 && misses.category.as_deref().is_none_or(|k| k == q.category.name()) {
                print_miss(c, q, a, &misses, s.recall[miss_at]);
            }
        }
    }
    println!("{}", table.render());
    let share = |k: usize| -> Vec<String> {
        CONFIGS.iter().zip(&top).map(|((name, _), t)| format!("{name} {:.2}", t[k] as f64 / t[0].max(1) as f64)).collect()
    };
    println!("top-5 hits spoken by the person asked about: {}", share(1).join(", "));
    println!("top-5 hits that reply to a gold turn: {}", share(2).join(", "));
    let g = &grounding;
    println!(
        "time (all): of {} questions naming an interval, {} grounded it exactly, {} another interval, {} none; {} of {} other questions grounded one",
        g.exact + g.other + g.none,
        g.exact,
        g.other,
        g.none,
        g.spurious,
        g.unnamed
    );
    if stale > 0 {
        println!("warning: {stale} answers were stale (the index had not caught up)");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The other speaker's replies to the gold turns of `q`.
fn replies_to(c: &Conversation, q: &Question) -> Vec<(usize, usize)> {
    c.planted.iter().filter(|p| q.gold.contains(&p.key)).map(|p| p.reply).collect()
}

fn print_miss(c: &Conversation, q: &Question, a: &Answer, misses: &Misses, recall: f64) {
    let line = |k: &(usize, usize)| {
        c.turn(*k)
            .map(|t| format!("s{:02} t{:02} {} {}: {}", t.session, t.turn, quality::date(t.at), t.speaker, t.text))
            .unwrap_or_default()
    };
    let replies = replies_to(c, q);
    let time = match &a.time {
        Some((f, u, text)) => format!(
            "time \"{text}\" {}..{}",
            f.map(quality::date).unwrap_or("-".into()),
            u.map(quality::date).unwrap_or("-".into())
        ),
        None => "no time".into(),
    };
    let named = q
        .interval
        .map(|(f, u)| format!(", names {}..{}", quality::date(f), quality::date(u)))
        .unwrap_or_default();
    println!(
        "\n[{}] c{:02} ({} & {}) {}  {} R@{} {:.2}  ({time}{named})",
        q.category.name(),
        c.id,
        c.people[0],
        c.people[1],
        q.text,
        misses.config,
        misses.k,
        recall
    );
    for g in &q.gold {
        let rank = a.hits.iter().position(|h| h == g).map(|p| (p + 1).to_string()).unwrap_or("-".into());
        println!("  gold (rank {rank}) {}", line(g));
    }
    for h in a.hits.iter().take(3) {
        let mark = if replies.contains(h) { " (a reply to gold)" } else { "" };
        println!("  hit{mark}  {}", line(h));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_ids_map_back_to_sessions() {
        let c = &people::dataset(1, 4)[3];
        assert_eq!(c.transcript(7), "c03-s07");
        assert_eq!(session_of(&c.transcript(7), 3), Some(7));
        assert_eq!(session_of("c03-s07", 2), None);
        assert_eq!(session_of("c03-sx", 3), None);
        for s in 0..c.sessions() {
            let id = c.transcript(s);
            assert!((1..=64).contains(&id.len()));
            assert!(id.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'));
        }
    }

    #[test]
    fn the_table_averages_by_category_and_subtracts_bm25() {
        let mut t = Table::default();
        t.add(0, Category::Temporal, Score { recall: [0.0, 0.5, 1.0], rr: 0.5 });
        t.add(5, Category::Temporal, Score { recall: [1.0, 1.0, 1.0], rr: 1.0 });
        let out = t.render();
        assert!(out.contains("| temporal | 1 | 0.000 | 0.500 | 1.000 |"), "{out}");
        assert!(out.contains("+1.000 | +0.500 | +0.000 |"), "{out}");
    }
}
