//! The command grammar of the `memory` network's front man when no model
//! is configured: a user message becomes one memory operation, so the agent
//! server is useful with no LLM at all. Matching is case-insensitive on the
//! command words and keeps the user's spelling of everything else.
//!
//! | message | command |
//! |---|---|
//! | `remember [that] <Type:id> <predicate> <object...>` | assert a fact (the object is an entity ref, a number, `true`/`false`, or text) |
//! | `forget <Type:id> <predicate> [<object...>]` | retract the current facts of that subject and predicate (with that object only, when given) |
//! | `what do you know about <Type:id>` / `tell me about <Type:id>` | the entity's current facts and the edges pointing at it |
//! | `history of <Type:id> [<predicate>]` | every version, as of now |
//! | `what changed since <when>` / `what's changed since <when>` / `changes since <when>` | the change log since then; `<when>` is an ISO date/time, a duration back from now (`24h`, `7d`), `today` or `yesterday` |
//! | `context for <task...>` / `build context for <task...>` | a context packet for the task |
//! | anything else | a question, answered from recall (search) |

use serde_json::Value;
use crate::store::is_entity_ref;

/// One parsed message.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Remember {
        subject: String,
        predicate: String,
        object: Value,
    },
    Forget {
        subject: String,
        predicate: String,
        object: Option<Value>,
    },
    About {
        entity: String,
    },
    History {
        subject: String,
        predicate: Option<String>,
    },
    /// Unix ms.
    ChangedSince {
        since: i64,
    },
    Context {
        task: String,
    },
    Question {
        text: String,
    },
}

/// Why a message that starts like a command is not one: the front man
/// answers with this, so the user sees how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const DAY_MS: i64 = 86_400_000;

/// Parses `text`; `now` (unix ms) resolves relative times.
pub fn parse(text: &str, now: i64) -> Result<Command, Usage> {
    let text = text.trim().trim_end_matches(['?', '.', '!']).trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let starts = |prefix: &[&str]| lower.len() >= prefix.len() && lower.iter().zip(prefix).all(|(w, p)| w == p);
    let rest = |n: usize| words[n.min(words.len())..].to_vec();

    if starts(&["remember"]) {
        let mut args = rest(1);
        if args.first().is_some_and(|w| w.eq_ignore_ascii_case("that")) {
            args.remove(0);
        }
        return match args.as_slice() {
            [s, p, o @ ..] if is_entity_ref(s) && !o.is_empty() => {
                Ok(Command::Remember { subject: s.to_string(), predicate: p.to_string(), object: object(&o.join(" ")) })
            }
            _ => Err(Usage("to remember, write: remember <Type:id> <predicate> <value>, e.g. remember Person:sarah works_at Org:acme".into())),
        };
    }
    if starts(&["forget"]) {
        return match rest(1).as_slice() {
            [s, p, o @ ..] if is_entity_ref(s) => Ok(Command::Forget {
                subject: s.to_string(),
                predicate: p.to_string(),
                object: (!o.is_empty()).then(|| object(&o.join(" "))),
            }),
            _ => Err(Usage(
                "to forget, write: forget <Type:id> <predicate> [<value>], e.g. forget Person:sarah works_at".into(),
            )),
        };
    }
    for prefix in
        [&["what", "do", "you", "know", "about"][..], &["tell", "me", "about"], &["who", "is"], &["what", "is"]]
    {
        if starts(prefix) {
            if let [e] = rest(prefix.len()).as_slice() {
                if is_entity_ref(e) {
                    return Ok(Command::About { entity: e.to_string() });
                }
            }
        }
    }
    if starts(&["history", "of"]) {
        return match rest(2).as_slice() {
            [s] if is_entity_ref(s) => Ok(Command::History { subject: s.to_string(), predicate: None }),
            [s, p] if is_entity_ref(s) => {
                Ok(Command::History { subject: s.to_string(), predicate: Some(p.to_string()) })
            }
            _ => Err(Usage("for a history, write: history of <Type:id> [<predicate>]".into())),
        };
    }
    for prefix in [
        &["what", "changed", "since"][..],
        &["what's", "changed", "since"],
        &["what", "has", "changed", "since"],
        &["changes", "since"],
    ] {
        if starts(prefix) {
            let when = rest(prefix.len()).join(" ");
            return since(&when, now).map(|since| Command::ChangedSince { since }).ok_or_else(|| {
                Usage(format!(
                    "I cannot read {when:?} as a time: write an ISO date (2026-01-31), a date and time \
                     (2026-01-31T12:00:00Z), a duration back from now (24h, 7d), today or yesterday"
                ))
            });
        }
    }
    for prefix in [&["build", "context", "for"][..], &["context", "for"]] {
        if starts(prefix) {
            let task = rest(prefix.len()).join(" ");
            if task.is_empty() {
                return Err(Usage("for a context packet, write: context for <the task>".into()));
            }
            return Ok(Command::Context { task });
        }
    }
    if text.is_empty() {
        return Err(Usage(
            "ask a question, or write one of: remember ..., forget ..., what do you know about ..., \
                          history of ..., what changed since ..., context for ..."
                .into(),
        ));
    }
    Ok(Command::Question { text: text.to_string() })
}

/// A value as written: an entity ref stays text (it is an edge), numbers and
/// booleans are typed, quotes around text are dropped.
fn object(s: &str) -> Value {
    let s = s.trim();
    if is_entity_ref(s) {
        return Value::String(s.to_string());
    }
    match s {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = s.parse::<i64>() {
        return Value::from(i);
    }
    if let Some(f) = s.parse::<f64>().ok().filter(|f| f.is_finite()) {
        return Value::from(f);
    }
    let unquoted = s.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(s);
    Value::String(unquoted.to_string())
}

fn since(when: &str, now: i64) -> Option<i64> {
    let w = when.trim().to_ascii_lowercase();
    let midnight = now.div_euclid(DAY_MS) * DAY_MS;
    match w.as_str() {
        "today" => return Some(midnight),
        "yesterday" => return Some(midnight - DAY_MS),
        _ => {}
    }
    if let Some(d) = crate::monitor::time::parse_duration(&w) {
        return Some(now.saturating_sub(d));
    }
    let w = w.strip_suffix(" ago").unwrap_or(&w);
    if let Some(d) = crate::monitor::time::parse_duration(&w.replace(' ', "")) {
        return Some(now.saturating_sub(d));
    }
    crate::monitor::time::parse_iso(&when.trim().to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_796_000_000_000; // 2026-11-30

    fn ok(text: &str) -> Command {
        parse(text, NOW).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn remember_types_the_value_and_keeps_edges() {
        assert_eq!(
            ok("Remember that Person:sarah works_at Org:acme."),
            Command::Remember {
                subject: "Person:sarah".into(),
                predicate: "works_at".into(),
                object: json!("Org:acme")
            }
        );
        assert_eq!(
            ok("remember Person:sarah age 41"),
            Command::Remember { subject: "Person:sarah".into(), predicate: "age".into(), object: json!(41) }
        );
        assert_eq!(
            ok("remember Person:sarah title \"staff engineer\""),
            Command::Remember {
                subject: "Person:sarah".into(),
                predicate: "title".into(),
                object: json!("staff engineer")
            }
        );
        for bad in ["remember", "remember sarah works_at acme", "remember Person:sarah works_at"] {
            assert!(parse(bad, NOW).unwrap_err().0.contains("remember <Type:id>"), "{bad}");
        }
    }

    #[test]
    fn forget_takes_an_optional_value() {
        assert_eq!(
            ok("forget Person:sarah works_at"),
            Command::Forget { subject: "Person:sarah".into(), predicate: "works_at".into(), object: None }
        );
        assert_eq!(
            ok("FORGET Person:sarah plays cello"),
            Command::Forget { subject: "Person:sarah".into(), predicate: "plays".into(), object: Some(json!("cello")) }
        );
        assert!(parse("forget everything", NOW).is_err());
    }

    #[test]
    fn questions_about_an_entity_history_and_context() {
        assert_eq!(ok("What do you know about Person:sarah?"), Command::About { entity: "Person:sarah".into() });
        assert_eq!(ok("tell me about Org:acme"), Command::About { entity: "Org:acme".into() });
        assert_eq!(ok("history of Person:sarah"), Command::History { subject: "Person:sarah".into(), predicate: None });
        assert_eq!(
            ok("history of Person:sarah works_at"),
            Command::History { subject: "Person:sarah".into(), predicate: Some("works_at".into()) }
        );
        assert_eq!(ok("context for planning the offsite"), Command::Context { task: "planning the offsite".into() });
        // Not an entity ref: an ordinary question for recall.
        assert_eq!(
            ok("what do you know about sarah?"),
            Command::Question { text: "what do you know about sarah".into() }
        );
        assert_eq!(ok("Where does Sarah work?"), Command::Question { text: "Where does Sarah work".into() });
        assert!(parse("   ", NOW).is_err());
    }

    #[test]
    fn since_reads_dates_durations_and_words() {
        let midnight = NOW.div_euclid(DAY_MS) * DAY_MS;
        assert_eq!(ok("what changed since yesterday?"), Command::ChangedSince { since: midnight - DAY_MS });
        assert_eq!(ok("what's changed since today"), Command::ChangedSince { since: midnight });
        assert_eq!(ok("changes since 24h"), Command::ChangedSince { since: NOW - DAY_MS });
        assert_eq!(ok("what has changed since 2 h ago"), Command::ChangedSince { since: NOW - 2 * 3_600_000 });
        assert_eq!(ok("what changed since 2026-01-31"), Command::ChangedSince { since: 1_769_817_600_000 });
        let err = parse("what changed since the dawn of time", NOW).unwrap_err();
        assert!(err.0.contains("\"the dawn of time\""), "{err}");
    }
}
