//! One delivery (a webhook body or a pulled document) from bytes to facts.
//!
//! Records are mapped as they are cut from the body and written in
//! transactions of about [`CHUNK_FACTS`] facts, so memory stays bounded by
//! one chunk whatever the body's size. Each record lands whole or is
//! rejected whole with its reason; one bad record never fails the others.
//!
//! A record that repeats what is stored (same subject, predicate and value,
//! live now) writes nothing and counts as `unchanged`: re-delivering the
//! same data, or pulling a source that did not change, adds no versions.

use super::mapping::{FieldMap, Mapper, SubjectRule};
use super::records::{Cut, Framing, Splitter};
use super::Connector;
use crate::digest::mask::Masker;
use crate::memory::{blocking, Memory};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;
use crate::store::{EngineError, FactInput, Idempotency, OpOutcome, Status, WriteOp, WriteOutcome};

/// Facts per transaction.
pub const CHUNK_FACTS: usize = 1000;
/// Rejections listed in a receipt; the count covers all of them.
pub const MAX_LISTED_REJECTIONS: usize = 100;
/// CSV is read whole (a quoted field may span lines): its bodies are
/// capped lower than streamed ones.
pub const MAX_CSV_BYTES: usize = 64 << 20;

/// Bounds on one delivery (`[connectors]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Largest body read (webhook) or fetched (pull).
    pub max_bytes: u64,
    /// Largest single record.
    pub max_record_bytes: usize,
    /// Most records per delivery.
    pub max_records: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { max_bytes: 256 << 20, max_record_bytes: 1 << 20, max_records: 1_000_000 }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rejection {
    pub record: usize,
    pub line: usize,
    pub reason: String,
}

/// What a delivery did (`IngestReceipt`).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Receipt {
    pub connector: String,
    pub source: String,
    pub delivery: String,
    pub records: usize,
    pub asserted: usize,
    pub candidates: usize,
    pub unchanged: usize,
    pub rejected: usize,
    pub rejections: Vec<Rejection>,
    pub rejections_truncated: bool,
    pub transactions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_tx: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_tx: Option<u64>,
    pub bytes: u64,
}

impl Receipt {
    fn reject(&mut self, record: usize, line: usize, reason: String) {
        self.rejected += 1;
        if self.rejections.len() < MAX_LISTED_REJECTIONS {
            self.rejections.push(Rejection { record, line, reason });
        } else {
            self.rejections_truncated = true;
        }
    }

    fn count(&mut self, out: &WriteOutcome) {
        self.transactions += 1;
        self.first_tx.get_or_insert(out.tx);
        self.last_tx = Some(out.tx);
        for o in &out.outcomes {
            if let OpOutcome::Asserted(a) = o {
                if a.fact.status == Status::Candidate {
                    self.candidates += 1;
                } else {
                    self.asserted += 1;
                }
            }
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }
}

/// Why a delivery stopped before its end.
#[derive(Debug)]
pub enum Stop {
    /// Over a bound: the records before it are written (the receipt says
    /// which); the rest were not read.
    TooLarge(String, Receipt),
    /// The body could not be read (the client went away, a pull timed out).
    Body(String, Receipt),
    /// The engine failed (not the data): nothing more was written.
    Engine(EngineError, Receipt),
}

/// A record mapped and waiting for its chunk's write.
struct Pending {
    record: usize,
    line: usize,
    facts: Vec<FactInput>,
}

pub struct Ingest {
    memory: Memory,
    tenant: String,
    subject: SubjectRule,
    fields: FieldMap,
    masker: Arc<Masker>,
    confidence: Option<f64>,
    bounds: Bounds,
    splitter: Option<Splitter>,
    /// CSV bodies, kept whole until the end.
    csv: Option<Vec<u8>>,
    pending: Vec<Pending>,
    pending_facts: usize,
    receipt: Receipt,
}

impl Ingest {
    /// `None` framing reads the body as CSV.
    pub fn new(
        memory: Memory,
        tenant: &str,
        c: &Connector,
        masker: Masker,
        framing: Option<Framing>,
        bounds: Bounds,
    ) -> Ingest {
        let receipt = Receipt {
            connector: c.name.clone(),
            source: Connector::source(&c.name),
            delivery: uuid::Uuid::now_v7().to_string(),
            ..Default::default()
        };
        Ingest {
            memory,
            tenant: tenant.to_string(),
            subject: c.subject_rule(),
            fields: c.fields.clone(),
            masker: Arc::new(masker),
            confidence: c.confidence,
            bounds,
            splitter: framing.map(|f| Splitter::new(f, bounds.max_record_bytes)),
            csv: framing.is_none().then(Vec::new),
            pending: Vec::new(),
            pending_facts: 0,
            receipt,
        }
    }

    pub fn receipt(&self) -> &Receipt {
        &self.receipt
    }

    /// The next bytes of the body.
    pub async fn feed(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        self.receipt.bytes += bytes.len() as u64;
        if self.receipt.bytes > self.bounds.max_bytes {
            return Err(self
                .too_large(format!("the body is larger than the limit of {} bytes", self.bounds.max_bytes))
                .await);
        }
        if let Some(buf) = &mut self.csv {
            if buf.len() + bytes.len() > MAX_CSV_BYTES {
                return Err(self
                    .too_large(format!(
                        "a CSV body is read whole and may be at most {MAX_CSV_BYTES} bytes; send JSON Lines for more"
                    ))
                    .await);
            }
            buf.extend_from_slice(bytes);
            return Ok(());
        }
        let mut cuts = Vec::new();
        if let Some(s) = &mut self.splitter {
            s.push(bytes, &mut cuts);
        }
        self.take(cuts).await
    }

    /// The end of the body: the rest is written. `idem` (the scoped key)
    /// stores the receipt as the reply to the request's
    /// `Idempotency-Key`, in the delivery's last write. `Ok(Err(reply))`:
    /// another delivery under the key finished first; this is its reply.
    /// When the last chunk writes nothing (all unchanged) no reply is
    /// stored: a retry then finds every record unchanged and writes nothing
    /// twice.
    pub async fn finish(mut self, idem: Option<Vec<u8>>) -> Result<Result<Receipt, Vec<u8>>, Stop> {
        let mut cuts = Vec::new();
        if let Some(s) = &mut self.splitter {
            s.finish(&mut cuts);
        }
        if let Some(buf) = self.csv.take() {
            let text = String::from_utf8_lossy(&buf);
            for (i, rec) in crate::digest::formats::csv(&text).into_iter().enumerate() {
                let (record, line) = (i + 1, rec.line.unwrap_or(0));
                if record > self.bounds.max_records {
                    return Err(self.too_many().await);
                }
                self.receipt.records = record;
                match rec.fields {
                    Ok(fields) => self.map(record, line, &fields, rec.id_fallback.as_deref()),
                    Err(reason) => self.receipt.reject(record, line, reason),
                }
                if self.pending_facts >= CHUNK_FACTS {
                    self.flush(None).await.map_err(|e| Stop::Engine(e, self.receipt.clone()))?;
                }
            }
        }
        self.take(cuts).await?;
        let replayed = self.flush(idem).await.map_err(|e| Stop::Engine(e, self.receipt.clone()))?;
        Ok(match replayed {
            Some(reply) => Err(reply),
            None => Ok(self.receipt),
        })
    }

    async fn take(&mut self, cuts: Vec<Cut>) -> Result<(), Stop> {
        for cut in cuts {
            if cut.record > self.bounds.max_records {
                return Err(self.too_many().await);
            }
            self.receipt.records = cut.record;
            match cut.fields {
                Ok(fields) => self.map(cut.record, cut.line, &fields, None),
                Err(reason) => self.receipt.reject(cut.record, cut.line, reason),
            }
            if self.pending_facts >= CHUNK_FACTS {
                self.flush(None).await.map_err(|e| Stop::Engine(e, self.receipt.clone()))?;
            }
        }
        Ok(())
    }

    fn map(&mut self, record: usize, line: usize, fields: &serde_json::Map<String, Value>, id_fallback: Option<&str>) {
        let mapper = Mapper {
            subject: &self.subject,
            fields: &self.fields,
            masker: &self.masker,
            source: &self.receipt.source,
            confidence: self.confidence,
            connector: &self.receipt.connector,
            delivery: &self.receipt.delivery,
        };
        match mapper.facts(record, fields, id_fallback) {
            Ok(facts) => {
                self.pending_facts += facts.len();
                self.pending.push(Pending { record, line, facts });
            }
            Err(reason) => self.receipt.reject(record, line, reason),
        }
    }

    /// Writes what is pending, the records before a bound included, and
    /// says why the delivery stopped.
    async fn too_large(&mut self, why: String) -> Stop {
        match self.flush(None).await {
            Ok(_) => Stop::TooLarge(why, self.receipt.clone()),
            Err(e) => Stop::Engine(e, self.receipt.clone()),
        }
    }

    async fn too_many(&mut self) -> Stop {
        let why = format!("a delivery holds at most {} records", self.bounds.max_records);
        self.too_large(why).await
    }

    /// Writes the pending records: the unchanged facts are dropped, the rest
    /// go in one transaction. If the engine refuses that transaction because
    /// of the data (a strict predicate's conflict), each record is written
    /// alone so only the offending ones are rejected.
    async fn flush(&mut self, idem: Option<Vec<u8>>) -> Result<Option<Vec<u8>>, EngineError> {
        let pending = std::mem::take(&mut self.pending);
        self.pending_facts = 0;
        let engine = Arc::clone(self.memory.store());
        let tenant = self.tenant.clone();
        // Drop what is already stored.
        let (pending, unchanged) = blocking(move || {
            let mut unchanged = 0;
            let mut kept = Vec::with_capacity(pending.len());
            for mut p in pending {
                let before = p.facts.len();
                let mut facts = Vec::with_capacity(before);
                for f in p.facts {
                    let live = super::live_values(&*engine, &tenant, &f.subject, &f.predicate)?;
                    if !live.iter().any(|l| l.object == f.object && l.source == f.source) {
                        facts.push(f);
                    }
                }
                unchanged += usize::from(facts.is_empty());
                p.facts = facts;
                if !p.facts.is_empty() {
                    kept.push(p);
                }
            }
            Ok((kept, unchanged))
        })
        .await?;
        self.receipt.unchanged += unchanged;
        if pending.is_empty() {
            return Ok(None);
        }
        let ops: Vec<WriteOp> = pending.iter().flat_map(|p| p.facts.iter().cloned().map(WriteOp::Assert)).collect();
        let idem = idem.map(|key| self.idempotency(key));
        match self.memory.write(&self.tenant, ops, idem).await {
            Ok(Ok(out)) => {
                self.receipt.count(&out);
                Ok(None)
            }
            Ok(Err(reply)) => Ok(Some(reply)),
            Err(EngineError::Conflict(_)) | Err(EngineError::Invalid(_)) => {
                for p in pending {
                    let ops = p.facts.into_iter().map(WriteOp::Assert).collect();
                    match self.memory.write(&self.tenant, ops, None).await {
                        Ok(Ok(out)) => self.receipt.count(&out),
                        Ok(Err(_)) => {}
                        Err(EngineError::Conflict(m)) | Err(EngineError::Invalid(m)) => {
                            self.receipt.reject(p.record, p.line, m)
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Stores the final receipt with the last write: the receipt so far plus
    /// what that write did.
    fn idempotency(&self, key: Vec<u8>) -> Idempotency {
        let so_far = self.receipt.clone();
        Idempotency {
            key,
            render: Box::new(move |r: &Result<WriteOutcome, EngineError>| {
                let out = r.as_ref().ok()?;
                let mut receipt = so_far;
                receipt.count(out);
                crate::service::idempotency::encode(Ok(&receipt.to_json()))
            }),
        }
    }
}
