//! `/api/ask`: an answer grounded in recalled facts.
//!
//! With a caller-supplied model (any OpenAI-compatible chat endpoint) the
//! model answers from the numbered evidence lines only. Without one, the
//! answer is extractive and deterministic: the best evidence facts, as
//! sentences. Either way the evidence is returned, and `system_reliability`
//! is the mean confidence of the evidence.

use super::tokens::fact_line;
use crate::llm::{Client, LlmError, ModelConfig};
use serde::Serialize;
use crate::store::Fact;

/// Evidence facts an extractive answer quotes.
const EXTRACTIVE_FACTS: usize = 3;

const SYSTEM_PROMPT: &str = "You answer questions from an agent's memory. Use only the numbered facts \
you are given; each is `subject predicate object (confidence, source)`. If they do not answer the \
question, say that memory does not say. Be brief. End with a last line `Confidence: <a number from 0 to 1>`.";

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Tokens {
    #[serde(rename = "in")]
    pub tokens_in: u64,
    #[serde(rename = "out")]
    pub tokens_out: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AskResponse {
    pub answer: String,
    pub evidence: Vec<Fact>,
    pub model_confidence: Option<f64>,
    pub system_reliability: Option<f64>,
    pub tokens: Tokens,
    /// `model` or `extractive`.
    pub mode: &'static str,
}

pub async fn ask(
    client: &Client,
    question: &str,
    evidence: Vec<Fact>,
    model: Option<&ModelConfig>,
) -> Result<AskResponse, LlmError> {
    let system_reliability = reliability(&evidence);
    let Some(cfg) = model else {
        return Ok(AskResponse {
            answer: extractive(&evidence),
            evidence,
            model_confidence: None,
            system_reliability,
            tokens: Tokens::default(),
            mode: "extractive",
        });
    };
    let chat = client.chat(cfg, SYSTEM_PROMPT, &prompt(question, &evidence)).await?;
    let (answer, model_confidence) = split_confidence(&chat.content);
    Ok(AskResponse {
        answer,
        evidence,
        model_confidence,
        system_reliability,
        tokens: Tokens { tokens_in: chat.tokens_in, tokens_out: chat.tokens_out },
        mode: "model",
    })
}

/// Mean confidence of the evidence; `None` without evidence.
pub fn reliability(evidence: &[Fact]) -> Option<f64> {
    if evidence.is_empty() {
        return None;
    }
    Some(evidence.iter().map(|f| f.confidence).sum::<f64>() / evidence.len() as f64)
}

pub fn prompt(question: &str, evidence: &[Fact]) -> String {
    let mut p = String::from("Facts:\n");
    if evidence.is_empty() {
        p.push_str("(none)\n");
    }
    for (i, f) in evidence.iter().enumerate() {
        p.push_str(&format!("[{}] {}\n", i + 1, fact_line(f)));
    }
    p.push_str("\nQuestion: ");
    p.push_str(question.trim());
    p
}

/// The answer built from the evidence alone.
pub fn extractive(evidence: &[Fact]) -> String {
    if evidence.is_empty() {
        return "Memory holds no facts that answer this question.".to_string();
    }
    let lines: Vec<String> = evidence.iter().take(EXTRACTIVE_FACTS).map(fact_line).collect();
    let mut answer = format!("{}.", lines[0]);
    if lines.len() > 1 {
        answer.push_str(" Also: ");
        answer.push_str(&lines[1..].join("; "));
        answer.push('.');
    }
    answer
}

/// Splits a trailing `Confidence: x` line off a model's answer.
pub fn split_confidence(content: &str) -> (String, Option<f64>) {
    let trimmed = content.trim_end();
    if let Some(pos) = trimmed.rfind('\n').map(|p| p + 1).or(Some(0)) {
        let last = trimmed[pos..].trim();
        let lower = last.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("confidence:") {
            if let Ok(c) = rest.trim().trim_end_matches('.').parse::<f64>() {
                if (0.0..=1.0).contains(&c) {
                    return (trimmed[..pos].trim_end().to_string(), Some(c));
                }
            }
        }
    }
    (trimmed.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_line_is_split_off() {
        assert_eq!(split_confidence("Acme.\nConfidence: 0.8\n"), ("Acme.".to_string(), Some(0.8)));
        assert_eq!(split_confidence("Acme."), ("Acme.".to_string(), None));
        assert_eq!(split_confidence("Acme.\nConfidence: high"), ("Acme.\nConfidence: high".to_string(), None));
        assert_eq!(split_confidence("Confidence: 2"), ("Confidence: 2".to_string(), None));
    }
}
