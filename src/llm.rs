//! Calls to OpenAI-compatible model endpoints: chat completions (for
//! `/api/ask`) and embeddings. The caller's key is sent as a bearer token on
//! that one call and never stored, logged, or echoed in an error.

use crate::json::present;
use crate::outbound::Policy;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest error body quoted back from an endpoint.
const MAX_QUOTED: usize = 300;

/// Where and how to call a model.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    #[serde(default, deserialize_with = "present")]
    pub base_url: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub api_key: Option<String>,
    pub model: String,
    #[serde(default, deserialize_with = "present")]
    pub temperature: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub max_tokens: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    pub timeout_ms: Option<u64>,
}

// The key must never reach a log line through `{:?}`.
impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("the model endpoint did not answer within {0} ms")]
    Timeout(u64),
    #[error("the model endpoint could not be reached: {0}")]
    Unreachable(String),
    #[error("the model endpoint answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the model endpoint's answer is not what an OpenAI-compatible endpoint returns: {0}")]
    Malformed(String),
    #[error("invalid model configuration: {0}")]
    Config(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chat {
    pub content: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON text, as the model wrote it (it may not parse).
    pub arguments: String,
}

/// The model's turn in a tool-calling conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

pub struct Client {
    http: reqwest::Client,
    policy: Policy,
}

impl Client {
    /// A client that reaches only what `policy` allows (see `crate::outbound`).
    pub fn new(policy: Policy) -> Client {
        Client { http: crate::outbound::client(policy.clone()), policy }
    }

    /// One chat completion with a system and a user message.
    pub async fn chat(&self, cfg: &ModelConfig, system: &str, user: &str) -> Result<Chat, LlmError> {
        let mut body = json!({
            "model": cfg.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": cfg.temperature.unwrap_or(0.0),
        });
        if let Some(m) = cfg.max_tokens {
            body["max_tokens"] = json!(m);
        }
        let v = self.post(cfg, "chat/completions", &body).await?;
        let content = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| LlmError::Malformed("no choices[0].message.content".into()))?
            .to_string();
        let usage = |k: &str| v.pointer(&format!("/usage/{k}")).and_then(Value::as_u64).unwrap_or(0);
        Ok(Chat { content, tokens_in: usage("prompt_tokens"), tokens_out: usage("completion_tokens") })
    }

    /// One step of a tool-calling conversation: `messages` in OpenAI's
    /// chat format, `tools` as OpenAI function tools. The model either
    /// answers (`content`) or asks for tool calls, or both.
    pub async fn complete(&self, cfg: &ModelConfig, messages: &[Value], tools: &[Value]) -> Result<Reply, LlmError> {
        let mut body = json!({
            "model": cfg.model,
            "messages": messages,
            "temperature": cfg.temperature.unwrap_or(0.0),
        });
        if !tools.is_empty() {
            body["tools"] = json!(tools);
        }
        if let Some(m) = cfg.max_tokens {
            body["max_tokens"] = json!(m);
        }
        let v = self.post(cfg, "chat/completions", &body).await?;
        let message = v
            .pointer("/choices/0/message")
            .and_then(Value::as_object)
            .ok_or_else(|| LlmError::Malformed("no choices[0].message".into()))?;
        let content = message.get("content").and_then(Value::as_str).map(str::to_string);
        let mut tool_calls = Vec::new();
        for (i, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let name = call.pointer("/function/name").and_then(Value::as_str);
            let Some(name) = name.filter(|n| !n.is_empty()) else {
                return Err(LlmError::Malformed(format!("tool_calls[{i}] names no function")));
            };
            // Arguments are a JSON string in the protocol; some servers send the object itself.
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => "{}".to_string(),
                Some(other) => other.to_string(),
            };
            let id = call.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{i}"), str::to_string);
            tool_calls.push(ToolCall { id, name: name.to_string(), arguments });
        }
        if content.is_none() && tool_calls.is_empty() {
            return Err(LlmError::Malformed("the message has neither content nor tool_calls".into()));
        }
        let usage = |k: &str| v.pointer(&format!("/usage/{k}")).and_then(Value::as_u64).unwrap_or(0);
        Ok(Reply { content, tool_calls, tokens_in: usage("prompt_tokens"), tokens_out: usage("completion_tokens") })
    }

    /// Embeddings of `inputs`, in input order.
    pub async fn embed(&self, cfg: &ModelConfig, inputs: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.embed_with(cfg, inputs, None).await
    }

    /// Embeddings of `inputs`, in input order, asking for `dimensions`
    /// (models that can shorten their vectors) when given. Every vector has
    /// the same length (`dimensions` when given) and finite values, or the
    /// answer is malformed.
    pub async fn embed_with(
        &self,
        cfg: &ModelConfig,
        inputs: &[String],
        dimensions: Option<u32>,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut body = json!({"model": cfg.model, "input": inputs});
        if let Some(d) = dimensions {
            body["dimensions"] = json!(d);
        }
        let out = self.embed_request(cfg, inputs, &body).await?;
        let want = dimensions.map(|d| d as usize).or_else(|| out.first().map(Vec::len)).unwrap_or(0);
        if let Some(v) = out.iter().find(|v| v.len() != want) {
            return Err(LlmError::Malformed(format!("an embedding has {} dimensions, expected {want}", v.len())));
        }
        if out.iter().flatten().any(|x| !x.is_finite()) {
            return Err(LlmError::Malformed("an embedding holds a non-finite number".into()));
        }
        Ok(out)
    }

    async fn embed_request(
        &self,
        cfg: &ModelConfig,
        inputs: &[String],
        body: &Value,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let v = self.post(cfg, "embeddings", body).await?;
        let data =
            v.get("data").and_then(Value::as_array).ok_or_else(|| LlmError::Malformed("no data array".into()))?;
        if data.len() != inputs.len() {
            return Err(LlmError::Malformed(format!("{} embeddings for {} inputs", data.len(), inputs.len())));
        }
        let mut out = vec![Vec::new(); inputs.len()];
        for (pos, item) in data.iter().enumerate() {
            let index = item.get("index").and_then(Value::as_u64).map(|i| i as usize).unwrap_or(pos);
            let vector = item
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| LlmError::Malformed("an item has no embedding array".into()))?
                .iter()
                .map(|x| x.as_f64().map(|f| f as f32))
                .collect::<Option<Vec<f32>>>()
                .ok_or_else(|| LlmError::Malformed("an embedding holds a non-number".into()))?;
            let slot = out.get_mut(index).ok_or_else(|| LlmError::Malformed(format!("index {index} out of range")))?;
            *slot = vector;
        }
        if out.iter().any(Vec::is_empty) {
            return Err(LlmError::Malformed("an input got no embedding".into()));
        }
        Ok(out)
    }

    async fn post(&self, cfg: &ModelConfig, path: &str, body: &Value) -> Result<Value, LlmError> {
        if cfg.model.trim().is_empty() {
            return Err(LlmError::Config("model must name a model".into()));
        }
        let base = cfg.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(LlmError::Config(format!("base_url must start with http:// or https://, got {base:?}")));
        }
        let url: reqwest::Url =
            format!("{base}/{path}").parse().map_err(|e| LlmError::Config(format!("base_url is not a URL: {e}")))?;
        self.policy.check_url(&url).await.map_err(|r| match r {
            crate::outbound::Refusal::Invalid(m) => LlmError::Config(m),
            crate::outbound::Refusal::Unresolvable(m) => LlmError::Unreachable(m),
        })?;
        let timeout_ms = cfg.timeout_ms.unwrap_or(DEFAULT_TIMEOUT.as_millis() as u64).clamp(100, 600_000);
        let mut req = self.http.post(url).timeout(Duration::from_millis(timeout_ms)).json(body);
        if let Some(k) = &cfg.api_key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| classify(e, timeout_ms))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| classify(e, timeout_ms))?;
        if !status.is_success() {
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            // Some endpoints quote the key they refused ("Incorrect API key
            // provided: sk-..."); it must not reach the caller or the log.
            if let Some(k) = cfg.api_key.as_deref().filter(|k| !k.is_empty()) {
                text = text.replace(k, "<redacted>");
            }
            let body: String = text.chars().take(MAX_QUOTED).collect();
            return Err(LlmError::Status { status: status.as_u16(), body });
        }
        serde_json::from_slice(&bytes).map_err(|e| LlmError::Malformed(format!("not JSON ({e})")))
    }
}

fn classify(e: reqwest::Error, timeout_ms: u64) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout(timeout_ms)
    } else {
        // Without the URL: it is the caller's own, and a query string could
        // carry a secret.
        LlmError::Unreachable(e.without_url().to_string())
    }
}
