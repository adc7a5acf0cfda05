//! tempora over its REST API: one keep-alive HTTP/1.1 connection per driver
//! connection, as an application would use it.

use super::data::{self, PREDICATE};
use super::http1::{Http1, Reply};
use super::system::{check_key, Done, Kind, Op, Violations};
use anyhow::{bail, Context, Result};
use hyper::Method;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Facts per `POST /api/facts/batch` in the bulk load (the endpoint takes up to 10 000).
const BULK_BATCH: u64 = 5_000;

pub struct Tempora {
    /// One base URL per replica; connections are spread over them in turn.
    bases: Vec<String>,
    next: std::sync::atomic::AtomicUsize,
    key: Option<String>,
    kind: Kind,
}

pub struct Conn {
    http: Http1,
}

impl Tempora {
    pub fn new(urls: &[String], key: Option<String>, kind: Kind) -> Tempora {
        let bases = urls.iter().map(|u| u.trim_end_matches('/').to_string()).collect();
        Tempora { bases, next: std::sync::atomic::AtomicUsize::new(0), key, kind }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub async fn setup(&self) -> Result<()> {
        let mut c = self.connect()?;
        let facts = c.get_json("/api/facts?status=all&include_retracted=true&limit=1").await?;
        if facts.as_array().is_some_and(|a| !a.is_empty()) {
            bail!("tempora at {} already holds facts: start it on an empty store", self.bases.join(", "));
        }
        Ok(())
    }

    /// A connection (opened at its first request): requests on it go one at a time.
    pub fn connect(&self) -> Result<Conn> {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Conn { http: Http1::new(&self.bases[i % self.bases.len()], self.key.as_deref())? })
    }

    /// Batches of 5 000 facts with their valid intervals, `streams` batches in flight.
    pub async fn bulk_load(&self, size: u64, streams: usize) -> Result<()> {
        let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..streams.max(1) {
            let (mut conn, next) = (self.connect()?, next.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let start = next.fetch_add(BULK_BATCH, std::sync::atomic::Ordering::Relaxed);
                    if start >= size {
                        return Ok::<_, anyhow::Error>(());
                    }
                    let facts: Vec<Value> = (start..(start + BULK_BATCH).min(size))
                        .map(|n| {
                            let r = data::row(n);
                            json!({"subject": r.subject, "predicate": PREDICATE, "object": r.object,
                                   "confidence": 0.9, "source": "import",
                                   "valid_from": r.valid_from(), "valid_until": r.valid_until()})
                        })
                        .collect();
                    conn.post("/api/facts/batch", &json!({ "facts": facts })).await?;
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        Ok(())
    }

    /// Reads every current fact of the predicate, page by page, and checks each key.
    pub async fn check(&self) -> Result<Violations> {
        let mut c = self.connect()?;
        let mut keys: HashMap<String, Vec<(i64, Option<i64>, bool)>> = HashMap::new();
        let mut cursor: Option<String> = None;
        let mut superseded = 0;
        loop {
            let mut path = format!("/api/facts?predicate={PREDICATE}&status=active,superseded&limit=1000");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let resp = c.get(&path).await?;
            cursor = resp.headers.get("x-next-cursor").and_then(|v| v.to_str().ok()).map(String::from);
            let page: Vec<Value> = serde_json::from_slice(&resp.body)?;
            for f in &page {
                let subject = f["subject"].as_str().context("a fact without a subject")?.to_string();
                let from = f["valid_from"].as_i64().context("a fact without valid_from")?;
                let until = f["valid_until"].as_i64();
                let open_active = until.is_none() && f["status"] == "active";
                // A superseded fact has two versions: as asserted, and closed.
                superseded += u64::from(f["status"] == "superseded");
                keys.entry(subject).or_default().push((from, until, open_active));
            }
            if cursor.is_none() {
                break;
            }
        }
        let mut v = Violations::default();
        for facts in keys.values_mut() {
            check_key(facts, &mut v);
        }
        v.versions = v.facts + superseded;
        Ok(v)
    }
}

impl Conn {
    /// A successful reply to `GET path`; any other status is an error.
    async fn get(&mut self, path: &str) -> Result<Reply> {
        let resp = self.http.request(Method::GET, path, None).await?;
        if !resp.status.is_success() {
            bail!("GET {path}: {} {}", resp.status, String::from_utf8_lossy(&resp.body));
        }
        Ok(resp)
    }

    async fn get_json(&mut self, path: &str) -> Result<Value> {
        Ok(serde_json::from_slice(&self.get(path).await?.body)?)
    }

    async fn post(&mut self, path: &str, body: &Value) -> Result<Value> {
        let resp = self.http.request(Method::POST, path, Some(serde_json::to_vec(body)?)).await?;
        if !resp.status.is_success() {
            bail!("POST {path}: {} {}", resp.status, String::from_utf8_lossy(&resp.body));
        }
        Ok(serde_json::from_slice(&resp.body)?)
    }

    /// The facts a read returned, counted without building them: the JSON is
    /// parsed in full (a malformed reply is an error) but no value is kept,
    /// as the peers' drivers hand back rows whose columns nobody decodes.
    async fn count_rows(&mut self, path: &str) -> Result<usize> {
        let body = self.get(path).await?.body;
        let rows: Vec<serde::de::IgnoredAny> =
            serde_json::from_slice(&body).with_context(|| format!("GET {path}: not a JSON array"))?;
        Ok(rows.len())
    }

    pub async fn run(&mut self, op: &Op<'_>) -> Result<Done> {
        let read = match *op {
            Op::Supersede { subject, object } => {
                let body = json!({"subject": subject, "predicate": PREDICATE, "object": object,
                                  "confidence": 0.9, "source": "w1"});
                self.post("/api/facts", &body).await?;
                return Ok(Done { rows: 1, retries: 0 });
            }
            // `valid_at` now: the open-ended fact, not the closed ones of the past (they are active too).
            Op::Current { subject } => {
                format!("/api/facts?subject={subject}&predicate={PREDICATE}&valid_at={}", data::now_ms())
            }
            Op::AsOf { subject, as_of_ms, valid_ms } => {
                format!("/api/facts?subject={subject}&predicate={PREDICATE}&as_of={as_of_ms}&valid_at={valid_ms}")
            }
            Op::History { subject } => format!("/api/facts?subject={subject}&status=all"),
            Op::RoundTrip => {
                self.get("/api/health").await?;
                return Ok(Done { rows: 1, retries: 0 });
            }
        };
        Ok(Done { rows: self.count_rows(&read).await?, retries: 0 })
    }
}
