//! Format 5: each tenant's superseded-until bound.
//!
//! From format 5 the writer keeps, per tenant, a time no earlier than the
//! `valid_until` of any fact the tenant has had superseded, in `meta` under
//! `0x0A` | tenant (see `docs/storage.md`). A read of the current facts at a
//! valid time at or past it cannot find anything in `idx_closed`, so it does
//! not look there: a point read of "now" is then one index descent instead of
//! two.
//!
//! This step computes the bound from `idx_closed`, which holds the latest
//! version of every superseded fact. Values there may still be format 1's
//! whole facts (format 4's rewrite runs after the steps), and
//! `fact_record::decode_indexed` reads both. A tenant with nothing superseded
//! gets `i64::MIN`, so that its current reads skip `idx_closed` at once; a
//! tenant the step did not see has no bound and skips nothing.

use crate::error::StorageError;
use crate::fact_record;
use crate::keys::{self, TenantId};
use crate::kv::{scan_prefix, Keyspace, OrderedKv, WriteBatch};
use crate::model::{Millis, Status};
use crate::record;
use std::collections::BTreeMap;
use std::ops::Bound;

pub fn apply(kv: &dyn OrderedKv, batch: &mut WriteBatch) -> Result<(), StorageError> {
    let mut bounds: BTreeMap<TenantId, Millis> = BTreeMap::new();
    for item in scan_prefix(kv, Keyspace::Meta, &keys::meta::tenant_by_name_prefix(), false) {
        let (_, v) = item?;
        bounds.insert(record::decode(&v)?, Millis::MIN);
    }
    for item in kv.scan(Keyspace::Closed, Bound::Unbounded, Bound::Unbounded, false) {
        let (k, v) = item?;
        // The tenant's name is not needed for the status and valid time.
        let fact = fact_record::decode_indexed("", &k, &v)?;
        if fact.status == Status::Superseded {
            let bound = bounds.entry(keys::tenant_of_index_key(&k)?).or_insert(Millis::MIN);
            *bound = (*bound).max(fact.valid_until.unwrap_or(Millis::MAX));
        }
    }
    for (tenant, bound) in bounds {
        batch.put(Keyspace::Meta, keys::meta::superseded_until(tenant), record::encode(&bound));
    }
    Ok(())
}
