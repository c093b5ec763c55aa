//! Share-group heartbeats on a shard: joining, sharing partitions, epochs, fencing,
//! leaving and the session timeout; the group's durable records and the checks of its
//! offsets' alteration and deletion.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::consumer::TopicsView;
use super::records::{GroupRecord, RecordKey, RecordValue};
use super::shard::{GroupShard, PublishedGroups};
use super::share::{ShareHeartbeat, ShareHeartbeatResponse};
use super::share_records::{ShareKey, ShareTopics, ShareValue};
use crate::coordinator::{Now, Outcome, Shard, Write};

const TOPIC: Uuid = Uuid::from_u128(7);

fn topics(partitions: i32) -> TopicsView {
    let mut view = TopicsView::default();
    view.insert("t", TOPIC, partitions);
    view
}

fn at(start: Instant, ms: u64) -> Now {
    Now {
        at: start + Duration::from_millis(ms),
        ms: ms as i64,
    }
}

fn beat(
    shard: &mut GroupShard,
    member: &str,
    epoch: i32,
    ms: u64,
    start: Instant,
) -> ShareHeartbeatResponse {
    let req = ShareHeartbeat {
        group_id: "sg".into(),
        member_id: member.into(),
        member_epoch: epoch,
        subscribed_topic_names: (epoch == 0).then(|| vec!["t".to_string()]),
        ..ShareHeartbeat::default()
    };
    let outcome = shard.share_heartbeat(req, &topics(3), at(start, ms));
    apply(shard, outcome).0
}

/// Replays what a step wrote, as the runtime does on append; returns the answer and
/// the records.
fn apply<R>(shard: &mut GroupShard, outcome: Outcome<GroupShard, R>) -> (R, Vec<GroupRecord>) {
    let mut written = Vec::new();
    if let Write::Records { records, .. } = outcome.write {
        for r in records {
            written.push(r.clone());
            shard.replay(0, None, r);
        }
    }
    (outcome.response, written)
}

fn shard() -> GroupShard {
    GroupShard::new(
        Arc::new(crate::group::test_config()),
        Arc::new(RwLock::new(PublishedGroups::default())),
    )
}

#[test]
fn every_member_gets_every_partition_and_the_epoch_moves_with_membership() {
    let start = Instant::now();
    let mut s = shard();
    let a = beat(&mut s, "a", 0, 0, start);
    assert_eq!((a.error, a.member_epoch), (0, 1));
    let all: std::collections::BTreeSet<i32> = (0..3).collect();
    assert_eq!(
        a.assignment.as_ref().and_then(|x| x.get(&TOPIC)),
        Some(&all)
    );
    let b = beat(&mut s, "b", 0, 10, start);
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        b.assignment.as_ref().and_then(|x| x.get(&TOPIC)),
        Some(&all)
    );
    // a catches up with the group epoch; its assignment did not change, so none is sent.
    let a2 = beat(&mut s, "a", 1, 20, start);
    assert_eq!((a2.error, a2.member_epoch, a2.assignment), (0, 2, None));
    // An old epoch is fenced, an unknown member is told so.
    assert_eq!(
        beat(&mut s, "a", 1, 30, start).error,
        ResponseError::FencedMemberEpoch.code()
    );
    assert_eq!(
        beat(&mut s, "c", 5, 30, start).error,
        ResponseError::UnknownMemberId.code()
    );
    let left = beat(&mut s, "b", -1, 40, start);
    assert_eq!((left.error, left.member_epoch), (0, -1));
    let g = s.describe_share("sg").expect("the group");
    assert_eq!((g.epoch, g.members.len()), (3, 1));
}

#[test]
fn silent_members_leave_after_the_session_timeout() {
    let start = Instant::now();
    let mut s = shard();
    beat(&mut s, "a", 0, 0, start);
    beat(&mut s, "b", 0, 0, start);
    assert_eq!(beat(&mut s, "a", 1, 900, start).error, 0);
    // test_config: a 1000 ms session.
    let _ = s.tick(at(start, 1500));
    let g = s.describe_share("sg").expect("a is alive");
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["a"]);
    let _ = s.tick(at(start, 2500));
    // The group stays, empty: it has durable records.
    assert!(s.describe_share("sg").is_some_and(|g| g.members.is_empty()));
    assert_eq!(
        beat(&mut s, "a", 3, 2600, start).error,
        ResponseError::UnknownMemberId.code()
    );
}

#[test]
fn a_share_group_id_is_not_a_consumer_group_and_the_reverse() {
    let start = Instant::now();
    let mut s = shard();
    beat(&mut s, "a", 0, 0, start);
    let req = crate::group::consumer::heartbeat::HeartbeatRequest {
        group_id: "sg".into(),
        member_id: "x".into(),
        member_epoch: 0,
        rebalance_timeout_ms: 1000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(Default::default()),
        ..Default::default()
    };
    let r = s.consumer_heartbeat(req, &topics(3), at(start, 1)).response;
    assert_eq!(r.error, ResponseError::GroupIdNotFound.code());
}

fn initialized(partitions: &[i32]) -> ShareTopics {
    let mut t = ShareTopics::new();
    t.insert(TOPIC, ("t".into(), partitions.iter().copied().collect()));
    t
}

#[test]
fn a_new_group_and_its_share_partitions_are_written_once_and_replay_into_an_empty_group() {
    let start = Instant::now();
    let mut s = shard();
    let req = ShareHeartbeat {
        group_id: "sg".into(),
        member_id: "a".into(),
        member_epoch: 0,
        subscribed_topic_names: Some(vec!["t".to_string()]),
        ..ShareHeartbeat::default()
    };
    let outcome = s.share_heartbeat(req, &topics(3), at(start, 0));
    let (answer, written) = apply(&mut s, outcome);
    assert_eq!(answer.error, 0);
    let keys: Vec<RecordKey> = written.iter().map(|r| r.key.clone()).collect();
    assert_eq!(
        keys,
        vec![
            RecordKey::Share(ShareKey::Metadata { group: "sg".into() }),
            RecordKey::Share(ShareKey::PartitionMetadata { group: "sg".into() }),
        ]
    );
    assert_eq!(
        written[1].value,
        Some(RecordValue::Share(ShareValue::PartitionMetadata {
            initialized: initialized(&[0, 1, 2])
        }))
    );
    // Nothing new to record on the next heartbeat, nor for a second member.
    let again = s.share_heartbeat(
        ShareHeartbeat {
            group_id: "sg".into(),
            member_id: "a".into(),
            member_epoch: 1,
            ..ShareHeartbeat::default()
        },
        &topics(3),
        at(start, 10),
    );
    assert!(matches!(again.write, Write::Nothing));
    // A new coordinator replays the records: the group is there with no members.
    let mut fresh = shard();
    for r in written {
        fresh.replay(0, None, r);
    }
    let g = fresh
        .describe_share("sg")
        .expect("the group outlives its members");
    assert_eq!(
        (g.state_name(), g.initialized.clone()),
        ("Empty", initialized(&[0, 1, 2]))
    );
    assert_eq!(
        fresh.share_offsets_topics("sg"),
        Ok(initialized(&[0, 1, 2]))
    );
}

#[test]
fn offsets_change_only_in_an_empty_share_group_and_move_the_epoch_on() {
    let start = Instant::now();
    let mut s = shard();
    let missing = s.alter_share_offsets("sg", initialized(&[0])).response;
    assert_eq!(
        missing.map_err(|e| e.error),
        Err(ResponseError::GroupIdNotFound)
    );
    beat(&mut s, "a", 0, 0, start);
    let busy = s.alter_share_offsets("sg", initialized(&[0])).response;
    assert_eq!(busy.map_err(|e| e.error), Err(ResponseError::NonEmptyGroup));
    assert_eq!(
        s.deletable_share_topics("sg").map_err(|e| e.error),
        Err(ResponseError::NonEmptyGroup)
    );
    beat(&mut s, "a", -1, 10, start);
    let epoch = s.describe_share("sg").map(|g| g.epoch).expect("the group");
    let outcome = s.alter_share_offsets("sg", initialized(&[0]));
    let (state_epoch, _) = apply(&mut s, outcome);
    assert_eq!(
        state_epoch,
        Ok(epoch + 1),
        "the state epoch is the new group epoch"
    );
    assert_eq!(s.describe_share("sg").map(|g| g.epoch), Some(epoch + 1));
    // Forgetting a topic's state drops it from what the group lists.
    let outcome = s.forget_share_topics("sg", &[TOPIC]);
    let (_, written) = apply(&mut s, outcome);
    assert_eq!(written.len(), 1);
    assert_eq!(s.share_offsets_topics("sg"), Ok(ShareTopics::new()));
    // A classic group's id is not a share group.
    let mut classic = shard();
    classic.groups.get_or_create("sg", 0);
    assert_eq!(
        classic.share_offsets_topics("sg").map_err(|e| e.error),
        Err(ResponseError::GroupIdNotFound)
    );
}

#[test]
fn an_empty_share_group_is_deleted_with_tombstones_for_its_records() {
    let start = Instant::now();
    let mut s = shard();
    beat(&mut s, "a", 0, 0, start);
    let busy = s.delete_group("sg").response;
    assert_eq!(busy, ResponseError::NonEmptyGroup.code());
    beat(&mut s, "a", -1, 10, start);
    let outcome = s.delete_group("sg");
    let (code, written) = apply(&mut s, outcome);
    assert_eq!(code, 0);
    assert!(written.iter().all(|r| r.value.is_none()), "tombstones only");
    assert_eq!(written.len(), 2);
    assert!(s.describe_share("sg").is_none());
    assert_eq!(
        s.share_offsets_topics("sg").map_err(|e| e.error),
        Err(ResponseError::GroupIdNotFound)
    );
}
