//! The group coordinator's steps without a network or a disk: joins, elections, static
//! members, timeouts, replay, retention, transactional offsets; and, on the runtime,
//! loading a partition back from a real log.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::join::JoinRequest;
use super::offsets::CommitRequest;
use super::rebalance::{maybe_complete_join, select_protocol, Waiting};
use super::records::{GroupRecord, GroupValue, OffsetValue, RecordKey, RecordValue, StoredMember};
use super::shard::{GroupShard, PublishedGroups};
use super::state::{Group, GroupState, JoinOutcome, Member};
use super::GroupConfig;
use crate::coordinator::{Now, Shard, Write};

fn config(initial_delay_ms: u64) -> Arc<GroupConfig> {
    Arc::new(GroupConfig {
        min_session_timeout_ms: 1000,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay: Duration::from_millis(initial_delay_ms),
        max_size: 3,
        offsets_retention_ms: 60_000,
        retention_check_every: Duration::from_secs(1),
        metadata_max_bytes: 4096,
        commit_timeout: Duration::from_secs(5),
        ..super::test_config()
    })
}

fn shard(initial_delay_ms: u64) -> GroupShard {
    GroupShard::new(
        config(initial_delay_ms),
        Arc::new(RwLock::new(PublishedGroups::default())),
    )
}

fn at(ms: i64) -> Now {
    Now {
        at: Instant::now(),
        ms,
    }
}

fn now() -> Now {
    at(0)
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
    s: &mut GroupShard,
    protocols: &[(&str, &[u8])],
) -> (String, oneshot::Receiver<JoinOutcome>) {
    let (first, _) = s.join_locked(request("", None, protocols), now());
    let Waiting::Now(required) = first else {
        panic!("first join must answer at once")
    };
    assert_eq!(required.error, ResponseError::MemberIdRequired.code());
    let id = required.member_id;
    assert!(id.starts_with("c-"));
    let (second, _) = s.join_locked(request(&id, None, protocols), now());
    let Waiting::Later(rx, _) = second else {
        panic!("second join must wait for the rebalance")
    };
    (id, rx)
}

fn state(s: &GroupShard) -> GroupState {
    s.groups.map["g"].state
}

#[test]
fn a_lone_member_gets_generation_one_and_leads() {
    let mut s = shard(0);
    let (id, mut rx) = join_new(&mut s, RANGE);
    let outcome = rx.try_recv().unwrap();
    assert_eq!(outcome.error, 0);
    assert_eq!(outcome.generation, 1);
    assert_eq!(outcome.leader, id);
    assert_eq!(outcome.protocol.as_deref(), Some("range"));
    assert_eq!(outcome.members.len(), 1);
    assert_eq!(outcome.members[0].2.as_ref(), b"sub");
    assert_eq!(state(&s), GroupState::CompletingRebalance);
}

#[test]
fn a_second_member_waits_until_the_first_rejoins() {
    let mut s = shard(0);
    let (first, mut rx1) = join_new(&mut s, RANGE);
    rx1.try_recv().unwrap();
    let (second, mut rx2) = join_new(&mut s, RANGE);
    assert_eq!(state(&s), GroupState::PreparingRebalance);
    assert!(rx2.try_recv().is_err(), "must wait for the first member");
    let (again, _) = s.join_locked(request(&first, None, RANGE), now());
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
    let mut s = shard(0);
    for _ in 0..3 {
        join_new(&mut s, RANGE);
    }
    let (full, _) = s.join_locked(request("", None, RANGE), now());
    let Waiting::Now(full) = full else { panic!() };
    assert_eq!(full.error, ResponseError::GroupMaxSizeReached.code());
    let (unknown, _) = s.join_locked(request("nobody", None, RANGE), now());
    let Waiting::Now(unknown) = unknown else {
        panic!()
    };
    assert_eq!(unknown.error, ResponseError::UnknownMemberId.code());
    let (other, _) = s.join_locked(request("", None, &[("roundrobin", b"")]), now());
    let Waiting::Now(other) = other else { panic!() };
    assert_eq!(other.error, ResponseError::InconsistentGroupProtocol.code());
}

#[test]
fn the_initial_delay_holds_the_first_rebalance() {
    let mut s = shard(500);
    let (_, mut rx) = join_new(&mut s, RANGE);
    assert!(rx.try_recv().is_err());
    let group = s.groups.map.get_mut("g").unwrap();
    assert!(maybe_complete_join(group, Instant::now(), 0).is_none());
    assert!(maybe_complete_join(group, Instant::now() + Duration::from_millis(600), 0).is_none());
    assert_eq!(rx.try_recv().unwrap().generation, 1);
}

#[test]
fn the_clock_expires_a_silent_member_and_the_group_empties() {
    let mut s = shard(0);
    let (_, mut rx) = join_new(&mut s, RANGE);
    rx.try_recv().unwrap();
    let later = Now {
        at: Instant::now() + Duration::from_secs(11),
        ms: 11_000,
    };
    // The member sits in CompletingRebalance with no parked request: its session runs
    // out, and with nobody left the join phase ends at once with the group empty.
    assert!(matches!(s.tick(now()).write, Write::Nothing));
    let outcome = s.tick(later);
    let Write::Records { records, .. } = outcome.write else {
        panic!("the emptied group is stored")
    };
    assert_eq!(records.len(), 1);
    assert_eq!(state(&s), GroupState::Empty);
}

#[test]
fn members_that_miss_the_rebalance_timeout_are_dropped_static_ones_kept() {
    let mut s = shard(0);
    let (dynamic, mut rx) = join_new(&mut s, RANGE);
    rx.try_recv().unwrap();
    let (r, _) = s.join_locked(request("", Some("static-1"), RANGE), now());
    let Waiting::Later(_static_rx, _) = r else {
        panic!()
    };
    let group = s.groups.map.get_mut("g").unwrap();
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
fn stable_static_group(s: &mut GroupShard) {
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
    s.replay(0, None, record);
}

#[test]
fn a_restarted_static_member_gets_its_slot_back_without_a_rebalance() {
    let mut s = shard(0);
    stable_static_group(&mut s);
    assert_eq!(state(&s), GroupState::Stable);
    let (reply, record) = s.join_locked(request("", Some("i1"), RANGE), now());
    let Waiting::Now(outcome) = reply else {
        panic!("no rebalance expected")
    };
    assert_eq!(outcome.error, 0);
    assert_eq!(outcome.generation, 7);
    assert_ne!(outcome.member_id, "old");
    assert!(record.is_some(), "the new member id is stored");
    let group = &s.groups.map["g"];
    assert_eq!(group.state, GroupState::Stable);
    assert_eq!(group.members[&outcome.member_id].assignment.as_ref(), b"A");
    assert_eq!(group.static_members["i1"], outcome.member_id);
    // The old incarnation is fenced.
    let (stale, _) = s.join_locked(request("old", Some("i1"), RANGE), now());
    let Waiting::Now(stale) = stale else { panic!() };
    assert_eq!(stale.error, ResponseError::FencedInstanceId.code());
}

#[test]
fn a_static_member_with_a_new_subscription_triggers_a_rebalance() {
    let mut s = shard(0);
    stable_static_group(&mut s);
    let (reply, _) = s.join_locked(request("", Some("i1"), &[("range", b"other")]), now());
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
    let mut g = Group::new("g".into(), 0);
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

fn offset_record(group: &str, partition: i32, offset: Option<i64>, ts: i64) -> GroupRecord {
    GroupRecord {
        key: RecordKey::Offset {
            group: group.into(),
            topic: "t".into(),
            partition,
        },
        value: offset.map(|offset| {
            RecordValue::Offset(OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: ts,
            })
        }),
    }
}

fn committed(s: &GroupShard, group: &str) -> Vec<(i32, i64)> {
    s.committed_offsets(group)
        .into_iter()
        .map(|((_, p), v)| (p, v.offset))
        .collect()
}

#[test]
fn offsets_replay_and_readers_see_them_only_once_committed() {
    let mut s = shard(0);
    s.replay(0, None, offset_record("g", 0, Some(10), 5));
    s.replay(1, None, offset_record("g", 1, Some(20), 5));
    s.commit(2);
    s.replay(2, None, offset_record("g", 0, Some(11), 5));
    s.replay(3, None, offset_record("g", 1, None, 5));
    assert_eq!(
        committed(&s, "g"),
        vec![(0, 10), (1, 20)],
        "not yet replicated"
    );
    s.commit(4);
    assert_eq!(committed(&s, "g"), vec![(0, 11)]);
    assert_eq!(state(&s), GroupState::Empty);
    // A group tombstone removes the group.
    let tombstone = GroupRecord {
        key: RecordKey::Group { group: "g".into() },
        value: None,
    };
    s.replay(4, None, tombstone);
    assert!(s.groups.map.is_empty());
}

#[test]
fn a_commit_is_refused_to_strangers_and_written_for_members() {
    let mut s = shard(0);
    let (id, mut rx) = join_new(&mut s, RANGE);
    let generation = rx.try_recv().unwrap().generation;
    let commit = |member: &str, generation: i32| CommitRequest {
        group_id: "g".into(),
        generation,
        member_id: member.into(),
        instance_id: None,
        offsets: vec![
            ("t".into(), 0, 5, -1, None),
            ("gone".into(), 0, 1, -1, None),
        ],
    };
    let outcome = s.offset_commit(commit("stranger", generation), &[true, false], now());
    assert_eq!(
        outcome.response,
        vec![ResponseError::UnknownMemberId.code(); 2]
    );
    assert!(matches!(outcome.write, Write::Nothing));
    // The leader awaits its assignment: a plain commit must wait for it.
    let outcome = s.offset_commit(commit(&id, generation), &[true, false], now());
    assert_eq!(
        outcome.response,
        vec![ResponseError::RebalanceInProgress.code(); 2]
    );
    s.groups.map.get_mut("g").unwrap().state = GroupState::Stable;
    let outcome = s.offset_commit(commit(&id, generation), &[true, false], now());
    assert_eq!(
        outcome.response,
        vec![0, ResponseError::UnknownTopicOrPartition.code()]
    );
    let Write::Records { records, producer } = outcome.write else {
        panic!()
    };
    assert_eq!((records.len(), producer), (1, None));
}

/// Kafka's OffsetMetadataManager: a member's plain commit in Stable keeps its session
/// alive (a closing static member's last commit counts), a transactional one does not.
#[test]
fn a_plain_commit_keeps_a_member_alive_and_a_transactional_one_does_not() {
    let mut s = shard(0);
    stable_static_group(&mut s);
    let commit = |generation: i32| CommitRequest {
        group_id: "g".into(),
        generation,
        member_id: "old".into(),
        instance_id: Some("i1".into()),
        offsets: vec![("t".into(), 0, 5, -1, None)],
    };
    let session_start = |s: &GroupShard| s.groups.map["g"].members["old"].last_heartbeat;
    let before = session_start(&s);
    let later = Now {
        at: before + std::time::Duration::from_secs(3),
        ms: 3_000,
    };
    let outcome = s.offset_commit(commit(7), &[true], later);
    assert_eq!(outcome.response, vec![0]);
    assert_eq!(session_start(&s), later.at);

    let mut s = shard(0);
    stable_static_group(&mut s);
    let before = session_start(&s);
    let outcome = s.txn_commit(commit(7), (9, 0), None, &[true], later);
    assert_eq!(outcome.response, vec![0]);
    assert_eq!(session_start(&s), before);
}

#[test]
fn retention_expires_offsets_only_after_the_group_emptied_long_enough() {
    let mut s = shard(0);
    // A consumer group that emptied at t=1000 with one offset, and an offsets-only
    // group whose two commits happened at t=5 and t=50_000.
    stable_static_group(&mut s);
    s.replay(1, None, offset_record("g", 0, Some(3), 5));
    let g = s.groups.map.get_mut("g").unwrap();
    g.members.clear();
    g.state = GroupState::Empty;
    g.state_since_ms = 1000;
    s.replay(2, None, offset_record("solo", 0, Some(1), 5));
    s.replay(3, None, offset_record("solo", 1, Some(2), 50_000));
    s.commit(4);
    // Per group: (offset tombstones, whether the group's own record goes too).
    let work_with = |s: &mut GroupShard, now: i64, exists: &dyn Fn(&str) -> bool| {
        let outcome = s.expire_offsets(at(now), exists);
        let mut by_group: BTreeMap<String, (usize, bool)> = BTreeMap::new();
        if let Write::Records { records, .. } = outcome.write {
            for r in records {
                let entry = by_group.entry(r.key.group().to_string()).or_default();
                match r.key {
                    RecordKey::Offset { .. } => entry.0 += 1,
                    RecordKey::Group { .. } => entry.1 = true,
                    RecordKey::Consumer(_) | RecordKey::Share(_) => {}
                }
            }
        }
        by_group.into_iter().collect::<Vec<_>>()
    };
    assert_eq!(work_with(&mut s, 30_000, &|_| true), vec![]);
    // Offsets of a deleted topic go at once; the group itself waits for its retention.
    assert_eq!(
        work_with(&mut s, 30_000, &|t| t != "t"),
        vec![
            ("g".to_string(), (1, false)),
            ("solo".to_string(), (2, false))
        ]
    );
    // t=61_000: the consumer group emptied 60 s ago: its offset and its metadata go;
    // only the solo group's first commit is old enough.
    assert_eq!(
        work_with(&mut s, 61_000, &|_| true),
        vec![
            ("g".to_string(), (1, true)),
            ("solo".to_string(), (1, false))
        ]
    );
    assert_eq!(
        work_with(&mut s, 200_000, &|_| true),
        vec![
            ("g".to_string(), (1, true)),
            ("solo".to_string(), (2, false))
        ]
    );
    // Replaying what retention wrote forgets both groups: the solo one goes with its
    // last offset, the stored one with its record.
    let outcome = s.expire_offsets(at(200_000), |_| true);
    let Write::Records { records, .. } = outcome.write else {
        panic!()
    };
    for (i, r) in records.into_iter().enumerate() {
        s.replay(10 + i as i64, None, r);
    }
    assert!(
        s.groups.map.is_empty(),
        "{:?}",
        s.groups.map.keys().collect::<Vec<_>>()
    );
}

#[test]
fn over_long_names_are_refused_and_member_ids_stay_storable() {
    let mut s = shard(0);
    let long_client = "é".repeat(1000);
    let mut req = request("", Some("i"), RANGE);
    req.client_id = long_client;
    let (reply, _) = s.join_locked(req, now());
    let Waiting::Later(mut rx, _) = reply else {
        panic!()
    };
    let id = rx.try_recv().unwrap().member_id;
    assert!(id.len() <= 200 + 37, "{}", id.len());
    let record = s.groups.map["g"].metadata_record(0);
    let decoded = GroupRecord::decode(&record.encode_key(), record.encode_value().as_deref());
    assert_eq!(decoded.unwrap(), record);
}

#[test]
fn transactional_offsets_count_at_their_commit_marker_and_stay_pending_without_one() {
    let mut s = shard(0);
    s.replay(0, Some(7), offset_record("g", 0, Some(70), 5)); // committed below
    s.replay(1, Some(8), offset_record("g", 1, Some(80), 5)); // aborted below
    s.replay(2, Some(9), offset_record("g", 2, Some(90), 5)); // never decided
    s.replay(3, None, offset_record("g", 3, Some(30), 5));
    s.replay_marker(4, 7, true);
    s.replay_marker(5, 8, false);
    s.commit(6);
    assert_eq!(
        committed(&s, "g"),
        vec![(0, 70), (3, 30)],
        "plain in place, the committed one at its marker"
    );
    assert!(s.offset_pending("g", "t", 2), "producer 9 is undecided");
    assert!(!s.offset_pending("g", "t", 1), "an abort drops them");
    assert!(
        !s.offset_pending("g", "t", 0),
        "committed: no longer pending"
    );
    assert!(!s.offset_pending("other", "t", 2));
}

#[test]
fn a_txn_offset_commit_verified_before_its_marker_is_refused_after_it() {
    let mut s = shard(0);
    let commit = CommitRequest {
        group_id: "g".into(),
        generation: -1,
        member_id: String::new(),
        instance_id: None,
        offsets: vec![("t".into(), 0, 5, -1, None)],
    };
    let guard = s.begin_txn_commit(7);
    s.replay_marker(0, 7, true);
    let outcome = s.txn_commit(commit.clone(), (7, 0), Some(guard), &[true], now());
    assert_eq!(
        outcome.response,
        vec![ResponseError::InvalidTxnState.code()]
    );
    let guard = s.begin_txn_commit(7);
    let outcome = s.txn_commit(commit, (7, 0), Some(guard), &[true], now());
    assert_eq!(outcome.response, vec![0]);
    assert!(matches!(
        outcome.write,
        Write::Records {
            producer: Some((7, 0)),
            ..
        }
    ));
}
