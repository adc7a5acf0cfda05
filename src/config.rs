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

/// The key-value backend of a new store (docs/storage.md, "Backends"). A data
/// directory that already holds a store opens with the backend that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackendSetting {
    #[default]
    Redb,
    Sled,
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
    pub storage_backend: Option<StorageBackendSetting>,
    #[serde(default)]
    pub store: FileStore,
    #[serde(default)]
    pub auth: AuthConfig,
    #[serde(default)]
    pub limits: FileLimits,
    #[serde(default)]
    pub outbound: FileOutbound,
    #[serde(default)]
    pub embeddings: crate::embed::FileEmbeddings,
    #[serde(default)]
    pub mcp: FileMcp,
    #[serde(default)]
    pub connectors: crate::connectors::config::FileConnectors,
    #[serde(default)]
    pub monitor: crate::monitor::FileMonitor,
    #[serde(default)]
    pub agents: FileAgents,
}

/// `[store]`: where the memory lives (docs/scale-out.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileStore {
    /// `embedded` (the default), or a PostgreSQL URL.
    pub url: Option<String>,
}

/// Where the memory lives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreSetting {
    /// The embedded engine, in `data_dir`.
    #[default]
    Embedded,
    /// A PostgreSQL database that several tempora processes may share.
    Postgres(StoreUrl),
}

/// A database URL, which may carry a password: it is shown (`Debug`,
/// `Display`) with the password masked.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl(String);

impl StoreUrl {
    /// The URL itself, to connect with. Never log it.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Split as the PostgreSQL client does: the credentials run to the
        // first '@' (a password may hold '/', '?' or ':'); the query after
        // the first '?' that follows may carry `password=` too.
        let url = &self.0;
        let Some((scheme, rest)) = url.split_once("://") else { return f.write_str("postgres://…") };
        let (user, rest) = match rest.split_once('@') {
            Some((creds, rest)) => match creds.split_once(':') {
                Some((user, _)) => (format!("{user}:***@"), rest),
                None => (format!("{creds}@"), rest),
            },
            None => (String::new(), rest),
        };
        let (place, query) = match rest.split_once('?') {
            Some((place, query)) => (place, Some(query)),
            None => (rest, None),
        };
        write!(f, "{scheme}://{user}{place}")?;
        if let Some(query) = query {
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if k.to_ascii_lowercase().contains("password") => format!("{k}=***"),
                    _ => pair.to_string(),
                })
                .collect();
            write!(f, "?{}", pairs.join("&"))?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

impl StoreSetting {
    /// `embedded`, or a `postgres://` / `postgresql://` URL.
    pub fn parse(what: &str, v: &str) -> Result<StoreSetting> {
        let v = v.trim();
        if v.eq_ignore_ascii_case("embedded") {
            return Ok(StoreSetting::Embedded);
        }
        if v.starts_with("postgres://") || v.starts_with("postgresql://") {
            return Ok(StoreSetting::Postgres(StoreUrl(v.to_string())));
        }
        bail!("{what} must be `embedded` or a postgres:// URL")
    }
}

/// `[agents]`: agent networks served by the NeuroSan API (docs/agents.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileAgents {
    /// The directory holding `manifest.hocon` and the network files.
    pub dir: Option<PathBuf>,
    /// A model for the built-in `memory` network's front man, which then
    /// runs the tool-calling loop over its tools instead of the command
    /// grammar. Any OpenAI-compatible endpoint.
    pub memory_model: Option<String>,
    pub memory_base_url: Option<String>,
    /// The environment variable holding that endpoint's key.
    pub memory_api_key_env: Option<String>,
}

/// `[mcp]`: the MCP endpoint at `/mcp`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMcp {
    /// Browser origins allowed besides the server's own
    /// (e.g. `["https://app.example.com"]`).
    pub allowed_origins: Option<Vec<String>>,
}

/// `[outbound]`: requests the server makes to URLs callers choose.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileOutbound {
    /// Allow loopback and private-network addresses (default false).
    pub allow_private: Option<bool>,
    /// Networks allowed although not public, e.g. `["10.1.2.0/24"]`.
    pub allow: Option<Vec<String>>,
}

/// `[auth]`: no tenants and no admin tokens means open mode.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub admin_tokens: Vec<String>,
    #[serde(default)]
    pub tenants: Vec<TenantKeys>,
    /// e.g. `"{tenant}.example.com"`: a tenant key then authenticates only on
    /// its own host.
    #[serde(default)]
    pub tenant_host: Option<String>,
    /// How long a console session (`POST /api/session`) lasts, in seconds;
    /// default [`DEFAULT_SESSION_LIFETIME_SECS`].
    #[serde(default)]
    pub session_lifetime_secs: Option<u64>,
}

/// A console session lasts a working day unless configured otherwise.
pub const DEFAULT_SESSION_LIFETIME_SECS: u64 = 12 * 3600;
/// Longer than a year is a typo, not a setting.
const MAX_SESSION_LIFETIME_SECS: u64 = 366 * 24 * 3600;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TenantKeys {
    pub name: String,
    pub keys: Vec<String>,
}

impl AuthConfig {
    pub fn is_open(&self) -> bool {
        self.admin_tokens.is_empty() && self.tenants.is_empty()
    }
}

/// `[limits]` as read from the file; every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    pub max_body_bytes: Option<usize>,
    pub max_sse_subscribers: Option<usize>,
    pub max_in_flight: Option<usize>,
    pub http_threads: Option<usize>,
    pub sse_buffer: Option<usize>,
    pub min_free_disk_bytes: Option<u64>,
    pub storage_cache_bytes: Option<u64>,
    pub storage_checkpoint_bytes: Option<u64>,
    pub storage_warm_cache: Option<bool>,
    pub request_timeout_secs: Option<usize>,
    pub header_read_timeout_secs: Option<usize>,
    pub max_header_bytes: Option<usize>,
    pub max_headers: Option<usize>,
    pub tcp_packet_timeout_secs: Option<usize>,
    pub tcp_idle_timeout_secs: Option<usize>,
}

/// Request and connection limits. Every one is documented in `docs/limits.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body accepted (413 `PayloadTooLarge` beyond).
    pub max_body_bytes: usize,
    /// Most concurrent `/api/stream` subscribers (429 `RateLimited` beyond).
    pub max_sse_subscribers: usize,
    /// Most requests handled at once, over all HTTP routes and gRPC calls
    /// together; more get 503 (gRPC `UNAVAILABLE`) at once. A request holds
    /// its place until its response head is ready; a streamed body, such as
    /// an SSE feed, does not hold it.
    pub max_in_flight: usize,
    /// Threads serving HTTP connections, each with its own event loop
    /// (`crate::http_threads`); the default is twice the cores.
    pub http_threads: usize,
    /// Change frames buffered per subscriber; a subscriber that falls this
    /// far behind is dropped (it can resume with `Last-Event-ID`).
    pub sse_buffer: usize,
    /// Free bytes the data directory's filesystem keeps: writes are refused
    /// (503, nothing written) below it and resume when space returns. 0
    /// refuses only on a read-only filesystem.
    pub min_free_disk_bytes: u64,
    /// The memory the storage engine's page cache may take (`--cache-mb`).
    /// It is the bulk of the server's memory and grows with the data until
    /// it is full; reads that miss it go to the kernel's page cache or the
    /// disk. On redb stores the bound counts the allocator's overhead per
    /// page; on sled stores it counts bytes as stored, which take about
    /// twice as much memory. See docs/operations.md, "Memory".
    pub storage_cache_bytes: u64,
    /// redb stores: journal bytes after which the writes in it are
    /// checkpointed into the store file. The writes not yet checkpointed
    /// are held in memory (at most about twice this) and replayed when the
    /// store opens after a crash. sled stores ignore it.
    pub storage_checkpoint_bytes: u64,
    /// redb stores: read the most-read tables into the page cache in the
    /// background when the store opens, and again once writes have gone by
    /// that a full cache could not keep (docs/storage.md, "Warming the
    /// cache"). sled stores ignore it.
    pub storage_warm_cache: bool,
    /// Longest a non-streaming HTTP request may take, from its headers to
    /// the start of its answer (503 `Unavailable` beyond); streams are exempt.
    pub request_timeout_secs: usize,
    /// Longest a client may take to send a request's headers; it is also
    /// how long an idle kept-alive HTTP connection is held. Slow clients
    /// (slowloris) are disconnected after it.
    pub header_read_timeout_secs: usize,
    /// Largest request head (request line and headers), in bytes (431 beyond).
    pub max_header_bytes: usize,
    /// Most headers in one request (431 beyond).
    pub max_headers: usize,
    /// Longest a NeuroDock packet may take to arrive once its first byte has.
    pub tcp_packet_timeout_secs: usize,
    /// Longest a NeuroDock connection may stay silent with nothing running.
    pub tcp_idle_timeout_secs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1 << 20,
            max_sse_subscribers: 1024,
            max_in_flight: 4096,
            http_threads: crate::http_threads::default_count(),
            sse_buffer: 1024,
            min_free_disk_bytes: 64 << 20,
            storage_cache_bytes: 256 << 20,
            storage_checkpoint_bytes: crate::store::CHECKPOINT_BYTES,
            storage_warm_cache: true,
            request_timeout_secs: 30,
            header_read_timeout_secs: 30,
            max_header_bytes: 64 * 1024,
            max_headers: 100,
            tcp_packet_timeout_secs: 30,
            tcp_idle_timeout_secs: 300,
        }
    }
}

/// Below this, checkpoints come so often that each costs more per write
/// than it saves (docs/performance.md measured 2 MiB against 8 MiB).
/// Extra origins allowed to call `/mcp` (comma-separated, e.g.
/// `https://app.example.com,http://localhost:3000`); overrides the file's
/// `[mcp] allowed_origins`.
pub const MCP_ORIGINS_ENV: &str = "TEMPORA_MCP_ALLOWED_ORIGINS";

/// Origins as `/mcp` compares them: lower case, no trailing `/`.
pub fn parse_origins(v: &str) -> Vec<String> {
    v.split(',').map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase()).filter(|o| !o.is_empty()).collect()
}

const MIN_CHECKPOINT_BYTES: u64 = 1 << 20;
/// Above this, the writes waiting for a checkpoint would hold gigabytes of
/// memory and take minutes to replay after a crash.
const MAX_CHECKPOINT_BYTES: u64 = 1 << 30;
/// Each HTTP thread is a runtime with its own timers and blocking pool; past
/// a thousand the figure is a typo, not a setting.
const MAX_HTTP_THREADS: usize = 1024;

/// The flag layer (filled by clap in `main`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub store: Option<String>,
    pub http_addr: Option<String>,
    pub grpc_addr: Option<String>,
    pub tcp_addr: Option<String>,
    pub log_format: Option<LogFormat>,
    pub durability: Option<DurabilitySetting>,
    /// `--cache-mb`: the storage cache's memory in MiB, over
    /// `storage_cache_bytes` from the environment or the file.
    pub cache_mb: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub http_addr: Listen,
    pub grpc_addr: Listen,
    pub tcp_addr: Listen,
    pub log_format: LogFormat,
    pub durability: DurabilitySetting,
    /// The backend a new store is created with.
    pub storage_backend: StorageBackendSetting,
    /// Where the memory lives: the embedded engine (in `data_dir`) or PostgreSQL.
    pub store: StoreSetting,
    pub auth: AuthConfig,
    pub limits: Limits,
    pub outbound: crate::outbound::Policy,
    /// `[embeddings]`; `None` when off.
    pub embeddings: Option<crate::embed::EmbeddingsConfig>,
    /// `[mcp] allowed_origins`, normalized (lower case, no trailing `/`).
    pub mcp_allowed_origins: Vec<String>,
    /// `[connectors]`.
    pub connectors: crate::connectors::config::ConnectorSettings,
    /// `[agents] dir`: agent network files; `None` serves the built-in
    /// `memory` network only.
    pub agents_dir: Option<PathBuf>,
    /// `[agents] memory_model` and friends: the `memory` network's model.
    pub memory_llm: Option<crate::agents::LlmConfig>,
    /// `[monitor]`: alert rule defaults and the background interval.
    pub monitor: crate::monitor::MonitorConfig,
}

pub const DEFAULT_DATA_DIR: &str = "./tempora-data";
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8080";
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:30011";
pub const DEFAULT_TCP_ADDR: &str = "127.0.0.1:5050";

impl Config {
    /// Layers defaults < file < environment < flags. `env` is passed in so
    /// tests need not touch the process environment.
    pub fn load(file: Option<&Path>, env: &dyn Fn(&str) -> Option<String>, flags: Overrides) -> Result<Config> {
        let file_cfg = match file {
            Some(p) => {
                let text =
                    std::fs::read_to_string(p).with_context(|| format!("cannot read config file {}", p.display()))?;
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
        let storage_backend = match env("TEMPORA_STORAGE_BACKEND") {
            Some(v) => parse_enum("TEMPORA_STORAGE_BACKEND", &v)?,
            None => file_cfg.storage_backend.unwrap_or_default(),
        };
        let store = match (flags.store, env("TEMPORA_STORE"), file_cfg.store.url) {
            (Some(v), _, _) => StoreSetting::parse("--store", &v)?,
            (None, Some(v), _) => StoreSetting::parse("TEMPORA_STORE", &v)?,
            (None, None, Some(v)) => StoreSetting::parse("[store] url", &v)?,
            (None, None, None) => StoreSetting::Embedded,
        };
        let mut auth = file_cfg.auth;
        if let Some(v) = env("TEMPORA_ADMIN_TOKENS") {
            auth.admin_tokens = split_list(&v);
        }
        if let Some(v) = env("TEMPORA_TENANT_KEYS") {
            auth.tenants = parse_tenant_keys(&v)?;
        }
        if let Some(v) = env("TEMPORA_TENANT_HOST") {
            auth.tenant_host = Some(v);
        }
        if let Some(v) = env("TEMPORA_SESSION_LIFETIME_SECS") {
            auth.session_lifetime_secs = Some(
                v.trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("TEMPORA_SESSION_LIFETIME_SECS: {v:?} is not a number of seconds"))?,
            );
        }
        validate_auth(&auth)?;
        let d = Limits::default();
        let fl = file_cfg.limits;
        let num = |var: &str, file: Option<usize>, default: usize| -> Result<usize> {
            let v = match env(var) {
                Some(v) => v.trim().parse::<usize>().with_context(|| format!("{var}: {v:?} is not a number"))?,
                None => file.unwrap_or(default),
            };
            if v == 0 {
                bail!("{var} must be at least 1");
            }
            Ok(v)
        };
        // A byte count from `floor` to `ceiling`.
        let bytes = |var: &str, file: Option<u64>, default: u64, floor: u64, ceiling: u64| -> Result<u64> {
            let v = match env(var) {
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| anyhow::anyhow!("{var}: expected a number of bytes, got {v:?}"))?,
                None => file.unwrap_or(default),
            };
            if v < floor {
                bail!("{var} must be at least {floor}, got {v}");
            }
            if v > ceiling {
                bail!("{var} must be at most {ceiling}, got {v}");
            }
            Ok(v)
        };
        let boolean = |var: &str, file: Option<bool>, default: bool| -> Result<bool> {
            match env(var) {
                Some(v) => match v.trim() {
                    "true" | "1" => Ok(true),
                    "false" | "0" => Ok(false),
                    other => bail!("{var}: expected true or false, got {other:?}"),
                },
                None => Ok(file.unwrap_or(default)),
            }
        };
        let limits = Limits {
            max_body_bytes: num("TEMPORA_MAX_BODY_BYTES", fl.max_body_bytes, d.max_body_bytes)?,
            max_sse_subscribers: num("TEMPORA_MAX_SSE_SUBSCRIBERS", fl.max_sse_subscribers, d.max_sse_subscribers)?,
            max_in_flight: num("TEMPORA_MAX_IN_FLIGHT", fl.max_in_flight, d.max_in_flight)?,
            http_threads: match num("TEMPORA_HTTP_THREADS", fl.http_threads, d.http_threads)? {
                n if n > MAX_HTTP_THREADS => bail!("TEMPORA_HTTP_THREADS must be at most {MAX_HTTP_THREADS}, got {n}"),
                n => n,
            },
            sse_buffer: num("TEMPORA_SSE_BUFFER", fl.sse_buffer, d.sse_buffer)?,
            min_free_disk_bytes: bytes(
                "TEMPORA_MIN_FREE_DISK_BYTES",
                fl.min_free_disk_bytes,
                d.min_free_disk_bytes,
                0,
                u64::MAX,
            )?,
            // Below a few MiB every read misses and the engine crawls; that
            // is never what anyone wants.
            storage_cache_bytes: match flags.cache_mb {
                Some(mb) if mb < 4 => bail!("--cache-mb must be at least 4, got {mb}"),
                Some(mb) => mb.checked_mul(1 << 20).context("--cache-mb is too large")?,
                None => bytes("TEMPORA_STORAGE_CACHE_BYTES", fl.storage_cache_bytes, d.storage_cache_bytes, 4 << 20, u64::MAX)?,
            },
            storage_checkpoint_bytes: bytes(
                "TEMPORA_STORAGE_CHECKPOINT_BYTES",
                fl.storage_checkpoint_bytes,
                d.storage_checkpoint_bytes,
                MIN_CHECKPOINT_BYTES,
                MAX_CHECKPOINT_BYTES,
            )?,
            storage_warm_cache: boolean("TEMPORA_STORAGE_WARM_CACHE", fl.storage_warm_cache, d.storage_warm_cache)?,
            request_timeout_secs: num("TEMPORA_REQUEST_TIMEOUT_SECS", fl.request_timeout_secs, d.request_timeout_secs)?,
            header_read_timeout_secs: num(
                "TEMPORA_HEADER_READ_TIMEOUT_SECS",
                fl.header_read_timeout_secs,
                d.header_read_timeout_secs,
            )?,
            max_header_bytes: num("TEMPORA_MAX_HEADER_BYTES", fl.max_header_bytes, d.max_header_bytes)?,
            max_headers: num("TEMPORA_MAX_HEADERS", fl.max_headers, d.max_headers)?,
            tcp_packet_timeout_secs: num(
                "TEMPORA_TCP_PACKET_TIMEOUT_SECS",
                fl.tcp_packet_timeout_secs,
                d.tcp_packet_timeout_secs,
            )?,
            tcp_idle_timeout_secs: num("TEMPORA_TCP_IDLE_TIMEOUT_SECS", fl.tcp_idle_timeout_secs, d.tcp_idle_timeout_secs)?,
        };
        let allow_private =
            boolean("TEMPORA_OUTBOUND_ALLOW_PRIVATE", file_cfg.outbound.allow_private, false)?;
        let allow = match env("TEMPORA_OUTBOUND_ALLOW") {
            Some(v) => split_list(&v),
            None => file_cfg.outbound.allow.clone().unwrap_or_default(),
        };
        let allow = allow
            .iter()
            .map(|s| crate::outbound::Policy::parse_net(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("[outbound] allow (TEMPORA_OUTBOUND_ALLOW): {e}"))?;
        let mcp_allowed_origins = match env(MCP_ORIGINS_ENV) {
            Some(v) => parse_origins(&v),
            None => parse_origins(&file_cfg.mcp.allowed_origins.unwrap_or_default().join(",")),
        };
        let embeddings = crate::embed::EmbeddingsConfig::resolve(file_cfg.embeddings, env)?;
        let connectors = crate::connectors::config::ConnectorSettings::resolve(file_cfg.connectors.clone(), env)?;
        let monitor = crate::monitor::MonitorConfig::resolve(file_cfg.monitor, env)?;
        let agents_dir = env("TEMPORA_AGENTS_DIR")
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from)
            .or(file_cfg.agents.dir.clone());
        let memory_model = env("TEMPORA_AGENTS_MEMORY_MODEL").or(file_cfg.agents.memory_model.clone());
        let memory_llm = memory_model.filter(|m| !m.trim().is_empty()).map(|m| crate::agents::LlmConfig {
            model_name: Some(m),
            base_url: env("TEMPORA_AGENTS_MEMORY_BASE_URL").or(file_cfg.agents.memory_base_url.clone()),
            api_key_env: env("TEMPORA_AGENTS_MEMORY_API_KEY_ENV").or(file_cfg.agents.memory_api_key_env.clone()),
            ..Default::default()
        });
        if let Some(u) = memory_llm.as_ref().and_then(|c| c.base_url.as_deref()) {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                anyhow::bail!("[agents] memory_base_url must start with http:// or https://, got {u:?}");
            }
        }
        let cfg = Config {
            memory_llm,
            agents_dir,
            connectors,
            monitor,
            mcp_allowed_origins,
            auth,
            embeddings,
            limits,
            outbound: crate::outbound::Policy { allow_private, allow: allow.into() },
            data_dir,
            http_addr: Listen::parse("http address", &http)?,
            grpc_addr: Listen::parse("gRPC address", &grpc)?,
            tcp_addr: Listen::parse("TCP address", &tcp)?,
            log_format,
            durability,
            storage_backend,
            store,
        };
        if cfg.data_dir.as_os_str().is_empty() {
            bail!("data directory must not be empty");
        }
        Ok(cfg)
    }
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// `nas=nas-key-1,nas=nas-key-2,acme=acme-key-1`
fn parse_tenant_keys(v: &str) -> Result<Vec<TenantKeys>> {
    let mut out: Vec<TenantKeys> = Vec::new();
    for pair in split_list(v) {
        let Some((name, key)) = pair.split_once('=') else {
            bail!("TEMPORA_TENANT_KEYS: expected tenant=key pairs separated by commas, got an entry without '='");
        };
        let (name, key) = (name.trim().to_string(), key.trim().to_string());
        match out.iter_mut().find(|t| t.name == name) {
            Some(t) => t.keys.push(key),
            None => out.push(TenantKeys { name, keys: vec![key] }),
        }
    }
    Ok(out)
}

fn validate_auth(a: &AuthConfig) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for t in &a.tenants {
        if t.name.is_empty()
            || t.name.len() > 64
            || !t.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("tenant name {:?}: use 1-64 letters, digits, '-' or '_'", t.name);
        }
        if t.keys.is_empty() {
            bail!("tenant {} has no keys", t.name);
        }
        for k in &t.keys {
            if k.len() < 8 {
                bail!("a key of tenant {} is shorter than 8 characters", t.name);
            }
            if !seen.insert(k.as_str()) {
                bail!("a key is listed twice (keys must be unique across tenants and admin tokens)");
            }
        }
    }
    for k in &a.admin_tokens {
        if k.len() < 8 {
            bail!("an admin token is shorter than 8 characters");
        }
        if !seen.insert(k.as_str()) {
            bail!("a key is listed twice (keys must be unique across tenants and admin tokens)");
        }
    }
    if let Some(h) = &a.tenant_host {
        if !h.contains("{tenant}") {
            bail!("tenant_host must contain {{tenant}}, e.g. \"{{tenant}}.example.com\"");
        }
    }
    if let Some(secs) = a.session_lifetime_secs {
        if !(1..=MAX_SESSION_LIFETIME_SECS).contains(&secs) {
            bail!("session_lifetime_secs (TEMPORA_SESSION_LIFETIME_SECS) must be from 1 to {MAX_SESSION_LIFETIME_SECS}, got {secs}");
        }
    }
    Ok(())
}

fn parse_enum<T: for<'de> Deserialize<'de>>(what: &str, v: &str) -> Result<T> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(&v.to_lowercase()))
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_store_url_is_shown_without_its_password() {
        let shown = |u: &str| super::StoreUrl(u.to_string()).to_string();
        assert_eq!(shown("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(shown("postgres://u@h/db?sslmode=require"), "postgres://u@h/db?sslmode=require");
        assert_eq!(shown("postgres://u@h/db?password=secret&sslmode=require"), "postgres://u@h/db?password=***&sslmode=require");
        assert_eq!(shown("postgres://u:pa/ss@h/db"), "postgres://u:***@h/db");
        assert_eq!(shown("postgres://u:p?a@ss@h/db"), "postgres://u:***@ss@h/db");
        assert_eq!(shown("postgres://h/db?sslpassword=secret"), "postgres://h/db?sslpassword=***");
        for u in ["postgres://u:s3cr/t@h/db", "postgres://u:s3cr?t@h/db?x=1", "postgresql://h/db?PASSWORD=s3cret"] {
            assert!(!shown(u).contains("s3cr"), "{}", shown(u));
        }
    }

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
    fn mcp_origins_come_from_the_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[mcp]\nallowed_origins = [\"https://App.example.com/\"]\n").unwrap();
        let c = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.mcp_allowed_origins, vec!["https://app.example.com".to_string()]);
        let env = env_of(&[("TEMPORA_MCP_ALLOWED_ORIGINS", "http://localhost:3000, https://b.example")]);
        let c = Config::load(Some(&file), &env, Overrides::default()).unwrap();
        assert_eq!(c.mcp_allowed_origins, vec!["http://localhost:3000".to_string(), "https://b.example".to_string()]);
        assert!(Config::load(None, &env_of(&[]), Overrides::default()).unwrap().mcp_allowed_origins.is_empty());
    }

    #[test]
    fn flag_beats_env_beats_file_beats_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "data_dir = \"/from/file\"\nhttp_addr = \"127.0.0.1:1\"\ngrpc_addr = \"127.0.0.1:2\"\n")
            .unwrap();
        let env = env_of(&[("TEMPORA_HTTP_ADDR", "127.0.0.1:3"), ("TEMPORA_DATA_DIR", "/from/env")]);
        let flags = Overrides { data_dir: Some("/from/flag".into()), ..Default::default() };
        let c = Config::load(Some(&file), &env, flags).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:3");
        assert_eq!(c.grpc_addr.to_string(), "127.0.0.1:2");
        assert_eq!(c.tcp_addr.to_string(), "127.0.0.1:5050");
    }

    #[test]
    fn keys_come_from_the_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(
            &file,
            "[auth]\nadmin_tokens = [\"adm-12345678\"]\n[[auth.tenants]]\nname = \"nas\"\nkeys = [\"nas-key-1\", \"nas-key-2\"]\n",
        )
        .unwrap();
        let c = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.auth.tenants[0].keys.len(), 2);
        assert!(!c.auth.is_open());
        let env = env_of(&[
            ("TEMPORA_TENANT_KEYS", "nas=nas-key-9,acme=acme-key-1"),
            ("TEMPORA_ADMIN_TOKENS", "adm-1-abcdef,adm-2-abcdef"),
        ]);
        let c = Config::load(Some(&file), &env, Overrides::default()).unwrap();
        assert_eq!(c.auth.tenants.len(), 2);
        assert_eq!(c.auth.tenants[0].keys, vec!["nas-key-9".to_string()]);
        assert_eq!(c.auth.admin_tokens.len(), 2);
        let bad = env_of(&[("TEMPORA_TENANT_KEYS", "nas")]);
        assert!(Config::load(None, &bad, Overrides::default()).is_err());
        let dup = env_of(&[("TEMPORA_TENANT_KEYS", "a=same-key-1,b=same-key-1")]);
        assert!(Config::load(None, &dup, Overrides::default()).is_err());
        assert!(Config::load(None, &env_of(&[]), Overrides::default()).unwrap().auth.is_open());
    }

    #[test]
    fn the_session_lifetime_comes_from_the_file_or_the_environment() {
        assert_eq!(Config::load(None, &env_of(&[]), Overrides::default()).unwrap().auth.session_lifetime_secs, None);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[auth]\nsession_lifetime_secs = 3600\n").unwrap();
        let c = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.auth.session_lifetime_secs, Some(3600));
        let env = env_of(&[("TEMPORA_SESSION_LIFETIME_SECS", "2")]);
        assert_eq!(Config::load(Some(&file), &env, Overrides::default()).unwrap().auth.session_lifetime_secs, Some(2));
        for bad in ["0", "soon", "99999999999"] {
            let env = env_of(&[("TEMPORA_SESSION_LIFETIME_SECS", bad)]);
            assert!(Config::load(None, &env, Overrides::default()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_backend_of_a_new_store_is_redb_unless_the_file_or_the_environment_says_sled() {
        let d = Config::load(None, &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(d.storage_backend, StorageBackendSetting::Redb);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "storage_backend = \"sled\"\n").unwrap();
        let c = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.storage_backend, StorageBackendSetting::Sled);
        let c = Config::load(Some(&file), &env_of(&[("TEMPORA_STORAGE_BACKEND", "REDB")]), Overrides::default());
        assert_eq!(c.unwrap().storage_backend, StorageBackendSetting::Redb);
        let bad = Config::load(None, &env_of(&[("TEMPORA_STORAGE_BACKEND", "rocksdb")]), Overrides::default());
        let e = format!("{:#}", bad.unwrap_err());
        assert!(e.contains("TEMPORA_STORAGE_BACKEND") && e.contains("rocksdb"), "{e}");
        std::fs::write(&file, "storage_backend = \"lmdb\"\n").unwrap();
        assert!(Config::load(Some(&file), &env_of(&[]), Overrides::default()).is_err());
    }

    #[test]
    fn the_storage_cache_comes_from_the_file_or_the_environment_and_has_a_floor() {
        let d = Config::load(None, &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(d.limits.storage_cache_bytes, Limits::default().storage_cache_bytes);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[limits]\nstorage_cache_bytes = 67108864\n").unwrap();
        let c = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.limits.storage_cache_bytes, 64 << 20);
        let env = env_of(&[("TEMPORA_STORAGE_CACHE_BYTES", "33554432")]);
        assert_eq!(Config::load(Some(&file), &env, Overrides::default()).unwrap().limits.storage_cache_bytes, 32 << 20);
        for bad in ["1024", "lots", "-5"] {
            let err = Config::load(None, &env_of(&[("TEMPORA_STORAGE_CACHE_BYTES", bad)]), Overrides::default())
                .unwrap_err();
            assert!(format!("{err:#}").contains("TEMPORA_STORAGE_CACHE_BYTES"), "{bad}: {err:#}");
        }
    }

    #[test]
    fn http_threads_default_to_twice_the_cores_and_come_from_the_file_or_the_environment() {
        let cores = std::thread::available_parallelism().unwrap().get();
        let d = Config::load(None, &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(d.limits.http_threads, 2 * cores);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[limits]\nhttp_threads = 3\n").unwrap();
        assert_eq!(Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap().limits.http_threads, 3);
        let env = env_of(&[("TEMPORA_HTTP_THREADS", "5")]);
        assert_eq!(Config::load(Some(&file), &env, Overrides::default()).unwrap().limits.http_threads, 5);
        for bad in ["0", "1025", "many"] {
            let err =
                Config::load(None, &env_of(&[("TEMPORA_HTTP_THREADS", bad)]), Overrides::default()).unwrap_err();
            assert!(format!("{err:#}").contains("TEMPORA_HTTP_THREADS"), "{bad}: {err:#}");
        }
    }

    #[test]
    fn warming_the_cache_is_on_unless_the_file_or_the_environment_says_otherwise() {
        let d = Config::load(None, &env_of(&[]), Overrides::default()).unwrap();
        assert!(d.limits.storage_warm_cache);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[limits]\nstorage_warm_cache = false\n").unwrap();
        assert!(!Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap().limits.storage_warm_cache);
        let env = env_of(&[("TEMPORA_STORAGE_WARM_CACHE", "1")]);
        assert!(Config::load(Some(&file), &env, Overrides::default()).unwrap().limits.storage_warm_cache);
        let env = env_of(&[("TEMPORA_STORAGE_WARM_CACHE", "maybe")]);
        let err = Config::load(None, &env, Overrides::default()).unwrap_err();
        assert!(format!("{err:#}").contains("TEMPORA_STORAGE_WARM_CACHE: expected true or false"), "{err:#}");
    }

    #[test]
    fn the_checkpoint_size_comes_from_the_file_or_the_environment_within_bounds() {
        let d = Config::load(None, &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(d.limits.storage_checkpoint_bytes, 32 << 20);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(&file, "[limits]\nstorage_checkpoint_bytes = 16777216\n").unwrap();
        let c = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap();
        assert_eq!(c.limits.storage_checkpoint_bytes, 16 << 20);
        let env = env_of(&[("TEMPORA_STORAGE_CHECKPOINT_BYTES", "2097152")]);
        let c = Config::load(Some(&file), &env, Overrides::default()).unwrap();
        assert_eq!(c.limits.storage_checkpoint_bytes, 2 << 20);
        for bad in ["1000", "2147483648", "lots"] {
            let env = env_of(&[("TEMPORA_STORAGE_CHECKPOINT_BYTES", bad)]);
            let err = Config::load(None, &env, Overrides::default()).unwrap_err();
            assert!(format!("{err:#}").contains("TEMPORA_STORAGE_CHECKPOINT_BYTES"), "{bad}: {err:#}");
        }
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

    #[test]
    fn embeddings_are_off_by_default_and_the_key_stays_out_of_the_file() {
        assert!(Config::load(None, &env_of(&[]), Overrides::default()).unwrap().embeddings.is_none());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.toml");
        std::fs::write(
            &file,
            "[embeddings]\nbase_url = \"https://emb.example.com/v1\"\nmodel = \"m\"\napi_key_env = \"EMB_KEY\"\nbatch_size = 16\ndimensions = 256\ntimeout_ms = 5000\n",
        )
        .unwrap();
        let c = Config::load(Some(&file), &env_of(&[("EMB_KEY", "sk-emb-1")]), Overrides::default()).unwrap();
        let e = c.embeddings.as_ref().unwrap();
        assert_eq!((e.batch_size, e.dimensions, e.timeout_ms), (16, Some(256), 5000));
        assert_eq!(e.api_key.as_deref(), Some("sk-emb-1"));
        assert!(!format!("{c:?}").contains("sk-emb-1"));
        let env =
            env_of(&[("TEMPORA_EMBEDDINGS_MODEL", "m2"), ("TEMPORA_EMBEDDINGS_BASE_URL", "http://127.0.0.1:9/v1")]);
        let c = Config::load(Some(&file), &env, Overrides::default()).unwrap();
        let e = c.embeddings.unwrap();
        assert_eq!(
            (e.model.as_str(), e.base_url.as_str(), e.api_key.as_deref()),
            ("m2", "http://127.0.0.1:9/v1", None)
        );
        std::fs::write(&file, "[embeddings]\nmodel = \"m\"\nbase_url = \"http://x/v1\"\napi_key = \"sk-in-file\"\n")
            .unwrap();
        let err = Config::load(Some(&file), &env_of(&[]), Overrides::default()).unwrap_err();
        assert!(format!("{err:#}").contains("api_key"), "a key in the file is refused: {err:#}");
    }
}
