//! The recall index's schema and how a memory item becomes an index
//! document.
//!
//! One document per item, keyed by its id (the engine makes every id, a
//! version 7 UUID, so an id is unique across tenants and kinds). Today the
//! only kind is a fact; narrative pages will be the second ([`IndexDoc`] and
//! [`DocKind`] are where they plug in). A fact's text never changes between
//! its versions, its status does: a new version replaces the document
//! (delete by id, add), so `live` always follows the latest version.
//!
//! Under sustained writes most of the index's CPU goes to its term
//! dictionaries: building one for each new segment and merging them. A
//! term that is unique to one document costs that work and helps no search,
//! so a document has as few as it can: the id is its 16 bytes (not its 36
//! characters of text) and is both the key deletes go by and the stored
//! value a hit is resolved through; the creation time, which only a range
//! filter reads, is a fast field and not in the term dictionary.

use super::tokenize::{json_text, terms};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, FAST, INDEXED, STORED, STRING,
};
use tantivy::{TantivyDocument, Term};
use crate::store::{Fact, FactId};

/// Bumped whenever the schema or the tokenization changes; an index written
/// with another version is rebuilt from the change log at start.
pub const SCHEMA_VERSION: u32 = 4;

/// Name of the tokenizer the text fields use (whitespace over terms the
/// service already normalized, see `tokenize.rs`).
pub const TOKENIZER: &str = "tempora_terms";

/// What kind of memory item a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Fact,
    /// A narrative page (`/api/digest`); not indexed yet.
    Page,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Fact => "fact",
            DocKind::Page => "page",
        }
    }
}

/// A memory item to index. New kinds add a variant and its mapping in
/// [`Fields::document`].
#[derive(Debug, Clone)]
pub enum IndexDoc {
    Fact(Fact),
}

impl IndexDoc {
    pub fn kind(&self) -> DocKind {
        match self {
            IndexDoc::Fact(_) => DocKind::Fact,
        }
    }
    pub fn tenant(&self) -> &str {
        match self {
            IndexDoc::Fact(f) => &f.tenant,
        }
    }
    pub fn id(&self) -> FactId {
        match self {
            IndexDoc::Fact(f) => f.id,
        }
    }
    /// The transaction that first recorded the item.
    pub fn created_tx(&self) -> u64 {
        match self {
            IndexDoc::Fact(f) => f.created_tx,
        }
    }
}

/// The fields of the schema.
#[derive(Debug, Clone)]
pub struct Fields {
    pub schema: Schema,
    /// Exact tenant name; every query requires it.
    pub tenant: Field,
    pub kind: Field,
    /// The item id's 16 bytes: what a new version deletes, and (stored)
    /// what a hit is resolved through.
    pub id: Field,
    /// Exact subject and predicate, for the `subject`/`predicate` filters.
    pub subject_exact: Field,
    pub predicate_exact: Field,
    /// Text fields (terms).
    pub subject: Field,
    pub predicate: Field,
    pub object: Field,
    pub source: Field,
    pub properties: Field,
    /// True while the latest version is active or candidate.
    pub live: Field,
    /// Record time of the first version (unix ms): an `as_of` search skips
    /// documents created after it.
    pub created_at: Field,
    /// Valid time of the latest version (unix ms; an open end is
    /// `i64::MAX`): the time signal's overlap filter. The engine's version
    /// decides, so an `as_of` search stays exact.
    pub valid_from: Field,
    pub valid_until: Field,
    /// The words of the subject's id, lower-cased (`Person:sam_lee` gives
    /// `sam lee`): how a name in a question finds its entity.
    pub subject_key: Field,
    /// The value of a name-like fact (`name`, `alias`...) lower-cased, and
    /// its first word: the other way a name finds its entity.
    pub name_key: Field,
    /// A conversation turn's `properties.conversation` and
    /// `properties.turn`: how a hit finds the turns around it.
    pub conversation: Field,
    pub turn: Field,
}

/// Predicates whose string value names their subject.
pub const NAME_PREDICATES: &[&str] =
    &["alias", "also_known_as", "aka", "display_name", "first_name", "full_name", "name", "nickname"];

/// The lower-cased words of `text` joined by single spaces: the form the
/// name keys are stored and looked up in.
pub fn name_form(text: &str) -> String {
    super::tokenize::words(text).join(" ")
}

/// The id part of an entity ref in [`name_form`] (`Person:sam_lee` gives
/// `sam lee`), or None for a value that is no entity ref.
pub fn entity_key(entity: &str) -> Option<String> {
    if !crate::store::is_entity_ref(entity) {
        return None;
    }
    let (_, id) = entity.split_once(':')?;
    Some(name_form(id)).filter(|k| !k.is_empty())
}

impl Fields {
    pub fn new() -> Fields {
        let mut b = Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer(TOKENIZER).set_index_option(IndexRecordOption::WithFreqs),
        );
        let tenant = b.add_text_field("tenant", STRING);
        let kind = b.add_text_field("kind", STRING);
        let id = b.add_bytes_field("id", INDEXED | STORED);
        // Fast too: a name lookup reads the subjects of its hits from the column.
        let subject_exact = b.add_text_field("subject_exact", STRING | FAST);
        let predicate_exact = b.add_text_field("predicate_exact", STRING);
        let subject = b.add_text_field("subject", text.clone());
        let predicate = b.add_text_field("predicate", text.clone());
        let object = b.add_text_field("object", text.clone());
        let source = b.add_text_field("source", text.clone());
        let properties = b.add_text_field("properties", text);
        let live = b.add_bool_field("live", INDEXED | FAST);
        // A range query over a fast field reads the column, no terms needed.
        let created_at = b.add_i64_field("created_at", FAST);
        let valid_from = b.add_i64_field("valid_from", FAST);
        let valid_until = b.add_i64_field("valid_until", FAST);
        let subject_key = b.add_text_field("subject_key", STRING);
        let name_key = b.add_text_field("name_key", STRING);
        let conversation = b.add_text_field("conversation", STRING);
        let turn = b.add_i64_field("turn", FAST);
        Fields {
            schema: b.build(),
            tenant,
            kind,
            id,
            subject_exact,
            predicate_exact,
            subject,
            predicate,
            object,
            source,
            properties,
            live,
            created_at,
            valid_from,
            valid_until,
            subject_key,
            name_key,
            conversation,
            turn,
        }
    }

    pub fn id_term(&self, id: FactId) -> Term {
        Term::from_field_bytes(self.id, id.as_bytes())
    }

    /// The id a stored document holds.
    pub fn stored_id(&self, doc: &TantivyDocument) -> Option<FactId> {
        doc.get_first(self.id).and_then(|v| v.as_bytes()).and_then(|b| FactId::from_slice(b).ok())
    }

    /// The tantivy document of `doc`.
    pub fn document(&self, doc: &IndexDoc) -> TantivyDocument {
        let mut d = TantivyDocument::default();
        d.add_text(self.tenant, doc.tenant());
        d.add_text(self.kind, doc.kind().as_str());
        d.add_bytes(self.id, doc.id().as_bytes());
        match doc {
            IndexDoc::Fact(f) => {
                d.add_text(self.subject_exact, &f.subject);
                d.add_text(self.predicate_exact, &f.predicate);
                let t = fact_texts(f);
                d.add_text(self.subject, t.subject.join(" "));
                d.add_text(self.predicate, t.predicate.join(" "));
                d.add_text(self.object, t.object.join(" "));
                d.add_text(self.source, t.source.join(" "));
                d.add_text(self.properties, t.properties.join(" "));
                d.add_bool(self.live, f.status.is_live());
                d.add_i64(self.created_at, f.created_at);
                d.add_i64(self.valid_from, f.valid_from);
                d.add_i64(self.valid_until, f.valid_until.unwrap_or(i64::MAX));
                if let Some(k) = entity_key(&f.subject) {
                    d.add_text(self.subject_key, k);
                }
                if let (true, Some(name)) = (NAME_PREDICATES.contains(&f.predicate.as_str()), f.object.as_str()) {
                    let name = name_form(name);
                    if let Some((first, _)) = name.split_once(' ') {
                        d.add_text(self.name_key, first);
                    }
                    if !name.is_empty() {
                        d.add_text(self.name_key, name);
                    }
                }
                if let Some((conversation, turn)) = turn_of(f) {
                    d.add_text(self.conversation, conversation);
                    d.add_i64(self.turn, turn);
                }
            }
        }
        d
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields::new()
    }
}

/// The conversation and 0-based turn of a fact stored as a turn of a
/// conversation (`properties.conversation`, `properties.turn`).
pub fn turn_of(f: &Fact) -> Option<(&str, i64)> {
    let p = f.properties.as_ref()?;
    Some((p.get("conversation")?.as_str()?, p.get("turn")?.as_i64()?))
}

/// The terms of each text field of a fact.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FactTexts {
    pub subject: Vec<String>,
    pub predicate: Vec<String>,
    pub object: Vec<String>,
    pub source: Vec<String>,
    pub properties: Vec<String>,
}

impl FactTexts {
    pub fn contains(&self, term: &str) -> bool {
        [&self.subject, &self.predicate, &self.object, &self.source, &self.properties]
            .iter()
            .any(|f| f.iter().any(|t| t == term))
    }
}

/// The raw text of each text field of a fact, before tokenizing: what the
/// index's terms and the embeddings (`crate::embed`) are made of.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FactRawText {
    pub subject: String,
    pub predicate: String,
    pub object: String,
    pub source: String,
    pub properties: String,
}

pub fn fact_raw_text(f: &Fact) -> FactRawText {
    let mut object = String::new();
    json_text(&f.object, &mut object);
    let mut properties = String::new();
    if let Some(p) = &f.properties {
        for v in p.values() {
            json_text(v, &mut properties);
        }
    }
    FactRawText {
        subject: f.subject.clone(),
        predicate: f.predicate.clone(),
        object: object.trim().to_string(),
        source: f.source.clone().unwrap_or_default(),
        properties: properties.trim().to_string(),
    }
}

/// A fact's indexed text as one line: subject, predicate, object,
/// property values, source (the fields that are not empty, space-separated).
pub fn fact_text(f: &Fact) -> String {
    let t = fact_raw_text(f);
    [t.subject, t.predicate, t.object, t.properties, t.source]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn fact_texts(f: &Fact) -> FactTexts {
    let t = fact_raw_text(f);
    FactTexts {
        subject: terms(&t.subject),
        predicate: terms(&t.predicate),
        object: terms(&t.object),
        source: terms(&t.source),
        properties: terms(&t.properties),
    }
}
