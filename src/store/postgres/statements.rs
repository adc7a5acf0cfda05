//! The writer's statements: prepared once per connection, run in the
//! group's transaction.

use std::collections::HashMap;
use std::sync::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement, Transaction};

/// Statements the writer's connection has prepared, by their text: each
/// is parsed and planned by the server once per connection, not per use.
#[derive(Default)]
pub(super) struct Prepared(Mutex<HashMap<String, Statement>>);

/// A group's transaction, running statements through [`Prepared`].
pub(super) struct Db<'a> {
    pub(super) tx: Transaction<'a>,
    pub(super) prepared: &'a Prepared,
}

impl Db<'_> {
    async fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        let known = self.prepared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(sql).cloned();
        if let Some(s) = known {
            return Ok(s);
        }
        let s = self.tx.prepare(sql).await?;
        self.prepared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub(super) async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.execute(&s, params).await
    }

    pub(super) async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.query(&s, params).await
    }

    pub(super) async fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.query_one(&s, params).await
    }

    /// The rows of `sql`, or none without asking when `ask` is false.
    pub(super) async fn query_if(
        &self,
        ask: bool,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        if !ask {
            return Ok(Vec::new());
        }
        self.query(sql, params).await
    }
}

