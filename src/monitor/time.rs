//! Times of the monitor: now, UTC days and ISO 8601 text, and the `since`
//! of a report's changes block (unix ms, an ISO date or a duration back).

use serde_json::Value;

pub const DAY_MS: i64 = 86_400_000;

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|t| t.as_millis() as i64).unwrap_or(0)
}

/// `YYYY-MM-DD` of the UTC day holding `ms`.
pub fn day(ms: i64) -> String {
    let (y, m, d) = crate::civil::civil_from_days(ms.div_euclid(DAY_MS));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso(ms: i64) -> String {
    let rem = ms.rem_euclid(DAY_MS);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    format!("{}T{h:02}:{mi:02}:{s:02}.{milli:03}Z", day(ms))
}

/// `YYYY-MM-DD`, optionally followed by `THH:MM`, then `:SS`, then `.f`
/// (1 to 9 digits), then `Z` (UTC is assumed; other offsets are refused).
/// Exactly the pattern the OpenAPI document gives.
pub fn parse_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = b.get(from..from + n)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |acc, d| acc * 10 + (d - b'0') as i64))
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // In range: checked above.
    let mut ms = crate::civil::days_from_civil(y, m as u32, d as u32) * DAY_MS;
    if b.len() == 10 {
        return Some(ms);
    }
    let rest = s[10..].strip_prefix('T')?;
    let rest = rest.strip_suffix('Z').unwrap_or(rest);
    let r = rest.as_bytes();
    if r.len() < 5 || r[2] != b':' {
        return None;
    }
    let (h, mi) = (digits(11, 2)?, digits(14, 2)?);
    if h > 23 || mi > 59 {
        return None;
    }
    ms += h * 3_600_000 + mi * 60_000;
    let mut tail = &rest[5..];
    if let Some(t) = tail.strip_prefix(':') {
        let sec = digits(17, 2)?;
        if t.len() < 2 || sec > 59 {
            return None;
        }
        ms += sec * 1000;
        tail = &t[2..];
        if let Some(f) = tail.strip_prefix('.') {
            if f.is_empty() || f.len() > 9 || !f.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let milli = &f[..f.len().min(3)];
            ms += milli.parse::<i64>().ok()? * 10_i64.pow(3 - milli.len() as u32);
            tail = "";
        }
    }
    tail.is_empty().then_some(ms)
}

/// `500ms`, `90s`, `15m`, `24h`, `7d`, `2w` (1 to 9 digits) in milliseconds.
pub fn parse_duration(s: &str) -> Option<i64> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = s.split_at(split);
    if n.is_empty() || n.len() > 9 {
        return None;
    }
    let n: i64 = n.parse().ok()?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => DAY_MS,
        "w" => 7 * DAY_MS,
        _ => return None,
    };
    n.checked_mul(unit_ms)
}

/// The patterns of a `since` string, for the OpenAPI document.
pub const DURATION_PATTERN: &str = "^[0-9]{1,9}(ms|s|m|h|d|w)$";
pub const ISO_PATTERN: &str =
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{1,9})?)?Z?)?$";

/// A `since` value: unix ms (a number), an ISO date/time, or a duration
/// back from `now`. The error says what is accepted.
pub fn resolve_since(v: &Value, now: i64) -> Result<i64, String> {
    const EXPECTED: &str = "must be unix milliseconds, an ISO date like 2026-01-31 or 2026-01-31T12:00:00Z, or a duration back from now like 24h, 90m, 7d";
    match v {
        // An int64, or a number without a fraction that a double holds
        // exactly (JSON Schema counts 5.0 as an integer); nothing else.
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0).map(|f| f as i64))
            .ok_or_else(|| EXPECTED.to_string()),
        Value::String(s) => {
            if let Some(d) = parse_duration(s) {
                return Ok(now.saturating_sub(d));
            }
            parse_iso(s).ok_or_else(|| EXPECTED.to_string())
        }
        _ => Err(EXPECTED.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates_round_trip() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        let t = parse_iso("2024-02-29T13:45:07.250Z").unwrap();
        assert_eq!(iso(t), "2024-02-29T13:45:07.250Z");
        assert_eq!(parse_iso("2020-01-01"), Some(1_577_836_800_000));
        assert_eq!(day(1_577_836_800_000 + DAY_MS - 1), "2020-01-01");
        assert_eq!(parse_iso("2020-13-01"), None);
        assert_eq!(parse_iso("yesterday"), None);
        assert_eq!(parse_iso("2020-01-01T10:00Z"), Some(1_577_836_800_000 + 36_000_000));
        for bad in ["2020-1-011", "2020-01-01Z", "2020-01-01 10:00", "2020-01-01T10:00:60", "2020-01-01T10:00:00.1234567890"] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn since_takes_ms_dates_and_durations() {
        let now = 10 * DAY_MS;
        assert_eq!(resolve_since(&json!(5), now), Ok(5));
        assert_eq!(resolve_since(&json!("24h"), now), Ok(9 * DAY_MS));
        assert_eq!(resolve_since(&json!("1970-01-02"), now), Ok(DAY_MS));
        assert!(resolve_since(&json!("soon"), now).is_err());
        assert!(resolve_since(&json!(true), now).is_err());
        assert!(resolve_since(&json!(9_223_372_036_854_775_808u64), now).is_err());
        assert!(resolve_since(&json!(-9.3e18), now).is_err());
        assert_eq!(resolve_since(&json!(5.0), now), Ok(5));
        assert_eq!(parse_duration("500ms"), Some(500));
        assert_eq!(parse_duration("3x"), None);
    }
}
