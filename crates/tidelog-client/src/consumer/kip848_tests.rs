//! The membership state the heartbeat task and `poll` share, and the heartbeat built
//! from it.
#![allow(clippy::unwrap_used)]

use super::*;

fn settings() -> Settings {
    Settings {
        group: "g".into(),
        instance_id: None,
        rebalance_timeout: Duration::from_secs(300),
        assignor: Some("uniform".into()),
        rack: Some("eu-west-1a".into()),
        heartbeat_interval: Duration::from_secs(3),
        max_poll_interval: Duration::from_secs(300),
        client: ClientConfig::new("127.0.0.1:9092").unwrap(),
    }
}

#[test]
fn a_heartbeat_reports_what_is_owned_and_a_rejoin_reports_nothing() {
    let state = Membership::new();
    state.set_topics(&["a".to_string(), "b".to_string()]);
    let topic = Uuid::from_u128(7);
    state.lock().epoch = 3;
    state.set_owned(0, BTreeSet::from([(topic, 0), (topic, 2)]));
    let joined = request(&settings(), &state.lock());
    assert_eq!(joined.member_epoch, 3);
    let owned = joined.topic_partitions.unwrap();
    assert_eq!(owned.len(), 1);
    assert_eq!(owned[0].partitions, vec![0, 2]);
    assert_eq!(joined.subscribed_topic_names.unwrap().len(), 2);
    assert_eq!(joined.server_assignor.unwrap().as_str(), "uniform");
    assert_eq!(joined.rebalance_timeout_ms, 300_000);
    assert_eq!(joined.rack_id.unwrap().as_str(), "eu-west-1a");
    assert!(joined.subscribed_topic_regex.is_none());

    // Fenced: rejoin at epoch 0 owning nothing, with the same member id.
    let id = state.identity().0;
    state.lose();
    let rejoin = request(&settings(), &state.lock());
    assert_eq!(rejoin.member_epoch, 0);
    assert_eq!(rejoin.member_id.as_str(), id);
    assert!(rejoin.topic_partitions.unwrap().is_empty());
    assert!(state.take_lost());
    assert!(!state.take_lost());
}

#[test]
fn a_reconciliation_from_before_the_rejoin_is_not_reported() {
    let state = Membership::new();
    let topic = Uuid::from_u128(1);
    let old = Target {
        join: 0,
        partitions: BTreeSet::from([(topic, 0)]),
    };
    state.lose();
    state.set_owned(old.join, old.partitions.clone());
    assert!(state.lock().owned.is_empty());
    state.retry_target(old);
    assert!(
        state.take_target().is_none(),
        "a stale target is not retried"
    );
    let current = Target {
        join: 1,
        partitions: BTreeSet::from([(topic, 1)]),
    };
    state.retry_target(current.clone());
    assert_eq!(state.take_target(), Some(current));
}

#[test]
fn a_regex_subscription_is_sent_and_leaving_it_is_announced_with_an_empty_one() {
    let state = Membership::new();
    state.set_regex(Some("orders-.*"));
    let with_regex = request(&settings(), &state.lock());
    assert_eq!(
        with_regex.subscribed_topic_regex.unwrap().as_str(),
        "orders-.*"
    );
    assert_eq!(with_regex.subscribed_topic_names.unwrap().len(), 0);
    state.lock().sent_regex = true;
    state.set_regex(None);
    state.set_topics(&["a".to_string()]);
    let by_names = request(&settings(), &state.lock());
    assert_eq!(by_names.subscribed_topic_regex.unwrap().as_str(), "");
    assert_eq!(by_names.subscribed_topic_names.unwrap().len(), 1);
}
