//! The writer's statements: prepared once per connection, run in the
//! group's transaction, and sent in pipelines so that a group waits on the
//! database a few times, not once per statement.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

/// Statements the writer's connection has prepared, by their text: each
/// is parsed and planned by the server once per connection, not per use.
#[derive(Default)]
pub(super) struct Prepared(Mutex<HashMap<String, Statement>>);

/// A parameter a [`Batch`] owns until its statement has been sent.
pub(super) type Param = Box<dyn ToSql + Sync + Send>;

/// Statements to send together. The server runs them one after another in
/// the order pushed; the writer waits once for all their answers.
#[derive(Default)]
pub(super) struct Batch {
    steps: Vec<(&'static str, Vec<Param>)>,
}

impl Batch {
    /// Adds a statement; its rows are at the returned position of what
    /// [`Db::send`] answers.
    pub(super) fn push(&mut self, sql: &'static str, params: Vec<Param>) -> usize {
        self.steps.push((sql, params));
        self.steps.len() - 1
    }
}

/// How a [`Batch`] stands to the group's transaction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Around {
    /// `BEGIN` goes first.
    Begin,
    /// `COMMIT` goes last.
    Commit,
}

/// A group's transaction on the writer's connection, running statements
/// through [`Prepared`]. The transaction is begun and ended by [`Db::send`]
/// and [`Db::rollback`]; a caller that meets an error drops the connection,
/// which ends whatever transaction it had open.
pub(super) struct Db<'a> {
    pub(super) client: &'a Client,
    pub(super) prepared: &'a Prepared,
}

type Pending<'a> = Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send + 'a>>;

impl Db<'_> {
    async fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        let known = self.prepared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(sql).cloned();
        if let Some(s) = known {
            return Ok(s);
        }
        let s = self.client.prepare(sql).await?;
        self.prepared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub(super) async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.client.execute(&s, params).await
    }

    pub(super) async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.client.query(&s, params).await
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

    /// Sends `batch` in one pipeline and answers each statement's rows, in
    /// order. Any statement not yet prepared is prepared first, so nothing
    /// of the batch is sent before the statements ahead of it.
    ///
    /// With [`Around::Commit`], `COMMIT` is sent behind the statements
    /// without waiting for them. That is safe because an error of any of
    /// them is the answer: a statement the server refused aborted the
    /// transaction (its `COMMIT` then rolls back), and one that failed
    /// before it was sent (encoding its parameters) stops everything
    /// after it, `COMMIT` included, from being sent at all.
    pub(super) async fn send(&self, around: Around, batch: Batch) -> Result<Vec<Vec<Row>>, tokio_postgres::Error> {
        let mut statements = Vec::with_capacity(batch.steps.len());
        for (sql, _) in &batch.steps {
            statements.push(self.statement(sql).await?);
        }
        let client = self.client;
        let mut pending: Vec<Pending<'_>> = Vec::with_capacity(batch.steps.len() + 1);
        if around == Around::Begin {
            pending.push(Box::pin(async move { client.batch_execute("BEGIN").await.map(|()| Vec::new()) }));
        }
        for (statement, (_, params)) in statements.into_iter().zip(batch.steps) {
            pending.push(Box::pin(async move {
                let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                client.query(&statement, &params).await
            }));
        }
        if around == Around::Commit {
            pending.push(Box::pin(async move { client.batch_execute("COMMIT").await.map(|()| Vec::new()) }));
        }
        let mut rows = in_order(pending).await?;
        if around == Around::Begin {
            rows.remove(0);
        }
        if around == Around::Commit {
            rows.pop();
        }
        Ok(rows)
    }

    /// Ends the group's transaction without writing anything.
    pub(super) async fn rollback(&self) -> Result<(), tokio_postgres::Error> {
        self.client.batch_execute("ROLLBACK").await
    }
}

/// Runs `futures` together, polling them in order: a query is sent on its
/// first poll, so they reach the server in this order. The first error is
/// the answer, and a future after it that was not yet polled is never
/// polled (never sent).
async fn in_order<T, E>(mut futures: Vec<Pin<Box<dyn Future<Output = Result<T, E>> + Send + '_>>>) -> Result<Vec<T>, E> {
    let mut done: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut waiting = false;
        for (future, out) in futures.iter_mut().zip(done.iter_mut()) {
            if out.is_some() {
                continue;
            }
            match future.as_mut().poll(cx) {
                Poll::Ready(Ok(v)) => *out = Some(v),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => waiting = true,
            }
        }
        if waiting {
            return Poll::Pending;
        }
        Poll::Ready(Ok(done.iter_mut().map(|o| o.take().expect("every future is done")).collect()))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::in_order;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};

    type Boxed = Pin<Box<dyn Future<Output = Result<u32, &'static str>> + Send>>;

    fn step(log: &Arc<Mutex<Vec<u32>>>, n: u32, fail: bool) -> Boxed {
        let log = log.clone();
        Box::pin(async move {
            log.lock().unwrap().push(n);
            tokio::task::yield_now().await;
            if fail { Err("refused") } else { Ok(n) }
        })
    }

    #[tokio::test]
    async fn answers_in_order_and_starts_each_in_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let out = in_order(vec![step(&log, 1, false), step(&log, 2, false), step(&log, 3, false)]).await;
        assert_eq!(out, Ok(vec![1, 2, 3]));
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn a_failure_before_sending_stops_the_ones_after_it() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let refused: Boxed = Box::pin(async { Err("cannot encode") });
        let out = in_order(vec![step(&log, 1, false), refused, step(&log, 3, false)]).await;
        assert_eq!(out, Err("cannot encode"));
        // The third (a COMMIT, in the writer) was never started.
        assert_eq!(*log.lock().unwrap(), vec![1]);
    }
}
