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

/// The proportional set size (PSS) of a server: the process `pid` and all
/// its descendants (PostgreSQL's backends are children of the postmaster),
/// or, without a pid, every process named `name`. Memory shared between a
/// server's processes (PostgreSQL's shared buffers) counts once, not once per
/// process. `None` when no such process is seen.
pub fn memory_bytes(pid: Option<u32>, name: &str) -> Option<u64> {
    let procs: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid, comm.to_string()))
        })
        .collect();
    let chosen: Vec<u32> = match pid {
        Some(root) => {
            let mut tree = vec![root];
            let mut i = 0;
            while i < tree.len() {
                let parent = tree[i];
                tree.extend(procs.iter().filter(|p| p.1 == parent).map(|p| p.0));
                i += 1;
            }
            tree
        }
        None => procs.iter().filter(|p| p.2 == name).map(|p| p.0).collect(),
    };
    let mut total = None;
    for p in chosen {
        let Ok(rollup) = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")) else { continue };
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
