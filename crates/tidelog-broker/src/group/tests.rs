//! The group state machine without a network: joins, elections, static members,
//! timeouts, replay, and loading a partition back from a real log.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::join::JoinRequest;
use super::load::read_partition;
use super::offsets::retention_work;
use super::rebalance::{maybe_complete_join, select_protocol, Waiting};
use super::records::{GroupRecord, GroupValue, OffsetValue, RecordKey, RecordValue, StoredMember};
use super::state::{Group, GroupState, Groups, JoinOutcome, Member};
use super::{encode_batch, GroupConfig, GroupCoordinator};
use crate::replica::Partition;

fn coordinator(initial_delay_ms: u64) -> GroupCoordinator {
    GroupCoordinator::new(GroupConfig {
        min_session_timeout_ms: 1000,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay: Duration::from_millis(initial_delay_ms),
        max_size: 3,
        offsets_retention_ms: 60_000,
        retention_check_every: Duration::from_secs(1),
        metadata_max_bytes: 4096,
    })
}

fn request(member_id: &str, instance: Option<&str>, protocols: &[(&str, &[u8])]) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        instance_id: instance.map(str::to_string),
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(n, m)| (n.to_string(), Bytes::copy_from_slice(m)))
            .collect(),
        require_known_member: true,
    }
}

const RANGE: &[(&str, &[u8])] = &[("range", b"sub")];

/// Joins as a new dynamic member (MEMBER_ID_REQUIRED, then again with the id) and
/// returns the member id and the parked answer.
fn join_new(
    c: &GroupCoordinator,
    protocols: &[(&str, &[u8])],
) -> (String, oneshot::Receiver<JoinOutcome>) {
    let mut inner = c.lock();
    let (first, _) = c.join_locked(&mut inner, 0, request("", None, protocols));
    let Waiting::Now(required) = first else {
        panic!("first join must answer at once")
    };
    assert_eq!(required.error, ResponseError::MemberIdRequired.code());
    let id = required.member_id;
    assert!(id.starts_with("c-"));
    let (second, _) = c.join_locked(&mut inner, 0, request(&id, None, protocols));
    let Waiting::Later(rx, _) = second else {
        panic!("second join must wait for the rebalance")
    };
    (id, rx)
}

fn state(c: &GroupCoordinator) -> GroupState {
    c.lock().groups.map["g"].state
}

#[test]
fn a_lone_member_gets_generation_one_and_leads() {
    let c = coordinator(0);
    let (id, mut rx) = join_new(&c, RANGE);
    let outcome = rx.try_recv().unwrap();
    assert_eq!(outcome.error, 0);
    assert_eq!(outcome.generation, 1);
    assert_eq!(outcome.leader, id);
    assert_eq!(outcome.protocol.as_deref(), Some("range"));
    assert_eq!(outcome.members.len(), 1);
    assert_eq!(outcome.members[0].2.as_ref(), b"sub");
    assert_eq!(state(&c), GroupState::CompletingRebalance);
}

#[test]
fn a_second_member_waits_until_the_first_rejoins() {
    let c = coordinator(0);
    let (first, mut rx1) = join_new(&c, RANGE);
    rx1.try_recv().unwrap();
    let (second, mut rx2) = join_new(&c, RANGE);
    assert_eq!(state(&c), GroupState::PreparingRebalance);
    assert!(rx2.try_recv().is_err(), "must wait for the first member");
    let mut inner = c.lock();
    let (again, _) = c.join_locked(&mut inner, 0, request(&first, None, RANGE));
    drop(inner);
    let Waiting::Later(mut rx1, _) = again else {
        panic!()
    };
    let (o1, o2) = (rx1.try_recv().unwrap(), rx2.try_recv().unwrap());
    assert_eq!((o1.generation, o2.generation), (2, 2));
    assert_eq!(o1.leader, first, "the old leader keeps leading");
    assert_eq!(o1.members.len(), 2);
    assert!(o2.members.is_empty(), "followers get no member list");
    assert_eq!(o2.member_id, second);
}

#[test]
fn the_group_size_limit_and_unknown_members_are_refused() {
    let c = coordinator(0);
    for _ in 0..3 {
        join_new(&c, RANGE);
    }
    let mut inner = c.lock();
    let (full, _) = c.join_locked(&mut inner, 0, request("", None, RANGE));
    let Waiting::Now(full) = full else { panic!() };
    assert_eq!(full.error, ResponseError::GroupMaxSizeReached.code());
    let (unknown, _) = c.join_locked(&mut inner, 0, request("nobody", None, RANGE));
    let Waiting::Now(unknown) = unknown else {
        panic!()
    };
    assert_eq!(unknown.error, ResponseError::UnknownMemberId.code());
    let (other, _) = c.join_locked(&mut inner, 0, request("", None, &[("roundrobin", b"")]));
    let Waiting::Now(other) = other else { panic!() };
    assert_eq!(other.error, ResponseError::InconsistentGroupProtocol.code());
}

#[test]
fn the_initial_delay_holds_the_first_rebalance() {
    let c = coordinator(500);
    let (_, mut rx) = join_new(&c, RANGE);
    assert!(rx.try_recv().is_err());
    let mut inner = c.lock();
    let group = inner.groups.map.get_mut("g").unwrap();
    assert!(maybe_complete_join(group, Instant::now(), 0).is_none());
    assert!(maybe_complete_join(group, Instant::now() + Duration::from_millis(600), 0).is_none());
    drop(inner);
    assert_eq!(rx.try_recv().unwrap().generation, 1);
}

#[test]
fn members_that_miss_the_rebalance_timeout_are_dropped_static_ones_kept() {
    let c = coordinator(0);
    let (dynamic, mut rx) = join_new(&c, RANGE);
    rx.try_recv().unwrap();
    let mut inner = c.lock();
    let (r, _) = c.join_locked(&mut inner, 0, request("", Some("static-1"), RANGE));
    let Waiting::Later(_static_rx, _) = r else {
        panic!()
    };
    let group = inner.groups.map.get_mut("g").unwrap();
    assert_eq!(group.state, GroupState::PreparingRebalance);
    // Nobody else rejoins: the join phase ends at the rebalance timeout.
    assert!(maybe_complete_join(group, Instant::now(), 0).is_none());
    let late = Instant::now() + Duration::from_secs(31);
    assert!(maybe_complete_join(group, late, 0).is_none());
    assert_eq!(group.state, GroupState::CompletingRebalance);
    assert!(!group.members.contains_key(&dynamic));
    assert_eq!(group.members.len(), 1);
    assert_eq!(group.generation, 2);
}

/// A Stable group as loaded from the log: one static member holding `assignment`.
fn stable_static_group(c: &GroupCoordinator) {
    stable_static_group_into(&mut c.lock().groups);
}

fn stable_static_group_into(groups: &mut Groups) {
    let value = GroupValue {
        protocol_type: "consumer".into(),
        generation: 7,
        protocol: Some("range".into()),
        leader: Some("old".into()),
        state_timestamp_ms: 1,
        members: vec![StoredMember {
            member_id: "old".into(),
            instance_id: Some("i1".into()),
            client_id: "c".into(),
            client_host: String::new(),
            rebalance_timeout_ms: 30_000,
            session_timeout_ms: 10_000,
            subscription: Bytes::from_static(b"sub"),
            assignment: Bytes::from_static(b"A"),
        }],
    };
    let record = GroupRecord {
        key: RecordKey::Group { group: "g".into() },
        value: Some(RecordValue::Group(value)),
    };
    groups.replay(0, &record, Instant::now(), 1);
}

#[test]
fn a_restarted_static_member_gets_its_slot_back_without_a_rebalance() {
    let c = coordinator(0);
    stable_static_group(&c);
    assert_eq!(state(&c), GroupState::Stable);
    let mut inner = c.lock();
    let (reply, record) = c.join_locked(&mut inner, 0, request("", Some("i1"), RANGE));
    let Waiting::Now(outcome) = reply else {
        panic!("no rebalance expected")
    };
    assert_eq!(outcome.error, 0);
    assert_eq!(outcome.generation, 7);
    assert_ne!(outcome.member_id, "old");
    assert!(record.is_some(), "the new member id is stored");
    let group = &inner.groups.map["g"];
    assert_eq!(group.state, GroupState::Stable);
    assert_eq!(group.members[&outcome.member_id].assignment.as_ref(), b"A");
    assert_eq!(group.static_members["i1"], outcome.member_id);
    // The old incarnation is fenced.
    let (stale, _) = c.join_locked(&mut inner, 0, request("old", Some("i1"), RANGE));
    let Waiting::Now(stale) = stale else { panic!() };
    assert_eq!(stale.error, ResponseError::FencedInstanceId.code());
}

#[test]
fn a_static_member_with_a_new_subscription_triggers_a_rebalance() {
    let c = coordinator(0);
    stable_static_group(&c);
    let mut inner = c.lock();
    let (reply, _) = c.join_locked(
        &mut inner,
        0,
        request("", Some("i1"), &[("range", b"other")]),
    );
    let Waiting::Later(mut rx, _) = reply else {
        panic!("a rebalance was expected")
    };
    assert_eq!(rx.try_recv().unwrap().generation, 8);
}

fn member(id: &str, protocols: &[&str]) -> Member {
    Member {
        id: id.into(),
        instance_id: None,
        client_id: String::new(),
        client_host: String::new(),
        rebalance_timeout_ms: 1,
        session_timeout_ms: 1,
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::new()))
            .collect(),
        assignment: Bytes::new(),
        last_heartbeat: Instant::now(),
        join_waiter: None,
        sync_waiter: None,
    }
}

#[test]
fn the_protocol_most_members_prefer_among_common_ones_wins() {
    let mut g = Group::new("g".into(), 0, 0);
    for (id, p) in [
        ("a", &["range", "roundrobin", "sticky"][..]),
        ("b", &["roundrobin", "range"][..]),
        ("c", &["sticky", "roundrobin", "range"][..]),
    ] {
        g.members.insert(id.into(), member(id, p));
    }
    // sticky is not common; of range/roundrobin, b and c prefer roundrobin.
    assert_eq!(select_protocol(&g).as_deref(), Some("roundrobin"));
}

fn offset_record(partition: i32, offset: Option<i64>) -> GroupRecord {
    GroupRecord {
        key: RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition,
        },
        value: offset.map(|offset| {
            RecordValue::Offset(OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 5,
            })
        }),
    }
}

#[test]
fn a_partition_loads_back_by_replay_from_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        tidelog_storage::Log::open(dir.path(), tidelog_storage::LogConfig::default()).unwrap();
    let p = Partition::new("__consumer_offsets".into(), uuid::Uuid::nil(), 0, 0, log);
    let batches = [
        vec![offset_record(0, Some(10)), offset_record(1, Some(20))],
        vec![offset_record(0, Some(11))],
        vec![offset_record(1, None)],
    ];
    for records in &batches {
        let mut buf = encode_batch(records, 5).unwrap();
        p.append(&mut buf, 5).unwrap();
    }
    let (entries, end) = read_partition(&p).unwrap();
    assert_eq!(end, 4);
    let (records, pending) = super::load::resolve(entries);
    assert_eq!(records.len(), 4);
    assert!(pending.is_empty());
    let c = coordinator(0);
    let mut inner = c.lock();
    for r in &records {
        inner.groups.replay(0, r, Instant::now(), 5);
    }
    let group = &inner.groups.map["g"];
    assert_eq!(group.offsets.len(), 1);
    assert_eq!(group.offsets[&("t".to_string(), 0)].offset, 11);
    assert_eq!(group.state, GroupState::Empty);
    // A group tombstone removes the group.
    let tombstone = GroupRecord {
        key: RecordKey::Group { group: "g".into() },
        value: None,
    };
    inner.groups.replay(0, &tombstone, Instant::now(), 5);
    assert!(inner.groups.map.is_empty());
}

#[test]
fn retention_expires_offsets_only_after_the_group_emptied_long_enough() {
    let c = coordinator(0);
    let mut inner = c.lock();
    // A consumer group that emptied at t=1000 with one offset, and an offsets-only
    // group whose two commits happened at t=5 and t=50_000.
    stable_static_group_into(&mut inner.groups);
    inner
        .groups
        .replay(0, &offset_record(0, Some(3)), Instant::now(), 5);
    let g = inner.groups.map.get_mut("g").unwrap();
    g.members.clear();
    g.state = GroupState::Empty;
    g.state_since_ms = 1000;
    let mut standalone = offset_record(0, Some(1));
    let mut later = offset_record(1, Some(2));
    for (r, ts) in [(&mut standalone, 5), (&mut later, 50_000)] {
        if let RecordKey::Offset { group, .. } = &mut r.key {
            *group = "solo".into();
        }
        if let Some(RecordValue::Offset(v)) = &mut r.value {
            v.commit_timestamp_ms = ts;
        }
        inner.groups.replay(1, r, Instant::now(), ts);
    }
    let work_with = |now, exists: &dyn Fn(&str) -> bool| {
        let mut w = retention_work(&inner.groups, now, 60_000, exists);
        w.sort_by(|a, b| a.1.cmp(&b.1));
        w.into_iter()
            .map(|(p, id, records, drop)| (p, id, records.len(), drop))
            .collect::<Vec<_>>()
    };
    let work = |now| work_with(now, &|_| true);
    assert_eq!(work(30_000), vec![]);
    // Offsets of a deleted topic go at once; the group itself waits for its retention.
    assert_eq!(
        work_with(30_000, &|t| t != "t"),
        vec![
            (0, "g".to_string(), 1, false),
            (1, "solo".to_string(), 2, true)
        ]
    );
    // t=61_000: the consumer group emptied 60 s ago: its offset and its metadata go;
    // only the solo group's first commit is old enough.
    assert_eq!(
        work(61_000),
        vec![
            (0, "g".to_string(), 2, true),
            (1, "solo".to_string(), 1, false)
        ]
    );
    assert_eq!(
        work(200_000),
        vec![
            (0, "g".to_string(), 2, true),
            (1, "solo".to_string(), 2, true)
        ]
    );
}

#[test]
fn over_long_names_are_refused_and_member_ids_stay_storable() {
    let c = coordinator(0);
    let mut inner = c.lock();
    let long_client = "é".repeat(1000);
    let mut req = request("", Some("i"), RANGE);
    req.client_id = long_client;
    let (reply, _) = c.join_locked(&mut inner, 0, req);
    let Waiting::Later(mut rx, _) = reply else {
        panic!()
    };
    let id = rx.try_recv().unwrap().member_id;
    assert!(id.len() <= 200 + 37, "{}", id.len());
    let record = inner.groups.map["g"].metadata_record(0);
    let decoded = GroupRecord::decode(&record.encode_key(), record.encode_value().as_deref());
    assert_eq!(decoded.unwrap(), record);
}

#[test]
fn transactional_offsets_count_at_their_commit_marker_and_stay_pending_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        tidelog_storage::Log::open(dir.path(), tidelog_storage::LogConfig::default()).unwrap();
    let p = Partition::new("__consumer_offsets".into(), uuid::Uuid::nil(), 0, 0, log);
    let transactional = |producer_id: i64, partition: i32, offset: i64| {
        let mut buf = super::encode_batch_of(
            &[offset_record(partition, Some(offset))],
            5,
            Some((producer_id, 0)),
        )
        .unwrap();
        p.append(&mut buf, 5).unwrap();
    };
    let marker = |producer_id: i64, commit: bool| {
        let mut batch = tidelog_storage::BatchBuilder::control_marker(producer_id, 0, commit, 0, 5)
            .build()
            .unwrap();
        p.append_control(&mut batch, 5).unwrap();
    };
    transactional(7, 0, 70); // committed below
    transactional(8, 1, 80); // aborted below
    transactional(9, 2, 90); // never decided
    let mut plain = encode_batch(&[offset_record(3, Some(30))], 5).unwrap();
    p.append(&mut plain, 5).unwrap();
    marker(7, true);
    marker(8, false);

    let (entries, _) = read_partition(&p).unwrap();
    let (records, pending) = super::load::resolve(entries);
    let replayed: Vec<(i32, i64)> = records
        .iter()
        .map(|r| match (&r.key, &r.value) {
            (RecordKey::Offset { partition, .. }, Some(RecordValue::Offset(v))) => {
                (*partition, v.offset)
            }
            other => panic!("unexpected record {other:?}"),
        })
        .collect();
    assert_eq!(
        replayed,
        vec![(3, 30), (0, 70)],
        "plain in place, the committed one at its marker"
    );
    assert_eq!(
        pending.len(),
        1,
        "only producer 9 is undecided: {pending:?}"
    );
    let undecided = &pending[&9];
    assert_eq!(undecided.len(), 1);
    assert_eq!(
        (
            undecided[0].0.as_str(),
            undecided[0].1.as_str(),
            undecided[0].2,
            undecided[0].3.offset
        ),
        ("g", "t", 2, 90)
    );
}
