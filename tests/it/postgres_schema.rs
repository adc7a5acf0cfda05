//! The PostgreSQL schema on a real PostgreSQL (`common::postgres`): it is
//! applied once however many processes start together, a newer schema is
//! refused, and the database itself refuses what the bitemporal rules
//! forbid.

use crate::common::postgres;
use tempora::store::postgres::schema::{self, Migrated, SchemaError};

#[tokio::test(flavor = "multi_thread")]
async fn replicas_starting_together_apply_the_schema_once() {
    let url = postgres::database().await;
    let mut starts = Vec::new();
    for _ in 0..6 {
        let url = url.clone();
        starts.push(tokio::spawn(async move {
            let mut client = postgres::connect(&url).await;
            schema::migrate(&mut client).await.expect("migrate")
        }));
    }
    let mut applied = 0;
    for s in starts {
        let m = s.await.unwrap();
        assert_eq!(m.to, schema::latest());
        if m.from == 0 {
            applied += 1;
        }
    }
    assert_eq!(applied, 1, "exactly one start found an empty database");
    let client = postgres::connect(&url).await;
    let versions: Vec<i32> =
        client.query("SELECT version FROM tempora_schema ORDER BY version", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, (1..=schema::latest()).collect::<Vec<_>>());
    // A later start finds everything in place.
    let mut again = postgres::connect(&url).await;
    assert_eq!(schema::migrate(&mut again).await.unwrap(), Migrated { from: schema::latest(), to: schema::latest() });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_newer_than_this_build_is_refused() {
    let url = postgres::database().await;
    let mut client = postgres::connect(&url).await;
    schema::migrate(&mut client).await.unwrap();
    let newer = schema::latest() + 1;
    client.execute("INSERT INTO tempora_schema (version, name) VALUES ($1, 'from the future')", &[&newer]).await.unwrap();
    match schema::migrate(&mut client).await {
        Err(e @ SchemaError::Newer { .. }) => {
            let m = e.to_string();
            assert!(m.contains(&format!("version {newer}")) && m.contains("newer"), "{m}");
        }
        other => panic!("expected the newer schema to be refused, got {other:?}"),
    }
    // The lock was released: another start is not left waiting.
    let mut other = postgres::connect(&url).await;
    let waited = tokio::time::timeout(std::time::Duration::from_secs(10), schema::migrate(&mut other)).await;
    assert!(matches!(waited, Ok(Err(SchemaError::Newer { .. }))), "{waited:?}");
}

/// Inserts one version of a fact and makes it the fact's latest; the
/// database's answer.
async fn put(
    client: &tokio_postgres::Client,
    tenant: i32,
    object: &str,
    slot: &str,
    status: &str,
    valid: (i64, Option<i64>),
) -> Result<u64, tokio_postgres::Error> {
    let id = uuid::Uuid::now_v7();
    let object = serde_json::json!(object).to_string();
    client
        .execute(
            "WITH v AS (
                 INSERT INTO fact_versions (tenant_id, id, tx, subject, predicate, object, confidence, valid_from,
                                            valid_until, recorded_at, status, created_tx, created_at)
                 VALUES ($1, $2, 1, 'Person:sarah', 'works_at', $3, 1.0, $4, $5, 1, $6, 1, 1)
                 RETURNING *)
             INSERT INTO facts (tenant_id, id, tx, subject, predicate, object, confidence, valid_from, valid_until,
                                recorded_at, status, created_tx, created_at, slot)
             SELECT tenant_id, id, tx, subject, predicate, object, confidence, valid_from, valid_until,
                    recorded_at, status, created_tx, created_at, $7 FROM v",
            &[&tenant, &id, &object, &valid.0, &valid.1, &status, &slot],
        )
        .await
}

fn sql_state(e: &tokio_postgres::Error) -> &str {
    e.code().map_or("", |c| c.code())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_database_refuses_what_the_rules_forbid() {
    let url = postgres::database().await;
    let mut client = postgres::connect(&url).await;
    schema::migrate(&mut client).await.unwrap();
    let tenant: i32 =
        client.query_one("INSERT INTO tenants (name, threshold) VALUES ('nas', 0.75) RETURNING id", &[]).await.unwrap().get(0);

    put(&client, tenant, "Org:acme", "", "active", (0, None)).await.expect("a first active value");
    // A second active value over overlapping valid time: refused.
    let clash = put(&client, tenant, "Org:globex", "", "active", (10, Some(20))).await.unwrap_err();
    assert_eq!(sql_state(&clash), "23P01", "an exclusion violation: {clash}");
    // Candidates, superseded facts and another slot (cardinality many) hold nothing exclusively.
    put(&client, tenant, "Org:globex", "", "candidate", (10, Some(20))).await.unwrap();
    put(&client, tenant, "Org:globex", "", "superseded", (10, Some(20))).await.unwrap();
    put(&client, tenant, "Org:initech", "m:initech", "active", (10, Some(20))).await.unwrap();
    let same_slot = put(&client, tenant, "Org:initech", "m:initech", "active", (15, None)).await.unwrap_err();
    assert_eq!(sql_state(&same_slot), "23P01", "{same_slot}");
    // An empty interval (a fact wholly taken over) overlaps nothing; an inverted one cannot be stored.
    put(&client, tenant, "Org:umbrella", "", "active", (5, Some(5))).await.unwrap();
    let inverted = put(&client, tenant, "Org:umbrella", "", "superseded", (5, Some(4))).await.unwrap_err();
    assert_eq!(sql_state(&inverted), "23514", "a check violation: {inverted}");
    // No status or cardinality outside the vocabulary.
    let status = put(&client, tenant, "Org:x", "", "maybe", (0, None)).await.unwrap_err();
    assert_eq!(sql_state(&status), "23514", "{status}");
    let card = client
        .execute("INSERT INTO predicates (tenant_id, name, cardinality) VALUES ($1, 'p', 'several')", &[&tenant])
        .await
        .unwrap_err();
    assert_eq!(sql_state(&card), "23514", "{card}");
}
