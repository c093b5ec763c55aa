//! KIP-848 subscription by regular expression (`subscribe_regex`, the broker resolves
//! `SubscribedTopicRegex`) against a real `tidelog serve`: the member gets the matching
//! topics' partitions, a topic created later that matches joins the assignment, and
//! topics that do not match are never assigned.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use support::native::{client, create_topic};
use support::Node;
use tidelog_client::{Consumer, ConsumerConfig, OffsetReset};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regex_subscription_follows_the_matching_topics() {
    let node = Node::start(&[
        "group.consumer.heartbeat.interval.ms=200",
        "group.consumer.min.heartbeat.interval.ms=100",
    ]);
    create_topic(&node, "re-orders", 2).await;
    create_topic(&node, "re-refunds", 1).await;
    create_topic(&node, "other", 2).await;

    let mut c = ConsumerConfig::for_group("regexers");
    c.set("group.protocol", "consumer").unwrap();
    c.auto_offset_reset = OffsetReset::Earliest;
    c.fetch.max_wait = Duration::from_millis(50);
    let mut consumer = Consumer::new(client(&node).await, c).unwrap();
    consumer.subscribe_regex("re-.*").unwrap();
    let wanted = |list: &[(&str, i32)]| -> Vec<(String, i32)> {
        list.iter().map(|(t, p)| ((*t).to_string(), *p)).collect()
    };
    let first = wanted(&[("re-orders", 0), ("re-orders", 1), ("re-refunds", 0)]);
    timeout(LIMIT, async {
        while consumer.assignment() != first {
            consumer.poll(Duration::from_millis(100)).await.unwrap();
            assert!(consumer.assignment().iter().all(|tp| tp.0 != "other"));
        }
    })
    .await
    .expect("the matching topics are assigned");

    create_topic(&node, "re-late", 1).await;
    let mut second = first.clone();
    second.push(("re-late".to_string(), 0));
    second.sort();
    timeout(LIMIT, async {
        while consumer.assignment() != second {
            consumer.poll(Duration::from_millis(100)).await.unwrap();
        }
    })
    .await
    .expect("a topic created later that matches is assigned");
    consumer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_member_cannot_subscribe_by_regex() {
    let mut c = ConsumerConfig::for_group("g");
    c.auto_offset_reset = OffsetReset::Earliest;
    let node = Node::start(&[]);
    let mut consumer = Consumer::new(client(&node).await, c).unwrap();
    assert!(consumer.subscribe_regex("re-.*").is_err());
}
