//! Order-preserving key encodings.
//!
//! Every index in the engine is a range of keys in an ordered key-value store
//! that compares keys as raw bytes. For a range scan to mean anything, the
//! byte order of an encoded key must equal the logical order of the values it
//! was built from. This module is the only place that knows how values become
//! key bytes, and `tests/codec.rs` proves with proptest that
//! `a.cmp(b) == enc(a).cmp(enc(b))` and that decoding inverts encoding.
//!
//! Encodings:
//! - `u64`/`u32`: big-endian, fixed width.
//! - `i64`: big-endian with the sign bit flipped, so negatives sort first.
//! - descending `u64`: bitwise NOT, so the largest value sorts first.
//! - byte strings: "escaped and terminated": every `0x00` byte becomes
//!   `0x00 0xFF` and the string ends with `0x00 0x01`. The terminator sorts
//!   below any escaped byte, so a string sorts before every longer string it is
//!   a prefix of, and no encoded string is a prefix of another encoded string.
//!   A length prefix would break ordering ("b" < "aa" by length); this does not.
//! - UUIDs: their 16 raw bytes (UUIDv7 bytes sort by creation time).

use std::fmt;

/// Error for a key that does not decode: a corrupted or foreign key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDecodeError(pub &'static str);

impl fmt::Display for KeyDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed key: {}", self.0)
    }
}

impl std::error::Error for KeyDecodeError {}

const ESC: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const TERMINATOR: u8 = 0x01;

/// Builds a composite key by appending encoded components in order.
#[derive(Debug, Default, Clone)]
pub struct KeyBuf(Vec<u8>);

impl KeyBuf {
    pub fn new() -> Self {
        KeyBuf(Vec::with_capacity(64))
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// Descending order: larger values sort first.
    pub fn u64_desc(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&(!v).to_be_bytes());
        self
    }
    pub fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&encode_i64(v));
        self
    }
    pub fn bytes(mut self, v: &[u8]) -> Self {
        encode_bytes_into(v, &mut self.0);
        self
    }
    pub fn str(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }
    pub fn raw(mut self, v: &[u8]) -> Self {
        self.0.extend_from_slice(v);
        self
    }
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

pub fn encode_i64(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1u64 << 63)).to_be_bytes()
}

pub fn decode_i64(b: [u8; 8]) -> i64 {
    (u64::from_be_bytes(b) ^ (1u64 << 63)) as i64
}

/// Appends the escaped-and-terminated form of `v` to `out`.
pub fn encode_bytes_into(v: &[u8], out: &mut Vec<u8>) {
    out.reserve(v.len() + 2);
    for &b in v {
        if b == ESC {
            out.push(ESC);
            out.push(ESCAPED_ZERO);
        } else {
            out.push(b);
        }
    }
    out.push(ESC);
    out.push(TERMINATOR);
}

pub fn encode_bytes(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() + 2);
    encode_bytes_into(v, &mut out);
    out
}

/// Reads a key back component by component.
pub struct KeyReader<'a> {
    buf: &'a [u8],
}

impl<'a> KeyReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        KeyReader { buf }
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N], KeyDecodeError> {
        if self.buf.len() < N {
            return Err(KeyDecodeError("truncated fixed-width component"));
        }
        let (head, tail) = self.buf.split_at(N);
        self.buf = tail;
        Ok(head.try_into().expect("length checked"))
    }
    pub fn u32(&mut self) -> Result<u32, KeyDecodeError> {
        Ok(u32::from_be_bytes(self.take::<4>()?))
    }
    pub fn u64(&mut self) -> Result<u64, KeyDecodeError> {
        Ok(u64::from_be_bytes(self.take::<8>()?))
    }
    pub fn u64_desc(&mut self) -> Result<u64, KeyDecodeError> {
        Ok(!u64::from_be_bytes(self.take::<8>()?))
    }
    pub fn i64(&mut self) -> Result<i64, KeyDecodeError> {
        Ok(decode_i64(self.take::<8>()?))
    }
    pub fn raw16(&mut self) -> Result<[u8; 16], KeyDecodeError> {
        self.take::<16>()
    }
    pub fn bytes(&mut self) -> Result<Vec<u8>, KeyDecodeError> {
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            let b = *self
                .buf
                .get(i)
                .ok_or(KeyDecodeError("unterminated string component"))?;
            if b == ESC {
                match self.buf.get(i + 1) {
                    Some(&ESCAPED_ZERO) => out.push(0),
                    Some(&TERMINATOR) => {
                        self.buf = &self.buf[i + 2..];
                        return Ok(out);
                    }
                    _ => return Err(KeyDecodeError("bad escape in string component")),
                }
                i += 2;
            } else {
                out.push(b);
                i += 1;
            }
        }
    }
    pub fn string(&mut self) -> Result<String, KeyDecodeError> {
        String::from_utf8(self.bytes()?).map_err(|_| KeyDecodeError("string component is not UTF-8"))
    }
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The smallest key greater than every key that starts with `prefix`, or `None`
/// when no such key exists (the prefix is all `0xFF`). Used as the exclusive
/// end of a prefix scan.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last != 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

/// The exclusive end of a scan of every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> std::ops::Bound<Vec<u8>> {
    match prefix_successor(prefix) {
        Some(end) => std::ops::Bound::Excluded(end),
        None => std::ops::Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_sort_like_their_bytes() {
        let a = encode_bytes(b"b");
        let b = encode_bytes(b"aa");
        assert!(b < a, "\"aa\" must sort before \"b\"");
        assert!(encode_bytes(b"a") < encode_bytes(b"a\0"));
        assert!(encode_bytes(b"a\0") < encode_bytes(b"a\x01"));
    }

    #[test]
    fn prefix_successor_bounds_a_prefix() {
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
