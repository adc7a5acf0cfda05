//! The data set every system is loaded with, and the instants the workloads
//! read at. Generated from the fact number alone, so every system holds the
//! same facts whatever order they arrive in.
//!
//! A size of N facts is N/4 subjects `Person:<i>` with predicate `works_at`
//! and four facts each, one per employer, with valid intervals that follow
//! one another: [2020, 2021), [2021, 2022), [2022, 2023) and [2023, open).
//! The last one is the current value; the subject's history is all four.

/// Facts per subject.
pub const VERSIONS: u64 = 4;
/// The predicate every fact uses (functional: one value at a time).
pub const PREDICATE: &str = "works_at";
/// Valid-time starts of the four versions, unix ms (1 January 2020..2023, UTC).
pub const VALID_STARTS: [i64; 4] = [1_577_836_800_000, 1_609_459_200_000, 1_640_995_200_000, 1_672_531_200_000];
/// The same instants as SQL timestamps (UTC), for the peers' bulk paths.
pub const VALID_STARTS_SQL: [&str; 4] =
    ["2020-01-01 00:00:00", "2021-01-01 00:00:00", "2022-01-01 00:00:00", "2023-01-01 00:00:00"];
/// The valid instant W3 reads at: 1 July 2021, inside the second version.
pub const W3_VALID_AT: i64 = 1_625_097_600_000;

pub fn subjects(size: u64) -> u64 {
    (size / VERSIONS).max(1)
}

pub fn subject(i: u64) -> String {
    format!("Person:{i}")
}

/// The employer of version `v` of subject `i`.
pub fn object(i: u64, v: u64) -> String {
    format!("Org:o{}-{v}", i % 10_007)
}

/// One imported fact.
pub struct Row {
    pub subject: String,
    pub object: String,
    /// Index into `VALID_STARTS`; the interval ends at the next start, or is open for the last.
    pub version: usize,
}

impl Row {
    pub fn valid_from(&self) -> i64 {
        VALID_STARTS[self.version]
    }
    pub fn valid_until(&self) -> Option<i64> {
        VALID_STARTS.get(self.version + 1).copied()
    }
}

/// Fact number `n` (0-based) of the data set: subject `n / 4`, version `n % 4`.
pub fn row(n: u64) -> Row {
    let (i, v) = (n / VERSIONS, n % VERSIONS);
    Row { subject: subject(i), object: object(i, v), version: v as usize }
}

/// A small xorshift PRNG: cheap, reproducible key choices.
pub struct Rng(pub u64);
impl Rng {
    pub fn seeded(stream: u64) -> Rng {
        Rng(0x9E37_79B9_7F4A_7C15 ^ (stream + 1).wrapping_mul(0x2545_F491_4F6C_DD1D))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_one_another_per_subject() {
        let rows: Vec<Row> = (0..8).map(row).collect();
        assert_eq!(rows[0].subject, "Person:0");
        assert_eq!(rows[3].subject, "Person:0");
        assert_eq!(rows[4].subject, "Person:1");
        for r in &rows[..3] {
            assert_eq!(r.valid_until(), Some(VALID_STARTS[r.version + 1]));
        }
        assert_eq!(rows[3].valid_until(), None);
        // W3 reads inside the second version's interval.
        assert!(VALID_STARTS[1] <= W3_VALID_AT && W3_VALID_AT < VALID_STARTS[2]);
    }
}
