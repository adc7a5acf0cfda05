//! `quality`: evidence recall of `/api/search` on the generated
//! conversations, next to a plain BM25 floor over the same turns.
//!
//! Mapping (what an agent that keeps a chat log in tempora would write):
//! one tenant per conversation (`conv-<id>`, keyed mode); every turn is a
//! fact `Session:c<id>-s<n> said "<turn text>"` with properties
//! `{speaker, session, turn, date}`, `valid_from` = the time the turn was
//! said, predicate `said` declared `many`. Each session is written with one
//! `POST /api/facts/batch` (after the session, as an agent would).
//!
//! The floor: tantivy's default tokenizer (split on non-alphanumerics,
//! lower-case; no stemming, no stopwords), one text field, BM25 with
//! tantivy's defaults, an OR of the question's distinct tokens, over the
//! same conversation's turns (one index per conversation).

use crate::gen::{Conversation, QType};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Schema, Value as _, STORED, TEXT};
use tantivy::{doc, Index, TantivyDocument, Term};

pub const K: [usize; 3] = [1, 5, 10];

/// Recall@1/5/10 and reciprocal rank of one question.
#[derive(Debug, Clone, Copy, Default)]
pub struct Score {
    pub recall: [f64; 3],
    pub rr: f64,
}

pub fn score(hits: &[(usize, usize)], gold: &[(usize, usize)]) -> Score {
    let mut s = Score::default();
    for (i, k) in K.iter().enumerate() {
        let found = gold.iter().filter(|g| hits.iter().take(*k).any(|h| h == *g)).count();
        s.recall[i] = found as f64 / gold.len() as f64;
    }
    if let Some(p) = hits.iter().take(10).position(|h| gold.contains(h)) {
        s.rr = 1.0 / (p + 1) as f64;
    }
    s
}

fn key(c: &Conversation) -> String {
    key_of(c.id)
}

/// The tenant of conversation `id`.
pub fn tenant_of(id: usize) -> String {
    format!("conv-{id:02}")
}

/// The bearer key of conversation `id`'s tenant.
pub fn key_of(id: usize) -> String {
    format!("bench-key-{id:02}")
}

/// A `tempora serve` started for the run, on a temp data dir.
pub struct Server {
    child: Child,
    pub base: String,
}

impl Server {
    /// Serves one tenant per conversation id (`tenant_of`, `key_of`).
    pub fn start(binary: &Path, data_dir: &Path, ids: &[usize]) -> Result<Server> {
        let keys: Vec<String> = ids.iter().map(|id| format!("{}={}", tenant_of(*id), key_of(*id))).collect();
        let mut cmd = Command::new(binary);
        cmd.args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "off", "--tcp-addr", "off", "--durability", "relaxed"]);
        for (k, _) in std::env::vars() {
            if k.starts_with("TEMPORA_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("NO_COLOR", "1").env("TEMPORA_LOG", "info").env("TEMPORA_TENANT_KEYS", keys.join(","));
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Some(rest) = line.split("http listening on ").nth(1) {
                        let addr: String =
                            rest.chars().take_while(|c| c.is_ascii_digit() || matches!(c, '.' | ':')).collect();
                        return Ok(Server { child, base: format!("http://{addr}") });
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    bail!("the server did not report its address");
                }
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes every conversation into its tenant.
pub async fn load(client: &reqwest::Client, base: &str, convs: &[Conversation]) -> Result<usize> {
    let mut n = 0;
    for c in convs {
        let auth = format!("Bearer {}", key(c));
        let r = client
            .put(format!("{base}/api/predicates/said"))
            .header("authorization", &auth)
            .json(&json!({"cardinality": "many"}))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("declaring said: {} {}", r.status(), r.text().await?);
        }
        for s in 0..c.sessions() {
            let facts: Vec<Value> = c
                .turns
                .iter()
                .filter(|t| t.session == s)
                .map(|t| {
                    json!({
                        "subject": format!("Session:c{:02}-s{:02}", c.id, t.session),
                        "predicate": "said",
                        "object": t.text,
                        "valid_from": t.at,
                        "source": "chat",
                        "properties": {"speaker": t.speaker, "session": t.session, "turn": t.turn, "date": date(t.at)},
                    })
                })
                .collect();
            n += facts.len();
            let r = client
                .post(format!("{base}/api/facts/batch"))
                .header("authorization", &auth)
                .json(&json!({ "facts": facts }))
                .send()
                .await?;
            if !r.status().is_success() {
                bail!("batch of conversation {} session {s}: {} {}", c.id, r.status(), r.text().await?);
            }
        }
    }
    Ok(n)
}

/// `YYYY-MM-DD` of unix ms (UTC).
pub fn date(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    // Civil from days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    format!("{:04}-{:02}-{:02}", if m <= 2 { y + 1 } else { y }, m, d)
}

/// The turns `/api/search` returns for a question, best first.
pub async fn tempora_hits(client: &reqwest::Client, base: &str, c: &Conversation, question: &str, k: usize) -> Result<Vec<(usize, usize)>> {
    let r = client
        .post(format!("{base}/api/search"))
        .header("authorization", format!("Bearer {}", key(c)))
        .json(&json!({"question": question, "top_k": k}))
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("search: {} {}", r.status(), r.text().await?);
    }
    let body: Value = r.json().await?;
    let facts = body["answer_facts"].as_array().context("answer_facts")?;
    Ok(facts
        .iter()
        .filter_map(|f| {
            let p = &f["properties"];
            Some((p["session"].as_u64()? as usize, p["turn"].as_u64()? as usize))
        })
        .collect())
}

/// The floor: plain BM25 over one conversation's turns.
pub struct Floor {
    index: Index,
    text: tantivy::schema::Field,
    session: tantivy::schema::Field,
    turn: tantivy::schema::Field,
}

impl Floor {
    pub fn build(c: &Conversation) -> Result<Floor> {
        let mut b = Schema::builder();
        let text = b.add_text_field("text", TEXT);
        let session = b.add_u64_field("session", STORED);
        let turn = b.add_u64_field("turn", STORED);
        let index = Index::create_in_ram(b.build());
        let mut w: tantivy::IndexWriter = index.writer_with_num_threads(1, 15_000_000)?;
        for t in &c.turns {
            w.add_document(doc!(text => t.text.clone(), session => t.session as u64, turn => t.turn as u64))?;
        }
        w.commit()?;
        Ok(Floor { index, text, session, turn })
    }

    pub fn hits(&self, question: &str, k: usize) -> Result<Vec<(usize, usize)>> {
        let mut tok = self.index.tokenizer_for_field(self.text)?;
        let mut stream = tok.token_stream(question);
        let mut words: Vec<String> = Vec::new();
        while let Some(t) = stream.next() {
            if !words.contains(&t.text) {
                words.push(t.text.clone());
            }
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = words
            .iter()
            .map(|w| {
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(Term::from_field_text(self.text, w), IndexRecordOption::WithFreqs));
                (Occur::Should, q)
            })
            .collect();
        let searcher = self.index.reader()?.searcher();
        let top = searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(k))?;
        let mut out = Vec::new();
        for (_, addr) in top {
            let d: TantivyDocument = searcher.doc(addr)?;
            let s = d.get_first(self.session).and_then(|v| v.as_u64()).unwrap_or(0) as usize;
            let t = d.get_first(self.turn).and_then(|v| v.as_u64()).unwrap_or(0) as usize;
            out.push((s, t));
        }
        Ok(out)
    }
}

/// Sums of scores by (split, system, type).
#[derive(Default)]
pub struct Table {
    /// (split, system, type name) -> (sum, count)
    cells: BTreeMap<(String, String, String), (Score, usize)>,
}

impl Table {
    pub fn add(&mut self, split: &str, system: &str, kind: QType, s: Score) {
        for t in [kind.name(), "overall"] {
            let e = self.cells.entry((split.into(), system.into(), t.into())).or_default();
            for i in 0..3 {
                e.0.recall[i] += s.recall[i];
            }
            e.0.rr += s.rr;
            e.1 += 1;
        }
    }

    pub fn mean(&self, split: &str, system: &str, kind: &str) -> Option<(Score, usize)> {
        self.cells.get(&(split.to_string(), system.to_string(), kind.to_string())).map(|(s, n)| {
            let n = *n as f64;
            (Score { recall: [s.recall[0] / n, s.recall[1] / n, s.recall[2] / n], rr: s.rr / n }, n as usize)
        })
    }

    /// A markdown table per split: both systems side by side.
    pub fn render(&self, splits: &[&str], systems: &[&str]) -> String {
        let mut out = String::new();
        for split in splits {
            out.push_str(&format!("\n{split}\n\n| type | n |"));
            for s in systems {
                out.push_str(&format!(" {s} R@1 | {s} R@5 | {s} R@10 | {s} MRR |"));
            }
            out.push_str("\n|---|---|");
            for _ in systems {
                out.push_str("---|---|---|---|");
            }
            out.push('\n');
            let kinds: Vec<&str> = QType::ALL.iter().map(|k| k.name()).chain(["overall"]).collect();
            for kind in kinds {
                let Some((_, n)) = self.mean(split, systems[0], kind) else { continue };
                out.push_str(&format!("| {kind} | {n} |"));
                for s in systems {
                    let (m, _) = self.mean(split, s, kind).unwrap_or_default();
                    out.push_str(&format!(" {:.3} | {:.3} | {:.3} | {:.3} |", m.recall[0], m.recall[1], m.recall[2], m.rr));
                }
                out.push('\n');
            }
        }
        out
    }
}

pub fn split_of(c: &Conversation) -> &'static str {
    if c.id.is_multiple_of(2) {
        "tune"
    } else {
        "held-out"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_fraction_of_gold_found_and_rr_the_first() {
        let s = score(&[(0, 1), (2, 4), (3, 0)], &[(2, 4), (9, 9)]);
        assert_eq!(s.recall, [0.0, 0.5, 0.5]);
        assert_eq!(s.rr, 0.5);
        assert_eq!(date(1_672_531_200_000), "2023-01-01");
        assert_eq!(date(1_709_251_200_000), "2024-03-01");
    }
}
