//! The `tempora backup`, `tempora restore` and `tempora verify-backup`
//! commands. A backup is taken from a running server over HTTP
//! (`GET /api/admin/backup`), from a data directory no server holds, or
//! straight from a PostgreSQL database; either way the file is written
//! beside its destination, checked end to end (record count and BLAKE3),
//! and only then moved into place. There is one file format for both
//! stores: a backup of either restores into a new data directory or into
//! an empty PostgreSQL database (`store/postgres/dump.rs`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use crate::config::StoreSetting;
use crate::store::embedded::{backup, Engine, EngineConfig};
use crate::store::{BackupSummary, MemoryStore};

/// Downloads a backup from the server at `base` (e.g. `http://127.0.0.1:8080`)
/// into `out`. `key` is an admin token (keyed mode).
pub fn fetch(base: &str, key: Option<&str>, out: &Path) -> Result<BackupSummary> {
    let partial = partial_path(out);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let url = format!("{}/api/admin/backup", base.trim_end_matches('/'));
    let downloaded = runtime.block_on(async {
        use tokio::io::AsyncWriteExt;
        let client = reqwest::Client::builder().connect_timeout(std::time::Duration::from_secs(10)).build()?;
        let mut req = client.get(&url);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let mut resp = req.send().await.with_context(|| format!("cannot reach {url}"))?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            match status.as_u16() {
                401 | 404 => bail!("{url} answered {status}: a backup needs an admin token in keyed mode (--key)"),
                _ => bail!("{url} answered {status}: {body}"),
            }
        }
        let mut file =
            tokio::fs::File::create(&partial).await.with_context(|| format!("cannot create {}", partial.display()))?;
        while let Some(chunk) = resp.chunk().await.context("the backup transfer was cut off")? {
            file.write_all(&chunk).await?;
        }
        file.sync_all().await?;
        Ok(())
    });
    finish(downloaded, &partial, out)
}

/// Writes a backup of a data directory that no server has open.
pub fn offline(data_dir: &Path, out: &Path) -> Result<BackupSummary> {
    if !data_dir.exists() {
        bail!("data directory {} does not exist", data_dir.display());
    }
    let engine = Engine::open(EngineConfig::at(data_dir)).map_err(|e| {
        if e.to_string().contains("in use") {
            anyhow::anyhow!(
                "data directory {} is in use by a running server: back it up through the server instead \
                 (tempora backup --url ...)",
                data_dir.display()
            )
        } else {
            anyhow::anyhow!("cannot open data directory {}: {e}", data_dir.display())
        }
    })?;
    let partial = partial_path(out);
    let written = (|| {
        let mut file =
            std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
        engine.backup(&mut file)?;
        file.sync_all()?;
        Ok(())
    })();
    engine.close();
    finish(written, &partial, out)
}

/// Writes a backup of the PostgreSQL database at `url`: one consistent
/// state of it, read in one transaction while servers on it go on.
pub fn from_postgres(url: &str, out: &Path) -> Result<BackupSummary> {
    let store = open_postgres(url)?;
    let partial = partial_path(out);
    let written = (|| {
        let mut file =
            std::fs::File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
        store.backup(&mut file)?;
        file.sync_all()?;
        Ok(())
    })();
    store.close();
    finish(written, &partial, out)
}

/// Loads the backup `from` into the PostgreSQL database at `url`, which
/// must hold no tempora data yet (its schema is made if it has none).
pub fn restore_to_postgres(from: &Path, url: &str) -> Result<BackupSummary> {
    let mut f = std::fs::File::open(from).with_context(|| format!("cannot open {}", from.display()))?;
    let store = open_postgres(url)?;
    let restored = store.restore(&mut f).with_context(|| format!("restore of {} failed", from.display()));
    store.close();
    restored
}

/// The PostgreSQL store at `url` (a `postgres://` URL; shown with its
/// password masked).
fn open_postgres(url: &str) -> Result<std::sync::Arc<crate::store::postgres::PostgresStore>> {
    match StoreSetting::parse("--store", url)? {
        StoreSetting::Postgres(url) => crate::store::postgres::open(url.secret())
            .with_context(|| format!("cannot open the PostgreSQL store at {url}")),
        StoreSetting::Embedded => bail!("--store takes a postgres:// URL; an embedded store is a --data-dir"),
    }
}

/// Checks the file written to `partial`, then moves it to `out`; removes it
/// on any failure.
fn finish(written: Result<()>, partial: &Path, out: &Path) -> Result<BackupSummary> {
    let checked = written.and_then(|()| verify(partial));
    match checked {
        Ok(summary) => {
            std::fs::rename(partial, out).with_context(|| format!("cannot move the backup to {}", out.display()))?;
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_file(partial);
            Err(e)
        }
    }
}

/// Reads a backup file whole and checks its count and checksum.
pub fn verify(file: &Path) -> Result<BackupSummary> {
    let mut f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    backup::verify(&mut f).with_context(|| format!("{} is not a sound backup", file.display()))
}

/// Restores `from` into `data_dir`, which must not exist or be empty.
pub fn restore(from: &Path, data_dir: &Path) -> Result<BackupSummary> {
    let mut f = std::fs::File::open(from).with_context(|| format!("cannot open {}", from.display()))?;
    let summary = backup::restore(&mut f, data_dir).with_context(|| format!("restore of {} failed", from.display()))?;
    // Open it once: runs any format migration now rather than at first serve,
    // and proves the store opens.
    let engine = Engine::open(EngineConfig::at(data_dir))
        .with_context(|| format!("the restored store in {} does not open", data_dir.display()))?;
    engine.close();
    Ok(summary)
}

fn partial_path(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "backup".into());
    out.with_file_name(format!("{name}.partial"))
}

/// One line saying what a backup holds.
pub fn describe(s: &BackupSummary) -> String {
    format!("{} records, {} bytes, up to tx {} (store format {})", s.records, s.bytes, s.last_tx, s.format)
}
