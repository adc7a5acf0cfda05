//! `[connectors]`: the bounds of one delivery and of one pull.
//!
//! | key | env | default |
//! |---|---|---|
//! | `max_ingest_bytes` | `TEMPORA_CONNECTORS_MAX_INGEST_BYTES` | 268435456 (256 MiB) |
//! | `max_record_bytes` | `TEMPORA_CONNECTORS_MAX_RECORD_BYTES` | 1048576 (1 MiB) |
//! | `max_records` | `TEMPORA_CONNECTORS_MAX_RECORDS` | 1000000 |
//! | `pull_timeout_secs` | `TEMPORA_CONNECTORS_PULL_TIMEOUT_SECS` | 60 |
//! | `max_redirects` | `TEMPORA_CONNECTORS_MAX_REDIRECTS` | 5 |
//! | `min_every_secs` | `TEMPORA_CONNECTORS_MIN_EVERY_SECS` | 10 |

use super::ingest::Bounds;
use super::pull::PullSettings;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConnectors {
    pub max_ingest_bytes: Option<u64>,
    pub max_record_bytes: Option<usize>,
    pub max_records: Option<usize>,
    pub pull_timeout_secs: Option<u64>,
    pub max_redirects: Option<usize>,
    pub min_every_secs: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectorSettings {
    pub bounds: Bounds,
    pub pull: PullSettings,
    pub min_every_secs: u64,
}

impl Default for ConnectorSettings {
    fn default() -> Self {
        ConnectorSettings {
            bounds: Bounds::default(),
            pull: PullSettings::default(),
            min_every_secs: super::MIN_EVERY_SECS,
        }
    }
}

impl ConnectorSettings {
    pub fn resolve(file: FileConnectors, env: &dyn Fn(&str) -> Option<String>) -> Result<ConnectorSettings> {
        fn num<T: std::str::FromStr>(
            env: &dyn Fn(&str) -> Option<String>,
            var: &str,
            file: Option<T>,
            default: T,
        ) -> Result<T> {
            match env(var) {
                Some(v) => v.trim().parse::<T>().ok().with_context(|| format!("{var}: {v:?} is not a number")),
                None => Ok(file.unwrap_or(default)),
            }
        }
        let d = ConnectorSettings::default();
        let s = ConnectorSettings {
            bounds: Bounds {
                max_bytes: num(env, "TEMPORA_CONNECTORS_MAX_INGEST_BYTES", file.max_ingest_bytes, d.bounds.max_bytes)?,
                max_record_bytes: num(
                    env,
                    "TEMPORA_CONNECTORS_MAX_RECORD_BYTES",
                    file.max_record_bytes,
                    d.bounds.max_record_bytes,
                )?,
                max_records: num(env, "TEMPORA_CONNECTORS_MAX_RECORDS", file.max_records, d.bounds.max_records)?,
            },
            pull: PullSettings {
                timeout: Duration::from_secs(num(
                    env,
                    "TEMPORA_CONNECTORS_PULL_TIMEOUT_SECS",
                    file.pull_timeout_secs,
                    d.pull.timeout.as_secs(),
                )?),
                connect_timeout: d.pull.connect_timeout,
                max_redirects: num(env, "TEMPORA_CONNECTORS_MAX_REDIRECTS", file.max_redirects, d.pull.max_redirects)?,
            },
            min_every_secs: num(env, "TEMPORA_CONNECTORS_MIN_EVERY_SECS", file.min_every_secs, d.min_every_secs)?,
        };
        if s.bounds.max_bytes == 0 || s.bounds.max_record_bytes == 0 || s.bounds.max_records == 0 {
            bail!("[connectors] max_ingest_bytes, max_record_bytes and max_records must be at least 1");
        }
        if s.pull.timeout.is_zero() {
            bail!("[connectors] pull_timeout_secs must be at least 1");
        }
        if s.min_every_secs == 0 || s.min_every_secs > super::MAX_EVERY_SECS {
            bail!("[connectors] min_every_secs must be within [1, {}]", super::MAX_EVERY_SECS);
        }
        Ok(s)
    }
}
