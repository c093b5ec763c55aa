//! The effectively-once sink's PostgreSQL backend (`sink::postgres`) on records consumed
//! from a real `tidelog serve`, writing into a real PostgreSQL (a throwaway cluster from
//! Debian's package, support/postgres.rs): the chapter's three cases (normal apply; the
//! same payment redelivered at another offset is a duplicate; an effect matching no row
//! rolls back and leaves no key), a failing effect, two sinks racing on one key, and
//! expiry by the dedup window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use support::postgres::Postgres;
use support::Node;
use tidelog_client::sink::postgres::{EffectFuture, PostgresSink};
use tidelog_client::sink::{DedupKey, DedupWindow, Outcome, SinkError};
use tidelog_client::{
    Client, Consumer, ConsumerConfig, ConsumerRecord, NewTopic, OffsetReset, ProduceRecord,
    Producer, ProducerConfig,
};
use tokio::time::timeout;
use tokio_postgres::Transaction;

const LIMIT: Duration = Duration::from_secs(60);
const WINDOW: DedupWindow = DedupWindow {
    session_timeout: Duration::from_secs(45),
    rebalance_time: Duration::from_secs(15),
};
const NOW: i64 = 1_000_000;

/// A payment: `ACCOUNT:CENTS` with the producer's `producer-id` and `idempotency-key`.
struct Payment {
    account: i64,
    cents: i64,
    key: &'static str,
}

/// Produces `payments` in order to a one-partition topic of a fresh node (so offset i is
/// payment i) and consumes them back as the sink sees them.
async fn deliver(payments: &[Payment]) -> (Node, Vec<ConsumerRecord>) {
    let node = Node::start(&[]);
    let bootstrap = node.kafka.to_string();
    let mut client = Client::connect_to(&bootstrap).await.unwrap();
    client
        .create_topic(&NewTopic {
            name: "payments".into(),
            partitions: 1,
            replication_factor: 1,
            configs: vec![],
        })
        .await
        .unwrap();
    let mut producer = Producer::new(client, ProducerConfig::default());
    for p in payments {
        let mut r = ProduceRecord::new(
            None,
            Some(Bytes::from(format!("{}:{}", p.account, p.cents))),
        );
        r.headers = vec![
            ("producer-id".into(), Some(Bytes::from_static(b"shop"))),
            ("idempotency-key".into(), Some(Bytes::from(p.key))),
        ];
        producer.send("payments", Some(0), r).await.unwrap();
    }
    producer.flush().await.unwrap();

    let mut config = ConsumerConfig::for_group("postgres-sink");
    config.auto_offset_reset = OffsetReset::Earliest;
    config.enable_auto_commit = false;
    let mut consumer =
        Consumer::new(Client::connect_to(&bootstrap).await.unwrap(), config).unwrap();
    consumer.assign(&[("payments".into(), 0)]).unwrap();
    let deadline = Instant::now() + LIMIT;
    let mut records = Vec::new();
    while records.len() < payments.len() {
        assert!(Instant::now() < deadline, "consumed only {records:?}");
        records.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
    }
    assert_eq!(records.len(), payments.len());
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, i as i64);
    }
    (node, records)
}

/// A sink on a fresh cluster, with accounts 1..=3 at 0.
async fn open_sink(pg: &Postgres) -> PostgresSink {
    let sink = timeout(LIMIT, PostgresSink::connect(&pg.config(), WINDOW))
        .await
        .unwrap()
        .unwrap();
    create_balances(&sink).await;
    sink
}

async fn create_balances(sink: &PostgresSink) {
    sink.client()
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS balances (id BIGINT PRIMARY KEY, cents BIGINT NOT NULL);
             INSERT INTO balances VALUES (1, 0), (2, 0), (3, 0) ON CONFLICT (id) DO NOTHING;",
        )
        .await
        .unwrap();
}

fn credit(
    account: i64,
    cents: i64,
) -> impl for<'t> FnOnce(&'t Transaction<'t>) -> EffectFuture<'t> {
    move |tx| {
        Box::pin(async move {
            tx.execute(
                "UPDATE balances SET cents = cents + $1 WHERE id = $2",
                &[&cents, &account],
            )
            .await
        })
    }
}

/// The effect the record asks for.
fn credit_of(
    record: &ConsumerRecord,
) -> impl for<'t> FnOnce(&'t Transaction<'t>) -> EffectFuture<'t> {
    let text = std::str::from_utf8(record.value.as_deref().unwrap()).unwrap();
    let (account, cents) = text.split_once(':').unwrap();
    credit(account.parse().unwrap(), cents.parse().unwrap())
}

async fn balance(sink: &PostgresSink, account: i64) -> i64 {
    sink.client()
        .query_one("SELECT cents FROM balances WHERE id = $1", &[&account])
        .await
        .unwrap()
        .get(0)
}

async fn keys(sink: &PostgresSink) -> i64 {
    sink.client()
        .query_one("SELECT count(*) FROM tidelog_dedup", &[])
        .await
        .unwrap()
        .get(0)
}

async fn apply(sink: &mut PostgresSink, record: &ConsumerRecord) -> Result<Outcome, SinkError> {
    apply_at(sink, record, NOW).await
}

/// Applies the record's credit with the clock at `now`.
async fn apply_at(
    sink: &mut PostgresSink,
    record: &ConsumerRecord,
    now: i64,
) -> Result<Outcome, SinkError> {
    timeout(LIMIT, sink.apply_at(record, now, credit_of(record)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_normal_apply_commits_the_effect_and_its_key() {
    let pg = Postgres::start();
    let (_node, records) = deliver(&[Payment {
        account: 1,
        cents: 250,
        key: "pay-1",
    }])
    .await;
    let mut sink = open_sink(&pg).await;
    assert_eq!(
        apply(&mut sink, &records[0]).await.unwrap(),
        Outcome::Applied
    );
    assert_eq!(balance(&sink, 1).await, 250);
    assert!(sink
        .contains(&DedupKey::of(&records[0]).unwrap())
        .await
        .unwrap());
    // The same delivery again (a crash before the offset commit): nothing runs.
    assert_eq!(
        apply(&mut sink, &records[0]).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(balance(&sink, 1).await, 250);
    assert_eq!(keys(&sink).await, 1);
    // The table's schema is created idempotently: a second sink opens on it.
    let again = open_sink(&pg).await;
    assert_eq!(keys(&again).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_redelivery_at_a_different_offset_is_a_duplicate() {
    // An unclean election truncated the log after pay-1 and the producer re-sent it: the
    // same logical payment now sits at offset 2 as well as at offset 0.
    let pg = Postgres::start();
    let (_node, records) = deliver(&[
        Payment {
            account: 1,
            cents: 250,
            key: "pay-1",
        },
        Payment {
            account: 2,
            cents: 40,
            key: "pay-2",
        },
        Payment {
            account: 1,
            cents: 250,
            key: "pay-1",
        },
    ])
    .await;
    assert_ne!(records[0].offset, records[2].offset);
    assert_eq!(
        DedupKey::of(&records[0]).unwrap(),
        DedupKey::of(&records[2]).unwrap()
    );
    let mut sink = open_sink(&pg).await;
    assert_eq!(
        apply(&mut sink, &records[0]).await.unwrap(),
        Outcome::Applied
    );
    assert_eq!(
        apply(&mut sink, &records[1]).await.unwrap(),
        Outcome::Applied
    );
    assert_eq!(
        apply(&mut sink, &records[2]).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(balance(&sink, 1).await, 250);
    assert_eq!(balance(&sink, 2).await, 40);
    assert_eq!(keys(&sink).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_an_effect_matching_no_row_rolls_back_and_leaves_no_key() {
    let pg = Postgres::start();
    let (_node, records) = deliver(&[Payment {
        account: 999,
        cents: 250,
        key: "pay-10",
    }])
    .await;
    let mut sink = open_sink(&pg).await;
    let err = apply(&mut sink, &records[0]).await.unwrap_err();
    assert!(
        matches!(err, SinkError::NoOpEffect { ref key } if key == "shop:pay-10"),
        "{err}"
    );
    assert!(!sink
        .contains(&DedupKey::of(&records[0]).unwrap())
        .await
        .unwrap());
    assert_eq!(keys(&sink).await, 0);
    // The redelivery, once the account exists, is applied rather than refused.
    sink.client()
        .execute("INSERT INTO balances VALUES (999, 0)", &[])
        .await
        .unwrap();
    assert_eq!(
        apply(&mut sink, &records[0]).await.unwrap(),
        Outcome::Applied
    );
    assert_eq!(balance(&sink, 999).await, 250);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_a_failing_effect_rolls_back_its_key_and_the_sink_goes_on() {
    let pg = Postgres::start();
    let (_node, records) = deliver(&[
        Payment {
            account: 1,
            cents: 5,
            key: "pay-11",
        },
        Payment {
            account: 1,
            cents: 7,
            key: "pay-12",
        },
    ])
    .await;
    let mut sink = open_sink(&pg).await;
    let failed = timeout(
        LIMIT,
        sink.apply_at(&records[0], NOW, |tx| {
            Box::pin(async move { tx.execute("UPDATE nowhere SET x = 1", &[]).await })
        }),
    )
    .await
    .unwrap();
    match failed {
        Err(e @ SinkError::Postgres(_)) => assert!(
            e.to_string()
                .contains("relation \"nowhere\" does not exist"),
            "the server's message is shown: {e}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(!sink
        .contains(&DedupKey::of(&records[0]).unwrap())
        .await
        .unwrap());
    // The aborted transaction is gone: the next record and the retry both apply.
    assert_eq!(
        apply(&mut sink, &records[1]).await.unwrap(),
        Outcome::Applied
    );
    assert_eq!(
        apply(&mut sink, &records[0]).await.unwrap(),
        Outcome::Applied
    );
    assert_eq!(balance(&sink, 1).await, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_two_sinks_racing_on_one_key_apply_it_once() {
    let pg = Postgres::start();
    let (_node, records) = deliver(&[Payment {
        account: 3,
        cents: 99,
        key: "pay-13",
    }])
    .await;
    // Two members opening at once: the dedup table is created under an advisory lock,
    // as a bare `CREATE TABLE IF NOT EXISTS` from both would race (and fail one of them
    // on pg_type's unique index). Then the same record applied by both at once (a
    // rebalance handed the partition over mid-batch).
    let config = pg.config();
    let (a, b) = tokio::join!(
        PostgresSink::connect(&config, WINDOW),
        PostgresSink::connect(&config, WINDOW)
    );
    let (mut a, mut b) = (a.unwrap(), b.unwrap());
    create_balances(&a).await;
    let (ra, rb) = tokio::join!(apply(&mut a, &records[0]), apply(&mut b, &records[0]));
    let mut outcomes = [ra.unwrap(), rb.unwrap()];
    outcomes.sort_by_key(|o| *o == Outcome::Duplicate);
    assert_eq!(outcomes, [Outcome::Applied, Outcome::Duplicate]);
    assert_eq!(balance(&a, 3).await, 99);
    assert_eq!(keys(&a).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_keys_expire_after_the_window_and_not_before() {
    let pg = Postgres::start();
    let (_node, records) = deliver(&[
        Payment {
            account: 1,
            cents: 1,
            key: "pay-14",
        },
        Payment {
            account: 1,
            cents: 2,
            key: "pay-15",
        },
        Payment {
            account: 1,
            cents: 4,
            key: "pay-16",
        },
    ])
    .await;
    let mut sink = open_sink(&pg).await;
    assert_eq!(
        apply(&mut sink, &records[0]).await.unwrap(),
        Outcome::Applied
    );
    // Within the 60 s window the key stays, past it the key goes.
    assert_eq!(sink.expire_keys(NOW + 59_000).await.unwrap(), 0);
    assert!(sink
        .contains(&DedupKey::of(&records[0]).unwrap())
        .await
        .unwrap());
    assert_eq!(sink.expire_keys(NOW + 61_000).await.unwrap(), 1);
    assert!(!sink
        .contains(&DedupKey::of(&records[0]).unwrap())
        .await
        .unwrap());
    // apply expires on its own, at most every half window (30 s here).
    let mut sink = open_sink(&pg).await;
    assert_eq!(
        apply_at(&mut sink, &records[1], NOW).await.unwrap(),
        Outcome::Applied
    );
    // 40 s later an expiry is due, but the key of NOW is inside the window.
    assert_eq!(
        apply_at(&mut sink, &records[2], NOW + 40_000)
            .await
            .unwrap(),
        Outcome::Applied
    );
    assert_eq!(keys(&sink).await, 2);
    assert_eq!(
        apply_at(&mut sink, &records[1], NOW + 40_000)
            .await
            .unwrap(),
        Outcome::Duplicate
    );
    // 90 s later the key of NOW has expired (the one of NOW + 40 s has not), so the same
    // payment applies again: this is why the window must cover every redelivery the
    // system makes, and why a replay past it is warned about.
    assert_eq!(
        apply_at(&mut sink, &records[1], NOW + 90_000)
            .await
            .unwrap(),
        Outcome::Applied
    );
    assert_eq!(keys(&sink).await, 2);
    assert_eq!(balance(&sink, 1).await, 1 + 2 + 4 + 2);
}
