//! The online downgrade: a consumer group whose last consumer-protocol member goes
//! (a leave heartbeat, or its session running out) becomes a classic group holding
//! the classic members and their target assignments, and asks them to rejoin.

use bytes::Buf;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;

use super::classic_tests::{
    classic_heartbeat, classic_join, classic_sync, join_new_classic, join_request, PARTITIONS,
};
use super::tests::{beat, join, topics, Driver, TOPIC};
use crate::coordinator::Shard;
use crate::group::rebalance::Waiting;
use crate::group::shard::GroupShard;
use crate::group::state::GroupState;

/// Topic `t`'s partitions in an embedded assignment, and the version it was written in.
fn embedded_partitions(assignment: &bytes::Bytes) -> (i16, Vec<i32>) {
    let mut buf = assignment.clone();
    let version = buf.get_i16();
    let decoded = ConsumerProtocolAssignment::decode(&mut buf, version).unwrap();
    let mut out: Vec<i32> = decoded
        .assigned_partitions
        .iter()
        .filter(|tp| tp.topic.0.as_str() == "t")
        .flat_map(|tp| tp.partitions.clone())
        .collect();
    out.sort_unstable();
    (version, out)
}

#[test]
fn the_last_consumer_member_leaving_turns_the_group_classic_and_its_members_rejoin() {
    let mut d = Driver::new();
    d.beat(join("a"), PARTITIONS, 0);
    let (id, joined) = join_new_classic(&mut d, 10);
    assert_eq!(joined.error, 0);
    let before = d.shard.consumer_groups["g"].clone();
    let target: Vec<i32> = before.members[&id].target[&TOPIC].iter().copied().collect();
    assert_eq!(target.len(), 2, "half is the classic member's target");

    let left = d.beat(beat("a", -1, None), PARTITIONS, 30);
    assert_eq!((left.error, left.member_epoch), (0, -1));
    assert!(
        !d.shard.consumer_groups.contains_key("g"),
        "no consumer group is left"
    );
    let classic = &d.shard.groups.map["g"];
    assert_eq!(classic.generation, before.epoch, "at the group epoch");
    assert_eq!(classic.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(classic.protocol.as_deref(), Some("range"));
    assert_eq!(classic.state, GroupState::PreparingRebalance);
    assert_eq!(classic.members.len(), 1);
    let (version, assigned) = embedded_partitions(&classic.members[&id].assignment);
    assert_eq!(version, 1, "in the version the member subscribed with");
    assert_eq!(assigned, target, "its target assignment");

    // Its next heartbeat sends it back to JoinGroup, which completes the rebalance.
    let generation = classic.generation;
    assert_eq!(
        classic_heartbeat(&mut d, &id, generation, 40),
        ResponseError::RebalanceInProgress.code()
    );
    let now = d.now(50);
    let outcome = d
        .shard
        .join(join_request(&id, &assigned), &topics(PARTITIONS), now);
    let Waiting::Later(mut rx, _) = d.apply(outcome) else {
        panic!("a classic JoinGroup waits for the join phase")
    };
    d.tick(60);
    let rejoined = rx
        .try_recv()
        .expect("the join phase ended: everyone rejoined");
    assert_eq!(rejoined.error, 0);
    assert_eq!(rejoined.generation, generation + 1);
    assert_eq!(rejoined.leader, id, "a classic group has a leader again");

    // The same classic group comes back from the records alone.
    let mut fresh = GroupShard::new(
        std::sync::Arc::new(crate::group::test_config()),
        std::sync::Arc::default(),
    );
    for (offset, r) in d.log.iter().enumerate() {
        fresh.replay(offset as i64, None, r.clone());
    }
    assert!(!fresh.consumer_groups.contains_key("g"));
    let replayed = &fresh.groups.map["g"];
    assert_eq!(replayed.generation, generation);
    assert_eq!(
        embedded_partitions(&replayed.members[&id].assignment).1,
        target
    );
}

#[test]
fn with_the_downgrade_off_the_classic_members_stay_in_a_consumer_group() {
    let mut d = Driver::with_config(crate::group::GroupConfig {
        consumer_downgrade: false,
        ..crate::group::test_config()
    });
    d.beat(join("a"), PARTITIONS, 0);
    let (id, _) = join_new_classic(&mut d, 10);
    d.beat(beat("a", -1, None), PARTITIONS, 20);
    let group = &d.shard.consumer_groups["g"];
    assert_eq!(group.members.keys().collect::<Vec<_>>(), vec![&id]);
    assert!(!d.shard.groups.map.contains_key("g"));
}

#[test]
fn a_consumer_member_whose_session_runs_out_turns_the_group_classic() {
    let mut d = Driver::new();
    d.beat(join("a"), PARTITIONS, 0);
    let (id, joined) = join_new_classic(&mut d, 10);
    // The group's session (1 s) passes for a; the classic member's own (3 s) does not.
    assert_eq!(classic_heartbeat(&mut d, &id, joined.generation, 900), 0);
    d.tick(1200);
    assert!(!d.shard.consumer_groups.contains_key("g"));
    let classic = &d.shard.groups.map["g"];
    assert_eq!(classic.members.keys().collect::<Vec<_>>(), vec![&id]);
    assert_eq!(classic.state, GroupState::PreparingRebalance);
}

#[test]
fn a_consumer_member_staying_keeps_the_group_a_consumer_group() {
    let mut d = Driver::new();
    d.beat(join("a"), PARTITIONS, 0);
    let (id, _) = join_new_classic(&mut d, 10);
    let again = classic_join(&mut d, join_request(&id, &[]), 20);
    assert_eq!(again.error, 0);
    // A second consumer-protocol member keeps the group one: a's leaving changes nothing.
    d.beat(join("b"), PARTITIONS, 30);
    d.beat(beat("a", -1, None), PARTITIONS, 40);
    assert!(d.shard.consumer_groups["g"].members.contains_key("b"));
    assert!(!d.shard.groups.map.contains_key("g"));
}

#[test]
fn a_classic_static_member_replacing_the_last_consumer_member_turns_the_group_classic() {
    let mut d = Driver::new();
    let mut a = join("a");
    a.instance_id = Some("instance".into());
    let joined = d.beat(a, PARTITIONS, 0);
    assert_eq!(joined.error, 0);
    let epoch = d.shard.consumer_groups["g"].epoch;

    let mut takeover = join_request("", &[]);
    takeover.instance_id = Some("instance".into());
    let answer = classic_join(&mut d, takeover, 10);
    assert_eq!(answer.error, 0);
    assert_ne!(answer.member_id, "a");
    assert_eq!(answer.generation, epoch);
    assert!(!d.shard.consumer_groups.contains_key("g"));
    let classic = &d.shard.groups.map["g"];
    assert_eq!(
        classic.state,
        GroupState::Stable,
        "nothing moves: no rebalance"
    );
    assert_eq!(
        classic.members.keys().collect::<Vec<_>>(),
        vec![&answer.member_id]
    );
    assert_eq!(
        classic.static_members.get("instance"),
        Some(&answer.member_id)
    );
    // It syncs to what the member it replaced held.
    assert_eq!(
        classic_sync(&mut d, &answer.member_id, answer.generation, 20),
        (0, vec![0, 1, 2, 3])
    );
}
