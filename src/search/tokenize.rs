//! The words of the recall index. Documents and questions go through the same
//! function, so a question term meets exactly the index terms it should:
//! lower-cased runs of letters and digits, `Type:id` refs, `snake_case`,
//! `kebab-case`, `dotted.names` and `camelCase` split into their words,
//! stopwords dropped, plurals and `-ing` folded by a light stemmer.
//!
//! The index stores these terms joined by spaces and splits them again with
//! tantivy's whitespace tokenizer, so tantivy never re-interprets them.

/// Words too common to say anything about relevance.
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "us", "was", "we", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "would", "you", "your",
];

/// Longest term kept; longer runs (hashes, base64) are cut to this.
const MAX_TERM_CHARS: usize = 40;

/// Lower-cased words of `text`: runs of letters and digits, split at
/// camelCase boundaries. Every other character separates words.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    let push = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            let w = std::mem::take(cur);
            out.push(if w.chars().count() > MAX_TERM_CHARS { w.chars().take(MAX_TERM_CHARS).collect() } else { w });
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                push(&mut cur, &mut out);
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            push(&mut cur, &mut out);
        }
    }
    push(&mut cur, &mut out);
    out
}

pub fn is_stopword(w: &str) -> bool {
    STOPWORDS.binary_search(&w).is_ok()
}

/// A light English stemmer: plurals, `-ed` and `-ing` (the first step of
/// Porter's algorithm), so "lives", "living" and "lived" meet "live",
/// "moved" meets "moving", "running" meets "runs". Short and non-ASCII words
/// are left alone.
pub fn stem(w: &str) -> String {
    let n = w.len();
    if !w.is_ascii() || n <= 3 || w.bytes().all(|b| b.is_ascii_digit()) {
        return w.to_string();
    }
    // Plurals.
    let s: &str = if let Some(s) = w.strip_suffix("sses") {
        return format!("{s}ss");
    } else if let Some(s) = w.strip_suffix("ies").filter(|_| n > 4) {
        return format!("{s}y");
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        &w[..n - 1]
    } else {
        w
    };
    // -ing, -ed: only when what is left has a vowel and three letters.
    let base = if s.ends_with("eed") {
        None
    } else {
        s.strip_suffix("ing").or_else(|| s.strip_suffix("ed")).filter(|b| b.len() >= 3 && has_vowel(b))
    };
    let Some(b) = base else { return s.to_string() };
    let bytes = b.as_bytes();
    let last = bytes[bytes.len() - 1];
    if b.ends_with("at") || b.ends_with("bl") || b.ends_with("iz") {
        // related -> relate, troubled -> trouble
        return format!("{b}e");
    }
    if bytes.len() >= 2 && last == bytes[bytes.len() - 2] && consonant(bytes, bytes.len() - 1) && !matches!(last, b'l' | b's' | b'z') {
        // running -> run, stopped -> stop
        return b[..b.len() - 1].to_string();
    }
    if measure(bytes) == 1 && cvc(bytes) {
        // living -> live, moved -> move, taking -> take
        return format!("{b}e");
    }
    b.to_string()
}

/// Whether byte `i` of a lower-case ASCII word is a consonant (`y` after a
/// consonant is a vowel).
fn consonant(w: &[u8], i: usize) -> bool {
    match w[i] {
        b'a' | b'e' | b'i' | b'o' | b'u' => false,
        b'y' => i == 0 || !consonant(w, i - 1),
        _ => true,
    }
}

fn has_vowel(w: &str) -> bool {
    (0..w.len()).any(|i| !consonant(w.as_bytes(), i))
}

/// Porter's measure: the number of vowel-consonant sequences.
fn measure(w: &[u8]) -> usize {
    let mut m = 0;
    let mut prev_vowel = false;
    for i in 0..w.len() {
        let v = !consonant(w, i);
        if prev_vowel && !v {
            m += 1;
        }
        prev_vowel = v;
    }
    m
}

/// Ends consonant-vowel-consonant, the last not `w`, `x` or `y` (`hop`, `liv`).
fn cvc(w: &[u8]) -> bool {
    let n = w.len();
    n >= 3
        && consonant(w, n - 3)
        && !consonant(w, n - 2)
        && consonant(w, n - 1)
        && !matches!(w[n - 1], b'w' | b'x' | b'y')
}

/// The index terms of `text`, in order (repeats kept: they are term
/// frequencies).
pub fn terms(text: &str) -> Vec<String> {
    words(text).into_iter().filter(|w| !is_stopword(w)).map(|w| stem(&w)).collect()
}

/// The distinct terms of a question, in first-seen order.
pub fn query_terms(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in terms(question) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The text of a JSON value: strings as they are, numbers and booleans
/// printed, objects' keys and values and arrays' items flattened; `null`
/// says nothing.
pub fn json_text(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Null => {}
        Value::String(s) => {
            out.push(' ');
            out.push_str(s);
        }
        Value::Bool(_) | Value::Number(_) => {
            out.push(' ');
            out.push_str(&v.to_string());
        }
        Value::Array(items) => items.iter().for_each(|i| json_text(i, out)),
        Value::Object(m) => {
            for (k, v) in m {
                out.push(' ');
                out.push_str(k);
                json_text(v, out);
            }
        }
    }
}

/// Entity refs (`Type:id`) named in a question, in order, deduplicated.
pub fn entity_refs(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in question.split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '!' | ';' | '(' | ')' | '"' | '\'')) {
        let w = w.trim_end_matches(['.', ':']);
        if crate::store::is_entity_ref(w) && !out.iter().any(|e| e == w) {
            out.push(w.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
        assert!(is_stopword("the") && is_stopword("where") && !is_stopword("sarah"));
    }

    #[test]
    fn refs_snake_kebab_dots_and_camel_case_fall_apart() {
        assert_eq!(words("Person:sarah_connor works_at Org:acmeCorp"), [
            "person", "sarah", "connor", "works", "at", "org", "acme", "corp"
        ]);
        assert_eq!(words("Service:billing-api.v2"), ["service", "billing", "api", "v2"]);
        assert_eq!(words("Größe ÜBER"), ["größe", "über"]);
        assert_eq!(words("  --  "), Vec::<String>::new());
        assert_eq!(words(&"x".repeat(100))[0].len(), MAX_TERM_CHARS);
    }

    #[test]
    fn terms_drop_stopwords_and_stem() {
        assert_eq!(terms("Where does Sarah work?"), ["sarah", "work"]);
        assert_eq!(terms("works working lives companies class status 2024"), [
            "work", "work", "live", "company", "class", "status", "2024"
        ]);
        assert_eq!(query_terms("sarah Sarah SARAH works work"), ["sarah", "work"]);
        assert_eq!(terms("living lived moved moving relocated running stopped"), [
            "live", "live", "move", "move", "relocate", "run", "stop"
        ]);
        assert_eq!(terms("need agreed sing things played fixed opened visited classes"), [
            "need", "agreed", "sing", "thing", "play", "fix", "open", "visit", "class"
        ]);
        assert!(terms("what is the").is_empty());
    }

    #[test]
    fn json_values_flatten_to_text() {
        let mut s = String::new();
        json_text(&serde_json::json!({"city": "Paris", "tags": ["a", 7, true, null]}), &mut s);
        assert_eq!(terms(&s), ["city", "paris", "tag", "7", "true"]);
    }

    #[test]
    fn entity_refs_are_found_in_questions() {
        assert_eq!(entity_refs("Where does Person:sarah work? And Person:sarah, Org:acme."), [
            "Person:sarah", "Org:acme"
        ]);
        assert!(entity_refs("no refs here: none").is_empty());
    }
}
