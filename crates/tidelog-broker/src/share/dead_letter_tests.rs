use std::collections::HashMap;

use bytes::Bytes;
use tidelog_records::{BatchHeader, RecordIter};

use super::*;
use crate::share::partition::{DeadLetter, DeadLetterCause};

fn rules(auto_create: bool, prefix: &str) -> ClusterRules {
    ClusterRules {
        auto_create,
        prefix: prefix.to_string(),
    }
}

fn target(topic: &str) -> Target {
    Target {
        topic: topic.to_string(),
        copy_record: true,
    }
}

fn config(message: &str) -> Result<bool, DeadLetterError> {
    Err(DeadLetterError::Config(message.to_string()))
}

/// Kafka's `validateDlqTopic`, rule by rule, in its order.
#[test]
fn a_dead_letter_topic_is_checked_in_kafkas_order() {
    let dlq = rules(false, "dlq.");
    assert_eq!(
        validate("g", &target("__consumer_offsets"), Some(true), &dlq),
        config("Configured DLQ topic name in share group: g cannot start with __, topic: __consumer_offsets.")
    );
    assert_eq!(
        validate("g", &target("dlq.g"), Some(false), &dlq),
        config("DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.g.")
    );
    assert_eq!(
        validate("g", &target("dlq.g"), None, &dlq),
        config("DLQ topic does not exist and auto create is disabled on cluster for share group: g, topic: dlq.g.")
    );
    assert_eq!(
        validate("g", &target("orders.dead"), Some(true), &dlq),
        config("Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, topic: orders.dead, prefix: dlq..")
    );
    assert_eq!(validate("g", &target("dlq.g"), Some(true), &dlq), Ok(true));
    assert_eq!(
        validate("g", &target("dlq.g"), None, &rules(true, "dlq.")),
        Ok(false)
    );
    // An empty prefix lifts the naming rule.
    assert_eq!(
        validate("g", &target("orders.dead"), Some(true), &rules(false, "")),
        Ok(true)
    );
}

fn letter(offset: i64, delivery_count: i16, cause: DeadLetterCause) -> DeadLetter {
    DeadLetter {
        offset,
        delivery_count,
        cause,
    }
}

type Decoded = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<String>)>,
);

fn decode(batch: &[u8]) -> Vec<Decoded> {
    let header = BatchHeader::new(batch).unwrap();
    let block = tidelog_records::records_block(batch, 1 << 20).unwrap();
    RecordIter::new(&block, header.record_count())
        .map(|r| {
            let r = r.unwrap();
            (
                header.record_timestamp(r.timestamp_delta),
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                r.headers()
                    .map(|h| {
                        (
                            String::from_utf8_lossy(h.key).into_owned(),
                            h.value.map(|v| String::from_utf8_lossy(v).into_owned()),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

/// The copy carries the KIP's headers, the source key and value when there are any,
/// and the time of the write.
#[test]
fn a_dead_letter_record_carries_the_kips_headers() {
    let mut sources = HashMap::new();
    sources.insert(
        7,
        (
            Some(Bytes::from_static(b"k")),
            Some(Bytes::from_static(b"v")),
        ),
    );
    let letters = [
        letter(7, 1, DeadLetterCause::ClientReject),
        letter(9, 3, DeadLetterCause::DeliveryCountExceeded),
    ];
    let (batch, offsets) = build_batch(("g", "orders", 2), &letters, &sources, 1_000).unwrap();
    assert_eq!(offsets, vec![7, 9]);
    let headers = |offset: &str, count: &str, message: &str| {
        [
            (HEADER_TOPIC, "orders"),
            (HEADER_PARTITION, "2"),
            (HEADER_OFFSET, offset),
            (HEADER_GROUP, "g"),
            (HEADER_DELIVERY_COUNT, count),
            (HEADER_MESSAGE, message),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect::<Vec<_>>()
    };
    assert_eq!(
        decode(&batch),
        vec![
            (
                1_000,
                Some(b"k".to_vec()),
                Some(b"v".to_vec()),
                headers("7", "1", "Offset rejected by client.")
            ),
            (
                1_000,
                None,
                None,
                headers("9", "3", "Offset delivery count exceeded the threshold.")
            ),
        ]
    );
}

#[test]
fn a_batch_stops_at_its_byte_budget() {
    let big = Bytes::from(vec![0u8; MAX_BATCH_BYTES]);
    let mut sources = HashMap::new();
    for offset in 0..3 {
        sources.insert(offset, (None, Some(big.clone())));
    }
    let letters: Vec<_> = (0..3)
        .map(|o| letter(o, 1, DeadLetterCause::ClientReject))
        .collect();
    let (_, offsets) = build_batch(("g", "t", 0), &letters, &sources, 0).unwrap();
    assert_eq!(offsets, vec![0], "the first record always goes");
}
