//! Helpers shared by the storage integration tests.

/// splitmix64: small, deterministic, good enough to pick operations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    #[allow(dead_code)] // not every test binary picks from slices
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Every fact of `tenant`, any status, retracted ones too, optionally as of
/// a record time, page by page through `query`.
#[allow(dead_code)] // not every test binary reads whole tenants
pub fn every_fact(
    e: &tempora_storage::Engine,
    tenant: &str,
    as_of: Option<tempora_storage::AsOf>,
) -> Vec<tempora_storage::Fact> {
    use tempora_storage::{FactQuery, StatusFilter, MAX_PAGE};
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let q = FactQuery {
            status: StatusFilter::Any,
            include_retracted: true,
            as_of,
            limit: MAX_PAGE,
            cursor,
            ..Default::default()
        };
        let page = e.query(tenant, &q).unwrap();
        out.extend(page.facts);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}
