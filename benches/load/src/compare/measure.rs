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

/// Busy CPU (in cores) below which the machine counts as quiet.
const QUIET_CORES: f64 = 0.15;

/// Waits, for at most `max`, until the machine is quiet: under
/// [`QUIET_CORES`] busy over a whole second. Returns the seconds waited.
///
/// A step leaves work behind that it does not wait for: after an import,
/// tempora's search index merges its segments (minutes of one core at 10M
/// facts), PostgreSQL vacuums and MariaDB purges old row versions. Left
/// running, that work would slow whichever system is timed next, and not
/// the one that caused it. So every step starts on a quiet machine, and the
/// wait after a step is recorded with it (`settle_s`): it is that system's.
/// The whole machine is measured, not the servers alone, because the load
/// tool is idle here and anything else busy would skew the next step as much.
pub async fn settle(max: std::time::Duration) -> f64 {
    let started = std::time::Instant::now();
    let Some(mut last) = busy_ticks() else { return 0.0 };
    let hz = 100.0; // USER_HZ: /proc/stat counts in hundredths of a second on Linux
    while started.elapsed() < max {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let Some(now) = busy_ticks() else { break };
        let cores = now.saturating_sub(last) as f64 / hz;
        last = now;
        if cores < QUIET_CORES {
            return started.elapsed().as_secs_f64();
        }
    }
    let waited = started.elapsed().as_secs_f64();
    if !max.is_zero() {
        eprintln!("the machine was still busy after {waited:.0} s (--settle-max-secs); going on");
    }
    waited
}

/// Clock ticks all CPUs spent busy since boot (`/proc/stat`: everything but
/// idle, iowait and steal).
fn busy_ticks() -> Option<u64> {
    busy_ticks_in(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn busy_ticks_in(stat: &str) -> Option<u64> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line.split_whitespace().filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq (guest time is already in
    // user; steal, time the hypervisor gave to other machines, is not ours
    // to wait for).
    let total: u64 = fields.iter().take(7).sum();
    Some(total - fields.get(3)? - fields.get(4)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_everything_but_idle_iowait_and_steal() {
        let stat = "cpu  100 5 50 1000 20 3 4 7 9 0\ncpu0 50 2 25 500 10 1 2 3 4 0\n";
        assert_eq!(busy_ticks_in(stat), Some(100 + 5 + 50 + 3 + 4));
        assert_eq!(busy_ticks_in("intr 1 2 3\n"), None);
        assert!(busy_ticks().is_some(), "this machine's /proc/stat");
    }

    #[tokio::test]
    async fn no_wait_when_the_limit_is_zero() {
        assert!(settle(std::time::Duration::ZERO).await < 0.5);
    }
}
