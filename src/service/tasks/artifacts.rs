//! Artifact contents, kept in the store's aux records next to the facts (so they share its durability, backups and tenancy): the bytes are
//! cut into chunks of [`CHUNK`] bytes under
//! `ap/artifact/<tenant>\0<artifact id>\0<chunk index, big-endian u32>`.
//! All chunks of an artifact are written in one atomic batch, and its
//! metadata facts only after that, so an artifact is listed only once all
//! of its bytes are stored. Downloads stream the chunks one by one.

use super::store::{self, Artifact, Facts};
use crate::memory::blocking;
use crate::service::{Service, ServiceError};
use serde_json::json;

/// Bytes per stored chunk.
pub const CHUNK: usize = 64 * 1024;
/// Longest file name or relative path, in bytes.
const MAX_NAME: usize = 1024;

fn chunk_key(tenant: &str, artifact: &str, index: u32) -> Vec<u8> {
    let mut k = b"ap/artifact/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(artifact.as_bytes());
    k.push(0);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// The key of a task's chat context (where its conversation continues).
pub fn context_key(tenant: &str, task: &str) -> Vec<u8> {
    let mut k = b"ap/context/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(task.as_bytes());
    k
}

/// The most an artifact may hold: the server's `max_body_bytes`.
pub fn max_bytes(st: &Service) -> usize {
    st.limits.max_body_bytes
}

/// A relative path as the protocol allows it: no `..` component, not
/// absolute, no control characters. Empty means none.
pub fn check_relative_path(p: &str) -> Result<Option<String>, ServiceError> {
    let p = p.trim();
    if p.is_empty() {
        return Ok(None);
    }
    check_path("relative_path", p)?;
    Ok(Some(p.to_string()))
}

fn check_path(what: &str, p: &str) -> Result<(), ServiceError> {
    let refuse = |why: &str| Err(ServiceError::invalid(format!("{what} {p:?} is refused: {why}")));
    if p.len() > MAX_NAME {
        return refuse(&format!("longer than {MAX_NAME} bytes"));
    }
    if p.chars().any(char::is_control) {
        return refuse("it contains control characters");
    }
    let bytes = p.as_bytes();
    if p.starts_with('/')
        || p.starts_with('\\')
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return refuse("absolute paths are not allowed");
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return refuse("'..' is not allowed");
    }
    Ok(())
}

/// The file name an artifact is stored under: the last component of what
/// the client sent, after the same checks as a relative path.
pub fn check_file_name(name: &str) -> Result<String, ServiceError> {
    let name = name.trim();
    check_path("file name", name)?;
    let base = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
    if base.is_empty() || base == "." {
        return Err(ServiceError::invalid(format!("file name {name:?} names no file")));
    }
    Ok(base.to_string())
}

/// Stores `bytes` as a new artifact of `task_id` (made by `step_id`, when
/// given) and returns it: the chunks first, then the facts.
pub async fn create(
    st: &Service,
    tenant: &str,
    task_id: &str,
    step_id: Option<&str>,
    file_name: String,
    relative_path: Option<String>,
    chunks: Vec<Vec<u8>>,
) -> Result<Artifact, ServiceError> {
    let id = store::new_id();
    let size: usize = chunks.iter().map(Vec::len).sum();
    if size > max_bytes(st) {
        return Err(ServiceError::TooLarge(format!("the artifact is larger than {} bytes", max_bytes(st))));
    }
    let n = chunks.len();
    let records: Vec<(Vec<u8>, Vec<u8>)> =
        chunks.into_iter().enumerate().map(|(i, c)| (chunk_key(tenant, &id, i as u32), c)).collect();
    let engine = st.memory.store().clone();
    blocking(move || engine.aux_put_many(records)).await?;
    let subject = store::artifact_subject(&id);
    let mut facts = Facts::of_task(task_id);
    facts
        .set(&subject, "artifact.task", json!(store::task_subject(task_id)))
        .set(&subject, "artifact.step", json!(step_id.map(store::step_subject)))
        .set(&subject, "artifact.file_name", json!(file_name))
        .set(&subject, "artifact.relative_path", json!(relative_path))
        .set(&subject, "artifact.agent_created", json!(step_id.is_some()))
        .set(&subject, "artifact.size", json!(size))
        .set(&subject, "artifact.chunks", json!(n));
    store::write(st, tenant, facts).await?;
    Ok(Artifact {
        id,
        task_id: task_id.to_string(),
        step_id: step_id.map(String::from),
        file_name,
        relative_path,
        agent_created: step_id.is_some(),
        size: size as u64,
        chunks: n as u64,
    })
}

/// Cuts bytes into stored chunks.
pub fn chunked(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.chunks(CHUNK).map(<[u8]>::to_vec).collect()
}

/// Collects chunks of [`CHUNK`] bytes from pieces of any size.
#[derive(Default)]
pub struct Chunker {
    pub done: Vec<Vec<u8>>,
    open: Vec<u8>,
    pub size: usize,
}

impl Chunker {
    pub fn push(&mut self, mut piece: &[u8]) {
        self.size += piece.len();
        while !piece.is_empty() {
            let room = CHUNK - self.open.len();
            let (now, later) = piece.split_at(room.min(piece.len()));
            self.open.extend_from_slice(now);
            piece = later;
            if self.open.len() == CHUNK {
                self.done.push(std::mem::take(&mut self.open));
            }
        }
    }
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        if !self.open.is_empty() {
            self.done.push(self.open);
        }
        self.done
    }
}

/// The artifact's bytes, read chunk by chunk as the stream is polled. A
/// chunk that cannot be read ends the stream with the error.
pub fn read(st: &Service, tenant: &str, a: &Artifact) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> {
    let store = st.memory.store().clone();
    let (tenant, id, n) = (tenant.to_string(), a.id.clone(), a.chunks as u32);
    futures_util::stream::unfold(0u32, move |i| {
        let (store, key) = (store.clone(), chunk_key(&tenant, &id, i));
        async move {
            if i >= n {
                return None;
            }
            let got = blocking(move || store.aux_get(&key)).await;
            let item = match got {
                Ok(Some(bytes)) => Ok(bytes),
                Ok(None) => Err(std::io::Error::other("an artifact chunk is missing")),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            // After an error the stream ends (the connection is cut short).
            let next = if item.is_ok() { i + 1 } else { n };
            Some((item, next))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_and_absolute_paths_are_refused() {
        for bad in ["../x", "a/../../x", "/etc/passwd", "\\windows", "C:\\x", "a\\..\\b", "a\nb"] {
            assert!(check_relative_path(bad).is_err(), "{bad}");
            assert!(check_file_name(bad).is_err(), "{bad}");
        }
        assert_eq!(check_relative_path("python/code/").unwrap().as_deref(), Some("python/code/"));
        assert_eq!(check_relative_path(" ").unwrap(), None);
        assert_eq!(check_file_name("dir/main.py").unwrap(), "main.py");
        assert!(check_file_name("dir/").is_err());
    }

    #[test]
    fn the_chunker_cuts_at_chunk_boundaries() {
        let mut c = Chunker::default();
        let data: Vec<u8> = (0..(CHUNK * 2 + 10)).map(|i| i as u8).collect();
        for piece in data.chunks(1000) {
            c.push(piece);
        }
        let chunks = c.finish();
        assert_eq!(chunks.iter().map(Vec::len).collect::<Vec<_>>(), [CHUNK, CHUNK, 10]);
        assert_eq!(chunks.concat(), data);
    }
}
