//! The allocator's own account of the heap, for `/metrics`.
//!
//! Resident memory alone cannot tell a growing data structure from an
//! allocator holding on to freed pages; jemalloc can: `allocated` is what
//! the program holds, `resident` what jemalloc has in physical pages
//! (allocated plus fragmentation, metadata and dirty pages not yet returned),
//! `retained` address space it keeps mapped but has given back to the kernel.

/// Bytes, as jemalloc counts them at the moment of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapStats {
    pub allocated: u64,
    pub active: u64,
    pub metadata: u64,
    pub resident: u64,
    pub retained: u64,
}

/// The figures, or `None` when jemalloc is not the allocator (a test
/// binary, or a target where the server runs on the system allocator): its
/// statistics then read zero.
pub fn stats() -> Option<HeapStats> {
    #[cfg(not(target_env = "msvc"))]
    {
        use tikv_jemalloc_ctl::{epoch, stats};
        // The statistics are cached per epoch; advancing refreshes them.
        epoch::advance().ok()?;
        let s = HeapStats {
            allocated: stats::allocated::read().ok()? as u64,
            active: stats::active::read().ok()? as u64,
            metadata: stats::metadata::read().ok()? as u64,
            resident: stats::resident::read().ok()? as u64,
            retained: stats::retained::read().ok()? as u64,
        };
        (s.allocated > 0).then_some(s)
    }
    #[cfg(target_env = "msvc")]
    {
        None
    }
}
