//! What a system costs besides time: its size on disk and its memory.

use anyhow::{Context, Result};
use std::path::Path;

/// Bytes allocated on disk under `dir` (blocks, not apparent sizes: sparse
/// and preallocated files count for what they really take).
pub fn disk_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() { disk_bytes(&entry.path())? } else { meta.blocks() * 512 };
    }
    Ok(total)
}

/// The proportional set size (PSS) of every process named `name`, summed:
/// memory shared between a server's processes (PostgreSQL's shared buffers)
/// counts once, not once per process. `None` when no such process is seen.
pub fn memory_bytes(name: &str) -> Option<u64> {
    let mut total = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let path = entry.path();
        let is_named = std::fs::read_to_string(path.join("comm")).is_ok_and(|c| c.trim_end() == name);
        if !is_named {
            continue;
        }
        let Ok(rollup) = std::fs::read_to_string(path.join("smaps_rollup")) else { continue };
        let pss_kb = rollup
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        if let Some(kb) = pss_kb {
            *total.get_or_insert(0) += kb * 1024;
        }
    }
    total
}
