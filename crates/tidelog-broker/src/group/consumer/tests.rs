//! Consumer-group steps on a shard, each step's records replayed as the runtime does:
//! joining, revoking before assigning, leaving, static replacement, fencing, and
//! rebuilding the same state from the records alone.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use super::{Assignment, MemberState, TopicsView};
use crate::coordinator::{Now, Outcome, Shard, Write};
use crate::group::records::GroupRecord;
use crate::group::shard::{GroupShard, PublishedGroups};

pub(super) const TOPIC: Uuid = Uuid::from_u128(42);

fn shard() -> GroupShard {
    GroupShard::new(
        Arc::new(crate::group::test_config()),
        Arc::new(RwLock::new(PublishedGroups::default())),
    )
}

pub(super) fn topics(partitions: i32) -> TopicsView {
    let mut view = TopicsView::default();
    view.insert("t", TOPIC, partitions);
    view
}

pub(super) struct Driver {
    pub(super) shard: GroupShard,
    offset: i64,
    pub(super) log: Vec<GroupRecord>,
    start: Instant,
}

impl Driver {
    pub(super) fn new() -> Driver {
        Driver::with_config(crate::group::test_config())
    }

    pub(super) fn with_config(config: crate::group::GroupConfig) -> Driver {
        Driver {
            shard: GroupShard::new(
                Arc::new(config),
                Arc::new(RwLock::new(PublishedGroups::default())),
            ),
            offset: 0,
            log: Vec::new(),
            start: Instant::now(),
        }
    }

    pub(super) fn now(&self, ms: u64) -> Now {
        Now {
            at: self.start + Duration::from_millis(ms),
            ms: ms as i64,
        }
    }

    pub(super) fn apply<R>(&mut self, outcome: Outcome<GroupShard, R>) -> R {
        if let Write::Records { records, .. } = outcome.write {
            for r in records {
                self.log.push(r.clone());
                self.shard.replay(self.offset, None, r);
                self.offset += 1;
            }
            self.shard.commit(self.offset);
        }
        if let Some(then) = outcome.then {
            then(&mut self.shard, Ok(()));
        }
        outcome.response
    }

    pub(super) fn beat(
        &mut self,
        req: HeartbeatRequest,
        partitions: i32,
        ms: u64,
    ) -> HeartbeatResponse {
        let now = self.now(ms);
        let outcome = self.shard.consumer_heartbeat(req, &topics(partitions), now);
        self.apply(outcome)
    }

    pub(super) fn tick(&mut self, ms: u64) {
        let now = self.now(ms);
        let outcome = self.shard.tick(now);
        self.apply(outcome);
    }
}

pub(super) fn join(member: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 5000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(Assignment::new()),
        client_id: "c".into(),
        ..HeartbeatRequest::default()
    }
}

pub(super) fn beat(member: &str, epoch: i32, owned: Option<&Assignment>) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.cloned(),
        client_id: "c".into(),
        ..HeartbeatRequest::default()
    }
}

pub(super) fn partitions(a: &Option<Assignment>) -> Vec<i32> {
    a.as_ref()
        .and_then(|a| a.get(&TOPIC))
        .map(|p| p.iter().copied().collect())
        .unwrap_or_default()
}

#[test]
fn a_second_member_gets_partitions_only_after_the_first_revokes_them() {
    let mut d = Driver::new();
    let a = d.beat(join("a"), 4, 0);
    assert_eq!((a.error, a.member_epoch), (0, 1));
    assert_eq!(partitions(&a.assignment), vec![0, 1, 2, 3]);
    let owned_a = a.assignment.clone().unwrap_or_default();

    let b = d.beat(join("b"), 4, 10);
    assert_eq!(b.member_epoch, 2);
    // Everything b is due is still a's: it waits with nothing.
    assert_eq!(partitions(&b.assignment), Vec::<i32>::new());

    // a is asked to revoke two, staying at epoch 1.
    let a = d.beat(beat("a", 1, Some(&owned_a)), 4, 20);
    assert_eq!(a.member_epoch, 1);
    let kept = partitions(&a.assignment);
    assert_eq!(kept.len(), 2);
    // b still gets nothing: a has not said it let them go.
    let b = d.beat(beat("b", 2, None), 4, 30);
    assert_eq!(partitions(&b.assignment), Vec::<i32>::new());
    // a revoked: it moves to epoch 2; then b gets the other two.
    let owned_a: Assignment = [(TOPIC, kept.iter().copied().collect())].into();
    let a = d.beat(beat("a", 1, Some(&owned_a)), 4, 40);
    assert_eq!(a.member_epoch, 2);
    let b = d.beat(beat("b", 2, Some(&Assignment::new())), 4, 50);
    let got = partitions(&b.assignment);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|p| !kept.contains(p)));
    let g = &d.shard.consumer_groups["g"];
    assert_eq!(g.state_name(), "Stable");
    assert!(g
        .members
        .values()
        .all(|m| m.current.state == MemberState::Stable));
}

#[test]
fn epochs_are_checked_and_unknown_members_refused() {
    let mut d = Driver::new();
    d.beat(join("a"), 2, 0);
    let fenced = d.beat(beat("a", 7, None), 2, 10);
    assert_eq!(fenced.error, ResponseError::FencedMemberEpoch.code());
    let unknown = d.beat(beat("zz", 1, None), 2, 10);
    assert_eq!(unknown.error, ResponseError::UnknownMemberId.code());
    let mut bad = join("b");
    bad.rebalance_timeout_ms = -1;
    let bad = d.beat(bad, 2, 10);
    assert_eq!(bad.error, ResponseError::InvalidRequest.code());
    assert!(bad.message.is_some());
    let mut regex = join("c");
    regex.subscribed_topic_regex = Some("(".into());
    assert_eq!(
        d.beat(regex, 2, 10).error,
        ResponseError::InvalidRegularExpression.code()
    );
}

#[test]
fn a_silent_member_is_fenced_and_the_state_replays_from_the_records() {
    let mut d = Driver::new();
    d.beat(join("a"), 4, 0);
    d.beat(join("b"), 4, 0);
    let a = d.beat(beat("a", 1, None), 4, 10);
    let owned: Assignment = a.assignment.clone().unwrap_or_default();
    d.beat(beat("a", 1, Some(&owned)), 4, 20);
    d.beat(beat("b", 2, Some(&Assignment::new())), 4, 30);
    // Only a keeps heartbeating; b's session (1 s) runs out.
    d.beat(beat("a", 2, None), 4, 900);
    d.tick(1500);
    let g = &d.shard.consumer_groups["g"];
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["a"]);
    let a = d.beat(beat("a", 2, None), 4, 1600);
    assert_eq!(partitions(&a.assignment), vec![0, 1, 2, 3]);

    let mut replayed = shard();
    for (i, r) in d.log.iter().enumerate() {
        let (key, value) = GroupShard::encode(r).unwrap();
        let back = GroupShard::decode(&key, value.as_deref()).unwrap();
        replayed.replay(i as i64, None, back);
    }
    let (x, y) = (
        &replayed.consumer_groups["g"],
        &d.shard.consumer_groups["g"],
    );
    assert_eq!((x.epoch, x.assignment_epoch), (y.epoch, y.assignment_epoch));
    assert_eq!(x.members["a"].current, y.members["a"].current);
    assert_eq!(x.members["a"].target, y.members["a"].target);
}

#[test]
fn a_static_member_that_left_is_replaced_with_its_partitions() {
    let mut d = Driver::new();
    let mut a = join("a");
    a.instance_id = Some("i".into());
    let first = d.beat(a, 2, 0);
    let mut leave = beat("a", -2, None);
    leave.instance_id = Some("i".into());
    assert_eq!(d.beat(leave, 2, 10).member_epoch, -2);
    let mut again = join("a2");
    again.instance_id = Some("i".into());
    let back = d.beat(again, 2, 20);
    assert_eq!(back.error, 0);
    assert_eq!(partitions(&back.assignment), partitions(&first.assignment));
    let g = &d.shard.consumer_groups["g"];
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["a2"]);
    // Its group epoch did not move: nothing was reassigned.
    assert_eq!(g.epoch, 1);

    // An instance id still in use is refused.
    let mut dup = join("a3");
    dup.instance_id = Some("i".into());
    assert_eq!(
        d.beat(dup, 2, 30).error,
        ResponseError::UnreleasedInstanceId.code()
    );
}

#[test]
fn a_leaving_member_frees_its_partitions_for_the_others() {
    let mut d = Driver::new();
    d.beat(join("a"), 4, 0);
    d.beat(join("b"), 4, 0);
    let gone = d.beat(beat("b", -1, None), 4, 10);
    assert_eq!(gone.member_epoch, -1);
    let a = d.beat(beat("a", 1, None), 4, 20);
    assert_eq!(a.member_epoch, 3);
    let held = &d.shard.consumer_groups["g"].members["a"].current.assigned;
    assert_eq!(partitions(&Some(held.clone())), vec![0, 1, 2, 3]);
    // A new partition bumps the group epoch and goes to a.
    let a = d.beat(beat("a", a.member_epoch, None), 5, 30);
    assert_eq!(partitions(&a.assignment), vec![0, 1, 2, 3, 4]);
}

#[test]
fn an_empty_consumer_group_is_deleted_with_its_offsets() {
    let mut d = Driver::new();
    d.beat(join("a"), 1, 0);
    let refused = d.shard.delete_group("g");
    assert_eq!(d.apply(refused), ResponseError::NonEmptyGroup.code());
    d.beat(beat("a", -1, None), 1, 10);
    let deleted = d.shard.delete_group("g");
    assert_eq!(d.apply(deleted), 0);
    assert!(d.shard.consumer_groups.is_empty());
    assert!(d.shard.list_groups().is_empty());
}
