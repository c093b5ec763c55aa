#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::records::ConsumedRecord;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn backoff() -> Backoff {
    Backoff {
        initial: ms(10),
        multiplier: 3.0,
        max: ms(50),
    }
}

/// Runs `attempt` with a handler failing its first `failures` calls; returns the
/// outcome, the calls made and the waits asked for.
async fn run(max_attempts: u32, failures: u32) -> (Result<u32, (u32, String)>, u32, Vec<Duration>) {
    let calls = Cell::new(0u32);
    let mut waits = Vec::new();
    let outcome = attempt(
        max_attempts,
        &backoff(),
        async || {
            calls.set(calls.get() + 1);
            if calls.get() <= failures {
                Err(format!("boom {}", calls.get()))
            } else {
                Ok(())
            }
        },
        async |d| waits.push(d),
    )
    .await;
    (outcome, calls.get(), waits)
}

#[tokio::test]
async fn a_handler_that_succeeds_is_called_once_and_never_waits() {
    assert_eq!(run(3, 0).await, (Ok(1), 1, vec![]));
}

#[tokio::test]
async fn a_retry_that_succeeds_counts_every_attempt() {
    assert_eq!(run(3, 2).await, (Ok(3), 3, vec![ms(10), ms(30)]));
}

#[tokio::test]
async fn a_handler_that_always_fails_is_called_exactly_max_attempts_times() {
    let (outcome, calls, waits) = run(4, u32::MAX).await;
    assert_eq!(
        outcome,
        Err((4, "boom 4".to_owned())),
        "the last error is kept"
    );
    assert_eq!(calls, 4);
    // No wait after the last attempt; every wait at most the cap.
    assert_eq!(waits, vec![ms(10), ms(30), ms(50)]);
}

#[tokio::test]
async fn one_attempt_means_no_retry() {
    assert_eq!(run(1, 1).await, (Err((1, "boom 1".to_owned())), 1, vec![]));
}

fn consumed(headers: Vec<(String, Option<Bytes>)>) -> ConsumerRecord {
    ConsumerRecord {
        topic: "payments".into(),
        record: ConsumedRecord {
            partition: 1,
            offset: 4,
            timestamp: 1_700_000_000_000,
            log_append_time: false,
            key: Some(Bytes::from_static(b"k\x00\xff")),
            value: Some(Bytes::from_static(b"poison\x01")),
            headers,
            producer_id: -1,
        },
    }
}

fn header(name: &str, value: &str) -> (String, Option<Bytes>) {
    (name.to_owned(), Some(Bytes::from(value.to_owned())))
}

#[test]
fn the_copy_keeps_the_record_and_appends_the_origin() {
    let record = consumed(vec![
        header("trace", "t1"),
        ("empty".into(), None),
        // From an earlier trip through a dead-letter topic: replaced, not repeated.
        header(headers::HEADER_OFFSET, "99"),
    ]);
    let policy = DeadLetterPolicy::to_topic("dlq.payments");
    let copy = dead_letter_record(&record, "billing", 3, "not a number", &policy);
    assert_eq!(copy.key, record.key);
    assert_eq!(copy.value, record.value);
    assert_eq!(copy.timestamp, None, "stamped when written");
    let mut wanted = vec![header("trace", "t1"), ("empty".into(), None)];
    wanted.extend(
        [
            ("__dlq.errors.topic", "payments"),
            ("__dlq.errors.partition", "1"),
            ("__dlq.errors.offset", "4"),
            ("__dlq.errors.group", "billing"),
            ("__dlq.errors.delivery.count", "3"),
            ("__dlq.errors.message", "not a number"),
        ]
        .iter()
        .map(|(k, v)| header(k, v)),
    );
    assert_eq!(copy.headers, wanted);
    let origin = DeadLetterOrigin::of(&copy.headers).unwrap();
    assert_eq!((origin.offset, origin.delivery_count), (4, 3));
}

#[test]
fn without_copy_record_only_the_origin_is_written() {
    let record = consumed(vec![header("trace", "t1")]);
    let mut policy = DeadLetterPolicy::to_topic("dlq.payments");
    policy.copy_record = false;
    let copy = dead_letter_record(&record, "billing", 1, "x", &policy);
    assert_eq!((copy.key, copy.value), (None, None));
    let names: Vec<&str> = copy.headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, HEADER_NAMES.to_vec());
}
