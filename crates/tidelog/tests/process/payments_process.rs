//! tidelog-client's `examples/payments.rs` (a consumer crediting balances through the
//! effectively-once sink, in SQLite or in PostgreSQL) against a real `tidelog serve`,
//! crashed between applying a batch and committing its offsets, then restarted: every
//! payment is applied exactly once, and the restart sees the redelivered ones as
//! duplicates. The PostgreSQL run uses a throwaway cluster (support/postgres.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

#[allow(dead_code, unreachable_pub)]
#[path = "../../../tidelog-client/examples/payments.rs"]
mod payments;

use std::time::Duration;

use bytes::Bytes;
use support::postgres::Postgres;
use support::Node;
use tidelog_client::{Client, NewTopic, ProduceRecord, Producer, ProducerConfig};

const PAYMENTS: usize = 300;

/// Produces the payments, runs the example until it crashes after 150 of them, restarts
/// it to the end; returns the two runs' totals.
async fn crash_and_restart(
    database: String,
    postgres: Option<String>,
) -> (payments::Totals, payments::Totals) {
    let node = Node::start(&["group.initial.rebalance.delay.ms=0"]);
    let bootstrap = node.kafka.to_string();
    let mut client = Client::connect_to(&bootstrap).await.unwrap();
    client
        .create_topic(&NewTopic {
            name: "payments".into(),
            partitions: 3,
            replication_factor: 1,
            configs: vec![],
        })
        .await
        .unwrap();
    let mut producer = Producer::new(client, ProducerConfig::default());
    for i in 0..PAYMENTS {
        let mut r =
            ProduceRecord::new(None, Some(Bytes::from(format!("{}:{}", i % 10 + 1, i + 1))));
        r.headers = vec![
            ("producer-id".into(), Some(Bytes::from_static(b"shop"))),
            (
                "idempotency-key".into(),
                Some(Bytes::from(format!("pay-{i}"))),
            ),
        ];
        producer
            .send("payments", Some((i % 3) as i32), r)
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();

    let mut options = payments::Options {
        bootstrap,
        database,
        postgres,
        topic: "payments".into(),
        group: "payments-sink".into(),
        idle_exit: Duration::from_secs(2),
        crash_after: Some(150),
    };
    let limit = Duration::from_secs(90);
    let crashed = tokio::time::timeout(limit, payments::run(&options))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(crashed.applied, 150);

    options.crash_after = None;
    let restarted = tokio::time::timeout(limit, payments::run(&options))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        crashed.applied + restarted.applied,
        PAYMENTS,
        "{crashed:?} {restarted:?}"
    );
    assert!(
        restarted.duplicates > 0,
        "the uncommitted batch came back: {restarted:?}"
    );
    assert_eq!(restarted.refused, 0);
    (crashed, restarted)
}

/// What account `account` must hold: the sum of its payments.
fn wanted(account: i64) -> i64 {
    (0..PAYMENTS as i64)
        .filter(|i| i % 10 + 1 == account)
        .map(|i| i + 1)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_apply_and_commit_applies_no_payment_twice() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir
        .path()
        .join("balances.db")
        .to_string_lossy()
        .into_owned();
    crash_and_restart(database.clone(), None).await;

    let db = rusqlite::Connection::open(&database).unwrap();
    let total: i64 = db
        .query_row("SELECT sum(cents) FROM balances", [], |r| r.get(0))
        .unwrap();
    let expected: i64 = (1..=PAYMENTS as i64).sum();
    assert_eq!(total, expected, "every payment credited exactly once");
    for account in 1..=10i64 {
        let cents: i64 = db
            .query_row("SELECT cents FROM balances WHERE id = ?1", [account], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(cents, wanted(account), "account {account}");
    }
    let keys: i64 = db
        .query_row("SELECT count(*) FROM tidelog_dedup", [], |r| r.get(0))
        .unwrap();
    assert_eq!(keys, PAYMENTS as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_crash_between_apply_and_commit_applies_no_payment_twice() {
    let pg = Postgres::start();
    crash_and_restart(String::new(), Some(pg.config())).await;

    let db = pg.connect().await;
    let total: i64 = db
        .query_one("SELECT sum(cents)::BIGINT FROM balances", &[])
        .await
        .unwrap()
        .get(0);
    let expected: i64 = (1..=PAYMENTS as i64).sum();
    assert_eq!(total, expected, "every payment credited exactly once");
    for account in 1..=10i64 {
        let cents: i64 = db
            .query_one("SELECT cents FROM balances WHERE id = $1", &[&account])
            .await
            .unwrap()
            .get(0);
        assert_eq!(cents, wanted(account), "account {account}");
    }
    let keys: i64 = db
        .query_one("SELECT count(*) FROM tidelog_dedup", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(keys, PAYMENTS as i64);
}
