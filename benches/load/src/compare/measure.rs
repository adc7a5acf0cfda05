//! What a system costs besides time: its size on disk and its memory, and
//! how much of its data the page cache holds.

use anyhow::{Context, Result};
use std::path::Path;

/// Bytes allocated on disk under `dir` (blocks, not apparent sizes: sparse
/// and preallocated files count for what they really take).
pub fn disk_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    each_file(dir, &mut |_, meta| {
        total += meta.blocks() * 512;
        Ok(())
    })?;
    Ok(total)
}

/// Calls `f` with every entry under `dir`, at any depth, that is not a
/// directory (its metadata not following links).
fn each_file(dir: &Path, f: &mut dyn FnMut(&Path, &std::fs::Metadata) -> Result<()>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            each_file(&entry.path(), f)?;
        } else {
            f(&entry.path(), &meta)?;
        }
    }
    Ok(())
}

/// The size of a memory page.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// Bytes of the files under `dir` that sit in the kernel's page cache now
/// (`mincore` over a read-only mapping of each file): how much of a system's
/// data a read step starts with in memory. Only the page cache: a server's
/// own cache (redb's, PostgreSQL's shared buffers, InnoDB's buffer pool, which
/// reads with `O_DIRECT` and so stays out of the page cache) is in its
/// memory figure instead.
pub fn cached_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    each_file(dir, &mut |path, meta| {
        if meta.is_file() && meta.len() > 0 {
            // A file may go between the listing and the open (PostgreSQL's
            // temporary files): it has nothing cached.
            if let Ok(file) = std::fs::File::open(path) {
                total += file_cached_bytes(&file, meta.len())?;
            }
        }
        Ok(())
    })?;
    Ok(total)
}

/// Reads every file under `dir` once, through the page cache: what a server
/// that had been serving this data would hold in memory (`--warm`).
pub fn warm(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 20];
    each_file(dir, &mut |path, meta| {
        if !meta.is_file() {
            return Ok(());
        }
        let Ok(mut file) = std::fs::File::open(path) else { return Ok(()) };
        // A file that shrank or went away under us: what was read is read.
        while let Ok(n @ 1..) = std::io::Read::read(&mut file, &mut buf) {
            total += n as u64;
        }
        Ok(())
    })?;
    Ok(total)
}

fn file_cached_bytes(file: &std::fs::File, len: u64) -> Result<u64> {
    use std::os::fd::AsRawFd;
    let page = page_size();
    let len = usize::try_from(len)?;
    // SAFETY: a fresh shared read-only mapping of an open file; nothing reads
    // through it (mincore only asks the kernel about its pages), and it is
    // unmapped before returning.
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()).context("mmap for mincore");
    }
    let mut resident = vec![0u8; len.div_ceil(page as usize)];
    // SAFETY: `addr..addr+len` is the mapping above and `resident` holds one
    // byte per page of it, as mincore requires.
    let rc = unsafe { libc::mincore(addr, len, resident.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err).context("mincore");
    }
    Ok(resident.iter().filter(|&&b| b & 1 == 1).count() as u64 * page)
}

/// A server's processes: `pid` and all its descendants (PostgreSQL's
/// backends are children of the postmaster), or, without a pid, every
/// process named `name`. `None` when `/proc` cannot be read.
fn server_processes(pid: Option<u32>, name: &str) -> Option<Vec<u32>> {
    let procs: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (comm, rest) = split_stat(&stat)?;
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid, comm.to_string()))
        })
        .collect();
    Some(match pid {
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
    })
}

/// `/proc/PID/stat` as (comm, the fields after it, from the state on).
/// `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so it
/// ends at the last ") ".
fn split_stat(stat: &str) -> Option<(&str, &str)> {
    stat.split_once(" (")?.1.rsplit_once(") ")
}

/// The proportional set size (PSS) of a server's processes (see
/// [`server_processes`]). Memory shared between a server's processes
/// (PostgreSQL's shared buffers) counts once, not once per process. `None`
/// when no such process is seen.
pub fn memory_bytes(pid: Option<u32>, name: &str) -> Option<u64> {
    let mut total = None;
    for p in server_processes(pid, name)? {
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

/// CPU seconds a server's processes (see [`server_processes`]) have used,
/// user and system, with those of their children that have exited. Two
/// readings give what the server spent in between, whichever of its
/// processes spent it: a PostgreSQL backend that exits is reaped by the
/// postmaster, and its time moves into the postmaster's children's time;
/// threads that have ended still count in their process. `None` when no
/// such process is seen.
pub fn server_cpu_seconds(pid: Option<u32>, name: &str) -> Option<f64> {
    let mut ticks = None;
    for p in server_processes(pid, name)? {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        if let Some(t) = cpu_ticks_in(&stat) {
            *ticks.get_or_insert(0) += t;
        }
    }
    ticks.map(|t| t as f64 / USER_HZ)
}

/// CPU seconds each kind of thread of process `pid` has used, by thread
/// name with a trailing number left off (`tempora-http-3` counts as
/// `tempora-http`): tempora names its threads for their stage (HTTP, writer,
/// journal sync, checkpoint), so two readings split a step's server CPU by
/// stage. A thread that ends between the readings takes its time with it;
/// tempora's threads live as long as the server. `None` when `/proc` cannot
/// be read.
pub fn thread_cpu_seconds(pid: u32) -> Option<std::collections::BTreeMap<String, f64>> {
    let mut by_kind = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let (Some((comm, _)), Some(t)) = (split_stat(&stat), cpu_ticks_in(&stat)) else { continue };
        *by_kind.entry(thread_kind(comm).to_string()).or_insert(0.0) += t as f64 / USER_HZ;
    }
    Some(by_kind)
}

/// A thread's name without its trailing number and the dash before it.
fn thread_kind(comm: &str) -> &str {
    let kind = comm.trim_end_matches(|c: char| c.is_ascii_digit());
    if kind.len() < comm.len() {
        kind.trim_end_matches('-')
    } else {
        comm
    }
}

/// CPU seconds this process (the load tool, every thread) has used.
pub fn own_cpu_seconds() -> Option<f64> {
    cpu_ticks_in(&std::fs::read_to_string("/proc/self/stat").ok()?).map(|t| t as f64 / USER_HZ)
}

/// Clock ticks per second of `/proc`'s CPU times on Linux.
const USER_HZ: f64 = 100.0;

/// utime + stime + cutime + cstime (fields 14-17) of a `/proc/PID/stat` line.
fn cpu_ticks_in(stat: &str) -> Option<u64> {
    let (_, rest) = split_stat(stat)?;
    // `rest` begins at field 3 (state), so fields 14-17 are its 11th to 14th.
    let fields: Vec<&str> = rest.split_whitespace().skip(11).take(4).collect();
    if fields.len() < 4 {
        return None;
    }
    fields.iter().map(|f| f.parse::<u64>().ok()).sum()
}

/// Busy CPU (in cores) below which the machine counts as quiet.
const QUIET_CORES: f64 = 0.15;

/// Share of a second a disk may spend doing I/O while the machine counts as
/// quiet.
const QUIET_DISK: f64 = 0.10;

/// Dirty and writeback page cache (bytes) above which settling writes it back
/// (`sync`) rather than leave the kernel to flush it during the next step.
const DIRTY_LIMIT: u64 = 32 << 20;

/// Waits, for at most `max`, until the machine is quiet: under
/// [`QUIET_CORES`] busy and no disk busier than [`QUIET_DISK`], over a whole
/// second, with the page cache written back. Returns the seconds waited.
///
/// A step leaves work behind that it does not wait for: after an import,
/// tempora's search index merges its segments (minutes of one core at 10M
/// facts), PostgreSQL vacuums and checkpoints, MariaDB purges old row
/// versions and flushes its buffer pool, and the kernel writes back the page
/// cache the import dirtied. Left running, that work would slow whichever
/// system is timed next, and not the one that caused it: a disk still busy
/// with another system's flush lengthens every sync of a write step. So every
/// step starts on a quiet machine, and the wait after a step is recorded with
/// it (`settle_s`): it is that system's. The whole machine is measured, not
/// the servers alone, because the load tool is idle here and anything else
/// busy would skew the next step as much.
///
/// Dirty page cache is not activity yet: the kernel may hold it for 30 s
/// before writing it back, in the middle of the next step. Once the CPU and
/// disks are quiet, settling writes it back itself (`sync`, timed as part of
/// the wait) and looks again.
pub async fn settle(max: std::time::Duration) -> f64 {
    let started = std::time::Instant::now();
    let mut last = Activity::now();
    while started.elapsed() < max {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let now = Activity::now();
        let busy = now.since(&last);
        last = now;
        if busy.cores < QUIET_CORES && busy.disk < QUIET_DISK {
            if dirty_bytes().unwrap_or(0) <= DIRTY_LIMIT {
                return started.elapsed().as_secs_f64();
            }
            let _ = tokio::process::Command::new("sync").status().await;
            last = Activity::now();
        }
    }
    let waited = started.elapsed().as_secs_f64();
    if !max.is_zero() {
        eprintln!("the machine was still busy after {waited:.0} s (--settle-max-secs); going on");
    }
    waited
}

/// What the machine had done by one moment: CPU busy time and each disk's
/// I/O time since boot. Two of them give how busy it was in between.
#[derive(Clone, Debug, Default)]
pub struct Activity {
    at: Option<std::time::Instant>,
    busy_ticks: Option<u64>,
    /// (device, milliseconds spent doing I/O)
    io_ms: Vec<(String, u64)>,
}

/// How busy the machine was between two [`Activity`] samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Busy {
    /// CPU cores busy, on average.
    pub cores: f64,
    /// Share of the time the busiest disk had I/O in flight (0 to 1).
    pub disk: f64,
}

impl Activity {
    pub fn now() -> Activity {
        Activity {
            at: Some(std::time::Instant::now()),
            busy_ticks: busy_ticks(),
            io_ms: std::fs::read_to_string("/proc/diskstats").map(|s| io_ms_in(&s)).unwrap_or_default(),
        }
    }

    /// Busy time from `earlier` to this sample, over the time between them.
    pub fn since(&self, earlier: &Activity) -> Busy {
        let (Some(t1), Some(t0)) = (self.at, earlier.at) else { return Busy::default() };
        let secs = t1.duration_since(t0).as_secs_f64().max(1e-3);
        let cores = match (self.busy_ticks, earlier.busy_ticks) {
            (Some(b1), Some(b0)) => b1.saturating_sub(b0) as f64 / USER_HZ / secs,
            _ => 0.0,
        };
        let disk = self
            .io_ms
            .iter()
            .filter_map(|(dev, ms)| {
                let before = earlier.io_ms.iter().find(|(d, _)| d == dev)?.1;
                Some(ms.saturating_sub(before) as f64 / 1000.0 / secs)
            })
            .fold(0.0, f64::max);
        Busy { cores, disk: disk.min(1.0) }
    }
}

/// Each block device's time spent doing I/O (`/proc/diskstats`, the 10th
/// statistic: milliseconds with at least one request in flight). Loop, RAM
/// and zram devices are left out; a partition counts as well as its disk,
/// which is harmless because only the busiest device is used.
fn io_ms_in(diskstats: &str) -> Vec<(String, u64)> {
    diskstats
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let dev = *f.get(2)?;
            if ["loop", "ram", "zram"].iter().any(|p| dev.starts_with(p)) {
                return None;
            }
            Some((dev.to_string(), f.get(12)?.parse().ok()?))
        })
        .collect()
}

/// Page cache waiting to be written back, or being written (`/proc/meminfo`
/// Dirty + Writeback).
fn dirty_bytes() -> Option<u64> {
    dirty_bytes_in(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn dirty_bytes_in(meminfo: &str) -> Option<u64> {
    let kb = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find_map(|l| l.strip_prefix(name))?;
        line.trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some((kb("Dirty:")? + kb("Writeback:")?) * 1024)
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

    #[test]
    fn cpu_time_is_user_and_system_with_exited_children() {
        // comm with spaces and parentheses; utime 7, stime 11, cutime 13, cstime 17.
        let stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 11 13 17 20 0 1 0 5 6 7";
        assert_eq!(cpu_ticks_in(stat), Some(7 + 11 + 13 + 17));
        assert_eq!(cpu_ticks_in("4242 (a) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 11"), None);
    }

    #[test]
    fn a_server_keeps_the_time_of_the_children_it_reaped() {
        // A shell whose child burns CPU and exits before the reading: its
        // time is then only in the shell's children's time.
        let done = std::env::temp_dir().join(format!("tempora-load-reaped-{}", std::process::id()));
        let _ = std::fs::remove_file(&done);
        let script = format!(
            "(i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done); touch {}; exec sleep 30",
            done.display()
        );
        let mut shell = std::process::Command::new("sh").arg("-c").arg(&script).spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !done.exists() {
            if std::time::Instant::now() > deadline {
                shell.kill().unwrap();
                panic!("the shell's child did not finish in 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let live = server_processes(Some(shell.id()), "").unwrap();
        let cpu = server_cpu_seconds(Some(shell.id()), "unused");
        shell.kill().unwrap();
        shell.wait().unwrap();
        std::fs::remove_file(&done).unwrap();
        assert_eq!(live, vec![shell.id()], "the burning child has exited");
        assert!(cpu.unwrap() >= 0.05, "the reaped child's time counts: {cpu:?}");

        // This thread spins for 200 ms of its own CPU time (not wall time,
        // which a busy machine stretches): the process's time grows by at
        // least as much, give or take a clock tick.
        let thread_cpu = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `ts` is a valid timespec for the call to fill.
            assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) }, 0);
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let (before, spin_from) = (own_cpu_seconds().unwrap(), thread_cpu());
        let mut x = 0u64;
        while thread_cpu() - spin_from < 0.2 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let grew = own_cpu_seconds().unwrap() - before;
        assert!(grew >= 0.2 - 2.0 / USER_HZ, "the load tool's own time grew by {grew} s");
    }

    #[test]
    fn thread_kinds_leave_off_the_number() {
        assert_eq!(thread_kind("tempora-http-12"), "tempora-http");
        assert_eq!(thread_kind("tempora-writer"), "tempora-writer");
        assert_eq!(thread_kind("thrd-tantivy-index0"), "thrd-tantivy-index");
        assert_eq!(thread_kind("42"), "");
    }

    #[test]
    fn disk_time_is_the_tenth_statistic_of_real_devices() {
        let stats = "   7       0 loop0 5 0 0 0 0 0 0 0 0 99 0 0 0 0 0 0 0\n \
                     254       0 vda 4197779 98518 160187186 80419669 9109049 1166721 573164440 15763736 0 2379944 96422338\n \
                     254       1 vda1 10 0 80 4 0 0 0 0 0 12 4\n \
                     253       0 zram0 0 0 0 0 0 0 0 0 0 77 0\n";
        assert_eq!(io_ms_in(stats), vec![("vda".to_string(), 2379944), ("vda1".to_string(), 12)]);
    }

    #[test]
    fn busy_is_the_busiest_disk_and_the_cores_over_the_time_between() {
        let t0 = std::time::Instant::now();
        let earlier = Activity { at: Some(t0), busy_ticks: Some(1000), io_ms: vec![("a".into(), 100), ("b".into(), 0)] };
        let later = Activity {
            at: Some(t0 + std::time::Duration::from_secs(2)),
            busy_ticks: Some(1300),
            io_ms: vec![("a".into(), 600), ("b".into(), 1800), ("new".into(), 5000)],
        };
        let busy = later.since(&earlier);
        assert!((busy.cores - 1.5).abs() < 1e-9, "{busy:?}");
        assert!((busy.disk - 0.9).abs() < 1e-9, "{busy:?}: b was busy 1.8 s of 2; a device seen once does not count");
        assert_eq!(Activity::default().since(&earlier), Busy::default());
    }

    #[test]
    fn dirty_is_dirty_plus_writeback() {
        let meminfo = "MemTotal: 100 kB\nDirty:  300 kB\nWriteback:  20 kB\nWritebackTmp: 5 kB\n";
        assert_eq!(dirty_bytes_in(meminfo), Some(320 * 1024));
        assert_eq!(dirty_bytes_in("MemTotal: 1 kB\n"), None);
        assert!(dirty_bytes().is_some(), "this machine's /proc/meminfo");
    }

    #[test]
    fn cached_bytes_counts_the_pages_read_and_not_the_holes() {
        use std::io::{Read, Write};
        let dir = std::env::temp_dir().join(format!("tempora-load-cached-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert_eq!(cached_bytes(&dir).unwrap(), 0, "no files");
        // Written and read back: every page in the cache.
        let read = dir.join("sub/read");
        std::fs::File::create(&read).unwrap().write_all(&vec![7u8; 1 << 20]).unwrap();
        std::fs::File::open(&read).unwrap().read_to_end(&mut Vec::new()).unwrap();
        // A hole never written nor read: nothing in the cache.
        std::fs::File::create(dir.join("hole")).unwrap().set_len(4 << 20).unwrap();
        std::fs::File::create(dir.join("empty")).unwrap();
        assert_eq!(cached_bytes(&dir).unwrap(), 1 << 20);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn warm_reads_every_file_once() {
        let dir = std::env::temp_dir().join(format!("tempora-load-warm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/one"), vec![1u8; (1 << 20) + 3]).unwrap();
        std::fs::write(dir.join("two"), b"xy").unwrap();
        assert_eq!(warm(&dir).unwrap(), (1 << 20) + 5);
        assert_eq!(cached_bytes(&dir).unwrap(), (1 << 20) + 2 * page_size(), "both files' pages, the last ones partial");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn no_wait_when_the_limit_is_zero() {
        assert!(settle(std::time::Duration::ZERO).await < 0.5);
    }
}
