//! The tools as a model sees them: names, descriptions, and the JSON Schemas
//! of their arguments (`inputSchema`) and results (`outputSchema`). Every
//! successful call returns `structuredContent` matching its output schema
//! (clients validate it) and the same JSON as a text item.

use serde_json::{json, Map, Value};

pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input: Value,
    pub output: Value,
    /// Writes memory (and honours `Idempotency-Key`).
    pub writes: bool,
}

pub const DIGEST: &str = "digest";
pub const REMEMBER: &str = "remember";
pub const RECALL: &str = "recall";
pub const RECALL_AS_OF: &str = "recall_as_of";
pub const WHATS_CHANGED: &str = "whats_changed";
pub const BUILD_CONTEXT: &str = "build_context";
pub const EXPLAIN_FACT: &str = "explain_fact";

fn namespace() -> Value {
    json!({
        "type": "string",
        "description": "The memory namespace (tenant). Optional: defaults to the namespace of your API key (in open mode, `default`). A tenant key can only name its own namespace; an admin token must name one."
    })
}

fn ms(description: &str) -> Value {
    json!({"type": "integer", "description": description})
}

/// One stored version of a fact.
pub fn fact() -> Value {
    json!({
        "type": "object",
        "required": ["id", "subject", "predicate", "object", "confidence", "status", "valid_from", "recorded_at", "tx"],
        "properties": {
            "id": {"type": "string", "description": "Fact id (UUID)."},
            "tenant": {"type": ["string", "null"]},
            "subject": {"type": "string"},
            "predicate": {"type": "string"},
            "object": {"description": "Any JSON value; a string `Type:id` is an entity reference."},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "source": {"type": ["string", "null"]},
            "properties": {"type": ["object", "null"]},
            "valid_from": {"type": "integer", "description": "Valid-time start, unix ms."},
            "valid_until": {"type": ["integer", "null"], "description": "Valid-time end (exclusive), unix ms; null while open."},
            "recorded_at": {"type": "integer", "description": "Record time of this version, unix ms."},
            "tx": {"type": "integer", "description": "Transaction that wrote this version."},
            "status": {"type": "string", "enum": ["active", "candidate", "superseded", "retracted"]},
            "created_tx": {"type": "integer"},
            "created_at": {"type": "integer"},
            "supersedes": {"type": "array", "items": {"type": "string"}},
            "superseded_by": {"type": ["string", "null"]},
            "continues": {"type": ["string", "null"]},
            "continued_by": {"type": "array", "items": {"type": "string"}}
        }
    })
}

fn facts(description: &str) -> Value {
    json!({"type": "array", "items": fact(), "description": description})
}

fn ids(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string"}, "description": description})
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties, "additionalProperties": false})
}

/// An output object: more fields may come in later versions.
fn output(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

fn with_namespace(mut properties: Value) -> Value {
    properties["namespace"] = namespace();
    properties
}

pub fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: BUILD_CONTEXT,
            title: "Build a context packet",
            description: "Call this first, at the start of a task: it loads what memory knows that is relevant, in one \
                call. Give the entities the task is about as `seeds` (e.g. [\"Person:sarah\"]) and/or the task in words \
                as `goal` (alias `task`), and optionally a token budget (`token_budget`, alias `max_tokens`). Returns a \
                ranked, budgeted packet: a summary line, the selected facts (best first) with why each was chosen \
                (`ranking`), the entities involved, and warnings (conflicting or unconfirmed candidates, low \
                confidence, expired or stale facts) worth telling the user about. `as_of` (unix ms) rewinds the \
                packet to what memory knew then.",
            input: object(&[], with_namespace(json!({
                "goal": {"type": "string", "description": "The task in words; facts relevant to it are recalled and ranked higher."},
                "task": {"type": "string", "description": "Alias of goal."},
                "seeds": {"type": "array", "items": {"type": "string"}, "maxItems": 32, "description": "Entities the task is about (`Type:id`): their facts, facts pointing at them, and their neighbours' facts are candidates."},
                "project": {"type": "string", "description": "A project entity, used as one more seed."},
                "token_budget": {"type": "integer", "minimum": 0, "description": "At most this many tokens of facts (estimated)."},
                "max_tokens": {"type": "integer", "minimum": 0, "description": "Alias of token_budget."},
                "max_facts": {"type": "integer", "minimum": 0, "maximum": 1000, "description": "At most this many facts (default 64)."},
                "max_pages": {"type": "integer", "minimum": 0, "description": "At most this many page snippets (default 8)."},
                "as_of": ms("Build the packet from what memory knew at this record time (unix ms)."),
                "reference_time": ms("What \"now\" is for relative time words in the goal (unix ms; default the server's clock)."),
                "neighbours": {"type": "integer", "minimum": 0, "maximum": 5, "description": "Conversation turns to bring in around each recalled turn, each side (default 1)."}
            }))),
            output: output(&["kind", "summary", "facts", "ranking", "warnings"], json!({
                "kind": {"type": "string"},
                "summary": {"type": "string"},
                "goal": {"type": "string"},
                "entities": {"type": "array", "items": {"type": "string"}},
                "facts": facts("Selected facts, best first."),
                "ranking": {"type": "array", "items": {"type": "object"}, "description": "Why each fact is in the packet, in the order of facts."},
                "pages": {"type": "array", "items": {"type": "object"}},
                "tokens": {"type": "integer"},
                "total_tokens": {"type": "integer"},
                "candidates": {"type": "integer"},
                "warnings": {"type": "array", "items": {"type": "object", "required": ["kind", "message"], "properties": {"kind": {"type": "string"}, "message": {"type": "string"}, "facts": ids("")}}}
            })),
            writes: false,
        },
        ToolDef {
            name: REMEMBER,
            title: "Remember a fact",
            description: "Store one fact: `subject predicate object`, e.g. Person:sarah works_at Org:acme. Use it when \
                the user tells you something worth keeping. Name entities `Type:id`; `object` is any JSON value (an \
                entity reference as `Type:id`). A new value of a single-valued predicate closes the older fact \
                instead of overwriting it (history is kept). Give `confidence` (0..1; below 0.75 the fact is kept as \
                an unconfirmed candidate), `source` (where it came from), and `valid_from`/`valid_until` (unix ms: \
                when it is true in the world) when you know them. Returns the stored fact and the ids of the facts \
                it superseded. Send an `Idempotency-Key` header to make a retry safe.",
            input: object(&["subject", "predicate", "object"], with_namespace(json!({
                "subject": {"type": "string", "minLength": 1, "description": "The entity the fact is about, `Type:id` (e.g. Person:sarah)."},
                "predicate": {"type": "string", "minLength": 1, "description": "The relation or attribute (e.g. works_at)."},
                "object": {"description": "The value: an entity `Type:id`, text, number, boolean or object."},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1, "description": "How sure (default 1.0)."},
                "source": {"type": "string", "description": "Provenance: where the fact comes from."},
                "valid_from": ms("When it became true in the world (unix ms; default now)."),
                "valid_until": ms("When it stops being true (unix ms, exclusive; default open)."),
                "properties": {"type": "object", "description": "Extra structured properties."}
            }))),
            output: output(&["fact", "superseded", "continued"], json!({
                "fact": fact(),
                "superseded": ids("Facts this one closed."),
                "continued": ids("Tails of older facts kept after a bounded interval."),
                "replayed": {"type": "boolean", "description": "True when this is the stored answer of an earlier call with the same Idempotency-Key."}
            })),
            writes: true,
        },
        ToolDef {
            name: RECALL,
            title: "Recall facts",
            description: "Search memory with a question in words (full-text, graph proximity, time and the people \
                named, fused). Use it to look something up during a task, e.g. \"where does sarah work?\" or \"what \
                did Dana do in May?\": time words in the question (\"last week\", \"in 2023\") favour facts of that \
                time, and facts about a person named rank above facts that only mention them. `seeds` (`Type:id`) \
                boost facts near those entities; `subject`/`predicate` narrow the search; `neighbours` returns the \
                conversation turns around each hit. Sees every write made before the call. Returns the matching \
                current facts, best first, with their scores.",
            input: object(&["question"], with_namespace(json!({
                "question": {"type": "string", "minLength": 1, "description": "What to look for, in words."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many facts (default 8)."},
                "seeds": {"type": "array", "items": {"type": "string"}, "maxItems": 16, "description": "Entities to favour (`Type:id`)."},
                "subject": {"type": "string", "description": "Only facts about this subject."},
                "predicate": {"type": "string", "description": "Only facts with this predicate."},
                "include_candidates": {"type": "boolean", "description": "Also unconfirmed (low-confidence) facts."},
                "valid_from": ms("Favour facts true at or after this moment (unix ms); with valid_until, a valid-time range. Without either, time words in the question (\"in May 2024\", \"two weeks ago\") set the range."),
                "valid_until": ms("Favour facts true before this moment (unix ms, exclusive)."),
                "reference_time": ms("What \"now\" is for relative time words in the question (unix ms; default the server's clock)."),
                "signals": {"type": "array", "items": {"type": "string", "enum": ["bm25", "graph", "time", "entity", "diverse", "vector"]}, "description": "Ranking signals on top of full-text (default all); [] is full-text alone."},
                "neighbours": {"type": "integer", "minimum": 0, "maximum": 5, "description": "Conversation turns to return around each hit, each side (default 0)."}
            }))),
            output: output(&["question", "facts", "matches", "stale"], json!({
                "question": {"type": "string"},
                "facts": facts("Matching facts, best first."),
                "matches": {"type": "array", "items": {"type": "object", "required": ["id", "score"], "properties": {"id": {"type": "string"}, "score": {"type": "number"}, "reasons": {"type": "array", "items": {"type": "string"}}, "neighbours": facts("The conversation turns around the hit, in order.")}}, "description": "Why each fact matched, in the order of facts."},
                "time": {"type": ["object", "null"], "description": "The valid-time range the search favoured: from, until (unix ms), text (the question's words), source (question or request)."},
                "stale": {"type": "boolean", "description": "True when the index had not caught up with the latest writes within the wait."}
            })),
            writes: false,
        },
        ToolDef {
            name: RECALL_AS_OF,
            title: "Recall as of a past time",
            description: "Time travel: what memory knew at a past moment (`as_of`, record time, unix ms; or `as_of_tx`, \
                a transaction number) and/or what was true in the world at a past moment (`valid_at`, unix ms). Use it \
                for questions like \"where did sarah work in 2022?\" (valid_at) or \"what did we believe last week?\" \
                (as_of). Filter by `subject`/`predicate`/`object` for an exact read, or give a `question` to search in \
                words (the search sees `as_of`; `valid_at` then keeps the facts covering that instant). Returns the \
                facts with their valid intervals and statuses; `next_cursor` pages an exact read.",
            input: object(&[], with_namespace(json!({
                "question": {"type": "string", "description": "Search in words (optional)."},
                "subject": {"type": "string", "description": "Only facts about this subject."},
                "predicate": {"type": "string", "description": "Only facts with this predicate."},
                "object": {"description": "Only facts with exactly this object."},
                "as_of": ms("Record time: read memory as it was at this moment (unix ms)."),
                "as_of_tx": {"type": "integer", "minimum": 0, "description": "Record time as a transaction number (instead of as_of)."},
                "valid_at": ms("Valid time: the facts true in the world at this moment (unix ms)."),
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many facts (default 100; with a question, default 8 and at most 100)."},
                "cursor": {"type": "string", "description": "next_cursor of a previous exact read."}
            }))),
            output: output(&["facts"], json!({
                "facts": facts("The facts, as of the times asked."),
                "as_of": {"type": ["integer", "null"]},
                "as_of_tx": {"type": ["integer", "null"]},
                "valid_at": {"type": ["integer", "null"]},
                "next_cursor": {"type": ["string", "null"], "description": "Pass as cursor for the next page; null when there is none."}
            })),
            writes: false,
        },
        ToolDef {
            name: WHATS_CHANGED,
            title: "What changed",
            description: "The change log: every write since a transaction (`since_tx`) or a time (`since`, unix ms), \
                oldest first, a bounded page at a time. Use it to catch up on what was learned, corrected or retracted \
                since you last looked. Each change is a transaction with its events (assert, retract, predicate, \
                threshold) and the facts involved. Pass `next_cursor` back as `cursor` for the next page; remember \
                `last_tx` to resume later.",
            input: object(&[], with_namespace(json!({
                "since_tx": {"type": "integer", "minimum": 0, "description": "Changes after this transaction (default 0: from the start)."},
                "since": ms("Changes recorded at or after this time (unix ms)."),
                "cursor": {"type": "integer", "minimum": 0, "description": "next_cursor of a previous page (the last tx it held)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "At most this many transactions (default 50)."}
            }))),
            output: output(&["changes", "next_cursor", "last_tx"], json!({
                "changes": {"type": "array", "items": {
                    "type": "object", "required": ["tx", "recorded_at", "events"],
                    "properties": {
                        "tx": {"type": "integer"},
                        "recorded_at": {"type": "integer"},
                        "events": {"type": "array", "items": {"type": "object", "required": ["op"], "properties": {"op": {"type": "string", "enum": ["assert", "retract", "predicate", "threshold"]}}}}
                    }
                }},
                "next_cursor": {"type": ["integer", "null"], "description": "The last tx of this page when more may follow; null at the end."},
                "last_tx": {"type": "integer", "description": "The last tx of this page (or the one you started after): resume after it later."}
            })),
            writes: false,
        },
        ToolDef {
            name: EXPLAIN_FACT,
            title: "Explain a fact",
            description: "Where a fact came from and what happened to it: its provenance (source, confidence, when it \
                was recorded), every stored version, and the supersession chain both ways (the facts it closed or \
                continues, and the fact that closed or continues it), resolved to facts. Use it when the user asks \
                why memory believes something, or when two facts disagree.",
            input: object(&["id"], with_namespace(json!({
                "id": {"type": "string", "description": "The fact id (UUID), as returned by the other tools."}
            }))),
            output: output(&["id", "fact", "versions", "predecessors", "successors"], json!({
                "id": {"type": "string"},
                "fact": fact(),
                "provenance": {"type": "object"},
                "versions": facts("Every version, oldest first."),
                "predecessors": facts("Facts this one closed, and the fact it continues."),
                "successors": facts("The fact that closed this one, and the tails that continue it.")
            })),
            writes: false,
        },
        ToolDef {
            name: DIGEST,
            title: "Digest content into facts",
            description: "Turn a piece of text (notes, a document, a message) into facts in memory: extracts \
                `subject predicate object` claims with confidences, masks personal data, and stores them with `source` \
                as their provenance (low-confidence ones as unconfirmed candidates). Use it for content too long or \
                unstructured to `remember` fact by fact. Returns a receipt with counts and the facts stored. Send an \
                `Idempotency-Key` header to make a retry safe.",
            input: object(&["content"], with_namespace(json!({
                "content": {"type": "string", "minLength": 1, "description": "The raw content to digest."},
                "subject": {"type": "string", "description": "The entity the content is about (`Type:id`), for lines that name none."},
                "content_type": {"type": "string", "description": "MIME type of the content (default text/markdown)."},
                "source": {"type": "string", "description": "Provenance label stamped on the facts (default upload)."},
                "threshold": {"type": "number", "minimum": 0, "maximum": 1, "description": "Confidence below which facts are kept as candidates (default 0.75)."},
                "mask": {"type": "string", "enum": ["redact", "hash", "hash_sha256", "shift_date"], "description": "How personal data in the text is masked (default redact)."},
                "extract_model": {"type": "object", "description": "An OpenAI-compatible model for extraction (bring your own key)."},
                "judge_model": {"type": "object", "description": "An OpenAI-compatible model that judges extracted facts."},
                "model": {"type": "object", "description": "Fallback model for both."}
            }))),
            output: output(&["records", "asserted", "candidates", "facts"], json!({
                "records": {"type": "integer", "description": "Source records processed."},
                "asserted": {"type": "integer", "description": "Facts stored as active."},
                "candidates": {"type": "integer", "description": "Facts kept as unconfirmed candidates."},
                "rejected": {"type": "integer"},
                "facts": ids("The facts stored from the content."),
                "page": {"type": ["string", "null"], "description": "The page entity the content was stored as, if any."},
                "source": {"type": "string"},
                "mode": {"type": "string", "description": "structured (no model) or model."},
                "tx": {"type": "integer"},
                "replayed": {"type": "boolean", "description": "True when this is the stored answer of an earlier call with the same Idempotency-Key."}
            })),
            writes: true,
        },
    ]
}

pub fn find(name: &str) -> Option<ToolDef> {
    tools().into_iter().find(|t| t.name == name)
}

pub fn as_object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!("schemas are objects"),
    }
}
