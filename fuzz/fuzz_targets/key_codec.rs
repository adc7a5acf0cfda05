//! The order-preserving key codec (`tempora_storage::codec`) and the key
//! decoders of `tempora_storage::keys`.
//!
//! The input is a script of components (a tag byte, then its payload),
//! encoded with `KeyBuf` and read back with `KeyReader`: every component must
//! come back, and the key must be used up. Byte-string components are also
//! checked pairwise for order: `a < b` exactly when `enc(a) < enc(b)`. The
//! raw input is then given to every decoder, which may refuse it but must not
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tempora_storage::codec::{encode_bytes, KeyBuf, KeyReader};
use tempora_storage::keys;

#[derive(Debug, PartialEq)]
enum Part {
    U32(u32),
    U64(u64),
    U64Desc(u64),
    I64(i64),
    Bytes(Vec<u8>),
    Raw16([u8; 16]),
}

fn take<const N: usize>(data: &mut &[u8]) -> Option<[u8; N]> {
    let head = data.get(..N)?.try_into().ok()?;
    *data = &data[N..];
    Some(head)
}

/// Reads the script: each component is a tag byte and its payload; a
/// byte string is a length byte and that many bytes.
fn script(mut data: &[u8]) -> Vec<Part> {
    let mut parts = Vec::new();
    while let Some([tag]) = take::<1>(&mut data) {
        let part = match tag % 6 {
            0 => take::<4>(&mut data).map(|b| Part::U32(u32::from_be_bytes(b))),
            1 => take::<8>(&mut data).map(|b| Part::U64(u64::from_le_bytes(b))),
            2 => take::<8>(&mut data).map(|b| Part::U64Desc(u64::from_le_bytes(b))),
            3 => take::<8>(&mut data).map(|b| Part::I64(i64::from_le_bytes(b))),
            4 => take::<1>(&mut data).map(|[n]| {
                let n = (n as usize).min(data.len());
                let (s, rest) = data.split_at(n);
                data = rest;
                Part::Bytes(s.to_vec())
            }),
            _ => take::<16>(&mut data).map(Part::Raw16),
        };
        match part {
            Some(p) => parts.push(p),
            None => break,
        }
    }
    parts
}

fn roundtrip(parts: &[Part]) {
    let mut buf = KeyBuf::new();
    for p in parts {
        buf = match p {
            Part::U32(v) => buf.u32(*v),
            Part::U64(v) => buf.u64(*v),
            Part::U64Desc(v) => buf.u64_desc(*v),
            Part::I64(v) => buf.i64(*v),
            Part::Bytes(v) => buf.bytes(v),
            Part::Raw16(v) => buf.raw(v),
        };
    }
    let key = buf.finish();
    let mut r = KeyReader::new(&key);
    for p in parts {
        let back = match p {
            Part::U32(_) => Part::U32(r.u32().expect("u32 decodes")),
            Part::U64(_) => Part::U64(r.u64().expect("u64 decodes")),
            Part::U64Desc(_) => Part::U64Desc(r.u64_desc().expect("u64_desc decodes")),
            Part::I64(_) => Part::I64(r.i64().expect("i64 decodes")),
            Part::Bytes(_) => Part::Bytes(r.bytes().expect("bytes decode")),
            Part::Raw16(_) => Part::Raw16(r.raw16().expect("raw16 decodes")),
        };
        assert_eq!(&back, p);
    }
    assert!(r.is_empty(), "the key has bytes left after its components");
}

fn order(parts: &[Part]) {
    let strings: Vec<&Vec<u8>> =
        parts.iter().filter_map(|p| if let Part::Bytes(b) = p { Some(b) } else { None }).collect();
    for pair in strings.windows(2) {
        assert_eq!(pair[0].cmp(pair[1]), encode_bytes(pair[0]).cmp(&encode_bytes(pair[1])), "{pair:?}");
    }
    let ints: Vec<i64> = parts.iter().filter_map(|p| if let Part::I64(v) = p { Some(*v) } else { None }).collect();
    for pair in ints.windows(2) {
        let enc = |v: i64| KeyBuf::new().i64(v).finish();
        assert_eq!(pair[0].cmp(&pair[1]), enc(pair[0]).cmp(&enc(pair[1])), "{pair:?}");
    }
}

/// Every decoder of stored keys, on bytes that may be anything.
fn decoders(data: &[u8]) {
    let mut r = KeyReader::new(data);
    while r.bytes().is_ok() {}
    let mut r = KeyReader::new(data);
    let _ = r.string();
    let _ = r.u64_desc();
    let _ = r.rest();
    let _ = keys::meta::tenant_of(data);
    let _ = keys::meta::tenant_name_of(data);
    let _ = keys::decode_version_tx(data);
    let _ = keys::decode_valid_id(data);
    let _ = keys::decode_ps(data);
    let _ = keys::decode_os(data);
    let _ = keys::decode_log_tx(data);
    let _ = keys::tenant_of_index_key(data);
    if let Some(succ) = tempora_storage::codec::prefix_successor(data) {
        assert!(succ.as_slice() > data && !succ.starts_with(data));
    }
}

fuzz_target!(|data: &[u8]| {
    let parts = script(data);
    roundtrip(&parts);
    order(&parts);
    decoders(data);
});
