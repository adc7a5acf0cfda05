//! Property tests of the order-preserving key codec (`tempora_storage::codec`).
//!
//! Every index of the engine is a range scan over keys compared as raw bytes,
//! so the engine is only correct if, for every component type and for
//! composite keys, `a.cmp(&b) == enc(a).cmp(&enc(b))` and decoding inverts
//! encoding. Byte-string strategies are biased towards 0x00, 0x01 and 0xFF
//! (the escape, terminator and escaped-zero bytes) and towards short strings,
//! so prefix relations and escape sequences come up in almost every case.

use proptest::prelude::*;
use std::cmp::Ordering;
use tempora_storage::codec::{
    decode_i64, encode_bytes, encode_bytes_into, encode_i64, prefix_successor, KeyBuf, KeyReader,
};

// ---- strategies -------------------------------------------------------------

/// A byte that is often one of the codec's special bytes.
fn tricky_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        3 => Just(0x00u8),
        2 => Just(0x01u8),
        3 => Just(0xFFu8),
        1 => Just(0xFEu8),
        1 => Just(0x02u8),
        1 => Just(b'a'),
        1 => Just(b'b'),
        4 => any::<u8>(),
    ]
}

fn bytes_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(tricky_byte(), 0..8),
        prop::collection::vec(any::<u8>(), 0..40),
    ]
}

/// Pairs of byte strings where one is often a prefix of the other or they
/// share a long common prefix.
fn related_bytes() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    prop_oneof![
        (bytes_strategy(), bytes_strategy()),
        (bytes_strategy(), bytes_strategy(), bytes_strategy()).prop_map(|(p, a, b)| {
            let mut x = p.clone();
            x.extend(a);
            let mut y = p;
            y.extend(b);
            (x, y)
        }),
        (bytes_strategy(), bytes_strategy()).prop_map(|(p, a)| {
            let mut x = p.clone();
            x.extend(a);
            (p, x)
        }),
    ]
}

/// Strings with NUL, control and multi-byte characters, short enough that
/// equal and prefix-related strings are common.
fn string_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[\u{0}\u{1}ab\u{7f}\u{ff}\u{e9}\u{10ffff}]{0,5}",
        any::<String>(),
    ]
}

fn u64_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        Just(0u64),
        Just(u64::MAX),
        0u64..300,
        (u64::MAX - 300)..=u64::MAX,
    ]
}

fn i64_strategy() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        Just(0i64),
        Just(i64::MIN),
        Just(i64::MAX),
        -300i64..300,
    ]
}

type Composite = (u32, String, String, [u8; 16]);

fn composite_strategy() -> impl Strategy<Value = Composite> {
    (
        prop_oneof![0u32..3, any::<u32>()],
        string_strategy(),
        string_strategy(),
        prop_oneof![Just([0u8; 16]), Just([0xFFu8; 16]), any::<[u8; 16]>()],
    )
}

/// Pairs of composites that often share leading components.
fn composite_pair() -> impl Strategy<Value = (Composite, Composite)> {
    (composite_strategy(), composite_strategy(), 0usize..4).prop_map(|(a, mut b, shared)| {
        if shared >= 1 {
            b.0 = a.0;
        }
        if shared >= 2 {
            b.1 = a.1.clone();
        }
        if shared >= 3 {
            b.2 = a.2.clone();
        }
        (a, b)
    })
}

fn enc_u64(v: u64) -> Vec<u8> {
    KeyBuf::new().u64(v).finish()
}
fn enc_u64_desc(v: u64) -> Vec<u8> {
    KeyBuf::new().u64_desc(v).finish()
}
fn enc_i64(v: i64) -> Vec<u8> {
    KeyBuf::new().i64(v).finish()
}
fn enc_composite(c: &Composite) -> Vec<u8> {
    KeyBuf::new().u32(c.0).str(&c.1).str(&c.2).raw(&c.3).finish()
}

/// The logical order of a composite: components compared in turn, strings
/// by their bytes.
fn cmp_composite(a: &Composite, b: &Composite) -> Ordering {
    a.0.cmp(&b.0)
        .then_with(|| a.1.as_bytes().cmp(b.1.as_bytes()))
        .then_with(|| a.2.as_bytes().cmp(b.2.as_bytes()))
        .then_with(|| a.3.cmp(&b.3))
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 2048, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    // ---- order preservation -------------------------------------------------

    #[test]
    fn u64_order_is_preserved(a in u64_strategy(), b in u64_strategy()) {
        prop_assert_eq!(a.cmp(&b), enc_u64(a).cmp(&enc_u64(b)));
        prop_assert_eq!(enc_u64(a).len(), 8);
    }

    #[test]
    fn u64_desc_order_is_reversed(a in u64_strategy(), b in u64_strategy()) {
        prop_assert_eq!(a.cmp(&b).reverse(), enc_u64_desc(a).cmp(&enc_u64_desc(b)));
        prop_assert_eq!(enc_u64_desc(a).len(), 8);
    }

    #[test]
    fn i64_order_is_preserved(a in i64_strategy(), b in i64_strategy()) {
        prop_assert_eq!(a.cmp(&b), enc_i64(a).cmp(&enc_i64(b)));
        prop_assert_eq!(a.cmp(&b), encode_i64(a).cmp(&encode_i64(b)));
        prop_assert_eq!(enc_i64(a), encode_i64(a).to_vec());
    }

    #[test]
    fn byte_string_order_is_preserved((a, b) in related_bytes()) {
        prop_assert_eq!(a.cmp(&b), encode_bytes(&a).cmp(&encode_bytes(&b)),
            "a={:?} b={:?}", a, b);
        // KeyBuf::bytes and encode_bytes_into produce the same encoding.
        let mut into = vec![0xAA];
        encode_bytes_into(&a, &mut into);
        prop_assert_eq!(&into[1..], &encode_bytes(&a)[..]);
        prop_assert_eq!(KeyBuf::new().bytes(&a).finish(), encode_bytes(&a));
    }

    #[test]
    fn string_order_is_preserved(a in string_strategy(), b in string_strategy()) {
        let ea = KeyBuf::new().str(&a).finish();
        let eb = KeyBuf::new().str(&b).finish();
        prop_assert_eq!(a.cmp(&b), ea.cmp(&eb), "a={:?} b={:?}", a, b);
    }

    #[test]
    fn composite_order_is_preserved((a, b) in composite_pair()) {
        prop_assert_eq!(cmp_composite(&a, &b), enc_composite(&a).cmp(&enc_composite(&b)),
            "a={:?} b={:?}", a, b);
    }

    /// A composite with every fixed-width kind: (i64, bytes, u64_desc, u64).
    #[test]
    fn mixed_composite_order_is_preserved(
        a in (i64_strategy(), bytes_strategy(), u64_strategy(), u64_strategy()),
        b in (i64_strategy(), bytes_strategy(), u64_strategy(), u64_strategy()),
        shared in 0usize..4,
    ) {
        let mut b = b;
        if shared >= 1 { b.0 = a.0; }
        if shared >= 2 { b.1 = a.1.clone(); }
        if shared >= 3 { b.2 = a.2; }
        let enc = |x: &(i64, Vec<u8>, u64, u64)| {
            KeyBuf::new().i64(x.0).bytes(&x.1).u64_desc(x.2).u64(x.3).finish()
        };
        let logical = a.0.cmp(&b.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2).reverse())
            .then_with(|| a.3.cmp(&b.3));
        prop_assert_eq!(logical, enc(&a).cmp(&enc(&b)));
        let key = enc(&a);
        let mut r = KeyReader::new(&key);
        prop_assert_eq!(r.i64().unwrap(), a.0);
        prop_assert_eq!(r.bytes().unwrap(), a.1.clone());
        prop_assert_eq!(r.u64_desc().unwrap(), a.2);
        prop_assert_eq!(r.u64().unwrap(), a.3);
        prop_assert!(r.is_empty());
    }

    // ---- round trips --------------------------------------------------------

    #[test]
    fn u64_round_trips(v in u64_strategy()) {
        let k = enc_u64(v);
        let mut r = KeyReader::new(&k);
        prop_assert_eq!(r.u64().unwrap(), v);
        prop_assert!(r.is_empty());
        let k = enc_u64_desc(v);
        let mut r = KeyReader::new(&k);
        prop_assert_eq!(r.u64_desc().unwrap(), v);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn u32_round_trips_and_orders(a in any::<u32>(), b in any::<u32>()) {
        let ka = KeyBuf::new().u32(a).finish();
        let kb = KeyBuf::new().u32(b).finish();
        prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        let mut r = KeyReader::new(&ka);
        prop_assert_eq!(r.u32().unwrap(), a);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn i64_round_trips(v in i64_strategy()) {
        let k = enc_i64(v);
        let mut r = KeyReader::new(&k);
        prop_assert_eq!(r.i64().unwrap(), v);
        prop_assert!(r.is_empty());
        prop_assert_eq!(decode_i64(encode_i64(v)), v);
    }

    #[test]
    fn byte_string_round_trips(v in bytes_strategy(), tail in bytes_strategy()) {
        let mut k = encode_bytes(&v);
        let encoded_len = k.len();
        // Exactly one escape byte per zero byte, plus the 2-byte terminator.
        prop_assert_eq!(encoded_len, v.len() + v.iter().filter(|b| **b == 0).count() + 2);
        k.extend_from_slice(&tail);
        let mut r = KeyReader::new(&k);
        prop_assert_eq!(r.bytes().unwrap(), v);
        // The reader stops right after the terminator: trailing bytes are left.
        prop_assert_eq!(r.rest(), &tail[..]);
        prop_assert_eq!(r.is_empty(), tail.is_empty());
    }

    #[test]
    fn string_round_trips(v in string_strategy()) {
        let k = KeyBuf::new().str(&v).finish();
        let mut r = KeyReader::new(&k);
        prop_assert_eq!(r.string().unwrap(), v);
        prop_assert!(r.is_empty());
    }

    #[test]
    fn composite_round_trips(c in composite_strategy()) {
        let k = enc_composite(&c);
        let mut r = KeyReader::new(&k);
        prop_assert_eq!(r.u32().unwrap(), c.0);
        prop_assert_eq!(r.string().unwrap(), c.1.clone());
        prop_assert_eq!(r.string().unwrap(), c.2.clone());
        prop_assert_eq!(r.raw16().unwrap(), c.3);
        prop_assert!(r.is_empty());
        prop_assert!(r.rest().is_empty());
        // Reading past the end fails cleanly.
        prop_assert!(r.u32().is_err());
        prop_assert!(r.bytes().is_err());
    }

    // ---- prefix freedom -----------------------------------------------------

    #[test]
    fn no_encoded_string_is_a_prefix_of_another((a, b) in related_bytes()) {
        let (ea, eb) = (encode_bytes(&a), encode_bytes(&b));
        if a != b {
            prop_assert!(!eb.starts_with(&ea), "enc({:?}) is a prefix of enc({:?})", a, b);
            prop_assert!(!ea.starts_with(&eb), "enc({:?}) is a prefix of enc({:?})", b, a);
        } else {
            prop_assert_eq!(ea, eb);
        }
    }

    /// Prefix freedom is what makes a composite prefix scan exact: the keys
    /// starting with enc(u32, s) are exactly the composites with those two
    /// leading components.
    #[test]
    fn composite_prefix_selects_exactly_its_components((a, b) in composite_pair()) {
        let prefix = KeyBuf::new().u32(a.0).str(&a.1).finish();
        let kb = enc_composite(&b);
        prop_assert_eq!(kb.starts_with(&prefix), b.0 == a.0 && b.1 == a.1);
    }

    // ---- prefix_successor ---------------------------------------------------

    #[test]
    fn prefix_successor_bounds_the_prefix_range(
        p in bytes_strategy(),
        suffix in bytes_strategy(),
        cut in 0usize..10,
        tail in bytes_strategy(),
    ) {
        match prefix_successor(&p) {
            None => prop_assert!(p.iter().all(|b| *b == 0xFF), "None for {:?}", p),
            Some(s) => {
                prop_assert!(!s.starts_with(&p), "successor {:?} starts with {:?}", s, p);
                // Greater than every key starting with p.
                let mut inside = p.clone();
                inside.extend(&suffix);
                prop_assert!(inside < s, "{:?} !< successor {:?}", inside, s);
                let mut max_inside = p.clone();
                max_inside.extend([0xFF; 12]);
                prop_assert!(max_inside < s);
                // Not greater than any key above the range: a key near p
                // that does not start with p and sorts after p is >= s.
                let mut outside = p[..p.len().saturating_sub(cut)].to_vec();
                outside.extend(&tail);
                if !outside.starts_with(&p) && outside > p {
                    prop_assert!(s <= outside, "successor {:?} > {:?} (p={:?})", s, outside, p);
                }
                // ... and s itself is such a key: it is the least one.
                prop_assert!(s > p);
            }
        }
    }

    /// Exhaustive over short keys from a small alphabet: s is exactly the
    /// least key that is above every key starting with p.
    #[test]
    fn prefix_successor_is_the_least_upper_key(p in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFEu8), Just(0xFFu8)], 0..4)) {
        let alphabet = [0u8, 1, 0x7F, 0xFE, 0xFF];
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        let mut frontier: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..(p.len() + 1) {
            let mut next = Vec::new();
            for k in &frontier {
                for b in alphabet {
                    let mut k2 = k.clone();
                    k2.push(b);
                    next.push(k2);
                }
            }
            keys.extend(next.iter().cloned());
            frontier = next;
        }
        let s = prefix_successor(&p);
        for k in &keys {
            if k.starts_with(&p) {
                if let Some(s) = &s {
                    prop_assert!(k < s);
                }
            } else if k > &p {
                match &s {
                    Some(s) => prop_assert!(s <= k, "s={:?} k={:?} p={:?}", s, k, p),
                    None => prop_assert!(false, "no successor for {:?} though {:?} lies above", p, k),
                }
            }
        }
    }

    // ---- malformed input ----------------------------------------------------

    /// `KeyReader::bytes` on arbitrary input never panics; it succeeds exactly
    /// when the input starts with a well-formed encoded string, and then
    /// consumes exactly that string.
    #[test]
    fn bytes_reader_rejects_malformed_input(
        input in prop_oneof![
            prop::collection::vec(tricky_byte(), 0..24),
            prop::collection::vec(any::<u8>(), 0..64),
        ]
    ) {
        let mut r = KeyReader::new(&input);
        match r.bytes() {
            Ok(v) => {
                let enc = encode_bytes(&v);
                prop_assert!(input.starts_with(&enc), "decoded {:?} from {:?}", v, input);
                prop_assert_eq!(r.rest(), &input[enc.len()..]);
            }
            Err(_) => {
                // The reader must not have consumed anything it reports.
                prop_assert_eq!(r.rest(), &input[..]);
                prop_assert!(expected_error(&input), "Err on well-formed {:?}", input);
            }
        }
        // The string, fixed-width and raw readers never panic either.
        let _ = KeyReader::new(&input).string();
        let mut r = KeyReader::new(&input);
        let _ = (r.u32(), r.u64(), r.u64_desc(), r.i64(), r.raw16());
    }

    #[test]
    fn unterminated_strings_are_rejected(v in bytes_strategy()) {
        let enc = encode_bytes(&v);
        // Dropping one or both terminator bytes leaves an unterminated string.
        for cut in 1..=2 {
            let truncated = &enc[..enc.len() - cut];
            prop_assert!(KeyReader::new(truncated).bytes().is_err(), "{:?}", truncated);
        }
        // So does any input with no zero byte at all.
        let no_zero: Vec<u8> = v.iter().map(|b| b.max(&1)).copied().collect();
        prop_assert!(KeyReader::new(&no_zero).bytes().is_err());
    }

    #[test]
    fn bad_escapes_are_rejected(v in bytes_strategy(), bad in any::<u8>()) {
        prop_assume!(bad != 0x01 && bad != 0xFF);
        // A well-formed prefix, then an escape byte followed by neither the
        // terminator nor the escaped-zero marker.
        let mut enc = encode_bytes(&v);
        enc.truncate(enc.len() - 2);
        enc.push(0x00);
        enc.push(bad);
        enc.extend_from_slice(&[0x00, 0x01]);
        prop_assert!(KeyReader::new(&enc).bytes().is_err(), "{:?}", enc);
    }

    #[test]
    fn short_fixed_width_input_is_rejected(input in prop::collection::vec(any::<u8>(), 0..16)) {
        let mut r = KeyReader::new(&input);
        prop_assert_eq!(r.u32().is_ok(), input.len() >= 4);
        prop_assert_eq!(KeyReader::new(&input).u64().is_ok(), input.len() >= 8);
        prop_assert_eq!(KeyReader::new(&input).i64().is_ok(), input.len() >= 8);
        prop_assert_eq!(KeyReader::new(&input).u64_desc().is_ok(), input.len() >= 8);
        prop_assert!(KeyReader::new(&input).raw16().is_err());
    }

    #[test]
    fn non_utf8_string_components_are_rejected(v in prop::collection::vec(any::<u8>(), 0..16)) {
        let k = encode_bytes(&v);
        prop_assert_eq!(KeyReader::new(&k).string().is_ok(), std::str::from_utf8(&v).is_ok());
    }
}

/// Whether `input` does not start with a complete, well-formed encoded
/// string: a reference scanner written independently of the codec.
fn expected_error(input: &[u8]) -> bool {
    let mut i = 0;
    while i < input.len() {
        if input[i] == 0x00 {
            match input.get(i + 1) {
                Some(0xFF) => i += 2,
                Some(0x01) => return false,
                _ => return true,
            }
        } else {
            i += 1;
        }
    }
    true
}

#[test]
fn fixed_examples() {
    // "aa" < "b" even though it is longer: no length prefix.
    assert!(encode_bytes(b"aa") < encode_bytes(b"b"));
    // A string sorts before its extensions, also by a zero byte.
    assert!(encode_bytes(b"a") < encode_bytes(b"a\0"));
    assert!(encode_bytes(b"a\0") < encode_bytes(b"a\0\0"));
    assert!(encode_bytes(b"a\0") < encode_bytes(b"a\x01"));
    assert!(encode_bytes(b"") < encode_bytes(b"\0"));
    assert_eq!(encode_bytes(b""), vec![0x00, 0x01]);
    assert_eq!(encode_bytes(b"\0"), vec![0x00, 0xFF, 0x00, 0x01]);
    assert!(KeyReader::new(&[0x00]).bytes().is_err());
    assert!(KeyReader::new(&[0x00, 0x02]).bytes().is_err());
    assert!(KeyReader::new(b"ab").bytes().is_err());
    assert!(KeyReader::new(&[]).bytes().is_err());
    assert_eq!(prefix_successor(&[]), None);
    assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
    assert_eq!(prefix_successor(&[0x00, 0xFF]), Some(vec![0x01]));
    assert!(enc_u64_desc(u64::MAX) < enc_u64_desc(0));
    assert!(enc_i64(-1) < enc_i64(0));
    assert!(enc_i64(i64::MIN) < enc_i64(i64::MAX));
}
