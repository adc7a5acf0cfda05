//! Vectors kept durably in the engine, as opaque aux records.
//!
//! | key | value |
//! |---|---|
//! | `E\|h` | header: JSON `{"model", "dimensions", "dims"}`: what the vectors were made with |
//! | `E\|w` | watermark: the highest transaction whose asserted facts all have a vector (u64, big-endian) |
//! | `V\|` tenant `\|` fact id (16 bytes) | the vector: `dims` f32, little-endian |
//!
//! A batch of vectors and the watermark that covers them are written in one
//! atomic, synced batch, so after any crash the store holds a vector for
//! every fact up to the watermark.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use crate::store::{MemoryStore, FactId, Tx};

pub const HEADER_KEY: &[u8] = b"E|h";
pub const WATERMARK_KEY: &[u8] = b"E|w";
pub const VECTOR_PREFIX: &[u8] = b"V|";
/// Keys deleted per batch when the vectors are dropped.
const DELETE_CHUNK: usize = 10_000;

/// What the stored vectors were made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub model: String,
    /// The `dimensions` asked of the endpoint, if any.
    pub dimensions: Option<u32>,
    /// The length of the stored vectors (`None` before the first).
    pub dims: Option<usize>,
}

pub fn vector_key(tenant: &str, id: FactId) -> Vec<u8> {
    let mut k = Vec::with_capacity(VECTOR_PREFIX.len() + tenant.len() + 17);
    k.extend_from_slice(VECTOR_PREFIX);
    k.extend_from_slice(tenant.as_bytes());
    k.push(b'|');
    k.extend_from_slice(&id.as_u128().to_be_bytes());
    k
}

/// `(tenant, id)` of a vector key.
pub fn parse_vector_key(key: &[u8]) -> Option<(String, FactId)> {
    let rest = key.strip_prefix(VECTOR_PREFIX)?;
    if rest.len() < 18 {
        return None;
    }
    let (head, id) = rest.split_at(rest.len() - 16);
    let tenant = head.strip_suffix(b"|")?;
    let id = FactId::from_u128(u128::from_be_bytes(id.try_into().ok()?));
    Some((String::from_utf8(tenant.to_vec()).ok()?, id))
}

pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn decode_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

pub fn read_header(engine: &dyn MemoryStore) -> Result<Option<Header>> {
    match engine.aux_get(HEADER_KEY)? {
        None => Ok(None),
        Some(b) => Ok(Some(serde_json::from_slice(&b).context("unreadable embeddings header")?)),
    }
}

pub fn header_record(h: &Header) -> (Vec<u8>, Vec<u8>) {
    (HEADER_KEY.to_vec(), serde_json::to_vec(h).expect("the header serializes"))
}

pub fn read_watermark(engine: &dyn MemoryStore) -> Result<Tx> {
    match engine.aux_get(WATERMARK_KEY)? {
        None => Ok(0),
        Some(b) => match <[u8; 8]>::try_from(b.as_slice()) {
            Ok(a) => Ok(u64::from_be_bytes(a)),
            Err(_) => bail!("unreadable embeddings watermark ({} bytes)", b.len()),
        },
    }
}

pub fn watermark_record(tx: Tx) -> (Vec<u8>, Vec<u8>) {
    (WATERMARK_KEY.to_vec(), tx.to_be_bytes().to_vec())
}

/// Every stored vector: `f(tenant, id, vector)`. Records that cannot be
/// read (or of another length than `dims`) are skipped and counted.
pub fn scan_vectors(engine: &dyn MemoryStore, dims: Option<usize>, mut f: impl FnMut(String, FactId, Vec<f32>)) -> Result<usize> {
    let mut bad = 0;
    engine.aux_scan(VECTOR_PREFIX, &mut |k, v| {
        match (parse_vector_key(k), decode_vector(v)) {
            (Some((tenant, id)), Some(vec)) if dims.is_none_or(|d| d == vec.len()) && !vec.is_empty() => {
                f(tenant, id, vec)
            }
            _ => bad += 1,
        }
        true
    })?;
    Ok(bad)
}

/// Drops every vector and the watermark and writes `header`: the next
/// catch-up embeds every fact again.
pub fn reset(engine: &dyn MemoryStore, header: &Header) -> Result<usize> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    engine.aux_scan(VECTOR_PREFIX, &mut |k, _| {
        keys.push(k.to_vec());
        true
    })?;
    let n = keys.len();
    for chunk in keys.chunks(DELETE_CHUNK) {
        engine.aux_delete_many(chunk.to_vec())?;
    }
    engine.aux_delete_many(vec![WATERMARK_KEY.to_vec()])?;
    engine.aux_put_many(vec![header_record(header)])?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_vectors_round_trip() {
        let id = FactId::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        for tenant in ["default", "a", "with|bar"] {
            let k = vector_key(tenant, id);
            assert!(k.starts_with(VECTOR_PREFIX));
            assert_eq!(parse_vector_key(&k), Some((tenant.to_string(), id)));
        }
        assert_eq!(parse_vector_key(b"V|short"), None);
        assert_eq!(parse_vector_key(b"E|w"), None);
        let v = vec![0.5f32, -1.25, 3.0e-7, 0.0];
        let b = encode_vector(&v);
        assert_eq!(b.len(), 16);
        assert_eq!(&b[..4], &0.5f32.to_le_bytes());
        assert_eq!(decode_vector(&b).unwrap(), v);
        assert_eq!(decode_vector(&[1, 2, 3]), None);
    }

    #[test]
    fn durable_records_and_reset() {
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::store::embedded::Engine::open(crate::store::embedded::EngineConfig::at(dir.path())).unwrap();
        assert_eq!(read_watermark(&engine).unwrap(), 0);
        assert_eq!(read_header(&engine).unwrap(), None);
        let h = Header { model: "m".into(), dimensions: None, dims: Some(2) };
        let id = FactId::from_u128(7);
        engine
            .aux_put_many(vec![
                header_record(&h),
                (vector_key("t", id), encode_vector(&[1.0, 0.0])),
                (vector_key("t", FactId::from_u128(8)), encode_vector(&[1.0, 0.0, 0.0])),
                watermark_record(42),
            ])
            .unwrap();
        assert_eq!(read_watermark(&engine).unwrap(), 42);
        assert_eq!(read_header(&engine).unwrap(), Some(h.clone()));
        let mut seen = Vec::new();
        let bad = scan_vectors(&engine, Some(2), |t, i, v| seen.push((t, i, v))).unwrap();
        assert_eq!(bad, 1, "the 3-float vector is skipped");
        assert_eq!(seen, vec![("t".to_string(), id, vec![1.0, 0.0])]);
        let h2 = Header { model: "other".into(), dimensions: None, dims: None };
        assert_eq!(reset(&engine, &h2).unwrap(), 2);
        assert_eq!(read_watermark(&engine).unwrap(), 0);
        assert_eq!(read_header(&engine).unwrap(), Some(h2));
        assert_eq!(scan_vectors(&engine, None, |_, _, _| panic!("no vectors left")).unwrap(), 0);
        engine.close();
    }
}
