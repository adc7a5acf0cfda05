//! The vocabulary of the service's operations, for the surfaces: facts and
//! what reads and writes of them take and answer (the store's model), the
//! requests of recall, a caller's model settings. Surfaces name these
//! through the service, never through the store or the parts below it.

pub use crate::connectors::records::Framing;
pub use crate::llm::ModelConfig;
pub use crate::store::{
    is_entity_ref, AsOf, Cardinality, Change, ChangeEvent, Fact, FactHistory, FactId, FactInput, FactPage, FactQuery,
    Millis, PredicateInfo, Status, StatusFilter, StatusSet, TenantStats, Tx, DEFAULT_PAGE, MAX_PAGE,
};
