//! `/api/digest`: content in, facts out, in one transaction.
//!
//! 1. Mask (`mask.rs`): the content's PII is replaced before anything is
//!    stored or sent anywhere.
//! 2. Read (`formats.rs`): structured content becomes records (JSON
//!    objects, JSON Lines, CSV rows, Markdown front matter and `key: value`
//!    lines); each record becomes facts about one subject ([`record_facts`]).
//!    A record that cannot be read or whose facts the engine would refuse is
//!    rejected with its reason; the others go on.
//! 3. Optionally extract (`model.rs`): a caller's model proposes facts from
//!    the masked text, a judge model scores them; the scores are the facts'
//!    confidences, so facts under the threshold land as candidates.
//! 4. Keep the document as a page (`pages.rs`) that mentions its entities.
//! 5. Write everything with one `Memory::write`: all of it lands or none.

pub mod formats;
pub mod mask;
pub mod model;
pub mod pages;

use crate::llm::{Client, LlmError, ModelConfig};
use formats::{Format, Record};
use mask::{Masker, Secret, Strategy};
use model::Proposal;
use serde::Serialize;
use serde_json::{json, Map, Value};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use crate::store::{
    is_entity_ref, validate_input, Cardinality, MemoryStore, EngineError, FactInput, FactQuery, OpOutcome, Status,
    StatusFilter, WriteOp, WriteOutcome,
};

/// Most facts one digest writes (its page's included): the batch limit of
/// `/api/facts/batch`.
pub const MAX_FACTS: usize = 10_000;
pub const DEFAULT_SOURCE: &str = "upload";
pub const DEFAULT_TYPE: &str = "Record";

/// The request's `subject`: the entity records without an id are about
/// (`Person:sarah`), or the type of records without a `type` (`Person`).
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    Entity(String),
    Type(String),
}

impl Hint {
    pub fn parse(s: &str) -> Result<Hint, String> {
        if is_entity_ref(s) {
            Ok(Hint::Entity(s.to_string()))
        } else if is_type_name(s) {
            Ok(Hint::Type(s.to_string()))
        } else {
            Err(format!("subject must be an entity ref (Type:id) or a type name (letters, digits, _ or - starting with a letter), got {s:?}"))
        }
    }
    fn type_name(this: Option<&Hint>) -> &str {
        match this {
            Some(Hint::Type(t)) => t,
            _ => DEFAULT_TYPE,
        }
    }
}

pub fn is_type_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_alphabetic()) && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[derive(Debug, Clone)]
pub struct Request {
    pub content: String,
    pub format: Format,
    pub content_type: String,
    pub source: String,
    pub hint: Option<Hint>,
    pub strategy: Strategy,
}

/// A fact to assert and the record it came from.
#[derive(Debug, Clone)]
pub struct Planned {
    pub record: usize,
    /// `content` or `extract`.
    pub origin: &'static str,
    pub input: FactInput,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rejection {
    /// 1-based, in the order records were read: the content's records, then
    /// the extractor's proposals.
    pub record: usize,
    /// The content line the record starts on, where the format has lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// `content` or `extract`.
    pub origin: &'static str,
    pub reason: String,
}

/// A digest, ready to write.
#[derive(Debug, Clone)]
pub struct Digest {
    pub page: String,
    pub title: String,
    pub body: String,
    pub body_truncated: bool,
    /// The whole masked content (what a model is shown).
    pub masked_text: String,
    pub masked: BTreeMap<&'static str, usize>,
    pub records: usize,
    pub facts: Vec<Planned>,
    pub rejections: Vec<Rejection>,
    pub mentions: Vec<String>,
    pub mentions_truncated: bool,
}

impl Digest {
    /// Facts the write will hold, the page's own included.
    pub fn fact_count(&self) -> usize {
        self.facts.len() + 4 + self.mentions.len()
    }

    fn reject(&mut self, record: usize, line: Option<usize>, origin: &'static str, reason: String) {
        self.rejections.push(Rejection { record, line, origin, reason });
    }

    fn mention(&mut self, entity: &str) {
        if entity == self.page || self.mentions.iter().any(|m| m == entity) {
            return;
        }
        if self.mentions.len() >= pages::MAX_MENTIONS {
            self.mentions_truncated = true;
            return;
        }
        self.mentions.push(entity.to_string());
    }
}

/// Steps 1, 2 and 4. `Err` is a request error (the whole content cannot be
/// read): nothing is written.
pub fn prepare(req: &Request, masker: &Masker) -> Result<Digest, String> {
    let page = pages::new_page_id();
    let masked = masker.mask(&req.content);
    let body = pages::cut_bytes(&masked.text, pages::MAX_BODY_BYTES).to_string();
    let mut d = Digest {
        page: page.clone(),
        title: String::new(),
        body_truncated: body.len() < masked.text.len(),
        body,
        masked_text: masked.text,
        masked: masked.counts,
        records: 0,
        facts: Vec::new(),
        rejections: Vec::new(),
        mentions: Vec::new(),
        mentions_truncated: false,
    };
    let ctx = RecordContext { req, masker, page: &page };
    match req.format {
        Format::Json | Format::Jsonl | Format::Csv => {
            let records = match req.format {
                Format::Json => formats::json(&req.content)?,
                Format::Jsonl => formats::jsonl(&req.content),
                _ => formats::csv(&req.content),
            };
            d.records = records.len();
            let label = match req.format {
                Format::Json => "JSON",
                Format::Jsonl => "JSON Lines",
                _ => "CSV",
            };
            d.title =
                pages::cut_chars(&format!("{}: {} {label} records", req.source, records.len()), pages::MAX_TITLE_CHARS);
            for (i, rec) in records.into_iter().enumerate() {
                let n = i + 1;
                let line = rec.line;
                match ctx.record_facts(n, rec) {
                    Ok(facts) => {
                        d.facts.extend(facts.into_iter().map(|input| Planned { record: n, origin: "content", input }))
                    }
                    Err(reason) => d.reject(n, line, "content", reason),
                }
            }
        }
        Format::Markdown => {
            let md = formats::markdown(&req.content);
            ctx.markdown(&md, &mut d);
            let front_title =
                md.front.iter().find(|(_, k, _)| k == "title").and_then(|(_, _, v)| v.as_str().map(String::from));
            d.title = md
                .heading
                .clone()
                .or(front_title)
                .map(|t| masker.mask(&t).text)
                .map(|t| pages::cut_chars(&t, pages::MAX_TITLE_CHARS))
                .or_else(|| pages::first_line(&d.masked_text))
                .unwrap_or_default();
        }
        Format::Text => d.title = pages::first_line(&d.masked_text).unwrap_or_default(),
    }
    if d.title.trim().is_empty() {
        d.title = "Untitled".into();
    }
    for e in pages::entity_refs(&d.masked_text) {
        d.mention(&e);
    }
    let linked: Vec<String> = d.facts.iter().flat_map(|f| linked_entities(&f.input)).collect();
    for e in linked {
        d.mention(&e);
    }
    Ok(d)
}

fn linked_entities(f: &FactInput) -> Vec<String> {
    let mut out = Vec::new();
    if is_entity_ref(&f.subject) && !pages::is_page(&f.subject) {
        out.push(f.subject.clone());
    }
    if let Some(o) = f.object.as_str().filter(|o| is_entity_ref(o)) {
        out.push(o.to_string());
    }
    out
}

/// Who a record is about, and the fields that said so (they do not become
/// facts): an entity ref in `id`, `subject` or `@id`; else `Type:id` from
/// `id` (or the CSV first column, `id_fallback`) with the type from `type`,
/// `@type` or the hint; else the hint's entity; else a hash of the record's
/// masked values, so the same record always lands on the same subject.
/// `value` masks a value as it will be stored.
pub fn record_subject<'f>(
    fields: &'f Map<String, Value>,
    id_fallback: Option<&str>,
    hint: Option<&Hint>,
    masker: &Masker,
    value: impl Fn(&Value) -> Value,
) -> Result<(String, Vec<&'f str>), String> {
    let mut used: Vec<&str> = Vec::new();
    let mut subject: Option<String> = None;
    let mut id: Option<String> = None;
    for key in ["id", "subject", "@id"] {
        match fields.get_key_value(key) {
            Some((k, Value::String(s))) if !s.trim().is_empty() => {
                let s = s.trim();
                if is_entity_ref(s) {
                    subject = Some(masker.mask_id(s));
                } else if key == "@id" {
                    continue;
                } else {
                    id = Some(s.to_string());
                }
                used.push(k);
                break;
            }
            Some((k, Value::Number(x))) if key != "@id" => {
                id = Some(x.to_string());
                used.push(k);
                break;
            }
            _ => {}
        }
    }
    if subject.is_none() && id.is_none() {
        // CSV: the first column names the row (and stays a fact too).
        id = id_fallback.and_then(|col| match fields.get(col) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            _ => None,
        });
    }
    if let Some(s) = subject {
        return Ok((s, used));
    }
    if let (Some(Hint::Entity(e)), None) = (hint, &id) {
        return Ok((e.clone(), used));
    }
    let mut ty = Hint::type_name(hint).to_string();
    for key in ["type", "@type"] {
        if let Some((k, Value::String(t))) = fields.get_key_value(key) {
            if !is_type_name(t) {
                return Err(format!(
                    "{key} {t:?} is not an entity type (letters, digits, _ or - starting with a letter)"
                ));
            }
            ty = t.clone();
            used.push(k);
            break;
        }
    }
    let id = match id {
        Some(id) => masker.mask_id(&id).split_whitespace().collect::<Vec<_>>().join("_"),
        None => {
            let masked: Map<String, Value> = fields.iter().map(|(k, v)| (k.clone(), value(v))).collect();
            let canonical = serde_json::to_string(&masked).unwrap_or_default();
            Sha256::digest(canonical.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
        }
    };
    Ok((format!("{ty}:{id}"), used))
}

struct RecordContext<'a> {
    req: &'a Request,
    masker: &'a Masker,
    page: &'a str,
}

impl RecordContext<'_> {
    fn fact(&self, record: usize, subject: &str, predicate: &str, object: Value) -> Result<FactInput, String> {
        let mut props = Map::new();
        props.insert("page".into(), json!(self.page));
        props.insert("record".into(), json!(record));
        let input = FactInput {
            subject: subject.to_string(),
            predicate: predicate.to_string(),
            object,
            source: Some(self.req.source.clone()),
            properties: Some(props),
            ..Default::default()
        };
        validate_input(&input).map_err(|e| format!("field {predicate:?}: {e}"))?;
        Ok(input)
    }

    /// A value as stored: masked; CSV text also typed (numbers, booleans).
    fn value(&self, v: &Value) -> Value {
        match (self.req.format, v) {
            (Format::Csv, Value::String(s)) => formats::infer(&self.masker.mask(s).text),
            _ => self.masker.mask_value(v),
        }
    }

    /// The facts of one record: see `docs/digest.md` for the rules.
    fn record_facts(&self, n: usize, rec: Record) -> Result<Vec<FactInput>, String> {
        let fields = rec.fields?;
        let (subject, used) =
            record_subject(&fields, rec.id_fallback.as_deref(), self.req.hint.as_ref(), self.masker, |v| {
                self.value(v)
            })?;
        let mut out = Vec::new();
        for (k, v) in &fields {
            if used.contains(&k.as_str()) || v.is_null() {
                continue;
            }
            out.push(self.fact(n, &subject, k, self.value(v))?);
        }
        Ok(out)
    }

    /// A Markdown document: each front matter entry and `key: value` line
    /// is one record about the document's subject.
    fn markdown(&self, md: &formats::Markdown, d: &mut Digest) {
        let front = |k: &str| md.front.iter().find(|(_, key, _)| key == k).map(|(_, _, v)| v);
        let mut used: Vec<&str> = Vec::new();
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let mut subject: Option<String> = None;
        if let Some(s) = text(front("subject")).filter(|s| is_entity_ref(s)) {
            subject = Some(self.masker.mask_id(&s));
            used.push("subject");
        } else if let Some(id) = text(front("id")) {
            used.push("id");
            if is_entity_ref(&id) {
                subject = Some(self.masker.mask_id(&id));
            } else {
                let ty = match text(front("type")).filter(|t| is_type_name(t)) {
                    Some(t) => {
                        used.push("type");
                        t
                    }
                    None => Hint::type_name(self.req.hint.as_ref()).to_string(),
                };
                let id = self.masker.mask_id(&id).split_whitespace().collect::<Vec<_>>().join("_");
                subject = Some(format!("{ty}:{id}"));
            }
        }
        let subject = subject.unwrap_or_else(|| match &self.req.hint {
            Some(Hint::Entity(e)) => e.clone(),
            _ => self.page.to_string(),
        });
        let entries = md.front.iter().filter(|(_, k, _)| !used.contains(&k.as_str())).chain(md.lines.iter());
        for (line, key, value) in entries {
            d.records += 1;
            let n = d.records;
            if value.is_null() {
                continue;
            }
            match self.fact(n, &subject, key, self.masker.mask_value(value)) {
                Ok(f) => d.facts.push(Planned { record: n, origin: "content", input: f }),
                Err(reason) => d.reject(n, Some(*line), "content", reason),
            }
        }
    }
}

// ------------------------------------------------------------- the model path

/// Why the model path failed: the endpoint (timeouts, HTTP errors) or an
/// answer that is not what was asked for.
#[derive(Debug)]
pub enum ModelFailure {
    Llm(LlmError),
    Junk(String),
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Tokens {
    #[serde(rename = "in")]
    pub tokens_in: u64,
    #[serde(rename = "out")]
    pub tokens_out: u64,
}

/// Step 3: extraction from the masked text and, with a judge, its scores.
/// Adds the accepted proposals to `d` (rejecting unusable ones).
pub async fn extract(
    client: &Client,
    extractor: &ModelConfig,
    judge: Option<&ModelConfig>,
    masker: &Masker,
    source: &str,
    d: &mut Digest,
) -> Result<Tokens, ModelFailure> {
    let text = pages::cut_bytes(&d.masked_text, model::MAX_MODEL_TEXT).to_string();
    let mut tokens = Tokens::default();
    let chat = client
        .chat(extractor, model::EXTRACT_SYSTEM, &model::extract_prompt(&text))
        .await
        .map_err(ModelFailure::Llm)?;
    tokens.tokens_in += chat.tokens_in;
    tokens.tokens_out += chat.tokens_out;
    let parsed = model::parse_proposals(&chat.content).map_err(ModelFailure::Junk)?;
    let first = d.records + 1;
    d.records += parsed.len();
    let mut good: Vec<(usize, Proposal)> = Vec::new();
    for (i, p) in parsed.into_iter().enumerate() {
        let n = first + i;
        match p {
            Ok(_) if good.len() >= model::MAX_PROPOSALS => {
                d.reject(n, None, "extract", format!("over the limit of {} extracted facts", model::MAX_PROPOSALS))
            }
            Ok(mut p) => {
                // The model saw masked text only; mask its answer too, in case.
                p.subject = masker.mask_id(&p.subject);
                p.object = masker.mask_value(&p.object);
                good.push((n, p));
            }
            Err(reason) => d.reject(n, None, "extract", reason),
        }
    }
    let scores = match judge {
        Some(j) if !good.is_empty() => {
            let props: Vec<Proposal> = good.iter().map(|(_, p)| p.clone()).collect();
            let judge_text = pages::cut_bytes(&text, model::MAX_MODEL_TEXT / 2);
            let chat = client
                .chat(j, model::JUDGE_SYSTEM, &model::judge_prompt(judge_text, &props))
                .await
                .map_err(ModelFailure::Llm)?;
            tokens.tokens_in += chat.tokens_in;
            tokens.tokens_out += chat.tokens_out;
            Some(model::parse_scores(&chat.content, props.len()).map_err(ModelFailure::Junk)?)
        }
        _ => None,
    };
    for (k, (n, p)) in good.into_iter().enumerate() {
        let confidence = match &scores {
            Some(s) => s[k],
            None => p.confidence.unwrap_or(model::UNSCORED_CONFIDENCE),
        };
        let mut props = Map::new();
        props.insert("page".into(), json!(d.page));
        props.insert("record".into(), json!(n));
        props.insert("extracted_by".into(), json!(extractor.model));
        if let Some(j) = judge {
            props.insert("judged_by".into(), json!(j.model));
        }
        let input = FactInput {
            subject: p.subject,
            predicate: p.predicate,
            object: p.object,
            confidence: Some(confidence),
            source: Some(source.to_string()),
            properties: Some(props),
            ..Default::default()
        };
        match validate_input(&input) {
            Ok(()) => {
                for e in linked_entities(&input) {
                    d.mention(&e);
                }
                d.facts.push(Planned { record: n, origin: "extract", input });
            }
            Err(e) => d.reject(n, None, "extract", e.to_string()),
        }
    }
    Ok(tokens)
}

// ------------------------------------------------------------- writing

/// Rejects the records whose facts a `strict` predicate would refuse (the
/// subject already holds another value now, or an earlier record of this
/// digest asserts another one), so one conflicting record does not fail the
/// whole digest. A conflict that appears between this check and the write
/// still fails the write as a whole (400 Conflict, nothing written).
pub fn check_strict(engine: &dyn MemoryStore, tenant: &str, d: &mut Digest, now: i64) -> Result<(), EngineError> {
    let mut cardinality: HashMap<String, Cardinality> = HashMap::new();
    let mut bad: BTreeMap<usize, (&'static str, String)> = BTreeMap::new();
    let mut held: HashMap<(String, String), Value> = HashMap::new();
    for f in &d.facts {
        let p = &f.input.predicate;
        if !cardinality.contains_key(p) {
            cardinality.insert(p.clone(), engine.predicate(tenant, p)?.cardinality);
        }
        if cardinality[p] != Cardinality::Strict || bad.contains_key(&f.record) {
            continue;
        }
        let key = (f.input.subject.clone(), p.clone());
        if let Some(prev) = held.get(&key) {
            if *prev != f.input.object {
                bad.insert(f.record, (f.origin, format!("{p} is strict and an earlier record gives {} {prev}", key.0)));
            }
            continue;
        }
        let q = FactQuery {
            subject: Some(key.0.clone()),
            predicate: Some(p.clone()),
            status: StatusFilter::Current,
            limit: 100,
            ..Default::default()
        };
        let current = engine.query(tenant, &q)?.facts;
        if let Some(other) =
            current.iter().find(|x| x.object != f.input.object && x.valid_until.is_none_or(|u| u > now))
        {
            bad.insert(f.record, (f.origin, format!("{p} is strict and {} already holds {}", key.0, other.object)));
            continue;
        }
        held.insert(key, f.input.object.clone());
    }
    if !bad.is_empty() {
        d.facts.retain(|f| !bad.contains_key(&f.record));
        for (record, (origin, reason)) in bad {
            d.reject(record, None, origin, reason);
        }
        d.rejections.sort_by_key(|r| r.record);
    }
    Ok(())
}

/// What each operation of the write is, to read the outcome back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Setting,
    Content,
    Page,
}

/// The write: the `mentions` cardinality when it is not `many` yet, the
/// request's threshold around the content facts (restored in the same
/// transaction), the content facts, then the page's facts (title, body,
/// source, content type, mentions).
pub fn ops(
    d: &Digest,
    source: &str,
    content_type: &str,
    mentions_many: bool,
    threshold: Option<(f64, f64)>,
) -> (Vec<WriteOp>, Vec<Slot>) {
    let mut ops = Vec::new();
    let mut slots = Vec::new();
    if !mentions_many && !d.mentions.is_empty() {
        ops.push(WriteOp::SetCardinality { predicate: pages::MENTIONS.into(), cardinality: Cardinality::Many });
        slots.push(Slot::Setting);
    }
    if let Some((wanted, _)) = threshold {
        ops.push(WriteOp::SetThreshold(wanted));
        slots.push(Slot::Setting);
    }
    for f in &d.facts {
        ops.push(WriteOp::Assert(f.input.clone()));
        slots.push(Slot::Content);
    }
    if let Some((_, tenant)) = threshold {
        ops.push(WriteOp::SetThreshold(tenant));
        slots.push(Slot::Setting);
    }
    let mut page = pages::page_facts(&d.page, &d.title, &d.body, source, content_type);
    page.extend(d.mentions.iter().map(|m| FactInput::new(&d.page, pages::MENTIONS, m.as_str()).source(source)));
    for f in page {
        ops.push(WriteOp::Assert(f));
        slots.push(Slot::Page);
    }
    (ops, slots)
}

/// What the receipt says besides the write's outcome.
#[derive(Debug, Clone)]
pub struct Summary {
    pub records: usize,
    pub rejections: Vec<Rejection>,
    pub page: String,
    pub title: String,
    pub mentions: Vec<String>,
    pub mentions_truncated: bool,
    pub body_truncated: bool,
    pub content_type: String,
    pub source: String,
    pub mask: &'static str,
    pub masked: BTreeMap<&'static str, usize>,
    pub mode: &'static str,
    pub threshold: f64,
    pub tokens: Tokens,
}

pub fn receipt(s: &Summary, slots: &[Slot], out: &WriteOutcome) -> Value {
    let (mut asserted, mut candidates) = (0, 0);
    let mut facts = Vec::new();
    for (slot, o) in slots.iter().zip(&out.outcomes) {
        if let (Slot::Content, OpOutcome::Asserted(a)) = (slot, o) {
            facts.push(a.fact.id.to_string());
            if a.fact.status == Status::Candidate {
                candidates += 1;
            } else {
                asserted += 1;
            }
        }
    }
    let seen: HashSet<usize> = s.rejections.iter().map(|r| r.record).collect();
    json!({
        "records": s.records,
        "asserted": asserted,
        "candidates": candidates,
        "rejected": seen.len(),
        "rejections": s.rejections,
        "facts": facts,
        "page": s.page,
        "title": s.title,
        "mentions": s.mentions,
        "mentions_truncated": s.mentions_truncated,
        "body_truncated": s.body_truncated,
        "content_type": s.content_type,
        "source": s.source,
        "mask": s.mask,
        "masked": s.masked,
        "mode": s.mode,
        "threshold": s.threshold,
        "tokens": s.tokens,
        "tx": out.tx,
        "recorded_at": out.recorded_at,
    })
}

// ------------------------------------------------------------- the tenant secret

fn secret_key(tenant: &str) -> Vec<u8> {
    let mut k = b"tempora/digest/mask-secret/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k
}

/// The tenant's masking secret, created (durably) on first use.
pub fn tenant_secret(engine: &dyn MemoryStore, tenant: &str) -> Result<Secret, EngineError> {
    static CREATE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let key = secret_key(tenant);
    if let Some(s) = engine.aux_get(&key)?.as_deref().and_then(Secret::from_bytes) {
        return Ok(s);
    }
    let _guard = CREATE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = engine.aux_get(&key)?.as_deref().and_then(Secret::from_bytes) {
        return Ok(s);
    }
    let s = Secret::generate();
    engine.aux_put(&key, s.as_bytes())?;
    Ok(s)
}
