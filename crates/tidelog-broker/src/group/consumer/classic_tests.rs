//! Classic members in consumer groups, and the two ways a group changes kind: a classic
//! member joining a consumer group with members, reconciling through rejoins; a
//! consumer-protocol member upgrading a classic group with members; a JoinGroup
//! turning an empty consumer group into a classic one.

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition;
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::tests::{beat, join, partitions, topics, Driver, TOPIC};
use super::{Assignment, MemberState};
use crate::coordinator::Shard;
use crate::group::join::JoinRequest;
use crate::group::members::SyncRequest;
use crate::group::rebalance::Waiting;
use crate::group::shard::GroupShard;
use crate::group::state::JoinOutcome;

pub(super) const PARTITIONS: i32 = 4;

/// ConsumerProtocolSubscription v1 of topic `t`, owning `owned` of it.
fn subscription(owned: &[i32]) -> Bytes {
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("t")])
        .with_owned_partitions(if owned.is_empty() {
            Vec::new()
        } else {
            vec![TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(owned.to_vec())]
        });
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&1i16.to_be_bytes());
    sub.encode(&mut buf, 1).unwrap();
    buf.freeze()
}

pub(super) fn join_request(member: &str, owned: &[i32]) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        client_id: "classic".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 3000,
        rebalance_timeout_ms: 5000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(owned))],
        require_known_member: true,
    }
}

pub(super) fn classic_join(d: &mut Driver, req: JoinRequest, ms: u64) -> JoinOutcome {
    let now = d.now(ms);
    let outcome = d.shard.join(req, &topics(PARTITIONS), now);
    match d.apply(outcome) {
        Waiting::Now(o) => o,
        Waiting::Later(..) => panic!("a classic member of a consumer group is answered at once"),
    }
}

/// The partitions of topic `t` SyncGroup hands the member.
pub(super) fn classic_sync(
    d: &mut Driver,
    member: &str,
    generation: i32,
    ms: u64,
) -> (i16, Vec<i32>) {
    let now = d.now(ms);
    let req = SyncRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        generation,
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments: Vec::new(),
    };
    let outcome = d.shard.sync(req, &topics(PARTITIONS), now);
    let Waiting::Now(sync) = d.apply(outcome) else {
        panic!("answered at once")
    };
    if sync.error != 0 {
        return (sync.error, Vec::new());
    }
    let mut buf = sync.assignment.clone();
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    assert_eq!(version, 1, "answered in the version it subscribed with");
    let _ = bytes::Buf::get_i16(&mut buf);
    let a = ConsumerProtocolAssignment::decode(&mut buf, version).unwrap();
    let mut out: Vec<i32> = a
        .assigned_partitions
        .iter()
        .filter(|tp| tp.topic.0.as_str() == "t")
        .flat_map(|tp| tp.partitions.clone())
        .collect();
    out.sort_unstable();
    (0, out)
}

pub(super) fn classic_heartbeat(d: &mut Driver, member: &str, generation: i32, ms: u64) -> i16 {
    let now = d.now(ms);
    d.shard.heartbeat("g", member, None, generation, now)
}

/// A classic member joins (MEMBER_ID_REQUIRED, then with its id): its id and answer.
pub(super) fn join_new_classic(d: &mut Driver, ms: u64) -> (String, JoinOutcome) {
    let first = classic_join(d, join_request("", &[]), ms);
    assert_eq!(first.error, ResponseError::MemberIdRequired.code());
    let id = first.member_id.clone();
    let joined = classic_join(d, join_request(&id, &[]), ms);
    (id, joined)
}

#[test]
fn a_classic_member_joins_a_consumer_group_and_reconciles_through_rejoins() {
    let mut d = Driver::new();
    let a = d.beat(join("a"), PARTITIONS, 0);
    let owned_a = a.assignment.clone().unwrap_or_default();
    assert_eq!(partitions(&a.assignment), vec![0, 1, 2, 3]);

    let (id, joined) = join_new_classic(&mut d, 10);
    assert_eq!(joined.error, 0);
    assert_eq!(joined.generation, 2, "its generation is its member epoch");
    assert_eq!(joined.leader, "", "the coordinator assigns, nobody leads");
    assert_eq!(joined.protocol.as_deref(), Some("range"));
    assert!(joined.members.is_empty());
    // Its share is still a's: it syncs to nothing yet.
    assert_eq!(classic_sync(&mut d, &id, 2, 20), (0, vec![]));
    assert_eq!(
        classic_heartbeat(&mut d, &id, 2, 30),
        0,
        "nothing is free yet"
    );

    // a gives up two partitions; then the classic member is told to rejoin.
    let a = d.beat(beat("a", 1, Some(&owned_a)), PARTITIONS, 40);
    let kept = a.assignment.clone().unwrap_or_default();
    let a = d.beat(beat("a", 1, Some(&kept)), PARTITIONS, 50);
    assert_eq!(a.member_epoch, 2);
    assert_eq!(
        classic_heartbeat(&mut d, &id, 2, 60),
        ResponseError::RebalanceInProgress.code()
    );
    let again = classic_join(&mut d, join_request(&id, &[]), 70);
    assert_eq!((again.error, again.generation), (0, 2));
    let (code, mine) = classic_sync(&mut d, &id, 2, 80);
    assert_eq!(code, 0);
    assert_eq!(mine.len(), 2);
    let theirs = partitions(&Some(kept));
    assert!(
        mine.iter().all(|p| !theirs.contains(p)),
        "no partition has two owners"
    );
    assert_eq!(classic_heartbeat(&mut d, &id, 2, 90), 0);
    assert_eq!(
        classic_heartbeat(&mut d, &id, 1, 95),
        ResponseError::IllegalGeneration.code()
    );
}

#[test]
fn a_classic_member_revokes_by_rejoining_with_fewer_owned_partitions() {
    let mut d = Driver::with_config(crate::group::GroupConfig {
        consumer_downgrade: false,
        ..crate::group::test_config()
    });
    let (id, joined) = {
        let a = d.beat(join("a"), PARTITIONS, 0);
        let owned_a = a.assignment.clone().unwrap_or_default();
        // a leaves: the group has only the classic member once it joins (and stays a
        // consumer group: the downgrade is off).
        let (id, joined) = join_new_classic(&mut d, 10);
        let _ = d.beat(beat("a", 1, Some(&owned_a)), PARTITIONS, 20);
        let _ = d.beat(beat("a", -1, None), PARTITIONS, 30);
        (id, joined)
    };
    assert_eq!(joined.error, 0);
    let back = classic_join(&mut d, join_request(&id, &[]), 40);
    let (_, all) = classic_sync(&mut d, &id, back.generation, 50);
    assert_eq!(all, vec![0, 1, 2, 3]);

    // A consumer-protocol member arrives: the classic member must give up half.
    let b = d.beat(join("b"), PARTITIONS, 60);
    assert_eq!(partitions(&b.assignment), Vec::<i32>::new());
    assert_eq!(
        classic_heartbeat(&mut d, &id, back.generation, 70),
        ResponseError::RebalanceInProgress.code()
    );
    // Cooperative: it rejoins still owning everything, and is asked to revoke.
    let revoking = classic_join(&mut d, join_request(&id, &all), 80);
    assert_eq!(
        revoking.generation, back.generation,
        "it stays at its epoch"
    );
    let member = &d.shard.consumer_groups["g"].members[&id];
    assert_eq!(member.current.state, MemberState::UnrevokedPartitions);
    let (_, keep) = classic_sync(&mut d, &id, revoking.generation, 90);
    assert_eq!(keep.len(), 2);
    assert_eq!(
        classic_heartbeat(&mut d, &id, revoking.generation, 100),
        ResponseError::RebalanceInProgress.code(),
        "asked to rejoin once it revoked"
    );
    let done = classic_join(&mut d, join_request(&id, &keep), 110);
    assert!(done.generation > revoking.generation);
    let b = d.beat(
        beat("b", b.member_epoch, Some(&Assignment::new())),
        PARTITIONS,
        120,
    );
    let theirs = partitions(&b.assignment);
    assert_eq!(theirs.len(), 2);
    assert!(theirs.iter().all(|p| !keep.contains(p)));
}

#[test]
fn a_classic_members_session_is_its_own_and_leave_group_removes_it() {
    let mut d = Driver::new();
    d.beat(join("a"), PARTITIONS, 0);
    let (id, _) = join_new_classic(&mut d, 10);
    // The group's session (1 s) passes; the classic member's own (3 s) has not.
    d.beat(beat("a", 1, None), PARTITIONS, 1500);
    d.tick(1600);
    assert!(d.shard.consumer_groups["g"].members.contains_key(&id));
    d.beat(beat("a", 1, None), PARTITIONS, 2500);
    d.tick(3400);
    assert!(!d.shard.consumer_groups["g"].members.contains_key(&id));

    let (id, _) = join_new_classic(&mut d, 3600);
    let epoch = d.shard.consumer_groups["g"].epoch;
    let now = d.now(3700);
    let outcome = d.shard.leave(
        "g",
        vec![(id.clone(), None), ("a".into(), None)],
        &topics(PARTITIONS),
        now,
    );
    let results = d.apply(outcome);
    assert_eq!(results[0].error, 0);
    assert_eq!(
        results[1].error,
        ResponseError::UnknownMemberId.code(),
        "a consumer-protocol member does not leave by LeaveGroup"
    );
    let g = &d.shard.consumer_groups["g"];
    assert!(!g.members.contains_key(&id));
    assert_eq!(g.epoch, epoch + 1);
}

#[test]
fn a_join_group_turns_an_empty_consumer_group_classic() {
    let mut d = Driver::new();
    d.beat(join("a"), PARTITIONS, 0);
    d.beat(beat("a", -1, None), PARTITIONS, 10);
    assert!(d.shard.consumer_groups["g"].members.is_empty());
    let first = classic_join(&mut d, join_request("", &[]), 20);
    assert_eq!(first.error, ResponseError::MemberIdRequired.code());
    assert!(!d.shard.consumer_groups.contains_key("g"));
    assert!(d.shard.groups.map.contains_key("g"));
}

#[test]
fn a_consumer_member_upgrades_a_classic_group_and_nothing_moves_until_it_is_assigned() {
    let mut d = Driver::new();
    // A classic group of one, at generation 1, owning everything.
    let now = d.now(0);
    let outcome = d
        .shard
        .join(join_request("", &[]), &topics(PARTITIONS), now);
    let Waiting::Now(required) = d.apply(outcome) else {
        panic!()
    };
    let id = required.member_id;
    let now = d.now(1);
    let outcome = d
        .shard
        .join(join_request(&id, &[]), &topics(PARTITIONS), now);
    let Waiting::Later(mut rx, _) = d.apply(outcome) else {
        panic!("parked until the join phase ends")
    };
    let joined = rx.try_recv().unwrap();
    assert_eq!(
        (joined.generation, joined.leader.as_str()),
        (1, id.as_str())
    );
    let all = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
        kafka_protocol::messages::consumer_protocol_assignment::TopicPartition::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![0, 1, 2, 3]),
    ]);
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&0i16.to_be_bytes());
    all.encode(&mut bytes, 0).unwrap();
    let now = d.now(2);
    let sync = SyncRequest {
        group_id: "g".into(),
        member_id: id.clone(),
        instance_id: None,
        generation: 1,
        protocol_type: Some("consumer".into()),
        protocol: Some("range".into()),
        assignments: vec![(id.clone(), bytes.freeze())],
    };
    let outcome = d.shard.sync(sync, &topics(PARTITIONS), now);
    d.apply(outcome);

    let b = d.beat(join("b"), PARTITIONS, 10);
    assert_eq!(b.error, 0, "{:?}", b.message);
    assert!(
        !d.shard.groups.map.contains_key("g"),
        "no classic group is left"
    );
    let classic = d.shard.consumer_groups["g"].members[&id].clone();
    assert_eq!(
        classic.current.member_epoch, 1,
        "the classic member keeps its generation"
    );
    assert_eq!(
        classic.current.assigned.get(&TOPIC).map(|p| p.len()),
        Some(4)
    );
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        partitions(&b.assignment),
        Vec::<i32>::new(),
        "all still owned"
    );
    assert_eq!(
        classic_heartbeat(&mut d, &id, 1, 20),
        ResponseError::RebalanceInProgress.code()
    );

    // The same state comes back from the records alone.
    let mut fresh = GroupShard::new(
        std::sync::Arc::new(crate::group::test_config()),
        std::sync::Arc::default(),
    );
    for (offset, r) in d.log.iter().enumerate() {
        fresh.replay(offset as i64, None, r.clone());
    }
    let replayed = &fresh.consumer_groups["g"];
    assert_eq!(replayed.epoch, 2);
    assert_eq!(replayed.members[&id].metadata, classic.metadata);
    assert!(!fresh.groups.map.contains_key("g"));
}
