//! Share-group heartbeats on a shard: joining, sharing partitions, epochs, fencing,
//! leaving and the session timeout.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::consumer::TopicsView;
use super::shard::{GroupShard, PublishedGroups};
use super::share::{ShareHeartbeat, ShareHeartbeatResponse};
use crate::coordinator::{Now, Shard, Write};

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
    assert!(
        matches!(outcome.write, Write::Nothing),
        "share membership writes no records"
    );
    outcome.response
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
fn silent_members_leave_after_the_session_timeout_and_the_group_with_them() {
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
    assert!(s.describe_share("sg").is_none());
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
