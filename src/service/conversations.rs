//! Conversations as memory: a transcript stored as facts, one per turn, with
//! the speaker as subject (`POST /api/conversations`, `docs/conversations.md`).
//! The agent protocols store their chats the same way (`chat/conversation.rs`).
//!
//! | subject | predicate | object | valid from |
//! |---|---|---|---|
//! | the speaker's entity | `said` | the text | the turn's `at` |
//! | `Conversation:<id>` | `participant` | the speaker's entity | the speaker's first turn |
//! | a named speaker's `Person:<slug>` | `name` | the name as written | its first turn |
//! | `Conversation:<id>` | `turns` | how many turns it holds | the write |
//!
//! Each `said` fact carries `{"conversation", "turn", "speaker"}` in its
//! properties (`turn` counts the conversation's turns from 0, continuing
//! after those it already holds), and all of them the request's source, or
//! `Conversation:<id>`. One call is one transaction.
//!
//! `said` and `participant` must have cardinality `many` and `turns` `one`:
//! a tenant that set none of them gets them set in the same transaction;
//! one that set them otherwise is refused (`FailedPrecondition`) until it
//! changes them back.
//!
//! Turn numbers come from the stored `turns` count, read before the write:
//! two appends to one conversation at the same time may both number from the
//! same count (their facts are all kept, their numbers interleave).

use super::error::{Result, ServiceError};
use super::idempotency::{Answer, IdempotencyKey, Op};
use super::Service;
use crate::json::{present, JsonInt};
use crate::store::{
    is_entity_ref, Cardinality, FactId, FactInput, FactQuery, Millis, OpOutcome, Tx, WriteOp, WriteOutcome,
    MAX_PAGE, MAX_SOURCE_BYTES,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The most turns one call stores. A call writes at most three facts a
/// turn and one more (`said`, `participant`, `name`; the count), well
/// within a fact batch's bound (`facts::MAX_BATCH`).
pub const MAX_TURNS: usize = 1000;
/// The longest conversation id: 1 to 64 ASCII letters, digits, `-`, `_`.
pub const MAX_ID: usize = 64;
/// The longest speaker, in bytes.
pub const MAX_SPEAKER_BYTES: usize = 256;
/// Longest text stored as a fact; the rest is cut, and the fact's
/// properties say how long it was (`truncated_from_bytes`).
pub const MAX_STORED_TEXT: usize = 16 * 1024;

/// The predicates of the shape.
pub const SAID: &str = "said";
pub const PARTICIPANT: &str = "participant";
pub const TURNS: &str = "turns";
pub const NAME: &str = "name";

/// The cardinality each predicate of the shape needs.
const NEEDS: [(&str, Cardinality); 3] =
    [(SAID, Cardinality::Many), (PARTICIPANT, Cardinality::Many), (TURNS, Cardinality::One)];

/// `POST /api/conversations`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationRequest {
    #[serde(default, deserialize_with = "present")]
    pub conversation: Option<String>,
    pub turns: Vec<crate::json::Object<TurnInput>>,
    #[serde(default, deserialize_with = "present")]
    pub source: Option<String>,
}

/// One turn of a transcript.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnInput {
    pub speaker: String,
    pub text: String,
    /// Unix ms; absent: the server's time plus the turn's index.
    #[serde(default, deserialize_with = "present")]
    pub at: Option<JsonInt>,
}

/// What a call stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    pub conversation: String,
    pub tx: Tx,
    pub recorded_at: Millis,
    /// The `said` facts, in the order of the turns.
    pub facts: Vec<SaidFact>,
    /// Each speaker as written, and its entity.
    pub speakers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SaidFact {
    pub id: FactId,
    /// The turn's number in the conversation, from 0.
    pub turn: u64,
    /// The speaker as written.
    pub speaker: String,
    /// The speaker's entity: the fact's subject.
    pub subject: String,
    pub valid_from: Millis,
}

/// One turn to store, checked.
pub(crate) struct Turn {
    pub speaker: String,
    pub text: String,
    pub at: Millis,
}

/// What the agent protocols add to a call (`chat/conversation.rs`).
#[derive(Default)]
pub(crate) struct Extra {
    /// The lowest number the first turn may take: a chat continued from a
    /// context numbers after the messages the context carries, even on a
    /// server that has not seen them.
    pub first_turn_at_least: u64,
    /// Facts of `Conversation:<id>`, each asserted unless it is already
    /// live (the chat's `network`).
    pub about: Vec<(&'static str, Value)>,
}

/// The conversation's entity.
pub fn entity(id: &str) -> String {
    format!("Conversation:{id}")
}

/// Whether `id` is a conversation id: 1 to [`MAX_ID`] ASCII letters, digits,
/// `-` or `_`.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A new conversation id (a UUID v7, 32 hex digits).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// A name as an entity id: lower case, runs of anything but letters,
/// digits, `_` and `-` turned into one `_`, none at either end. Letters
/// beyond ASCII are kept (lower-cased). Empty when nothing is left.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    let mut gap = false;
    for c in name.chars() {
        if c.is_alphanumeric() || c == '_' || c == '-' {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.extend(c.to_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

/// The entity a speaker stands for: a `Type:id` reference as is, a name as
/// `Person:<slug>` (then `true`: the name is asserted too). `None` when a
/// name leaves no slug.
pub fn speaker_entity(speaker: &str) -> Option<(String, bool)> {
    if is_entity_ref(speaker) {
        return Some((speaker.to_string(), false));
    }
    let s = slug(speaker);
    (!s.is_empty()).then(|| (format!("Person:{s}"), true))
}

/// `text`, cut to [`MAX_STORED_TEXT`] bytes at a character boundary, and
/// whether it was cut.
pub fn clip(text: &str) -> (&str, bool) {
    if text.len() <= MAX_STORED_TEXT {
        return (text, false);
    }
    let mut end = MAX_STORED_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

fn now_ms() -> Millis {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as Millis)
}

/// Checks a request: the conversation id, the turns, the source. Every
/// message names the field, and the turn by its index.
fn check(req: ConversationRequest, now: Millis) -> Result<(String, Vec<Turn>, Option<String>)> {
    let id = match req.conversation {
        Some(id) if is_valid_id(&id) => id,
        Some(id) => {
            return Err(ServiceError::invalid(format!(
                "conversation must be 1 to {MAX_ID} ASCII letters, digits, '-' or '_', got {id:?}"
            )))
        }
        None => new_id(),
    };
    if req.turns.is_empty() {
        return Err(ServiceError::invalid("turns must hold at least one turn"));
    }
    if req.turns.len() > MAX_TURNS {
        return Err(ServiceError::invalid(format!(
            "turns holds {} turns; a call stores at most {MAX_TURNS}: split the transcript into several calls",
            req.turns.len()
        )));
    }
    if let Some(s) = &req.source {
        if s.trim().is_empty() {
            return Err(ServiceError::invalid("source must not be blank (leave it out for Conversation:<id>)"));
        }
        if s.len() > MAX_SOURCE_BYTES {
            return Err(ServiceError::invalid(format!("source is longer than {MAX_SOURCE_BYTES} bytes")));
        }
        if s.chars().any(char::is_control) {
            return Err(ServiceError::invalid("source must not contain control characters"));
        }
    }
    let mut turns = Vec::with_capacity(req.turns.len());
    for (i, crate::json::Object(t)) in req.turns.into_iter().enumerate() {
        let speaker = t.speaker.trim();
        if speaker.is_empty() {
            return Err(ServiceError::invalid(format!("turns[{i}].speaker must not be empty")));
        }
        if speaker.len() > MAX_SPEAKER_BYTES {
            return Err(ServiceError::invalid(format!("turns[{i}].speaker is longer than {MAX_SPEAKER_BYTES} bytes")));
        }
        if speaker.chars().any(char::is_control) {
            return Err(ServiceError::invalid(format!("turns[{i}].speaker must not contain control characters")));
        }
        if speaker_entity(speaker).is_none() {
            return Err(ServiceError::invalid(format!(
                "turns[{i}].speaker {speaker:?} has no letter or digit to name an entity by: send a Type:id reference"
            )));
        }
        if t.text.trim().is_empty() {
            return Err(ServiceError::invalid(format!("turns[{i}].text must not be empty")));
        }
        let at = match t.at {
            Some(JsonInt(at)) => at,
            None => now.saturating_add(i as Millis),
        };
        turns.push(Turn { speaker: speaker.to_string(), text: t.text, at });
    }
    Ok((id, turns, req.source))
}

impl Service {
    /// Stores a transcript (`POST /api/conversations`), in one transaction.
    pub async fn record_conversation(
        &self,
        tenant: &str,
        req: ConversationRequest,
        key: Option<&IdempotencyKey>,
    ) -> Result<Answer<Recorded>> {
        // A retry under a key is answered before anything is read.
        if let Some(stored) = self.stored_answer(tenant, Op::Conversation, key).await? {
            return Ok(Answer::Replayed(stored));
        }
        let (id, turns, source) = check(req, now_ms())?;
        self.store_turns(tenant, &id, turns, source, Extra::default(), key).await
    }

    /// Stores `turns` in conversation `id`, in one transaction (the shape in
    /// the module's doc). The turns are checked already.
    pub(crate) async fn store_turns(
        &self,
        tenant: &str,
        id: &str,
        turns: Vec<Turn>,
        source: Option<String>,
        extra: Extra,
        key: Option<&IdempotencyKey>,
    ) -> Result<Answer<Recorded>> {
        let conversation = entity(id);
        let source = source.unwrap_or_else(|| conversation.clone());
        let mut ops = self.shape_cardinalities(tenant).await?;
        let first_op = ops.len();

        let counted = self
            .memory
            .query(
                tenant,
                FactQuery {
                    subject: Some(conversation.clone()),
                    predicate: Some(TURNS.into()),
                    limit: 16,
                    ..FactQuery::default()
                },
            )
            .await?
            .facts;
        let first = counted.iter().filter_map(|f| f.object.as_u64()).max().unwrap_or(0).max(extra.first_turn_at_least);

        let assert = |subject: &str, predicate: &str, object: Value, at: Option<Millis>, props: Option<Map<String, Value>>| {
            WriteOp::Assert(FactInput {
                subject: subject.to_string(),
                predicate: predicate.to_string(),
                object,
                source: Some(source.clone()),
                valid_from: at,
                properties: props,
                ..FactInput::default()
            })
        };

        // The turns, and each speaker's entity and first turn.
        let mut speakers: BTreeMap<String, String> = BTreeMap::new();
        let mut first_said: Vec<(String, Millis)> = Vec::new();
        let mut named: Vec<(String, String, Millis)> = Vec::new();
        let mut facts = Vec::with_capacity(turns.len());
        for (i, t) in turns.iter().enumerate() {
            let (subject, is_name) = match speaker_entity(&t.speaker) {
                Some(e) => e,
                None => return Err(ServiceError::invalid(format!("turns[{i}].speaker names no entity"))),
            };
            speakers.entry(t.speaker.clone()).or_insert_with(|| subject.clone());
            if !first_said.iter().any(|(s, _)| *s == subject) {
                first_said.push((subject.clone(), t.at));
            }
            if is_name && !named.iter().any(|(s, _, _)| *s == subject) {
                named.push((subject.clone(), t.speaker.clone(), t.at));
            }
            let n = first + i as u64;
            let (text, cut) = clip(&t.text);
            let mut props = Map::new();
            props.insert("conversation".into(), json!(id));
            props.insert("turn".into(), json!(n));
            props.insert("speaker".into(), json!(t.speaker));
            if cut {
                props.insert("truncated_from_bytes".into(), json!(t.text.len()));
            }
            ops.push(assert(&subject, SAID, json!(text), Some(t.at), Some(props)));
            facts.push(SaidFact {
                id: FactId::nil(),
                turn: n,
                speaker: t.speaker.clone(),
                subject,
                valid_from: t.at,
            });
        }

        // Participants not yet recorded.
        let present = self.participants(tenant, &conversation).await?;
        for (subject, at) in &first_said {
            if !present.contains(subject) {
                ops.push(assert(&conversation, PARTICIPANT, json!(subject), Some(*at), None));
            }
        }
        // Names, unless the entity already goes by that name, or by another
        // one that a new name would replace.
        let mut name_cardinality = None;
        for (subject, name, at) in &named {
            let live = self
                .memory
                .query(
                    tenant,
                    FactQuery {
                        subject: Some(subject.clone()),
                        predicate: Some(NAME.into()),
                        limit: 16,
                        ..FactQuery::default()
                    },
                )
                .await?
                .facts;
            if live.iter().any(|f| f.object.as_str() == Some(name)) {
                continue;
            }
            if !live.is_empty() {
                let c = match name_cardinality {
                    Some(c) => c,
                    None => *name_cardinality.insert(self.memory.store().predicate(tenant, NAME)?.cardinality),
                };
                if c != Cardinality::Many {
                    continue;
                }
            }
            ops.push(assert(subject, NAME, json!(name), Some(*at), None));
        }
        // The conversation's own facts, unless they hold already.
        let start = turns.first().map(|t| t.at);
        for (predicate, object) in extra.about {
            let live = self
                .memory
                .query(
                    tenant,
                    FactQuery {
                        subject: Some(conversation.clone()),
                        predicate: Some(predicate.into()),
                        object: Some(object.clone()),
                        limit: 1,
                        ..FactQuery::default()
                    },
                )
                .await?
                .facts;
            if live.is_empty() {
                ops.push(assert(&conversation, predicate, object, start, None));
            }
        }
        ops.push(assert(&conversation, TURNS, json!(first + turns.len() as u64), None, None));

        // Refused before the write, so a bad fact names its turn.
        for (i, op) in ops[first_op..first_op + turns.len()].iter().enumerate() {
            if let WriteOp::Assert(f) = op {
                crate::store::validate_input(f)
                    .map_err(|e| ServiceError::invalid(format!("turns[{i}]: {}", ServiceError::from(e).message())))?;
            }
        }

        let skeleton = Recorded { conversation: id.to_string(), tx: 0, recorded_at: 0, facts, speakers };
        let render = move |out: &WriteOutcome| -> Result<Recorded> {
            let mut r = skeleton.clone();
            r.tx = out.tx;
            r.recorded_at = out.recorded_at;
            for (i, f) in r.facts.iter_mut().enumerate() {
                match out.outcomes.get(first_op + i) {
                    Some(OpOutcome::Asserted(a)) => f.id = a.fact.id,
                    other => return Err(ServiceError::internal(format!("a turn's assert answered {other:?}"))),
                }
            }
            Ok(r)
        };
        self.write_keyed(tenant, Op::Conversation, key, ops, render).await
    }

    /// The operations that give the shape's predicates the cardinality they
    /// need: none when they have it; a `SetCardinality` for each the tenant
    /// never set; an error naming one it set otherwise.
    async fn shape_cardinalities(&self, tenant: &str) -> Result<Vec<WriteOp>> {
        // One read: what the tenant set, as of one moment (two reads could
        // straddle another first call setting them).
        let set = self.memory.store().predicates(tenant)?;
        let mut ops = Vec::new();
        for (p, want) in NEEDS {
            match set.iter().find(|i| i.name == p) {
                Some(i) if i.cardinality == want => {}
                Some(i) => {
                    return Err(ServiceError::FailedPrecondition(format!(
                        "conversations need the predicate {p} to have cardinality {}, and this tenant set it to {}: \
                         set it back with PUT /api/predicates/{p} {{\"cardinality\": \"{}\"}} to store conversations",
                        want.as_str(),
                        i.cardinality.as_str(),
                        want.as_str()
                    )))
                }
                None if want == Cardinality::default() => {}
                None => ops.push(WriteOp::SetCardinality { predicate: p.to_string(), cardinality: want }),
            }
        }
        Ok(ops)
    }

    /// The live participants of a conversation.
    async fn participants(&self, tenant: &str, conversation: &str) -> Result<HashSet<String>> {
        let mut out = HashSet::new();
        let mut cursor = None;
        loop {
            let page = self
                .memory
                .query(
                    tenant,
                    FactQuery {
                        subject: Some(conversation.to_string()),
                        predicate: Some(PARTICIPANT.into()),
                        limit: MAX_PAGE,
                        cursor,
                        ..FactQuery::default()
                    },
                )
                .await?;
            out.extend(page.facts.into_iter().filter_map(|f| f.object.as_str().map(String::from)));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_person_slugs_and_refs_stay() {
        assert_eq!(speaker_entity("Sam"), Some(("Person:sam".into(), true)));
        assert_eq!(speaker_entity("Mary Ann O'Neil"), Some(("Person:mary_ann_o_neil".into(), true)));
        assert_eq!(speaker_entity("  Dr. Who!  "), Some(("Person:dr_who".into(), true)));
        assert_eq!(speaker_entity("José Núñez"), Some(("Person:josé_núñez".into(), true)));
        assert_eq!(speaker_entity("jean-luc_p"), Some(("Person:jean-luc_p".into(), true)));
        assert_eq!(speaker_entity("Agent:memory"), Some(("Agent:memory".into(), false)));
        assert_eq!(speaker_entity("Person:Sam"), Some(("Person:Sam".into(), false)));
        assert_eq!(speaker_entity("Sam: the host"), Some(("Person:sam_the_host".into(), true)));
        assert_eq!(speaker_entity("?!"), None);
        for s in ["Sam", "Mary Ann", "José Núñez", "Ünal"] {
            assert!(is_entity_ref(&speaker_entity(s).unwrap().0), "{s}");
        }
    }

    #[test]
    fn ids_are_checked() {
        assert!(is_valid_id("c03-s07") && is_valid_id(&"x".repeat(64)) && is_valid_id(&new_id()));
        for bad in ["", "a b", "Conversation:x", "é", &"x".repeat(65)] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_STORED_TEXT);
        let (cut, was) = clip(&long);
        assert!(was && cut.len() <= MAX_STORED_TEXT && cut.len() > MAX_STORED_TEXT - 2);
        assert_eq!(clip("hi"), ("hi", false));
    }

    fn req(v: Value) -> ConversationRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn requests_are_checked_naming_the_turn() {
        let err = |v: Value| check(req(v), 1000).map(|_| ()).unwrap_err().message();
        assert!(err(json!({"turns": []})).contains("at least one turn"));
        assert!(err(json!({"conversation": "a b", "turns": [{"speaker": "S", "text": "t"}]})).contains("conversation"));
        let e = err(json!({"turns": [{"speaker": "S", "text": "t"}, {"speaker": " ", "text": "t"}]}));
        assert!(e.contains("turns[1].speaker"), "{e}");
        let e = err(json!({"turns": [{"speaker": "S", "text": "t"}, {"speaker": "S", "text": "\n"}]}));
        assert!(e.contains("turns[1].text"), "{e}");
        let many: Vec<Value> = (0..=MAX_TURNS).map(|_| json!({"speaker": "S", "text": "t"})).collect();
        assert!(err(json!({"turns": many})).contains("at most"));
        let (id, turns, source) =
            check(req(json!({"turns": [{"speaker": " Sam ", "text": "a"}, {"speaker": "Bo", "text": "b", "at": 5}, {"speaker": "Sam", "text": "c"}]})), 1000)
                .unwrap();
        assert!(is_valid_id(&id) && source.is_none());
        assert_eq!(turns.iter().map(|t| t.at).collect::<Vec<_>>(), [1000, 5, 1002]);
        assert_eq!(turns[0].speaker, "Sam");
    }
}
