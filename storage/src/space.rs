//! Refusing writes before the disk refuses them.
//!
//! sled treats an I/O error while writing its log as fatal: after one
//! `ENOSPC` or `EROFS` every later write of that process fails, even once
//! space is back. So the engine checks the data directory's filesystem before
//! it queues a write, and refuses the write itself while free space is below
//! a reserve or the filesystem is mounted read-only. Such a refusal changes
//! nothing, and writes resume on their own when space returns. Only a write
//! that gets past the check and still fails (another process filled the disk
//! in between) stops the store; [`Health`] then remembers why, so every later
//! write is refused with the cause instead of a backend error, until restart.

use crate::error::StorageError;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};

/// The free-space and read-only check of one data directory.
#[derive(Debug, Clone)]
pub struct DiskGuard {
    dir: PathBuf,
    /// Bytes that must stay free; 0 checks only for a read-only mount.
    reserve: u64,
}

impl DiskGuard {
    pub fn new(dir: &Path, reserve: u64) -> DiskGuard {
        DiskGuard { dir: dir.to_path_buf(), reserve }
    }

    /// `Ok` when a write may go ahead. One `statvfs` call (about a
    /// microsecond), so it runs on every write.
    pub fn check(&self) -> Result<(), StorageError> {
        let Some(fs) = statvfs(&self.dir) else {
            // Cannot tell: let the write try; the store reports what fails.
            return Ok(());
        };
        if fs.read_only {
            return Err(StorageError::ReadOnly(self.dir.display().to_string()));
        }
        if fs.available < self.reserve {
            return Err(StorageError::NoSpace { free: fs.available, reserve: self.reserve });
        }
        Ok(())
    }
}

struct FsState {
    /// Bytes an unprivileged process may still write.
    available: u64,
    read_only: bool,
}

#[cfg(unix)]
fn statvfs(dir: &Path) -> Option<FsState> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid NUL-terminated string and `st` a writable
    // statvfs; the call only writes into `st`.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(FsState {
        available: (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
        read_only: st.f_flag & libc::ST_RDONLY != 0,
    })
}

#[cfg(not(unix))]
fn statvfs(_dir: &Path) -> Option<FsState> {
    None
}

/// Whether the store still takes writes: set for good (until the process
/// restarts) by the first write the backend failed.
#[derive(Debug, Default)]
pub struct Health {
    failed: Mutex<Option<String>>,
}

impl Health {
    /// Records that the backend failed a write with `cause`; the first cause
    /// is kept.
    pub fn fail(&self, cause: &StorageError) {
        let mut f = self.failed.lock();
        if f.is_none() {
            tracing::error!(error = %cause, "the store failed a write; further writes are refused until restart");
            *f = Some(cause.to_string());
        }
    }

    pub fn check(&self) -> Result<(), StorageError> {
        match &*self.failed.lock() {
            Some(cause) => Err(StorageError::Failed(cause.clone())),
            None => Ok(()),
        }
    }

    /// Why writes are refused, if they are.
    pub fn failure(&self) -> Option<String> {
        self.failed.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_directory_passes_and_an_impossible_reserve_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DiskGuard::new(dir.path(), 0).check().is_ok());
        match DiskGuard::new(dir.path(), u64::MAX).check() {
            Err(StorageError::NoSpace { reserve, free }) => {
                assert_eq!(reserve, u64::MAX);
                assert!(free < u64::MAX);
            }
            other => panic!("expected NoSpace, got {other:?}"),
        }
    }

    #[test]
    fn health_keeps_the_first_cause() {
        let h = Health::default();
        assert!(h.check().is_ok());
        h.fail(&StorageError::Backend("first".into()));
        h.fail(&StorageError::Backend("second".into()));
        match h.check() {
            Err(StorageError::Failed(c)) => assert!(c.contains("first"), "{c}"),
            other => panic!("expected Failed, got {other:?}"),
        }
    }
}
