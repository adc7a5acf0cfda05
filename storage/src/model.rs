//! The data model: facts, their versions, and what a write or read takes.
//!
//! A *fact* is one claim `subject predicate object` with an id. A fact has one
//! or more *versions*: the first is written when it is asserted, and every
//! later change of its status or valid interval (superseded, retracted)
//! appends another version stamped with that write's `tx` and `recorded_at`.
//! A [`Fact`] value is one version. Nothing stored is ever edited in place.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use uuid::Uuid;

/// A fact's id: a UUIDv7, so ids sort by creation time.
pub type FactId = Uuid;

/// Write-transaction number: global, strictly increasing, starts at 1.
pub type Tx = u64;

/// Unix milliseconds.
pub type Millis = i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Currently believed; takes part in conflict resolution.
    Active,
    /// Stored below the confidence threshold; supersedes nothing and is never
    /// superseded.
    Candidate,
    /// Closed by a newer conflicting fact; still true for the valid instants
    /// it kept.
    Superseded,
    /// Withdrawn; hidden unless asked for.
    Retracted,
}

impl Status {
    pub const ALL: [Status; 4] = [Status::Active, Status::Candidate, Status::Superseded, Status::Retracted];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Candidate => "candidate",
            Status::Superseded => "superseded",
            Status::Retracted => "retracted",
        }
    }
    /// Live facts are the ones a new assertion may still interact with.
    pub fn is_live(self) -> bool {
        matches!(self, Status::Active | Status::Candidate)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "active" => Ok(Status::Active),
            "candidate" => Ok(Status::Candidate),
            "superseded" => Ok(Status::Superseded),
            "retracted" => Ok(Status::Retracted),
            other => Err(format!(
                "unknown status {other:?} (expected active, candidate, superseded or retracted)"
            )),
        }
    }
}

/// How many values a predicate may hold at one valid instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Cardinality {
    /// At most one active value per valid instant; a new value takes over its
    /// interval.
    #[default]
    One,
    /// Values coexist; re-asserting the same object supersedes the older copy.
    Many,
    /// Like `One`, but a different value over an overlapping interval is
    /// rejected instead of taking over.
    Strict,
}

impl Cardinality {
    pub fn as_str(self) -> &'static str {
        match self {
            Cardinality::One => "one",
            Cardinality::Many => "many",
            Cardinality::Strict => "strict",
        }
    }
}

impl std::str::FromStr for Cardinality {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "one" => Ok(Cardinality::One),
            "many" => Ok(Cardinality::Many),
            "strict" => Ok(Cardinality::Strict),
            other => Err(format!("unknown cardinality {other:?} (expected one, many or strict)")),
        }
    }
}

/// One version of a fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub id: FactId,
    pub tenant: String,
    pub subject: String,
    pub predicate: String,
    pub object: Value,
    pub confidence: f64,
    pub source: Option<String>,
    pub properties: Option<serde_json::Map<String, Value>>,
    /// Valid time: the claim holds in the world over `[valid_from, valid_until)`.
    pub valid_from: Millis,
    pub valid_until: Option<Millis>,
    /// Record time of this version.
    pub recorded_at: Millis,
    /// Transaction that wrote this version.
    pub tx: Tx,
    pub status: Status,
    /// Transaction and record time of the fact's first version.
    pub created_tx: Tx,
    pub created_at: Millis,
    /// Facts this one closed when it was asserted.
    pub supersedes: Vec<FactId>,
    /// The fact that closed this one.
    pub superseded_by: Option<FactId>,
    /// When this fact is the surviving tail of an older fact whose interval a
    /// bounded assertion cut in two: that older fact.
    pub continues: Option<FactId>,
    /// The reverse links: the tail facts that carry on parts of this one's
    /// interval, oldest first (a fact cut more than once has several).
    #[serde(deserialize_with = "one_or_many_ids")]
    pub continued_by: Vec<FactId>,
}

impl Fact {
    /// Whether valid instant `t` lies in `[valid_from, valid_until)`.
    pub fn covers(&self, t: Millis) -> bool {
        self.valid_from <= t && self.valid_until.is_none_or(|u| t < u)
    }

    /// Whether the valid interval overlaps `[from, until)`. Empty intervals
    /// overlap nothing.
    pub fn overlaps(&self, from: Millis, until: Option<Millis>) -> bool {
        let self_nonempty = self.valid_until.is_none_or(|u| u > self.valid_from);
        let other_nonempty = until.is_none_or(|u| u > from);
        self_nonempty
            && other_nonempty
            && until.is_none_or(|u| self.valid_from < u)
            && self.valid_until.is_none_or(|u| from < u)
    }

    /// `Type:id` when the object is an entity reference.
    pub fn object_entity(&self) -> Option<&str> {
        self.object.as_str().filter(|s| is_entity_ref(s))
    }
}

/// Whether `s` has the shape `Type:id` of an entity reference: a type name of
/// letters, digits, `_` or `-` starting with a letter, a colon, and a
/// non-empty id without whitespace.
pub fn is_entity_ref(s: &str) -> bool {
    let Some((ty, id)) = s.split_once(':') else {
        return false;
    };
    let mut chars = ty.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !id.is_empty()
        && !id.chars().any(char::is_whitespace)
}

/// What a caller asserts. Missing `confidence` means 1.0; missing
/// `valid_from` means the write's record time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactInput {
    pub subject: String,
    pub predicate: String,
    #[serde(default)]
    pub object: Value,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub valid_from: Option<Millis>,
    #[serde(default)]
    pub valid_until: Option<Millis>,
    #[serde(default)]
    pub properties: Option<serde_json::Map<String, Value>>,
}

impl FactInput {
    pub fn new(subject: impl Into<String>, predicate: impl Into<String>, object: impl Into<Value>) -> Self {
        FactInput {
            subject: subject.into(),
            predicate: predicate.into(),
            object: object.into(),
            ..Default::default()
        }
    }
    pub fn valid_from(mut self, t: Millis) -> Self {
        self.valid_from = Some(t);
        self
    }
    pub fn valid_until(mut self, t: Millis) -> Self {
        self.valid_until = Some(t);
        self
    }
    pub fn confidence(mut self, c: f64) -> Self {
        self.confidence = Some(c);
        self
    }
    pub fn source(mut self, s: impl Into<String>) -> Self {
        self.source = Some(s.into());
        self
    }
}

/// One operation of a write transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteOp {
    Assert(FactInput),
    Retract(FactId),
    SetCardinality { predicate: String, cardinality: Cardinality },
    SetThreshold(f64),
}

/// What one assertion did.
#[derive(Debug, Clone, PartialEq)]
pub struct Asserted {
    /// The new fact (active or candidate).
    pub fact: Fact,
    /// The closing versions of the facts it superseded.
    pub superseded: Vec<Fact>,
    /// Tails: new active facts carrying on the part of a superseded interval
    /// that lies after the new fact's bounded interval.
    pub continued: Vec<Fact>,
}

/// The result of one [`WriteOp`], in request order.
#[derive(Debug, Clone, PartialEq)]
pub enum OpOutcome {
    Asserted(Asserted),
    /// The retracted version. `changed` is false when the fact was already
    /// retracted (nothing was written for it).
    Retracted { fact: Fact, changed: bool },
    CardinalitySet(PredicateInfo),
    ThresholdSet(f64),
}

/// The result of one committed write transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOutcome {
    pub tx: Tx,
    pub recorded_at: Millis,
    pub outcomes: Vec<OpOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredicateInfo {
    pub name: String,
    pub cardinality: Cardinality,
}

/// Record time to read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// Unix milliseconds: every write whose `recorded_at` is at or before it.
    Time(Millis),
    /// Every write with `tx` at or below it.
    Tx(Tx),
}

impl AsOf {
    pub(crate) fn admits(self, tx: Tx, recorded_at: Millis) -> bool {
        match self {
            AsOf::Time(t) => recorded_at <= t,
            AsOf::Tx(x) => tx <= x,
        }
    }
}

/// Which statuses a read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusFilter {
    /// `active`; with `valid_at`, also `superseded` facts that still cover the
    /// instant (a fact closed by a successor stays true for what it kept).
    #[default]
    Current,
    Only(Status),
    /// Any of several statuses (`status=active,candidate`).
    Among(StatusSet),
    /// Every status (retracted ones still only with `include_retracted`).
    Any,
}

/// A set of statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusSet(u8);

impl StatusSet {
    /// Every status, retracted included (`status=all`).
    pub fn all() -> StatusSet {
        Status::ALL.into_iter().collect()
    }

    fn bit(s: Status) -> u8 {
        match s {
            Status::Active => 1,
            Status::Candidate => 2,
            Status::Superseded => 4,
            Status::Retracted => 8,
        }
    }
    pub fn with(self, s: Status) -> Self {
        StatusSet(self.0 | Self::bit(s))
    }
    pub fn contains(self, s: Status) -> bool {
        self.0 & Self::bit(s) != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<Status> for StatusSet {
    fn from_iter<I: IntoIterator<Item = Status>>(iter: I) -> Self {
        iter.into_iter().fold(StatusSet::default(), StatusSet::with)
    }
}

/// A fact read. At most one of `subject`/`predicate`/`object` picks the index;
/// the others filter.
#[derive(Debug, Clone, Default)]
pub struct FactQuery {
    pub subject: Option<String>,
    pub predicate: Option<String>,
    pub object: Option<Value>,
    pub status: StatusFilter,
    pub as_of: Option<AsOf>,
    pub valid_at: Option<Millis>,
    pub include_retracted: bool,
    /// At most this many facts (capped at [`MAX_PAGE`]); 0 means the default.
    pub limit: usize,
    /// Resume after the last fact of a previous page.
    pub cursor: Option<String>,
}

pub const DEFAULT_PAGE: usize = 100;
pub const MAX_PAGE: usize = 1000;

#[derive(Debug, Clone, PartialEq)]
pub struct FactPage {
    pub facts: Vec<Fact>,
    /// Present when more facts may follow.
    pub next_cursor: Option<String>,
}

/// Every version of one fact, oldest first, with its neighbours in the
/// supersession chain.
#[derive(Debug, Clone, PartialEq)]
pub struct FactHistory {
    pub id: FactId,
    pub versions: Vec<Fact>,
    /// Facts this one closed, and the fact it continues (chain backwards).
    pub predecessors: Vec<FactId>,
    /// The fact that closed this one and the tail that continues it (forwards).
    pub successors: Vec<FactId>,
}

/// One event of a committed transaction, resolved to fact versions.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangeEvent {
    Assert { fact: Fact, superseded: Vec<Fact>, continued: Vec<Fact> },
    Retract { fact: Fact },
    Cardinality(PredicateInfo),
    Threshold(f64),
}

impl ChangeEvent {
    pub fn op(&self) -> &'static str {
        match self {
            ChangeEvent::Assert { .. } => "assert",
            ChangeEvent::Retract { .. } => "retract",
            ChangeEvent::Cardinality(_) => "predicate",
            ChangeEvent::Threshold(_) => "threshold",
        }
    }
}

/// One committed write transaction from the change log.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub tx: Tx,
    pub recorded_at: Millis,
    pub tenant: String,
    pub events: Vec<ChangeEvent>,
}

/// One event of a committed transaction as the change log holds it: fact
/// ids, the subject and the count of value changes, without the versions
/// ([`ChangeEvent`] reads them). For following the log cheaply: a reader
/// that needs a fact's other fields reads its version (`Engine::get` as of
/// the transaction) for the events it wants.
#[derive(Debug, Clone, PartialEq)]
pub enum LoggedEvent {
    Assert {
        fact: FactId,
        subject: String,
        superseded: Vec<FactId>,
        continued: Vec<FactId>,
        /// How many of the `superseded` facts held another object than the
        /// new fact (the rest were confirmed as they were).
        changed: usize,
    },
    Retract { fact: FactId, subject: String },
    Cardinality(PredicateInfo),
    Threshold(f64),
}

/// One committed write transaction from the change log, by fact id.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedChange {
    pub tx: Tx,
    pub recorded_at: Millis,
    pub events: Vec<LoggedEvent>,
}

/// Per-tenant counts. Fact counts are by each fact's latest status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantStats {
    pub active: u64,
    pub candidate: u64,
    pub superseded: u64,
    pub retracted: u64,
    /// Distinct subjects that have ever had a fact.
    pub subjects: u64,
    /// Distinct predicates that have ever had a fact.
    pub predicates: u64,
}

impl TenantStats {
    pub fn total(&self) -> u64 {
        self.active + self.candidate + self.superseded + self.retracted
    }
    pub(crate) fn count_mut(&mut self, s: Status) -> &mut u64 {
        match s {
            Status::Active => &mut self.active,
            Status::Candidate => &mut self.candidate,
            Status::Superseded => &mut self.superseded,
            Status::Retracted => &mut self.retracted,
        }
    }
}

/// Counts of the facts attributed to one source (a fact's `source`), by
/// each fact's latest status, like the fact counts of [`TenantStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceStats {
    pub active: u64,
    pub candidate: u64,
    pub superseded: u64,
    pub retracted: u64,
}

impl SourceStats {
    /// Facts still in play: active plus held candidates.
    pub fn live(&self) -> u64 {
        self.active + self.candidate
    }
    pub fn total(&self) -> u64 {
        self.active + self.candidate + self.superseded + self.retracted
    }
    pub(crate) fn count_mut(&mut self, s: Status) -> &mut u64 {
        match s {
            Status::Active => &mut self.active,
            Status::Candidate => &mut self.candidate,
            Status::Superseded => &mut self.superseded,
            Status::Retracted => &mut self.retracted,
        }
    }
}

/// Reads `continued_by` as stored by any format: format 1 wrote one optional
/// id, later formats a list.
fn one_or_many_ids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<FactId>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Many(Vec<FactId>),
        One(Option<FactId>),
    }
    Ok(match Stored::deserialize(d)? {
        Stored::Many(v) => v,
        Stored::One(o) => o.into_iter().collect(),
    })
}
