//! PII masking, applied before anything of a digest is stored or sent to a
//! model. Detection is pattern-based (no dictionaries, no names): e-mail
//! addresses, phone numbers, payment card numbers (Luhn-checked), IBANs
//! (mod-97-checked), IPv4/IPv6 addresses, US-SSN-shaped national ids and
//! ISO dates. `docs/digest.md` lists exactly what is and is not caught.
//!
//! Strategies: `redact` (`[EMAIL]`), `hash` (`[EMAIL:<12 hex>]`, an HMAC
//! keyed with the tenant's secret: stable within a tenant, unlinkable across
//! tenants), `hash_sha256` (`[EMAIL:<64 hex>]`, plain SHA-256 of the
//! normalised value, reproducible outside tempora), `shift_date` (ISO dates
//! moved by the tenant's secret offset, other PII as `hash`), and `none`.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    None,
    Redact,
    Hash,
    HashSha256,
    ShiftDate,
}

impl Strategy {
    pub const NAMES: [&'static str; 5] = ["redact", "hash", "hash_sha256", "shift_date", "none"];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Redact => "redact",
            Strategy::Hash => "hash",
            Strategy::HashSha256 => "hash_sha256",
            Strategy::ShiftDate => "shift_date",
        }
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "none" => Strategy::None,
            "redact" => Strategy::Redact,
            "hash" => Strategy::Hash,
            "hash_sha256" => Strategy::HashSha256,
            "shift_date" => Strategy::ShiftDate,
            other => {
                return Err(format!("mask must be one of {}, got {other:?}", Strategy::NAMES.join(", ")));
            }
        })
    }
}

/// What a span of text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Email,
    Phone,
    Card,
    Iban,
    Ip,
    NationalId,
    Date,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Email => "EMAIL",
            Kind::Phone => "PHONE",
            Kind::Card => "CARD",
            Kind::Iban => "IBAN",
            Kind::Ip => "IP",
            Kind::NationalId => "NATIONAL_ID",
            Kind::Date => "DATE",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Phone => "phone",
            Kind::Card => "card",
            Kind::Iban => "iban",
            Kind::Ip => "ip",
            Kind::NationalId => "national_id",
            Kind::Date => "date",
        }
    }
}

/// A tenant's masking secret: the HMAC key of `hash` and the source of the
/// `shift_date` offset. Stored durably (see `super::secret`).
#[derive(Clone)]
pub struct Secret([u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Secret {
    pub fn from_bytes(b: &[u8]) -> Option<Secret> {
        b.try_into().ok().map(Secret)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 32 bytes from the operating system's random source.
    pub fn generate() -> Secret {
        let mut key = [0u8; 32];
        let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| {
            use std::io::Read;
            f.read_exact(&mut key)
        });
        if from_os.is_err() {
            // Elsewhere: the random bits of fresh UUIDs (the OS generator
            // behind the uuid crate), hashed.
            let mut h = Sha256::new();
            for _ in 0..8 {
                h.update(uuid::Uuid::now_v7().as_bytes());
            }
            key.copy_from_slice(&h.finalize());
        }
        Secret(key)
    }

    /// HMAC-SHA256 of `msg` under this secret.
    pub fn mac(&self, msg: &[u8]) -> [u8; 32] {
        let mut ipad = [0x36u8; 64];
        let mut opad = [0x5cu8; 64];
        for (i, k) in self.0.iter().enumerate() {
            ipad[i] ^= k;
            opad[i] ^= k;
        }
        let inner = Sha256::new().chain_update(ipad).chain_update(msg).finalize();
        Sha256::new().chain_update(opad).chain_update(inner).finalize().into()
    }

    /// The tenant's date offset for `shift_date`: 1 to 365 days, forwards or
    /// backwards, never zero.
    pub fn shift_days(&self) -> i64 {
        let h = self.mac(b"tempora shift_date offset");
        let v = u64::from_be_bytes(h[..8].try_into().expect("8 bytes"));
        let days = 1 + (v % 365) as i64;
        if h[8] & 1 == 0 {
            days
        } else {
            -days
        }
    }
}

/// A span of detected PII, byte offsets into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

/// Masks text with one strategy and one tenant secret.
pub struct Masker {
    pub strategy: Strategy,
    secret: Secret,
}

/// Masked text and how many items of each kind were masked.
#[derive(Debug, Clone, Default)]
pub struct Masked {
    pub text: String,
    pub counts: BTreeMap<&'static str, usize>,
}

impl Masker {
    pub fn new(strategy: Strategy, secret: Secret) -> Masker {
        Masker { strategy, secret }
    }

    pub fn mask(&self, text: &str) -> Masked {
        self.mask_as(text, self.strategy)
    }

    /// For identifiers (the id that names a record's subject): `redact`
    /// would give every record with a masked id the same subject, so ids are
    /// masked like `hash` then; the other strategies as usual.
    pub fn mask_id(&self, text: &str) -> String {
        let strategy = if self.strategy == Strategy::Redact { Strategy::Hash } else { self.strategy };
        self.mask_as(text, strategy).text
    }

    fn mask_as(&self, text: &str, strategy: Strategy) -> Masked {
        let mut out = Masked::default();
        if strategy == Strategy::None {
            out.text = text.to_string();
            return out;
        }
        let mut last = 0;
        let mut s = String::with_capacity(text.len());
        for span in detect(text) {
            let raw = &text[span.start..span.end];
            let replacement = if span.kind == Kind::Date {
                if strategy != Strategy::ShiftDate {
                    continue;
                }
                match shift_date(raw, self.secret.shift_days()) {
                    Some(d) => d,
                    None => continue,
                }
            } else {
                self.token(span.kind, raw, strategy)
            };
            s.push_str(&text[last..span.start]);
            s.push_str(&replacement);
            last = span.end;
            *out.counts.entry(span.kind.name()).or_default() += 1;
        }
        s.push_str(&text[last..]);
        out.text = s;
        out
    }

    fn token(&self, kind: Kind, raw: &str, strategy: Strategy) -> String {
        let norm = normalize(kind, raw);
        match strategy {
            Strategy::Redact => format!("[{}]", kind.label()),
            Strategy::HashSha256 => format!("[{}:{}]", kind.label(), hex(&Sha256::digest(norm.as_bytes()))),
            _ => {
                let mut msg = kind.name().as_bytes().to_vec();
                msg.push(0);
                msg.extend_from_slice(norm.as_bytes());
                format!("[{}:{}]", kind.label(), &hex(&self.secret.mac(&msg))[..12])
            }
        }
    }

    /// Masks every string in a JSON value (object keys are kept). A number
    /// whose digits are PII (a card number sent as a JSON number) becomes its
    /// masked string.
    pub fn mask_value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.mask(s).text),
            Value::Number(n) => {
                let text = n.to_string();
                let m = self.mask(&text);
                if m.counts.is_empty() {
                    v.clone()
                } else {
                    Value::String(m.text)
                }
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.mask_value(x)).collect()),
            Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), self.mask_value(x))).collect()),
            other => other.clone(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The form a value is hashed in, so spellings of one value hash alike.
fn normalize(kind: Kind, raw: &str) -> String {
    match kind {
        Kind::Email => raw.to_ascii_lowercase(),
        Kind::Phone => {
            let digits: String = raw.chars().filter(char::is_ascii_digit).collect();
            if raw.starts_with('+') {
                format!("+{digits}")
            } else {
                digits
            }
        }
        Kind::Card | Kind::NationalId => raw.chars().filter(char::is_ascii_digit).collect(),
        Kind::Iban => raw.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_uppercase(),
        Kind::Ip => raw
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.to_string())
            .unwrap_or_else(|_| raw.to_ascii_lowercase()),
        Kind::Date => raw.to_string(),
    }
}

// ------------------------------------------------------------- detection

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every PII span of `text`, in order, not overlapping. Detectors run in a
/// fixed priority (e-mail, IBAN, IPv6, IPv4, ISO date, then numeric runs
/// classified as card, national id or phone); a later detector never takes
/// text an earlier one claimed.
pub fn detect(text: &str) -> Vec<Span> {
    let b = text.as_bytes();
    let mut spans: Vec<Span> = Vec::new();
    let claim = |spans: &mut Vec<Span>, s: usize, e: usize, kind: Kind| {
        if spans.iter().all(|p| e <= p.start || s >= p.end) {
            spans.push(Span { start: s, end: e, kind });
        }
    };
    for (s, e) in emails(b) {
        claim(&mut spans, s, e, Kind::Email);
    }
    for (s, e) in ibans(b) {
        claim(&mut spans, s, e, Kind::Iban);
    }
    for (s, e) in ipv6s(text) {
        claim(&mut spans, s, e, Kind::Ip);
    }
    for (s, e) in ipv4s(text) {
        claim(&mut spans, s, e, Kind::Ip);
    }
    for (s, e) in iso_dates(b) {
        claim(&mut spans, s, e, Kind::Date);
    }
    // Numeric runs, in the gaps the detectors above left.
    spans.sort_by_key(|s| s.start);
    let mut gaps = Vec::new();
    let mut at = 0;
    for s in &spans {
        gaps.push((at, s.start));
        at = s.end;
    }
    gaps.push((at, b.len()));
    for (gs, ge) in gaps {
        for (s, e) in numeric_runs(b, gs, ge) {
            if let Some(kind) = classify_number(&text[s..e]) {
                spans.push(Span { start: s, end: e, kind });
            }
        }
    }
    spans.sort_by_key(|s| s.start);
    spans
}

fn emails(b: &[u8]) -> Vec<(usize, usize)> {
    let local = |c: u8| c.is_ascii_alphanumeric() || b"._%+-".contains(&c);
    let domain = |c: u8| c.is_ascii_alphanumeric() || c == b'.' || c == b'-';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'@' {
            i += 1;
            continue;
        }
        let mut s = i;
        while s > 0 && local(b[s - 1]) {
            s -= 1;
        }
        while s < i && b[s] == b'.' {
            s += 1;
        }
        let mut e = i + 1;
        while e < b.len() && domain(b[e]) {
            e += 1;
        }
        while e > i + 1 && (b[e - 1] == b'.' || b[e - 1] == b'-') {
            e -= 1;
        }
        let dom = &b[i + 1..e];
        let labels: Vec<&[u8]> = dom.split(|c| *c == b'.').collect();
        let tld_ok = labels.last().is_some_and(|t| t.len() >= 2 && t.iter().all(u8::is_ascii_alphabetic));
        if s < i && labels.len() >= 2 && labels.iter().all(|l| !l.is_empty()) && tld_ok {
            out.push((s, e));
            i = e;
        } else {
            i += 1;
        }
    }
    out
}

/// IBAN check: move the first four characters to the end, letters to
/// numbers (A = 10), and the number mod 97 must be 1.
pub fn iban_valid(compact: &str) -> bool {
    let c = compact.as_bytes();
    if !(15..=34).contains(&c.len())
        || !c[..2].iter().all(u8::is_ascii_uppercase)
        || !c[2..4].iter().all(u8::is_ascii_digit)
        || !c.iter().all(|x| x.is_ascii_uppercase() || x.is_ascii_digit())
    {
        return false;
    }
    let mut rem: u32 = 0;
    for &x in c[4..].iter().chain(&c[..4]) {
        let v = if x.is_ascii_digit() { (x - b'0') as u32 } else { (x - b'A') as u32 + 10 };
        rem = if v >= 10 { (rem * 100 + v) % 97 } else { (rem * 10 + v) % 97 };
    }
    rem == 1
}

fn ibans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 <= b.len() {
        let starts = (i == 0 || !is_word(b[i - 1]))
            && b[i].is_ascii_alphabetic()
            && b[i + 1].is_ascii_alphabetic()
            && b[i + 2].is_ascii_digit()
            && b[i + 3].is_ascii_digit();
        if !starts {
            i += 1;
            continue;
        }
        // Alphanumerics with single spaces between; every place a word ends
        // is a possible end.
        let mut ends = Vec::new();
        let mut j = i;
        loop {
            while j < b.len() && b[j].is_ascii_alphanumeric() {
                j += 1;
            }
            if j >= b.len() || !is_word(b[j]) {
                ends.push(j);
            }
            if j + 1 < b.len() && b[j] == b' ' && b[j + 1].is_ascii_alphanumeric() && j - i < 50 {
                j += 1;
            } else {
                break;
            }
        }
        let found = ends.iter().rev().find(|&&e| {
            let compact: String =
                b[i..e].iter().filter(|c| **c != b' ').map(|c| c.to_ascii_uppercase() as char).collect();
            iban_valid(&compact)
        });
        match found {
            Some(&e) => {
                out.push((i, e));
                i = e;
            }
            None => i += 1,
        }
    }
    out
}

fn ipv6s(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let part = |c: u8| c.is_ascii_hexdigit() || c == b':' || c == b'.';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !part(b[i]) {
            i += 1;
            continue;
        }
        let s = i;
        let mut e = i;
        while e < b.len() && part(b[e]) {
            e += 1;
        }
        i = e;
        if (s > 0 && is_word(b[s - 1])) || (e < b.len() && is_word(b[e])) {
            continue;
        }
        let mut end = e;
        while end > s && b[end - 1] == b'.' {
            end -= 1;
        }
        let cand = &text[s..end];
        if cand.matches(':').count() < 2 || !cand.bytes().any(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        if cand.parse::<Ipv6Addr>().is_ok() {
            out.push((s, end));
        } else if let Some(shorter) = cand.strip_suffix(':').filter(|c| !c.ends_with(':')) {
            if shorter.parse::<Ipv6Addr>().is_ok() {
                out.push((s, s + shorter.len()));
            }
        }
    }
    out
}

fn ipv4s(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let s = i;
        let mut e = i;
        while e < b.len() && (b[e].is_ascii_digit() || b[e] == b'.') {
            e += 1;
        }
        i = e;
        if (s > 0 && (is_word(b[s - 1]) || b[s - 1] == b'.')) || (e < b.len() && is_word(b[e])) {
            continue;
        }
        let mut end = e;
        while end > s && b[end - 1] == b'.' {
            end -= 1;
        }
        let cand = &text[s..end];
        if cand.matches('.').count() == 3 && cand.parse::<Ipv4Addr>().is_ok() {
            out.push((s, end));
        }
    }
    out
}

fn iso_dates(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let d = |i: usize| b[i].is_ascii_digit();
    let mut i = 0;
    while i + 10 <= b.len() {
        let shaped = d(i) && d(i + 1) && d(i + 2) && d(i + 3) && b[i + 4] == b'-' && d(i + 5) && d(i + 6)
            && b[i + 7] == b'-' && d(i + 8) && d(i + 9);
        let bounded = (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'))
            && (i + 10 == b.len() || !(b[i + 10].is_ascii_digit() || (b[i + 10] == b'-' && i + 11 < b.len() && b[i + 11].is_ascii_digit())));
        if shaped && bounded && parse_date(std::str::from_utf8(&b[i..i + 10]).unwrap_or("")).is_some() {
            out.push((i, i + 10));
            i += 10;
        } else {
            i += 1;
        }
    }
    out
}

/// Runs of digits joined by single separators (` `, `.`, `-`, parentheses)
/// within `[from, to)`, optionally led by `+`, not glued to a word.
fn numeric_runs(b: &[u8], from: usize, to: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = from;
    let at = |k: usize| if k < to { b[k] } else { 0 };
    while i < to {
        let c = b[i];
        if !(c.is_ascii_digit() || c == b'+' || c == b'(') {
            i += 1;
            continue;
        }
        let s = i;
        let mut j = i;
        if at(j) == b'+' {
            j += 1;
        }
        if at(j) == b'(' {
            j += 1;
        }
        if !at(j).is_ascii_digit() {
            i += 1;
            continue;
        }
        while at(j).is_ascii_digit() {
            j += 1;
        }
        loop {
            if at(j).is_ascii_digit() {
                j += 1;
                continue;
            }
            let mut k = j;
            if at(k) == b')' {
                k += 1;
            }
            if matches!(at(k), b' ' | b'.' | b'-') {
                k += 1;
            }
            if at(k) == b'(' {
                k += 1;
            }
            if k > j && at(k).is_ascii_digit() {
                j = k + 1;
                continue;
            }
            break;
        }
        let glued_before = s > from && (is_word(b[s - 1]) || b[s - 1] == b'.');
        let glued_after = j < to && is_word(b[j]);
        if !glued_before && !glued_after {
            out.push((s, j));
        }
        i = j.max(s + 1);
    }
    out
}

pub fn luhn_valid(digits: &str) -> bool {
    let mut sum = 0;
    for (i, c) in digits.bytes().rev().enumerate() {
        let mut d = (c - b'0') as u32;
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum % 10 == 0
}

fn classify_number(run: &str) -> Option<Kind> {
    let digits: String = run.chars().filter(char::is_ascii_digit).collect();
    let n = digits.len();
    let plus = run.starts_with('+');
    let card_seps = run.chars().all(|c| c.is_ascii_digit() || c == ' ' || c == '-');
    if !plus && card_seps && (13..=19).contains(&n) && luhn_valid(&digits) {
        return Some(Kind::Card);
    }
    if is_ssn(run) {
        return Some(Kind::NationalId);
    }
    let has_sep = run.chars().any(|c| matches!(c, ' ' | '-' | '.' | '(' | ')'));
    let dots = run.matches('.').count();
    let phone = if plus { (8..=15).contains(&n) } else { (10..=15).contains(&n) && has_sep };
    if phone && dots != 1 {
        return Some(Kind::Phone);
    }
    None
}

/// `ddd-dd-dddd` (or with spaces), with the ranges the US never issues
/// excluded (area 000, 666, 900-999; group 00; serial 0000).
fn is_ssn(run: &str) -> bool {
    let b = run.as_bytes();
    if b.len() != 11 {
        return false;
    }
    let sep = b[3];
    if !(sep == b'-' || sep == b' ') || b[6] != sep {
        return false;
    }
    let digits_at = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits_at(0..3) && digits_at(4..6) && digits_at(7..11)) {
        return false;
    }
    let area = &run[0..3];
    area != "000" && area != "666" && !area.starts_with('9') && &run[4..6] != "00" && &run[7..11] != "0000"
}

// ------------------------------------------------------------- dates

/// Days since 1970-01-01 of a `YYYY-MM-DD` date that exists.
pub fn parse_date(s: &str) -> Option<i64> {
    let y: i64 = s.get(0..4)?.parse().ok()?;
    let m: u32 = s.get(5..7)?.parse().ok()?;
    let d: u32 = s.get(8..10)?.parse().ok()?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(crate::civil::days_from_civil(y, m, d))
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DD` moved by `days`; `None` if it leaves years 0000-9999.
pub fn shift_date(s: &str, days: i64) -> Option<String> {
    let (y, m, d) = crate::civil::civil_from_days(parse_date(s)? + days);
    (0..=9999).contains(&y).then(|| format!("{y:04}-{m:02}-{d:02}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, Kind)> {
        detect(text).into_iter().map(|s| (text[s.start..s.end].to_string(), s.kind)).collect()
    }

    #[test]
    fn detectors() {
        let k = |t: &str| kinds(t);
        assert_eq!(k("mail Sarah.Chen+x@Example.co.uk."), vec![("Sarah.Chen+x@Example.co.uk".into(), Kind::Email)]);
        for phone in ["+1 415 555 0132", "(415) 555-0132", "415-555-0132", "415.555.0132", "+44 20 7946 0958", "+4930123456"] {
            assert_eq!(k(&format!("call {phone} now")), vec![(phone.to_string(), Kind::Phone)], "{phone}");
        }
        for card in ["4111 1111 1111 1111", "4111-1111-1111-1111", "5500005555555559", "378282246310005"] {
            assert_eq!(k(&format!("card {card}.")), vec![(card.to_string(), Kind::Card)], "{card}");
        }
        assert_eq!(k("not a card 4111 1111 1111 1112"), vec![]);
        assert_eq!(k("iban DE89 3704 0044 0532 0130 00 ok"), vec![("DE89 3704 0044 0532 0130 00".into(), Kind::Iban)]);
        assert_eq!(k("GB82WEST12345698765432"), vec![("GB82WEST12345698765432".into(), Kind::Iban)]);
        assert_eq!(k("DE89 3704 0044 0532 0130 01"), vec![]);
        assert_eq!(k("from 192.168.1.20."), vec![("192.168.1.20".into(), Kind::Ip)]);
        assert_eq!(k("v6 2001:db8::8a2e:370:7334 and fe80::1"), vec![
            ("2001:db8::8a2e:370:7334".into(), Kind::Ip),
            ("fe80::1".into(), Kind::Ip)
        ]);
        assert_eq!(k("ssn 123-45-6789"), vec![("123-45-6789".into(), Kind::NationalId)]);
        assert_eq!(k("not ssn 666-45-6789 or 123456789"), vec![]);
        assert_eq!(k("at 10:30:00 use std::vec, 999.99 EUR, v1.2.3, 2024"), vec![]);
        assert_eq!(k("born 1990-04-01"), vec![("1990-04-01".into(), Kind::Date)]);
        assert_eq!(k("Person:sarah works_at Org:acme"), vec![]);
    }

    #[test]
    fn checksums_and_dates() {
        assert!(luhn_valid("4111111111111111"));
        assert!(!luhn_valid("4111111111111112"));
        assert!(iban_valid("DE89370400440532013000"));
        assert!(!iban_valid("DE89370400440532013001"));
        assert_eq!(shift_date("2024-02-28", 1).as_deref(), Some("2024-02-29"));
        assert_eq!(shift_date("2024-03-01", -1).as_deref(), Some("2024-02-29"));
        assert_eq!(shift_date("1999-12-31", 1).as_deref(), Some("2000-01-01"));
        assert_eq!(shift_date("2023-02-29", 1), None);
        for days in [-365, -1, 1, 365] {
            assert_eq!(shift_date(&shift_date("2020-06-15", days).unwrap(), -days).as_deref(), Some("2020-06-15"));
        }
    }

    #[test]
    fn strategies() {
        let secret = Secret([7; 32]);
        let m = |s| Masker::new(s, secret.clone());
        let text = "Mail a@b.io on 2024-01-15.";
        assert_eq!(m(Strategy::Redact).mask(text).text, "Mail [EMAIL] on 2024-01-15.");
        let hashed = m(Strategy::Hash).mask(text).text;
        assert!(hashed.starts_with("Mail [EMAIL:") && hashed.ends_with("] on 2024-01-15."), "{hashed}");
        assert_eq!(m(Strategy::Hash).mask("A@B.IO").text, m(Strategy::Hash).mask("a@b.io").text);
        let sha = m(Strategy::HashSha256).mask("a@b.io").text;
        assert_eq!(sha, format!("[EMAIL:{}]", hex(&Sha256::digest(b"a@b.io"))));
        let shifted = m(Strategy::ShiftDate).mask(text);
        let expect = shift_date("2024-01-15", secret.shift_days()).unwrap();
        assert!(shifted.text.contains(&expect) && shifted.text.contains("[EMAIL:"), "{}", shifted.text);
        assert_eq!(shifted.counts.get("date"), Some(&1));
        assert_eq!(m(Strategy::None).mask(text).text, text);
        assert_eq!(m(Strategy::Redact).mask_id("a@b.io"), m(Strategy::Hash).mask("a@b.io").text);
        assert_ne!(secret.shift_days(), 0);
    }
}
