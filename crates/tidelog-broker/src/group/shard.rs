//! [`GroupShard`]: the group coordinator's state for one `__consumer_offsets` partition,
//! and how its records replay into it. The steps (Kafka's requests) are in `join`,
//! `members`, `offsets` and `txn_offsets`; they run on the coordinator runtime.
//!
//! - Committed offsets: a [`Timeline`], so OffsetFetch answers with what is committed
//!   while the next commit already builds on what was just appended.
//! - Groups: membership (transient) and the last stored generation (replayed).
//! - Offsets of open transactions, per producer: they become committed offsets at the
//!   transaction's COMMIT marker and are dropped at its ABORT marker (Kafka's division
//!   of work: the transaction coordinator writes the marker, this shard replays it).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use super::consumer::{ConsumerGroup, ConsumerKey};
use super::member_summary::{self, MemberSummary};
use super::records::{GroupRecord, OffsetValue, RecordKey, RecordValue};
use super::state::{Groups, JoinOutcome, SyncOutcome};
use super::GroupConfig;
use crate::coordinator::timeline::Timeline;
use crate::coordinator::{CoordinatorError, Now, Outcome, Shard};
use crate::poison::RwLockTolerant;

/// (group, topic, partition).
pub(crate) type OffsetKey = (String, String, i32);

/// TxnOffsetCommits verified at once per partition at most; beyond it the guards are
/// reset (those producers retry).
const MAX_VERIFYING: usize = 100_000;

/// What the metrics read of a shard without asking its task: per group its state, and
/// its committed offsets. An offset changes here when it commits; the rest at each
/// clock tick.
#[derive(Debug, Default)]
pub(crate) struct PublishedGroups {
    pub(crate) groups: BTreeMap<String, GroupSummary>,
    pub(crate) offsets: BTreeMap<OffsetKey, i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupSummary {
    /// `classic`, or `consumer` for a KIP-848 group.
    pub(crate) group_type: &'static str,
    pub(crate) state: &'static str,
    pub(crate) protocol_type: String,
    pub(crate) generation: i32,
    pub(crate) members: usize,
    /// The first [`member_summary::MAX_MEMBERS_SHOWN`] members, described.
    pub(crate) member_list: Vec<MemberSummary>,
}

pub(crate) struct GroupShard {
    pub(crate) config: Arc<GroupConfig>,
    pub(crate) groups: Groups,
    /// Consumer-protocol (KIP-848) groups; a group id is here or in `groups`, not both.
    pub(crate) consumer_groups: HashMap<String, ConsumerGroup>,
    /// Share groups (KIP-932), transient; a group id is of one kind only.
    pub(crate) share_groups: HashMap<String, super::share::ShareGroup>,
    pub(crate) offsets: Timeline<OffsetKey, OffsetValue>,
    /// Producer id -> offsets its open transaction committed here.
    pub(crate) txn_offsets: BTreeMap<i64, BTreeMap<OffsetKey, OffsetValue>>,
    /// TxnOffsetCommits being verified with their transaction's coordinator: producer
    /// id -> guard. A marker for the producer removes the guard, so offsets verified
    /// before the transaction ended are not written after its marker (Kafka's
    /// verification guard, KIP-890).
    pub(crate) verifying: HashMap<i64, u64>,
    next_guard: u64,
    published: Arc<RwLock<PublishedGroups>>,
}

impl GroupShard {
    pub(crate) fn new(
        config: Arc<GroupConfig>,
        published: Arc<RwLock<PublishedGroups>>,
    ) -> GroupShard {
        GroupShard {
            config,
            groups: Groups::default(),
            consumer_groups: HashMap::new(),
            share_groups: HashMap::new(),
            offsets: Timeline::default(),
            txn_offsets: BTreeMap::new(),
            verifying: HashMap::new(),
            next_guard: 1,
            published,
        }
    }

    fn publish_groups(&self) {
        let mut summaries: BTreeMap<String, GroupSummary> = self
            .groups
            .map
            .values()
            .map(|g| {
                let summary = GroupSummary {
                    group_type: "classic",
                    state: g.state.name(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    generation: g.generation,
                    members: g.members.len(),
                    member_list: g
                        .members
                        .values()
                        .take(member_summary::MAX_MEMBERS_SHOWN)
                        .map(|m| member_summary::of_classic(m, g.protocol_type.as_deref()))
                        .collect(),
                };
                (g.id.clone(), summary)
            })
            .collect();
        for g in self.consumer_groups.values() {
            let summary = GroupSummary {
                group_type: "consumer",
                state: g.state_name(),
                protocol_type: "consumer".to_string(),
                generation: g.epoch,
                members: g.members.len(),
                member_list: g
                    .members
                    .values()
                    .take(member_summary::MAX_MEMBERS_SHOWN)
                    .map(member_summary::of_consumer)
                    .collect(),
            };
            summaries.insert(g.id.clone(), summary);
        }
        for (id, g) in &self.share_groups {
            let summary = GroupSummary {
                group_type: "share",
                state: g.state_name(),
                protocol_type: "share".to_string(),
                generation: g.epoch,
                members: g.members.len(),
                member_list: g
                    .members
                    .values()
                    .take(member_summary::MAX_MEMBERS_SHOWN)
                    .map(member_summary::of_share)
                    .collect(),
            };
            summaries.insert(id.clone(), summary);
        }
        self.published.write_locked().groups = summaries;
    }

    fn publish_offsets(&self, keys: Vec<OffsetKey>) {
        if keys.is_empty() {
            return;
        }
        let mut published = self.published.write_locked();
        for key in keys {
            match self.offsets.get_committed(&key) {
                Some(v) => published.offsets.insert(key, v.offset),
                None => published.offsets.remove(&key),
            };
        }
    }

    /// The latest offsets of `group`, committed or not, in (topic, partition) order.
    pub(crate) fn group_offsets<'a>(
        &'a self,
        group: &'a str,
    ) -> impl Iterator<Item = (&'a OffsetKey, &'a OffsetValue)> + 'a {
        self.offsets
            .range((group.to_string(), String::new(), i32::MIN)..)
            .take_while(move |(k, _)| k.0 == group)
    }

    /// The committed offsets of `group`: ((topic, partition), value), in order.
    pub(crate) fn committed_offsets(&self, group: &str) -> Vec<((String, i32), OffsetValue)> {
        self.offsets
            .committed_where(&(group.to_string(), String::new(), i32::MIN), |k| {
                k.0 == group
            })
            .into_iter()
            .map(|((_, topic, partition), v)| ((topic, partition), v))
            .collect()
    }

    fn has_offsets(&self, group: &str) -> bool {
        self.group_offsets(group).next().is_some()
    }

    /// A group that holds nothing any more (no members, no stored generation, no
    /// offsets) is forgotten.
    fn drop_if_empty(&mut self, group: &str) {
        let empty = self
            .groups
            .map
            .get(group)
            .is_some_and(|g| !g.stored && g.members.is_empty() && g.pending.is_empty());
        if empty && !self.has_offsets(group) {
            self.groups.map.remove(group);
        }
    }

    /// Starts verifying a TxnOffsetCommit of `producer_id`; the guard to write it with.
    pub(crate) fn begin_txn_commit(&mut self, producer_id: i64) -> u64 {
        let guard = self.next_guard;
        self.next_guard += 1;
        if self.verifying.len() >= MAX_VERIFYING && !self.verifying.contains_key(&producer_id) {
            self.verifying.clear();
        }
        self.verifying.insert(producer_id, guard);
        guard
    }

    /// Whether an open transaction holds an offset for this group partition (OffsetFetch
    /// with `require_stable` answers UNSTABLE_OFFSET_COMMIT for it).
    pub(crate) fn offset_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (group.to_string(), topic.to_string(), partition);
        self.txn_offsets.values().any(|o| o.contains_key(&key))
    }
}

impl Shard for GroupShard {
    type Record = GroupRecord;
    type Effect = ();

    fn encode(record: &GroupRecord) -> Result<(Vec<u8>, Option<Vec<u8>>), CoordinatorError> {
        Ok((
            record.encode_key().to_vec(),
            record.encode_value().map(|v| v.to_vec()),
        ))
    }

    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<GroupRecord, String> {
        GroupRecord::decode(key, value).map_err(|e| e.to_string())
    }

    fn replay(&mut self, offset: i64, producer: Option<i64>, record: GroupRecord) {
        let now = Instant::now();
        let now_ms = crate::context::now_ms();
        match (record.key, record.value) {
            (
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                },
                Some(RecordValue::Offset(v)),
            ) => {
                if !self.consumer_groups.contains_key(&group) {
                    self.groups.get_or_create(&group, now_ms);
                }
                let key = (group, topic, partition);
                match producer {
                    Some(pid) => {
                        self.txn_offsets.entry(pid).or_default().insert(key, v);
                    }
                    None => self.offsets.insert(offset, key, v),
                }
            }
            (
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                },
                None,
            ) => {
                self.offsets
                    .remove(offset, &(group.clone(), topic, partition));
                self.drop_if_empty(&group);
            }
            (RecordKey::Group { group }, Some(RecordValue::Group(v))) => {
                self.groups
                    .get_or_create(&group, now_ms)
                    .replay_metadata(&v, now);
            }
            (RecordKey::Group { group }, None) => {
                // Only a group without members is deleted: nobody is parked on it.
                self.groups.map.remove(&group);
            }
            (RecordKey::Consumer(ConsumerKey::Metadata { group }), None) => {
                self.consumer_groups.remove(&group);
            }
            (RecordKey::Consumer(key), value) => {
                let value = match value {
                    Some(RecordValue::Consumer(v)) => Some(v),
                    _ => None,
                };
                let id = key.group().to_string();
                if value.is_none() && !self.consumer_groups.contains_key(&id) {
                    // A tombstone of a group already gone (compaction keeps them a while).
                    return;
                }
                // An empty classic entry (one made for offsets) gives way to a group
                // being written; a tombstone leaves a classic group taking over alone.
                if value.is_some()
                    && self
                        .groups
                        .map
                        .get(&id)
                        .is_some_and(|g| g.members.is_empty() && g.pending.is_empty())
                {
                    self.groups.map.remove(&id);
                }
                self.consumer_groups
                    .entry(id.clone())
                    .or_insert_with(|| ConsumerGroup::new(id))
                    .replay(&key, value, now);
            }
            (RecordKey::Share(key), value) => {
                let value = match value {
                    Some(RecordValue::Share(v)) => Some(v),
                    _ => None,
                };
                self.replay_share(key, value);
            }
            // A value of the other kind cannot be decoded for a key (see records.rs).
            _ => {}
        }
    }

    fn replay_marker(&mut self, offset: i64, producer_id: i64, commit: bool) {
        self.verifying.remove(&producer_id);
        let Some(pending) = self.txn_offsets.remove(&producer_id) else {
            return;
        };
        if commit {
            for (key, value) in pending {
                self.offsets.insert(offset, key, value);
            }
        }
    }

    fn commit(&mut self, offset: i64) {
        let committed = self.offsets.commit(offset);
        self.publish_offsets(committed);
    }

    fn loaded(&mut self, _now: Now) -> Vec<()> {
        let keys = self.offsets.iter().map(|(k, _)| k.clone()).collect();
        self.publish_offsets(keys);
        self.publish_groups();
        Vec::new()
    }

    fn tick(&mut self, now: Now) -> Outcome<Self, ()> {
        let mut records = self.expire_members(now);
        let (fenced, downgraded) = self.expire_consumer_members(now);
        records.extend(fenced);
        self.expire_share_members(now);
        self.publish_groups();
        let outcome = Outcome::records(records, ());
        if downgraded.is_empty() {
            return outcome;
        }
        outcome.then(move |shard, written| {
            if written.is_ok() {
                shard.rebalance_downgraded(&downgraded, now);
            }
        })
    }

    fn unload(&mut self) {
        *self.published.write_locked() = PublishedGroups::default();
        for group in self.groups.map.values_mut() {
            super::rebalance::answer_all(group, not_coordinator());
        }
    }
}

/// What a parked request hears when this node stops coordinating its group.
fn not_coordinator() -> (JoinOutcome, SyncOutcome) {
    let code = kafka_protocol::error::ResponseError::NotCoordinator.code();
    (
        JoinOutcome {
            error: code,
            generation: -1,
            ..JoinOutcome::default()
        },
        SyncOutcome {
            error: code,
            ..SyncOutcome::default()
        },
    )
}
