//! `POST /api/digest`: the request checks and the order of the work; the
//! pipeline itself is `crate::digest`.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, Object};
use super::idempotency::{self, IdempotencyKey};
use super::AppState;
use crate::digest::formats::Format;
use crate::digest::mask::{Masker, Strategy};
use crate::digest::{self, Hint, ModelFailure, Summary, DEFAULT_SOURCE, MAX_FACTS};
use crate::llm::ModelConfig;
use crate::memory::blocking;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use tempora_storage::{Cardinality, MAX_SOURCE_BYTES};

const ROUTE: &str = "POST /api/digest";
pub const DEFAULT_CONTENT_TYPE: &str = "text/markdown";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestBody {
    content: String,
    #[serde(default, deserialize_with = "present")]
    content_type: Option<String>,
    #[serde(default, deserialize_with = "present")]
    source: Option<String>,
    #[serde(default, deserialize_with = "present")]
    threshold: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    mask: Option<String>,
    #[serde(default, deserialize_with = "present")]
    subject: Option<String>,
    #[serde(default, deserialize_with = "present")]
    extract_model: Option<ModelConfig>,
    #[serde(default, deserialize_with = "present")]
    judge_model: Option<ModelConfig>,
    #[serde(default, deserialize_with = "present")]
    model: Option<ModelConfig>,
}

fn too_many(n: usize) -> ApiError {
    ApiError::schema(format!(
        "a digest writes at most {MAX_FACTS} facts (its page's included); this content gives {n}: split it into smaller digests"
    ))
}

fn model_error(f: ModelFailure) -> ApiError {
    match f {
        ModelFailure::Llm(e) => super::recall::llm_error(e),
        ModelFailure::Junk(m) => {
            tracing::warn!(error = %m, "model call failed");
            ApiError::new(StatusCode::BAD_GATEWAY, "UpstreamError", m)
        }
    }
}

pub async fn digest(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<DigestBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    if body.content.trim().is_empty() {
        return Err(ApiError::schema("content must not be empty"));
    }
    let content_type = body.content_type.unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string());
    let format = Format::from_content_type(&content_type).map_err(ApiError::schema)?;
    let source = body.source.unwrap_or_else(|| DEFAULT_SOURCE.to_string());
    if source.len() > MAX_SOURCE_BYTES {
        return Err(ApiError::schema(format!("source is longer than {MAX_SOURCE_BYTES} bytes")));
    }
    if let Some(t) = body.threshold {
        if !(0.0..=1.0).contains(&t) {
            return Err(ApiError::schema(format!("threshold must be within [0, 1], got {t}")));
        }
    }
    let strategy: Strategy = body.mask.as_deref().unwrap_or("redact").parse().map_err(ApiError::schema)?;
    let hint = body.subject.as_deref().map(Hint::parse).transpose().map_err(ApiError::schema)?;
    let extractor = body.extract_model.or_else(|| body.model.clone());
    let judge = body.judge_model.or(body.model);
    if extractor.is_none() && judge.is_some() {
        return Err(ApiError::schema(
            "judge_model scores the facts an extractor proposes: give extract_model (or model) too",
        ));
    }

    // A retry is answered from the stored reply before any model is called.
    if let Some(replayed) = idempotency::stored(&st, &tenant, ROUTE, &idem).await? {
        return Ok(replayed);
    }

    let engine = st.memory.engine().clone();
    let secret = {
        let (engine, tenant) = (engine.clone(), tenant.clone());
        blocking(move || digest::tenant_secret(&engine, &tenant)).await?
    };
    let masker = std::sync::Arc::new(Masker::new(strategy, secret));
    let req = digest::Request { content: body.content, format, content_type: content_type.clone(), source: source.clone(), hint, strategy };
    let prepared = {
        let masker = std::sync::Arc::clone(&masker);
        tokio::task::spawn_blocking(move || digest::prepare(&req, &masker)).await.map_err(|e| {
            tracing::error!(error = %e, "digest task failed");
            ApiError::internal()
        })?
    };
    let mut d = prepared.map_err(ApiError::schema)?;
    if d.fact_count() > MAX_FACTS {
        return Err(too_many(d.fact_count()));
    }

    let mut tokens = digest::Tokens::default();
    let mode = match &extractor {
        Some(x) => {
            tokens = digest::extract(&st.llm, x, judge.as_ref(), &masker, &source, &mut d).await.map_err(model_error)?;
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
            digest::check_strict(&engine, &tenant, &mut d, now)?;
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
    idempotency::write(&st, &tenant, ROUTE, idem, ops, StatusCode::OK, move |out| digest::receipt(&summary, &slots, out)).await
}
