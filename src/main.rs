//! The `tempora` command line. Parses flags, sets up logging, and hands over
//! to `tempora::server`.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use tempora::config::{Config, DurabilitySetting, LogFormat, Overrides};

/// jemalloc instead of the system allocator: with glibc malloc the storage
/// engine slows down as the heap fragments (docs/performance.md, "The allocator").
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the
/// environment still overrides them). A background thread returns freed
/// pages to the kernel on its own: without it jemalloc purges only while it
/// is called, and an idle server kept 82 MB of freed pages resident at 1M
/// facts. One arena instead of four per core: the threads that allocate most
/// (HTTP, writer, checkpoint, search) each draw from their own thread cache
/// either way, and one arena's slabs are shared instead of half-empty in
/// each (docs/performance.md, "Memory").
#[cfg(not(target_env = "msvc"))]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: MallocConf = MallocConf(c"background_thread:true,narenas:1".as_ptr());

/// A C string pointer jemalloc reads as its `malloc_conf`.
#[cfg(not(target_env = "msvc"))]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);
// SAFETY: it points at a string literal, immutable for the whole program.
#[cfg(not(target_env = "msvc"))]
unsafe impl Sync for MallocConf {}

#[derive(Parser)]
#[command(name = "tempora", version, about = "A persistent, bitemporal memory database for AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server. With no flags and no config file: data in
    /// ./tempora-data, open mode, loopback listeners only.
    ///
    /// Every setting can also come from a TOML file (--config) or a TEMPORA_*
    /// environment variable; precedence is flag > environment > file > default.
    Serve(ServeArgs),
    /// Delete the full-text recall index of a data directory and build it
    /// again from the change log. The server must not be running on it.
    ///
    /// Reads the data directory like serve does (flag > TEMPORA_DATA_DIR >
    /// the config file > the default).
    Reindex(DataDirArgs),
    /// Rewrite the store of a data directory packed, in key order, to take
    /// less disk and read faster once it no longer fits in memory (most useful
    /// after a large import). The copy is checked before it replaces the
    /// store. The server must not be running on it; needs free space for one
    /// more copy of the store.
    ///
    /// Reads the data directory like serve does (flag > TEMPORA_DATA_DIR >
    /// the config file > the default).
    Compact(DataDirArgs),
    /// Print where the bytes of a data directory go: each table of the store
    /// (entries, bytes of records, bytes of pages), free pages, the journal,
    /// the search index, and the store's bytes per fact version. Changes
    /// nothing. The server must not be running on it.
    ///
    /// Reads the data directory like serve does (flag > TEMPORA_DATA_DIR >
    /// the config file > the default).
    Size(DataDirArgs),
    /// Exit 0 when the server answers GET /healthz (for container health
    /// checks; needs no curl). The address defaults to TEMPORA_HTTP_ADDR, with
    /// 0.0.0.0 taken as loopback.
    Healthcheck {
        /// host:port of the HTTP listener
        #[arg(long, value_name = "ADDR")]
        addr: Option<String>,
    },
    /// Write a consistent backup of the whole store (every tenant) to a
    /// file. From a running server by default (GET /api/admin/backup, on
    /// either store; it holds the store as it stood when it began while
    /// reads and writes go on); with --data-dir, from a data directory no
    /// server has open; with --store, straight from a PostgreSQL database
    /// (servers on it go on). The file is checked before it is kept.
    ///
    /// Both stores write the same format: a backup of either restores into
    /// either, with every fact id, tx and version unchanged.
    Backup(BackupArgs),
    /// Restore a backup into a new, empty data directory (no server may be
    /// running on it), or with --store into a PostgreSQL database that holds
    /// no tempora data yet (a database with data is refused and left as it
    /// was). A backup of either store restores into either. The search
    /// index is rebuilt at the next start.
    Restore(RestoreArgs),
    /// Read a backup file whole and check its record count and checksum.
    VerifyBackup {
        /// The backup file
        file: PathBuf,
    },
}

#[derive(clap::Args)]
struct BackupArgs {
    /// Where to write the backup
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Base URL of the running server [default: http:// + TEMPORA_HTTP_ADDR, or 127.0.0.1:8080]
    #[arg(long, value_name = "URL", conflicts_with_all = ["data_dir", "store"])]
    url: Option<String>,
    /// Admin token, for a server in keyed mode
    #[arg(long, env = "TEMPORA_BACKUP_KEY", value_name = "KEY", hide_env_values = true)]
    key: Option<String>,
    /// Back up this data directory directly instead (no server may have it open)
    #[arg(long, value_name = "DIR", conflicts_with = "store")]
    data_dir: Option<PathBuf>,
    /// Back up this PostgreSQL database directly instead, as
    /// `postgres://user:password@host:port/db` (servers on it may go on)
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

#[derive(clap::Args)]
struct RestoreArgs {
    /// The backup file (of either store)
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// The data directory to create; must not exist or be empty
    #[arg(long, value_name = "DIR", required_unless_present = "store", conflicts_with = "store")]
    data_dir: Option<PathBuf>,
    /// Restore into this PostgreSQL database instead, as
    /// `postgres://user:password@host:port/db`; it must hold no tempora data
    #[arg(long, value_name = "URL")]
    store: Option<String>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file [env: TEMPORA_CONFIG]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory [env: TEMPORA_DATA_DIR] [default: ./tempora-data]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Where the memory lives: `embedded` (in the data directory), or a
    /// PostgreSQL database several servers can share, as
    /// `postgres://user:password@host:port/db` [env: TEMPORA_STORE] [default: embedded]
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// HTTP listener address, or `off` [env: TEMPORA_HTTP_ADDR] [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR")]
    http_addr: Option<String>,
    /// gRPC listener address, or `off` [env: TEMPORA_GRPC_ADDR] [default: 127.0.0.1:30011]
    #[arg(long, value_name = "ADDR")]
    grpc_addr: Option<String>,
    /// NeuroDock TCP listener address, or `off` [env: TEMPORA_TCP_ADDR] [default: 127.0.0.1:5050]
    #[arg(long, value_name = "ADDR")]
    tcp_addr: Option<String>,
    /// Log format [env: TEMPORA_LOG_FORMAT] [default: text]
    #[arg(long, value_enum)]
    log_format: Option<LogFormatArg>,
    /// `durable` (default): a write returns once it is on disk. `relaxed`:
    /// once applied, synced later; for bulk loads you can redo
    /// [env: TEMPORA_DURABILITY]
    #[arg(long, value_enum)]
    durability: Option<DurabilityArg>,
    /// Memory for the storage engine's page cache, in MiB: the bulk of the
    /// server's memory once the store outgrows it; reads that miss it go to
    /// the operating system's page cache or the disk
    /// [env: TEMPORA_STORAGE_CACHE_BYTES, in bytes] [default: 256]
    #[arg(long, value_name = "MB")]
    cache_mb: Option<u64>,
}

#[derive(clap::Args)]
struct DataDirArgs {
    /// TOML configuration file [env: TEMPORA_CONFIG]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory [env: TEMPORA_DATA_DIR] [default: ./tempora-data]
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DurabilityArg {
    Durable,
    Relaxed,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Reindex(args) => reindex(args),
        Command::Compact(args) => compact(args),
        Command::Size(args) => size(args),
        Command::Healthcheck { addr } => healthcheck(addr),
        Command::Backup(args) => {
            let made = match (&args.data_dir, &args.store) {
                (Some(dir), _) => tempora::backup::offline(dir, &args.out)?,
                (None, Some(store)) => tempora::backup::from_postgres(store, &args.out)?,
                (None, None) => {
                    let url = args.url.unwrap_or_else(|| format!("http://{}", local_http_addr(None)));
                    tempora::backup::fetch(&url, args.key.as_deref(), &args.out)?
                }
            };
            println!("backup written to {}: {}", args.out.display(), tempora::backup::describe(&made));
            Ok(())
        }
        Command::Restore(RestoreArgs { from, data_dir, store }) => {
            let (s, into) = match (data_dir, store) {
                (Some(dir), _) => (tempora::backup::restore(&from, &dir)?, dir.display().to_string()),
                (None, Some(url)) => {
                    let s = tempora::backup::restore_to_postgres(&from, &url)?;
                    (s, "the PostgreSQL database".to_string())
                }
                (None, None) => unreachable!("clap requires --data-dir or --store"),
            };
            println!("restored into {into}: {}", tempora::backup::describe(&s));
            Ok(())
        }
        Command::VerifyBackup { file } => {
            let s = tempora::backup::verify(&file)?;
            println!("{} is sound: {}", file.display(), tempora::backup::describe(&s));
            Ok(())
        }
    }
}

fn serve(args: ServeArgs) -> Result<()> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let file = args.config.clone().or_else(|| env("TEMPORA_CONFIG").map(PathBuf::from));
    let flags = Overrides {
        data_dir: args.data_dir,
        store: args.store,
        http_addr: args.http_addr,
        grpc_addr: args.grpc_addr,
        tcp_addr: args.tcp_addr,
        log_format: args.log_format.map(|f| match f {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }),
        durability: args.durability.map(|d| match d {
            DurabilityArg::Durable => DurabilitySetting::Durable,
            DurabilityArg::Relaxed => DurabilitySetting::Relaxed,
        }),
        cache_mb: args.cache_mb,
    };
    let cfg = Config::load(file.as_deref(), &env, flags)?;
    init_logging(cfg.log_format);
    // Named so a per-thread CPU account tells this runtime's work (search
    // indexing, change feeds, the monitor, gRPC) from the HTTP threads'.
    let runtime = tokio::runtime::Builder::new_multi_thread().thread_name("tempora-main").enable_all().build()?;
    runtime.block_on(async {
        let shutdown = tempora::server::shutdown_signal();
        tempora::server::run(cfg, shutdown).await
    })
}

/// The configuration of an offline command, whose data directory must exist.
fn offline_config(args: DataDirArgs) -> Result<Config> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let file = args.config.clone().or_else(|| env("TEMPORA_CONFIG").map(PathBuf::from));
    let flags = Overrides { data_dir: args.data_dir, ..Default::default() };
    let cfg = Config::load(file.as_deref(), &env, flags)?;
    init_logging(cfg.log_format);
    if !cfg.data_dir.exists() {
        anyhow::bail!("data directory {} does not exist", cfg.data_dir.display());
    }
    Ok(cfg)
}

fn compact(args: DataDirArgs) -> Result<()> {
    let cfg = offline_config(args)?;
    let done = tempora::store::embedded::compact(&cfg.data_dir).map_err(|e| match e {
        tempora::store::EngineError::Storage(tempora::store::StorageError::Locked(_)) => anyhow::anyhow!(
            "data directory {} is in use by another process (a running tempora server?); stop it before compacting",
            cfg.data_dir.display()
        ),
        other => anyhow::anyhow!("compaction of {} failed: {other}", cfg.data_dir.display()),
    })?;
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "compacted {}: {} records, {:.1} MB -> {:.1} MB in {:.1} s",
        cfg.data_dir.display(),
        done.records,
        mb(done.bytes_before),
        mb(done.bytes_after),
        done.elapsed.as_secs_f64()
    );
    Ok(())
}

fn size(args: DataDirArgs) -> Result<()> {
    let cfg = offline_config(args)?;
    let dir = &cfg.data_dir;
    let u = tempora::store::embedded::usage(dir).map_err(|e| match e {
        tempora::store::EngineError::Storage(tempora::store::StorageError::Locked(_)) => anyhow::anyhow!(
            "data directory {} is in use by another process (a running tempora server?); stop it first",
            dir.display()
        ),
        other => anyhow::anyhow!("cannot read the store in {}: {other}", dir.display()),
    })?;
    let index = tree_disk_bytes(&tempora::search::indexer::index_dir(dir));
    let mb = |b: u64| format!("{:.1}", b as f64 / 1e6);
    let versions = u.fact_versions().max(1) as f64;
    println!("{:<12} {:>12} {:>12} {:>12} {:>7} {:>14}", "table", "entries", "records MB", "pages MB", "fill", "pages B/entry");
    for t in &u.tables {
        let fill = if t.page_bytes == 0 { "-".to_string() } else { format!("{:.0} %", 100.0 * t.stored_bytes as f64 / t.page_bytes as f64) };
        let per = if t.entries == 0 { "-".to_string() } else { format!("{:.0}", t.page_bytes as f64 / t.entries as f64) };
        println!("{:<12} {:>12} {:>12} {:>12} {:>7} {:>14}", t.keyspace.name(), t.entries, mb(t.stored_bytes), mb(t.page_bytes), fill, per);
    }
    println!("{:<12} {:>12} {:>12} {:>12}", "all tables", "", mb(u.tables.iter().map(|t| t.stored_bytes).sum()), mb(u.page_bytes()));
    println!(
        "file {} MB long, {} MB on disk: {} MB on disk outside the tables (free pages, to be reused; `tempora compact` gives them back)",
        mb(u.file_bytes),
        mb(u.file_disk_bytes),
        mb(u.outside_tables_bytes)
    );
    println!("journal {} MB on disk", mb(u.journal_disk_bytes));
    println!(
        "store {} MB on disk for {} fact versions: {:.0} B per version ({:.0} B in table pages); search index {} MB ({:.0} B per version)",
        mb(u.disk_bytes()),
        u.fact_versions(),
        u.disk_bytes() as f64 / versions,
        u.page_bytes() as f64 / versions,
        mb(index),
        index as f64 / versions
    );
    Ok(())
}

/// Blocks allocated under `dir`, as `du` counts them.
fn tree_disk_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => tree_disk_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

fn reindex(args: DataDirArgs) -> Result<()> {
    let cfg = offline_config(args)?;
    // The store locks its files: a running server makes this fail.
    let engine = tempora::server::open_store(&cfg).map_err(|e| {
        let text = format!("{e:#}");
        if text.contains("in use") || text.contains("lock") {
            anyhow::anyhow!(
                "data directory {} is in use by another process (a running tempora server?); stop it before reindexing",
                cfg.data_dir.display()
            )
        } else {
            e
        }
    })?;
    let started = std::time::Instant::now();
    let done = tempora::search::rebuild(&cfg.data_dir, std::sync::Arc::clone(&engine))?;
    engine.close();
    println!(
        "indexed {} facts of {} tenants up to tx {} in {:.1} s",
        done.facts,
        done.tenants,
        done.watermark,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// host:port of this machine's server: `addr`, else TEMPORA_HTTP_ADDR, else
/// the default, with a wildcard address taken as loopback.
fn local_http_addr(addr: Option<String>) -> String {
    addr.or_else(|| std::env::var("TEMPORA_HTTP_ADDR").ok())
        .unwrap_or_else(|| tempora::config::DEFAULT_HTTP_ADDR.to_string())
        .replace("0.0.0.0", "127.0.0.1")
        .replace("[::]", "[::1]")
}

fn healthcheck(addr: Option<String>) -> Result<()> {
    use std::io::{Read, Write};
    let addr = local_http_addr(addr);
    let sock: std::net::SocketAddr = addr.parse()?;
    let timeout = std::time::Duration::from_secs(3);
    let mut s = std::net::TcpStream::connect_timeout(&sock, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(format!("GET /healthz HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head)?;
    if &head[9..12] == b"200" {
        Ok(())
    } else {
        anyhow::bail!("unhealthy: {}", String::from_utf8_lossy(&head))
    }
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("TEMPORA_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // tantivy reports every commit and merge at info level.
    let own_tantivy = std::env::var("TEMPORA_LOG").is_ok_and(|v| v.contains("tantivy"));
    let filter = match "tantivy=warn".parse() {
        Ok(d) if !own_tantivy => filter.add_directive(d),
        _ => filter,
    };
    // rmcp (the MCP server) reports every stateless request at info level.
    let own_rmcp = std::env::var("TEMPORA_LOG").is_ok_and(|v| v.contains("rmcp"));
    let filter = match "rmcp=warn".parse() {
        Ok(d) if !own_rmcp => filter.add_directive(d),
        _ => filter,
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(|| QuietStderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Standard error that drops what it cannot write: a closed log pipe must not
/// take the server down with it.
struct QuietStderr;

impl std::io::Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}
