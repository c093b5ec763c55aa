//! Subscription regexes resolved by the coordinator (KIP-848 with KAFKA-18813): only
//! to topics the resolving principal may describe, once per metadata image, kept as
//! records that replay, and deleted with their last user.

use uuid::Uuid;

use super::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use super::tests::{beat, Driver};
use super::{Assignment, TopicFilter, TopicsView};
use crate::coordinator::Shard;
use crate::group::shard::GroupShard;

const ORDERS_EU: Uuid = Uuid::from_u128(1);
const ORDERS_US: Uuid = Uuid::from_u128(2);
const ORDERS_ASIA: Uuid = Uuid::from_u128(3);
const SHIPMENTS: Uuid = Uuid::from_u128(4);

/// The image at `version`, seen by a principal that may describe all but `hidden`.
fn view(version: i64, with_asia: bool, hidden: &'static [&'static str]) -> TopicsView {
    let mut view = TopicsView {
        version,
        describable: TopicFilter::new(move |t| !hidden.contains(&t)),
        ..TopicsView::default()
    };
    view.insert("orders-eu", ORDERS_EU, 2);
    view.insert("orders-us", ORDERS_US, 2);
    view.insert("shipments", SHIPMENTS, 1);
    view.insert("__consumer_offsets", Uuid::from_u128(9), 50);
    if with_asia {
        view.insert("orders-asia", ORDERS_ASIA, 1);
    }
    view
}

fn join_regex(member: &str, regex: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 5000,
        subscribed_topic_regex: Some(regex.into()),
        owned: Some(Assignment::new()),
        client_id: "c".into(),
        ..HeartbeatRequest::default()
    }
}

fn beat_in(d: &mut Driver, req: HeartbeatRequest, view: &TopicsView, ms: u64) -> HeartbeatResponse {
    let now = d.now(ms);
    let outcome = d.shard.consumer_heartbeat(req, view, now);
    d.apply(outcome)
}

fn resolved(d: &Driver, regex: &str) -> Vec<String> {
    d.shard.consumer_groups["g"].regexes[regex]
        .topics
        .iter()
        .cloned()
        .collect()
}

fn assigned_topics(response: &HeartbeatResponse) -> Vec<Uuid> {
    response
        .assignment
        .as_ref()
        .map(|a| a.keys().copied().collect())
        .unwrap_or_default()
}

#[test]
fn a_regex_resolves_only_to_topics_the_member_may_describe() {
    let mut d = Driver::new();
    let a = beat_in(
        &mut d,
        join_regex("a", "orders-.*"),
        &view(10, false, &["orders-us"]),
        0,
    );
    assert_eq!(a.error, 0);
    assert_eq!(resolved(&d, "orders-.*"), vec!["orders-eu"]);
    assert_eq!(assigned_topics(&a), vec![ORDERS_EU]);
}

#[test]
fn another_principal_at_the_same_image_does_not_move_the_resolution() {
    let mut d = Driver::new();
    beat_in(
        &mut d,
        join_regex("a", "orders-.*"),
        &view(10, false, &[]),
        0,
    );
    let epoch = d.shard.consumer_groups["g"].epoch;
    // b may not describe orders-us, but the regex was resolved at this image already.
    beat_in(
        &mut d,
        join_regex("b", "orders-.*"),
        &view(10, false, &["orders-us"]),
        10,
    );
    assert_eq!(resolved(&d, "orders-.*"), vec!["orders-eu", "orders-us"]);
    // Only b's joining moved the group epoch.
    assert_eq!(d.shard.consumer_groups["g"].epoch, epoch + 1);
}

#[test]
fn a_newer_image_re_resolves_the_regex_and_the_new_topic_is_assigned() {
    let mut d = Driver::new();
    let a = beat_in(
        &mut d,
        join_regex("a", "orders-.*"),
        &view(10, false, &[]),
        0,
    );
    let owned = a.assignment.clone().unwrap_or_default();
    // The same image: nothing new; a newer one with orders-asia: resolved again.
    beat_in(
        &mut d,
        beat("a", a.member_epoch, Some(&owned)),
        &view(10, true, &[]),
        10,
    );
    assert_eq!(resolved(&d, "orders-.*"), vec!["orders-eu", "orders-us"]);
    let a = beat_in(
        &mut d,
        beat("a", a.member_epoch, Some(&owned)),
        &view(11, true, &[]),
        20,
    );
    assert_eq!(
        resolved(&d, "orders-.*"),
        vec!["orders-asia", "orders-eu", "orders-us"]
    );
    assert_eq!(assigned_topics(&a), vec![ORDERS_EU, ORDERS_US, ORDERS_ASIA]);
}

#[test]
fn resolved_regexes_replay_from_the_records_and_go_with_their_last_user() {
    let mut d = Driver::new();
    beat_in(
        &mut d,
        join_regex("a", "orders-e.*"),
        &view(10, false, &[]),
        0,
    );
    let b = beat_in(&mut d, join_regex("b", "ship.*"), &view(10, false, &[]), 0);
    assert_eq!(assigned_topics(&b), vec![SHIPMENTS]);

    let mut replayed = GroupShard::new(
        std::sync::Arc::new(crate::group::test_config()),
        std::sync::Arc::default(),
    );
    for (i, r) in d.log.iter().enumerate() {
        let (key, value) = GroupShard::encode(r).expect("encode");
        let back = GroupShard::decode(&key, value.as_deref()).expect("decode");
        replayed.replay(i as i64, None, back);
    }
    assert_eq!(
        replayed.consumer_groups["g"].regexes,
        d.shard.consumer_groups["g"].regexes
    );

    // b leaves, and the regex only b used goes with it.
    beat_in(&mut d, beat("b", -1, None), &view(10, false, &[]), 10);
    let regexes: Vec<&String> = d.shard.consumer_groups["g"].regexes.keys().collect();
    assert_eq!(regexes, vec!["orders-e.*"]);

    // The last member leaving takes the last regex with it; the group then goes.
    beat_in(&mut d, beat("a", -1, None), &view(10, false, &[]), 30);
    assert!(d.shard.consumer_groups["g"].regexes.is_empty());
    let deleted = d.shard.delete_group("g");
    assert_eq!(d.apply(deleted), 0);
    assert!(d.shard.consumer_groups.is_empty());
}
