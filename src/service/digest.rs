//! Digesting a document into facts: the checks and the order of the work;
//! the pipeline itself is `crate::digest` (`docs/digest.md`).

use super::error::{Result, ServiceError};
use super::idempotency::{Answer, IdempotencyKey, Op};
use super::Service;
use crate::digest::formats::Format;
use crate::digest::mask::{Masker, Strategy};
use crate::digest::{self, Hint, ModelFailure, Summary, DEFAULT_SOURCE, MAX_FACTS};
use crate::json::present;
use crate::llm::{LlmError, ModelConfig};
use crate::memory::blocking;
use serde::Deserialize;
use serde_json::Value;
use tempora_storage::{Cardinality, MAX_SOURCE_BYTES};

pub const DEFAULT_CONTENT_TYPE: &str = "text/markdown";

/// What to digest and how.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestRequest {
    pub content: String,
    #[serde(default, deserialize_with = "present")]
    pub content_type: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub source: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub threshold: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub mask: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub subject: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub extract_model: Option<ModelConfig>,
    #[serde(default, deserialize_with = "present")]
    pub judge_model: Option<ModelConfig>,
    #[serde(default, deserialize_with = "present")]
    pub model: Option<ModelConfig>,
}

fn too_many(n: usize) -> ServiceError {
    ServiceError::invalid(format!(
        "a digest writes at most {MAX_FACTS} facts (its page's included); this content gives {n}: split it into smaller digests"
    ))
}

fn model_error(f: ModelFailure) -> ServiceError {
    match f {
        ModelFailure::Llm(e) => llm_error(e),
        ModelFailure::Junk(m) => {
            tracing::warn!(error = %m, "model call failed");
            ServiceError::Upstream(m)
        }
    }
}

/// A failed model call: a bad configuration is the caller's, a timeout
/// and anything else the endpoint's.
pub(crate) fn llm_error(e: LlmError) -> ServiceError {
    tracing::warn!(error = %e, "model call failed");
    match e {
        LlmError::Config(m) => ServiceError::Invalid(m),
        LlmError::Timeout(_) => ServiceError::UpstreamTimeout(e.to_string()),
        _ => ServiceError::Upstream(e.to_string()),
    }
}

impl Service {
    /// Digests `body` into facts of `tenant` in one atomic write; its
    /// receipt says what was written, masked and rejected.
    pub async fn digest(
        &self,
        tenant: &str,
        body: DigestRequest,
        key: Option<&IdempotencyKey>,
    ) -> Result<Answer<Value>> {
        if body.content.trim().is_empty() {
            return Err(ServiceError::invalid("content must not be empty"));
        }
        let content_type = body.content_type.unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string());
        let format = Format::from_content_type(&content_type).map_err(ServiceError::invalid)?;
        let source = body.source.unwrap_or_else(|| DEFAULT_SOURCE.to_string());
        if source.len() > MAX_SOURCE_BYTES {
            return Err(ServiceError::invalid(format!("source is longer than {MAX_SOURCE_BYTES} bytes")));
        }
        if let Some(t) = body.threshold {
            if !(0.0..=1.0).contains(&t) {
                return Err(ServiceError::invalid(format!("threshold must be within [0, 1], got {t}")));
            }
        }
        let strategy: Strategy = body.mask.as_deref().unwrap_or("redact").parse().map_err(ServiceError::invalid)?;
        let hint = body.subject.as_deref().map(Hint::parse).transpose().map_err(ServiceError::invalid)?;
        let extractor = body.extract_model.or_else(|| body.model.clone());
        let judge = body.judge_model.or(body.model);
        if extractor.is_none() && judge.is_some() {
            return Err(ServiceError::invalid(
                "judge_model scores the facts an extractor proposes: give extract_model (or model) too",
            ));
        }

        // A retry is answered from the stored reply before any model is called.
        if let Some(stored) = self.stored_answer(tenant, Op::Digest, key).await? {
            return Ok(Answer::Replayed(stored));
        }

        let engine = self.memory.store().clone();
        let tenant = tenant.to_string();
        let secret = {
            let (engine, tenant) = (engine.clone(), tenant.clone());
            blocking(move || digest::tenant_secret(&*engine, &tenant)).await?
        };
        let masker = std::sync::Arc::new(Masker::new(strategy, secret));
        let req = digest::Request { content: body.content, format, content_type: content_type.clone(), source: source.clone(), hint, strategy };
        let prepared = {
            let masker = std::sync::Arc::clone(&masker);
            tokio::task::spawn_blocking(move || digest::prepare(&req, &masker)).await.map_err(|e| {
                tracing::error!(error = %e, "digest task failed");
                ServiceError::Internal
            })?
        };
        let mut d = prepared.map_err(ServiceError::invalid)?;
        if d.fact_count() > MAX_FACTS {
            return Err(too_many(d.fact_count()));
        }

        let mut tokens = digest::Tokens::default();
        let mode = match &extractor {
            Some(x) => {
                tokens = digest::extract(&self.llm, x, judge.as_ref(), &masker, &source, &mut d).await.map_err(model_error)?;
                crate::monitor::usage::record_async(engine.clone(), tenant.clone(), tokens.tokens_in, tokens.tokens_out).await;
                if d.fact_count() > MAX_FACTS {
                    return Err(too_many(d.fact_count()));
                }
                "model"
            }
            None => "structured",
        };

        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|t| t.as_millis() as i64).unwrap_or(0);
        let (d, mentions_many, tenant_threshold) = {
            let (engine, tenant) = (engine.clone(), tenant.clone());
            blocking(move || {
                let mut d = d;
                digest::check_strict(&*engine, &tenant, &mut d, now)?;
                let many = engine.predicate(&tenant, digest::pages::MENTIONS)?.cardinality == Cardinality::Many;
                Ok((d, many, engine.threshold(&tenant)))
            })
            .await?
        };
        let threshold = body.threshold.unwrap_or(tenant_threshold);
        let window = (threshold != tenant_threshold).then_some((threshold, tenant_threshold));
        let (ops, slots) = digest::ops(&d, &source, &content_type, mentions_many, window);
        let summary = Summary {
            records: d.records,
            rejections: d.rejections,
            page: d.page,
            title: d.title,
            mentions: d.mentions,
            mentions_truncated: d.mentions_truncated,
            body_truncated: d.body_truncated,
            content_type,
            source,
            mask: strategy.as_str(),
            masked: d.masked,
            mode,
            threshold,
            tokens,
        };
        self.write_keyed(&tenant, Op::Digest, key, ops, move |out| Ok(digest::receipt(&summary, &slots, out))).await
    }
}
