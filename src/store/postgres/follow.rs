//! The commits of every replica, announced to this process's commit
//! listeners (the change feed, the search index, embeddings, the monitor).
//!
//! The `changes` table is the truth: this task reads it after the last
//! transaction it announced, in tx order, whenever a commit's `NOTIFY`
//! wakes it and at least once a second besides, so a notification lost with
//! a dropped connection delays an announcement, never loses one. This
//! process's own commits are announced by its writer at once as well; a
//! listener may hear of a transaction twice, and reads the log for what
//! is new, so that costs it nothing.

use super::shared::Shared;
use crate::store::Tx;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

/// The longest a commit of another replica waits to be announced when its
/// notification is lost.
const POLL: Duration = Duration::from_secs(1);
/// Transactions announced per read of the log.
const PAGE: i64 = 1000;

pub async fn run(shared: Arc<Shared>) {
    let mut after: Option<Tx> = None;
    loop {
        if let Err(e) = follow(&shared, &mut after).await {
            tracing::debug!(error = %e, "following the database's commits; reconnecting");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Aborts the connection's driver when the follower lets it go.
struct Driver(tokio::task::JoinHandle<()>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Listens on one connection until it fails.
async fn follow(shared: &Shared, after: &mut Option<Tx>) -> Result<(), tokio_postgres::Error> {
    let (client, mut conn) = shared.tls.connect(&shared.config).await?;
    let (wake, mut woken) = mpsc::channel::<()>(1);
    // The connection's messages: a notification wakes the reader; the
    // stream ends with the connection.
    let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    let driver = Driver(tokio::spawn(async move {
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(_) = m {
                let _ = wake.try_send(());
            }
        }
    }));
    client.batch_execute("LISTEN tempora_changes").await?;
    // Announced from the present on: what committed before this process
    // started, each follower reads from the log itself.
    if after.is_none() {
        let last: i64 = client.query_one("SELECT last_tx FROM clock", &[]).await?.get(0);
        *after = Some(last as Tx);
    }
    loop {
        announce_new(shared, &client, after).await?;
        if driver.0.is_finished() {
            return Ok(());
        }
        let _ = tokio::time::timeout(POLL, woken.recv()).await;
    }
}

/// Announces the transactions committed after `after`, in tx order.
async fn announce_new(
    shared: &Shared,
    client: &tokio_postgres::Client,
    after: &mut Option<Tx>,
) -> Result<(), tokio_postgres::Error> {
    loop {
        let from = after.unwrap_or(0) as i64;
        let rows = client
            .query(
                "SELECT t.name, c.tx FROM changes c JOIN tenants t ON t.id = c.tenant_id
                 WHERE c.tx > $1 ORDER BY c.tx LIMIT $2",
                &[&from, &PAGE],
            )
            .await?;
        let committed: Vec<(String, Tx)> = rows.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as Tx)).collect();
        if let Some((_, last)) = committed.last() {
            *after = Some(*last);
            shared.notify_committed(&committed);
        }
        if (rows.len() as i64) < PAGE {
            return Ok(());
        }
    }
}
