//! The model path of a digest: the prompts of the extractor (free text to
//! proposed facts) and the judge (a confidence for each proposal), and the
//! strict parsing of their answers. An answer that is not the JSON asked
//! for is an error of the whole digest (502); a proposal inside a good
//! answer that is not a usable fact is a rejected record.

use serde_json::Value;

pub const EXTRACT_SYSTEM: &str = "You extract facts from a document for an agent's memory. \
Answer with JSON only, no prose: {\"facts\": [{\"subject\": \"Type:id\", \"predicate\": \"snake_case_verb\", \
\"object\": <a string, number, boolean, or \"Type:id\" for another entity>, \"confidence\": <0 to 1>}]}. \
Subjects and entity objects are `Type:id` (e.g. Person:sarah, Org:acme). Only facts the document states. \
Text in square brackets such as [EMAIL:…] is masked personal data: keep it exactly as written.";

pub const JUDGE_SYSTEM: &str = "You judge facts extracted from a document. For each numbered fact, \
give the probability (0 to 1) that the document states it. Answer with JSON only, no prose: \
{\"scores\": [<one number per fact, in order>]}.";

/// Most text sent to the extractor, in bytes (the masked document's start).
pub const MAX_MODEL_TEXT: usize = 64 * 1024;
/// Most proposals taken from one extraction; more are rejected.
pub const MAX_PROPOSALS: usize = 1000;
/// Confidence of a proposal the extractor gave none for, without a judge.
pub const UNSCORED_CONFIDENCE: f64 = 0.5;

#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub subject: String,
    pub predicate: String,
    pub object: Value,
    pub confidence: Option<f64>,
}

pub fn extract_prompt(text: &str) -> String {
    format!("Document:\n{text}")
}

pub fn judge_prompt(text: &str, proposals: &[Proposal]) -> String {
    let mut p = format!("Document:\n{text}\n\nFacts:\n");
    for (i, f) in proposals.iter().enumerate() {
        let object = match &f.object {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        p.push_str(&format!("[{}] {} {} {}\n", i + 1, f.subject, f.predicate, object));
    }
    p
}

/// The JSON inside an answer: the whole answer, or the body of a fenced
/// ```json block around it.
fn json_of(content: &str) -> Option<Value> {
    let t = content.trim();
    if let Ok(v) = serde_json::from_str(t) {
        return Some(v);
    }
    let inner = t.strip_prefix("```")?.trim_end().strip_suffix("```")?;
    let inner = inner.split_once('\n').map(|(_, rest)| rest).unwrap_or(inner);
    serde_json::from_str(inner.trim()).ok()
}

fn preview(content: &str) -> String {
    let p: String = content.trim().chars().take(80).collect();
    format!("{p:?}")
}

/// The extractor's answer: `{"facts": [...]}` or a bare list. Each item is
/// a proposal or the reason it is not one.
pub fn parse_proposals(content: &str) -> Result<Vec<Result<Proposal, String>>, String> {
    let junk = || format!("the extract model did not answer a JSON list of facts (it answered {})", preview(content));
    let items = match json_of(content).ok_or_else(junk)? {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("facts") {
            Some(Value::Array(a)) => a,
            _ => return Err(junk()),
        },
        _ => return Err(junk()),
    };
    Ok(items.into_iter().map(proposal).collect())
}

fn proposal(v: Value) -> Result<Proposal, String> {
    let Value::Object(mut o) = v else { return Err("a proposed fact is not a JSON object".into()) };
    let text = |o: &mut serde_json::Map<String, Value>, k: &str| match o.remove(k) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        _ => Err(format!("a proposed fact has no {k} string")),
    };
    let subject = text(&mut o, "subject")?;
    let predicate = text(&mut o, "predicate")?;
    let object = match o.remove("object") {
        None | Some(Value::Null) => return Err("a proposed fact has no object".into()),
        Some(v) => v,
    };
    let confidence = match o.remove("confidence") {
        None | Some(Value::Null) => None,
        Some(c) => match c.as_f64() {
            Some(c) if (0.0..=1.0).contains(&c) => Some(c),
            _ => return Err(format!("a proposed fact's confidence {c} is not a number within [0, 1]")),
        },
    };
    Ok(Proposal { subject, predicate, object, confidence })
}

/// The judge's answer: `{"scores": [...]}` or a bare list, one number in
/// [0, 1] per proposal, in order.
pub fn parse_scores(content: &str, n: usize) -> Result<Vec<f64>, String> {
    let junk = |why: &str| format!("the judge model did not answer {n} scores ({why}; it answered {})", preview(content));
    let list = match json_of(content).ok_or_else(|| junk("not JSON"))? {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("scores").or_else(|| o.remove("confidences")) {
            Some(Value::Array(a)) => a,
            _ => return Err(junk("no scores list")),
        },
        _ => return Err(junk("not a list")),
    };
    if list.len() != n {
        return Err(junk(&format!("{} scores", list.len())));
    }
    list.iter()
        .map(|v| v.as_f64().filter(|c| (0.0..=1.0).contains(c)).ok_or_else(|| junk("a score is not a number within [0, 1]")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn proposals() {
        let good = r#"{"facts": [{"subject": "Person:sarah", "predicate": "works_at", "object": "Org:acme", "confidence": 0.9},
                       {"subject": "", "predicate": "x", "object": 1}, {"subject": "A:b", "predicate": "p", "object": 2, "confidence": 7}]}"#;
        let p = parse_proposals(good).unwrap();
        assert_eq!(p[0], Ok(Proposal { subject: "Person:sarah".into(), predicate: "works_at".into(), object: json!("Org:acme"), confidence: Some(0.9) }));
        assert!(p[1].as_ref().unwrap_err().contains("subject"));
        assert!(p[2].as_ref().unwrap_err().contains("confidence"));
        let fenced = "```json\n[{\"subject\": \"A:b\", \"predicate\": \"p\", \"object\": true}]\n```";
        assert_eq!(parse_proposals(fenced).unwrap().len(), 1);
        for junk in ["I cannot help with that.", "{\"answer\": 1}", "42", ""] {
            assert!(parse_proposals(junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn scores() {
        assert_eq!(parse_scores("{\"scores\": [0.9, 0.1]}", 2).unwrap(), vec![0.9, 0.1]);
        assert_eq!(parse_scores("[1, 0]", 2).unwrap(), vec![1.0, 0.0]);
        assert!(parse_scores("[0.5]", 2).is_err());
        assert!(parse_scores("[0.5, 2]", 2).is_err());
        assert!(parse_scores("yes", 1).is_err());
    }
}
