//! Configuration: compiled-in defaults, then a TOML file, then `TEMPORA_*`
//! environment variables, then command-line flags, each layer overriding the
//! one before. Validated once at start; the rest of the service only sees the
//! resulting [`Config`].

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A listener address, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    Off,
    At(SocketAddr),
}

impl Listen {
    pub fn parse(what: &str, s: &str) -> Result<Listen> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(Listen::Off);
        }
        s.parse::<SocketAddr>()
            .map(Listen::At)
            .with_context(|| format!("{what}: {s:?} is not an address like 127.0.0.1:8080 or `off`"))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Off => f.write_str("off"),
            Listen::At(a) => write!(f, "{a}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DurabilitySetting {
    #[default]
    Durable,
    Relaxed,
}

/// The file layer: every field optional, unknown keys rejected so a typo is
/// an error rather than a silently ignored setting.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub http_addr: Option<String>,
    pub grpc_addr: Option<String>,
    pub tcp_addr: Option<String>,
    pub log_format: Option<LogFormat>,
    pub durability: Option<DurabilitySetting>,
}

/// The flag layer (filled by clap in `main`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub http_addr: Option<String>,
    pub grpc_addr: Option<String>,
    pub tcp_addr: Option<String>,
    pub log_format: Option<LogFormat>,
    pub durability: Option<DurabilitySetting>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub http_addr: Listen,
    pub grpc_addr: Listen,
    pub tcp_addr: Listen,
    pub log_format: LogFormat,
    pub durability: DurabilitySetting,
}

pub const DEFAULT_DATA_DIR: &str = "./tempora-data";
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:30011";
pub const DEFAULT_TCP_ADDR: &str = "127.0.0.1:5050";

impl Config {
    /// Layers defaults < file < environment < flags. `env` is passed in so
    /// tests need not touch the process environment.
    pub fn load(
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        flags: Overrides,
    ) -> Result<Config> {
        let file_cfg = match file {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read config file {}", p.display()))?;
                toml::from_str::<FileConfig>(&text)
                    .with_context(|| format!("config file {} is invalid", p.display()))?
            }
            None => FileConfig::default(),
        };
        let pick = |flag: Option<String>, var: &str, file: Option<String>, default: &str| {
            flag.or_else(|| env(var)).or(file).unwrap_or_else(|| default.to_string())
        };
        let data_dir = flags
            .data_dir
            .or_else(|| env("TEMPORA_DATA_DIR").map(PathBuf::from))
            .or(file_cfg.data_dir)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
        let http = pick(flags.http_addr, "TEMPORA_HTTP_ADDR", file_cfg.http_addr, DEFAULT_HTTP_ADDR);
        let grpc = pick(flags.grpc_addr, "TEMPORA_GRPC_ADDR", file_cfg.grpc_addr, DEFAULT_GRPC_ADDR);
        let tcp = pick(flags.tcp_addr, "TEMPORA_TCP_ADDR", file_cfg.tcp_addr, DEFAULT_TCP_ADDR);
        let log_format = match flags.log_format {
            Some(f) => f,
            None => match env("TEMPORA_LOG_FORMAT") {
                Some(v) => parse_enum("TEMPORA_LOG_FORMAT", &v)?,
                None => file_cfg.log_format.unwrap_or_default(),
            },
        };
        let durability = match flags.durability {
            Some(d) => d,
            None => match env("TEMPORA_DURABILITY") {
                Some(v) => parse_enum("TEMPORA_DURABILITY", &v)?,
                None => file_cfg.durability.unwrap_or_default(),
            },
        };
        let cfg = Config {
            data_dir,
            http_addr: Listen::parse("http address", &http)?,
            grpc_addr: Listen::parse("gRPC address", &grpc)?,
            tcp_addr: Listen::parse("TCP address", &tcp)?,
            log_format,
            durability,
        };
        if cfg.data_dir.as_os_str().is_empty() {
            bail!("data directory must not be empty");
        }
        Ok(cfg)
    }
}

fn parse_enum<T: for<'de> Deserialize<'de>>(what: &str, v: &str) -> Result<T> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(&v.to_lowercase()))
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
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
    fn defaults_are_loopback_and_local_data_dir() {
        let c = Config::load(None, &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("./tempora-data"));
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.grpc_addr.to_string(), "127.0.0.1:30011");
        assert_eq!(c.tcp_addr.to_string(), "127.0.0.1:5050");
        assert_eq!(c.durability, DurabilitySetting::Durable);
    }

    #[test]
    fn flag_beats_env_beats_file_beats_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "data_dir = \"/from/file\"\nhttp_addr = \"127.0.0.1:1\"\ngrpc_addr = \"127.0.0.1:2\"\n").unwrap();
        let env = env_of(&[("TEMPORA_HTTP_ADDR", "127.0.0.1:3"), ("TEMPORA_DATA_DIR", "/from/env")]);
        let flags = Overrides { data_dir: Some("/from/flag".into()), ..Default::default() };
        let c = Config::load(Some(&file), &env, flags).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:3");
        assert_eq!(c.grpc_addr.to_string(), "127.0.0.1:2");
        assert_eq!(c.tcp_addr.to_string(), "127.0.0.1:5050");
    }

    #[test]
    fn off_disables_and_bad_values_are_errors() {
        let env = env_of(&[("TEMPORA_TCP_ADDR", "off")]);
        let c = Config::load(None, &env, Overrides::default()).unwrap();
        assert_eq!(c.tcp_addr, Listen::Off);
        let bad = env_of(&[("TEMPORA_GRPC_ADDR", "nonsense")]);
        let err = Config::load(None, &bad, Overrides::default()).unwrap_err();
        assert!(format!("{err:#}").contains("gRPC address"), "{err:#}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "data_dri = \"typo\"\n").unwrap();
        let err = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap_err();
        assert!(format!("{err:#}").contains("data_dri"), "{err:#}");
    }
}
