//! Words of facts and questions, and how well a fact's words answer a goal.
//!
//! Used where the candidate set is already small (a context packet's facts,
//! an answer's evidence), so relevance is computed on the spot: BM25 over the
//! candidates themselves, with the candidates as the corpus.

use std::collections::HashMap;
use tempora_storage::Fact;

/// Words too common to say anything about relevance.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "before", "brief", "by", "did", "do", "does", "for", "from",
    "has", "have", "he", "her", "his", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our",
    "she", "that", "the", "their", "them", "they", "this", "to", "us", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
];

/// Lower-cased words of `text`: runs of letters and digits. `Type:id` refs,
/// `snake_case` and `camelCase` fall apart into their words.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            // camelCase boundary
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The words of `text` that carry meaning (stopwords dropped), stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text).into_iter().filter(|w| !STOPWORDS.contains(&w.as_str())).map(|w| stem(&w)).collect()
}

/// A light English stemmer: plurals and `-ing`, enough for "lives" to meet
/// "live" and "working" to meet "works". Short words are left alone.
pub fn stem(w: &str) -> String {
    let n = w.len();
    if !w.is_ascii() || n <= 3 {
        return w.to_string();
    }
    if let Some(s) = w.strip_suffix("ies").filter(|_| n > 4) {
        return format!("{s}y");
    }
    if let Some(s) = w.strip_suffix("ing").filter(|_| n > 5) {
        return s.to_string();
    }
    if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return w[..n - 1].to_string();
    }
    w.to_string()
}

/// Everything of a fact a question could be about.
pub fn fact_text(f: &Fact) -> String {
    let mut t = format!("{} {} ", f.subject, f.predicate);
    match &f.object {
        serde_json::Value::String(s) => t.push_str(s),
        other => t.push_str(&other.to_string()),
    }
    if let Some(s) = &f.source {
        t.push(' ');
        t.push_str(s);
    }
    if let Some(p) = &f.properties {
        for v in p.values() {
            t.push(' ');
            match v {
                serde_json::Value::String(s) => t.push_str(s),
                other => t.push_str(&other.to_string()),
            }
        }
    }
    t
}

/// BM25 scores of `docs` (already split into terms) for `query` terms, with
/// `docs` as the corpus. Scores are >= 0; 0 means no query term occurs.
pub fn bm25(query: &[String], docs: &[Vec<String>]) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let n = docs.len() as f64;
    if docs.is_empty() || query.is_empty() {
        return vec![0.0; docs.len()];
    }
    let avg_len = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for d in docs {
        let mut seen: Vec<&str> = d.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for w in seen {
            *df.entry(w).or_insert(0) += 1;
        }
    }
    let mut q: Vec<&str> = query.iter().map(String::as_str).collect();
    q.sort_unstable();
    q.dedup();
    docs.iter()
        .map(|d| {
            let len = d.len() as f64;
            q.iter()
                .map(|t| {
                    let tf = d.iter().filter(|w| w == t).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = *df.get(t).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
                })
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_refs_snake_and_camel_case() {
        assert_eq!(words("Person:sarah works_at Org:acmeCorp"), ["person", "sarah", "works", "at", "org", "acme", "corp"]);
        assert_eq!(terms("Where does Sarah work?"), ["sarah", "work"]);
        assert_eq!(terms("works working lives companies class"), ["work", "work", "live", "company", "class"]);
    }

    #[test]
    fn bm25_prefers_the_document_with_the_rare_term() {
        let docs: Vec<Vec<String>> = ["sarah works at acme", "bob works at globex", "sarah lives in paris"]
            .iter()
            .map(|d| terms(d))
            .collect();
        let s = bm25(&terms("where does sarah live"), &docs);
        assert!(s[2] > s[0] && s[0] > s[1] && s[1] == 0.0, "{s:?}");
    }
}
