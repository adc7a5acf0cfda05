//! `[embeddings]`: the operator's embeddings endpoint.
//!
//! Off unless both a base URL and a model are set (file or environment).
//! The key is read from the environment variable the file names
//! (`api_key_env`), never from the file itself, and never printed: the
//! `Debug` output redacts it.

use crate::llm::ModelConfig;
use anyhow::{bail, Context, Result};
use serde::Deserialize;

pub const DEFAULT_API_KEY_ENV: &str = "TEMPORA_EMBEDDINGS_API_KEY";
pub const DEFAULT_BATCH_SIZE: usize = 64;
pub const MAX_BATCH_SIZE: usize = 2048;
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_MAX_VECTORS: usize = 500_000;

/// `[embeddings]` as read from the file; every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEmbeddings {
    /// e.g. `https://api.openai.com/v1` (`/embeddings` is appended).
    pub base_url: Option<String>,
    pub model: Option<String>,
    /// The name of the environment variable holding the key.
    pub api_key_env: Option<String>,
    pub batch_size: Option<usize>,
    /// Asked of models that can shorten their vectors.
    pub dimensions: Option<u32>,
    pub timeout_ms: Option<u64>,
    /// Vectors held in memory at most (all tenants).
    pub max_vectors: Option<usize>,
}

/// The resolved settings of a configured endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct EmbeddingsConfig {
    pub base_url: String,
    pub model: String,
    /// From the environment variable `api_key_env`; `None` when unset.
    pub api_key: Option<String>,
    pub api_key_env: String,
    pub batch_size: usize,
    pub dimensions: Option<u32>,
    pub timeout_ms: u64,
    pub max_vectors: usize,
}

// The key must never reach a log line through `{:?}`.
impl std::fmt::Debug for EmbeddingsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingsConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("batch_size", &self.batch_size)
            .field("dimensions", &self.dimensions)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_vectors", &self.max_vectors)
            .finish()
    }
}

impl EmbeddingsConfig {
    /// The file layer with `TEMPORA_EMBEDDINGS_BASE_URL` and
    /// `TEMPORA_EMBEDDINGS_MODEL` over it; `None` when either is missing
    /// (embeddings off).
    pub fn resolve(file: FileEmbeddings, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<EmbeddingsConfig>> {
        let nonblank = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        let base_url = nonblank(env("TEMPORA_EMBEDDINGS_BASE_URL")).or(nonblank(file.base_url));
        let model = nonblank(env("TEMPORA_EMBEDDINGS_MODEL")).or(nonblank(file.model));
        let (base_url, model) = match (base_url, model) {
            (Some(b), Some(m)) => (b, m),
            (None, None) => return Ok(None),
            (Some(_), None) => bail!("[embeddings] base_url is set but model is not (TEMPORA_EMBEDDINGS_MODEL)"),
            (None, Some(_)) => bail!("[embeddings] model is set but base_url is not (TEMPORA_EMBEDDINGS_BASE_URL)"),
        };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            bail!("[embeddings] base_url must start with http:// or https://, got {base_url:?}");
        }
        base_url
            .parse::<reqwest::Url>()
            .with_context(|| format!("[embeddings] base_url {base_url:?} is not a URL"))?;
        let api_key_env = nonblank(file.api_key_env).unwrap_or_else(|| DEFAULT_API_KEY_ENV.to_string());
        let api_key = nonblank(env(&api_key_env));
        let batch_size = file.batch_size.unwrap_or(DEFAULT_BATCH_SIZE);
        if batch_size == 0 || batch_size > MAX_BATCH_SIZE {
            bail!("[embeddings] batch_size must be 1..={MAX_BATCH_SIZE}, got {batch_size}");
        }
        if file.dimensions == Some(0) {
            bail!("[embeddings] dimensions must be at least 1");
        }
        let timeout_ms = file.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !(100..=600_000).contains(&timeout_ms) {
            bail!("[embeddings] timeout_ms must be 100..=600000, got {timeout_ms}");
        }
        let max_vectors = file.max_vectors.unwrap_or(DEFAULT_MAX_VECTORS);
        if max_vectors == 0 {
            bail!("[embeddings] max_vectors must be at least 1");
        }
        Ok(Some(EmbeddingsConfig {
            base_url,
            model,
            api_key,
            api_key_env,
            batch_size,
            dimensions: file.dimensions,
            timeout_ms,
            max_vectors,
        }))
    }

    /// The model config the LLM client takes.
    pub fn model_config(&self) -> ModelConfig {
        ModelConfig {
            base_url: Some(self.base_url.clone()),
            api_key: self.api_key.clone(),
            model: self.model.clone(),
            temperature: None,
            max_tokens: None,
            timeout_ms: Some(self.timeout_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn off_unless_both_url_and_model() {
        assert!(EmbeddingsConfig::resolve(FileEmbeddings::default(), &env_of(&[])).unwrap().is_none());
        let half = FileEmbeddings { base_url: Some("http://x/v1".into()), ..Default::default() };
        assert!(EmbeddingsConfig::resolve(half, &env_of(&[])).is_err());
        let env = env_of(&[("TEMPORA_EMBEDDINGS_MODEL", "m")]);
        assert!(EmbeddingsConfig::resolve(FileEmbeddings::default(), &env).is_err());
    }

    #[test]
    fn env_beats_file_and_key_comes_from_the_named_variable() {
        let file = FileEmbeddings {
            base_url: Some("http://file/v1".into()),
            model: Some("file-model".into()),
            api_key_env: Some("MY_KEY".into()),
            batch_size: Some(8),
            ..Default::default()
        };
        let env = env_of(&[
            ("TEMPORA_EMBEDDINGS_MODEL", "env-model"),
            ("MY_KEY", "sk-secret-123"),
            ("TEMPORA_EMBEDDINGS_API_KEY", "not-this-one"),
        ]);
        let c = EmbeddingsConfig::resolve(file, &env).unwrap().unwrap();
        assert_eq!(c.base_url, "http://file/v1");
        assert_eq!(c.model, "env-model");
        assert_eq!(c.api_key.as_deref(), Some("sk-secret-123"));
        assert_eq!(c.batch_size, 8);
        assert_eq!(c.timeout_ms, DEFAULT_TIMEOUT_MS);
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-secret-123") && shown.contains("<redacted>"), "{shown}");
        assert_eq!(c.model_config().api_key.as_deref(), Some("sk-secret-123"));
    }

    #[test]
    fn default_key_variable_and_bad_values() {
        let env = env_of(&[
            ("TEMPORA_EMBEDDINGS_BASE_URL", "https://api.example.com/v1"),
            ("TEMPORA_EMBEDDINGS_MODEL", "m"),
            ("TEMPORA_EMBEDDINGS_API_KEY", "k-1"),
        ]);
        let c = EmbeddingsConfig::resolve(FileEmbeddings::default(), &env).unwrap().unwrap();
        assert_eq!(c.api_key.as_deref(), Some("k-1"));
        assert_eq!(c.api_key_env, DEFAULT_API_KEY_ENV);
        assert_eq!(c.batch_size, DEFAULT_BATCH_SIZE);
        for bad in [
            FileEmbeddings { batch_size: Some(0), ..Default::default() },
            FileEmbeddings { dimensions: Some(0), ..Default::default() },
            FileEmbeddings { timeout_ms: Some(5), ..Default::default() },
            FileEmbeddings { base_url: Some("ftp://x".into()), ..Default::default() },
        ] {
            let env = env_of(&[("TEMPORA_EMBEDDINGS_MODEL", "m"), ("TEMPORA_EMBEDDINGS_BASE_URL", "http://h/v1")]);
            let env2 = |k: &str| if bad.base_url.is_some() && k == "TEMPORA_EMBEDDINGS_BASE_URL" { None } else { env(k) };
            assert!(EmbeddingsConfig::resolve(bad.clone(), &env2).is_err(), "{bad:?}");
        }
    }
}
