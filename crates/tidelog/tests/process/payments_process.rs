//! tidelog-client's `examples/payments.rs` (a consumer crediting balances in SQLite
//! through the effectively-once sink) against a real `tidelog serve`, crashed between
//! applying a batch and committing its offsets, then restarted: every payment is applied
//! exactly once, and the restart sees the redelivered ones as duplicates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

#[allow(dead_code, unreachable_pub)]
#[path = "../../../tidelog-client/examples/payments.rs"]
mod payments;

use std::time::Duration;

use bytes::Bytes;
use support::Node;
use tidelog_client::{Client, NewTopic, ProduceRecord, Producer, ProducerConfig};

const PAYMENTS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_apply_and_commit_applies_no_payment_twice() {
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

    let dir = tempfile::tempdir().unwrap();
    let database = dir
        .path()
        .join("balances.db")
        .to_string_lossy()
        .into_owned();
    let mut options = payments::Options {
        bootstrap,
        database: database.clone(),
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
        let wanted: i64 = (0..PAYMENTS as i64)
            .filter(|i| i % 10 + 1 == account)
            .map(|i| i + 1)
            .sum();
        assert_eq!(cents, wanted, "account {account}");
    }
    let keys: i64 = db
        .query_row("SELECT count(*) FROM tidelog_dedup", [], |r| r.get(0))
        .unwrap();
    assert_eq!(keys, PAYMENTS as i64);
}
