//! Committed offsets (OffsetCommit, OffsetFetch, OffsetDelete, retention), offsets in
//! transactions (TxnOffsetCommit and the marker that ends them) and the group admin
//! views (ListGroups, DescribeGroups, DeleteGroups): steps on [`GroupShard`].

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::consumer::offsets::{consumer_group_tombstones, validate_consumer_committer};
use super::records::{GroupRecord, OffsetValue, RecordKey, RecordValue};
use super::shard::GroupShard;
use super::state::{Group, GroupState};
use crate::coordinator::{Now, Outcome, Write};

/// An OffsetCommit (or TxnOffsetCommit) as the coordinator sees it.
#[derive(Debug, Clone)]
pub(crate) struct CommitRequest {
    pub(crate) group_id: String,
    pub(crate) generation: i32,
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    /// (topic, partition, offset, leader epoch, metadata)
    pub(crate) offsets: Vec<(String, i32, i64, i32, Option<String>)>,
}

#[derive(Debug, Clone)]
pub(crate) struct ListedGroup {
    pub(crate) group_id: String,
    pub(crate) protocol_type: String,
    pub(crate) state: &'static str,
    /// "classic", or "consumer" for a KIP-848 group.
    pub(crate) group_type: &'static str,
}

#[derive(Debug, Clone)]
pub(crate) struct DescribedMember {
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) metadata: Bytes,
    pub(crate) assignment: Bytes,
}

#[derive(Debug, Clone)]
pub(crate) struct DescribedGroup {
    /// A consumer-protocol (KIP-848) group: DescribeGroups, the classic API, describes
    /// it as Dead.
    pub(crate) not_classic: bool,
    pub(crate) state: &'static str,
    pub(crate) protocol_type: String,
    pub(crate) protocol: String,
    pub(crate) members: Vec<DescribedMember>,
}

/// One partition's committed offset: (partition, offset, leader epoch, metadata).
pub(crate) type FetchedOffset = (i32, i64, i32, String);

/// Per topic, its partitions' committed offsets — offset -1 when none.
pub(crate) type FetchedOffsets = Vec<(String, Vec<FetchedOffset>)>;

fn offset_key(group: &str, topic: &str, partition: i32) -> RecordKey {
    RecordKey::Offset {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    }
}

impl GroupShard {
    /// OffsetCommit: validates the committer, then one record per partition; one error
    /// code per requested offset, in order (`known[i]`: the i-th partition exists).
    pub(crate) fn offset_commit(
        &mut self,
        req: CommitRequest,
        known: &[bool],
        now: Now,
    ) -> Outcome<Self, Vec<i16>> {
        let checked = match self.consumer_groups.get(&req.group_id) {
            Some(g) => validate_consumer_committer(g, &req),
            None => validate_committer(self.groups.map.get_mut(&req.group_id), &req, false, now),
        };
        if let Err(e) = checked {
            return Outcome::answer(vec![e.code(); req.offsets.len()]);
        }
        let (codes, records) = self.offset_records(&req, known, now);
        Outcome::records(records, codes)
    }

    /// TxnOffsetCommit: the offsets are written as a transactional batch of `producer`
    /// and count only at that transaction's COMMIT marker.
    pub(crate) fn txn_commit(
        &mut self,
        req: CommitRequest,
        producer: (i64, i16),
        guard: Option<u64>,
        known: &[bool],
        now: Now,
    ) -> Outcome<Self, Vec<i16>> {
        if let Some(guard) = guard {
            // The transaction ended (its marker came) while it was being verified.
            if self.verifying.remove(&producer.0) != Some(guard) {
                return Outcome::answer(vec![
                    ResponseError::InvalidTxnState.code();
                    req.offsets.len()
                ]);
            }
        }
        let checked = match self.consumer_groups.get(&req.group_id) {
            // A transactional commit of a consumer group member: checked as Kafka
            // does, by member and epoch when it names them.
            Some(g) if req.generation >= 0 || !req.member_id.is_empty() => {
                validate_consumer_committer(g, &req)
            }
            Some(_) => Ok(()),
            None => validate_committer(self.groups.map.get_mut(&req.group_id), &req, true, now),
        };
        if let Err(e) = checked {
            return Outcome::answer(vec![e.code(); req.offsets.len()]);
        }
        let (codes, records) = self.offset_records(&req, known, now);
        let write = if records.is_empty() {
            Write::Nothing
        } else {
            Write::Records {
                records,
                producer: Some(producer),
            }
        };
        Outcome {
            write,
            response: codes,
            effects: Vec::new(),
            then: None,
        }
    }

    fn offset_records(
        &self,
        req: &CommitRequest,
        known: &[bool],
        now: Now,
    ) -> (Vec<i16>, Vec<GroupRecord>) {
        let mut codes = Vec::with_capacity(req.offsets.len());
        let mut records = Vec::with_capacity(req.offsets.len());
        for (i, (topic, p, offset, epoch, metadata)) in req.offsets.iter().enumerate() {
            let metadata = metadata.clone().unwrap_or_default();
            codes.push(if !known.get(i).copied().unwrap_or(false) {
                ResponseError::UnknownTopicOrPartition.code()
            } else if metadata.len() > self.config.metadata_max_bytes {
                ResponseError::OffsetMetadataTooLarge.code()
            } else {
                records.push(GroupRecord {
                    key: offset_key(&req.group_id, topic, *p),
                    value: Some(RecordValue::Offset(OffsetValue {
                        offset: *offset,
                        leader_epoch: *epoch,
                        metadata,
                        commit_timestamp_ms: now.ms,
                    })),
                });
                0
            });
        }
        (codes, records)
    }

    /// A transaction's end, told by its coordinator: the marker that commits or drops
    /// the offsets it committed here.
    pub(crate) fn complete_transaction(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> Outcome<Self, ()> {
        Outcome {
            write: Write::Marker {
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
            },
            response: (),
            effects: Vec::new(),
            then: None,
        }
    }

    /// The committed offsets of `group` for `topics` (every committed one when `None`).
    pub(crate) fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> FetchedOffsets {
        match topics {
            Some(topics) => topics
                .into_iter()
                .map(|(topic, partitions)| {
                    let found = partitions
                        .into_iter()
                        .map(|p| {
                            let key = (group_id.to_string(), topic.clone(), p);
                            match self.offsets.get_committed(&key) {
                                Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone()),
                                None => (p, -1, -1, String::new()),
                            }
                        })
                        .collect();
                    (topic, found)
                })
                .collect(),
            None => {
                let mut by_topic: FetchedOffsets = Vec::new();
                for ((topic, p), v) in self.committed_offsets(group_id) {
                    let entry = (p, v.offset, v.leader_epoch, v.metadata);
                    match by_topic.last_mut() {
                        Some((t, list)) if *t == topic => list.push(entry),
                        _ => by_topic.push((topic, vec![entry])),
                    }
                }
                by_topic
            }
        }
    }

    pub(crate) fn list_groups(&self) -> Vec<ListedGroup> {
        let classic = self.groups.map.values().map(|g| ListedGroup {
            group_id: g.id.clone(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: g.state.name(),
            group_type: "classic",
        });
        let consumer = self.consumer_groups.values().map(|g| ListedGroup {
            group_id: g.id.clone(),
            protocol_type: "consumer".to_string(),
            state: g.state_name(),
            group_type: "consumer",
        });
        let share = self.share_groups.iter().map(|(id, g)| ListedGroup {
            group_id: id.clone(),
            protocol_type: "share".to_string(),
            state: g.state_name(),
            group_type: "share",
        });
        classic.chain(consumer).chain(share).collect()
    }

    pub(crate) fn describe(&self, group_id: &str) -> DescribedGroup {
        let Some(g) = self.groups.map.get(group_id) else {
            return DescribedGroup {
                not_classic: self.consumer_groups.contains_key(group_id),
                state: GroupState::Dead.name(),
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            };
        };
        let protocol = g.protocol.clone().unwrap_or_default();
        let settled = matches!(
            g.state,
            GroupState::Stable | GroupState::CompletingRebalance
        );
        DescribedGroup {
            not_classic: false,
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if settled {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if settled {
                        m.metadata_for(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if g.state == GroupState::Stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }

    /// DeleteGroups: an empty group goes with all its offsets.
    pub(crate) fn delete_group(&mut self, group_id: &str) -> Outcome<Self, i16> {
        // A share group's share-partition state is deleted first (DeleteGroups does it
        // through the share coordinator); here go its own records.
        if let Some(g) = self.share_groups.get(group_id) {
            if !g.members.is_empty() {
                return Outcome::answer(ResponseError::NonEmptyGroup.code());
            }
            return Outcome::records(super::share::share_group_tombstones(group_id), 0);
        }
        if let Some(g) = self.consumer_groups.get(group_id) {
            if !g.members.is_empty() {
                return Outcome::answer(ResponseError::NonEmptyGroup.code());
            }
            let mut records = self.tombstones(group_id, |_, _| true, false);
            records.extend(consumer_group_tombstones(g));
            return Outcome::records(records, 0);
        }
        let Some(g) = self.groups.map.get(group_id) else {
            return Outcome::answer(ResponseError::GroupIdNotFound.code());
        };
        if !g.members.is_empty() || g.state != GroupState::Empty {
            return Outcome::answer(ResponseError::NonEmptyGroup.code());
        }
        let records = self.tombstones(group_id, |_, _| true, true);
        Outcome::records(records, 0)
    }

    /// OffsetDelete: the top-level error, and one code per (topic, partition).
    pub(crate) fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Outcome<Self, (i16, Vec<i16>)> {
        let Some(g) = self.groups.map.get(group_id) else {
            return Outcome::answer((
                ResponseError::GroupIdNotFound.code(),
                vec![0; partitions.len()],
            ));
        };
        let active = g.state != GroupState::Empty && !g.members.is_empty();
        if active && g.protocol_type.as_deref() != Some("consumer") {
            return Outcome::answer((
                ResponseError::NonEmptyGroup.code(),
                vec![0; partitions.len()],
            ));
        }
        let subscribed = if active {
            subscribed_topics(g)
        } else {
            Vec::new()
        };
        let mut codes = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for (topic, p) in partitions {
            if subscribed.contains(topic) {
                codes.push(ResponseError::GroupSubscribedToTopic.code());
                continue;
            }
            let key = (group_id.to_string(), topic.clone(), *p);
            if self.offsets.get(&key).is_some() {
                records.push(GroupRecord {
                    key: offset_key(group_id, topic, *p),
                    value: None,
                });
            }
            codes.push(0);
        }
        Outcome::records(records, (0, codes))
    }

    /// Offsets retention at `now`: a group that has been empty for
    /// `offsets.retention.minutes` loses its offsets (a group that never had members:
    /// each offset that old), an empty group without offsets is removed, and offsets of
    /// topics that no longer exist (`topic_exists`) go from any group.
    pub(crate) fn expire_offsets(
        &mut self,
        now: Now,
        topic_exists: impl Fn(&str) -> bool,
    ) -> Outcome<Self, usize> {
        let retention_ms = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut forget = Vec::new();
        for g in self.groups.map.values() {
            if g.state != GroupState::Empty || !g.members.is_empty() || !g.pending.is_empty() {
                records.extend(self.tombstones(&g.id, |topic, _| !topic_exists(topic), false));
                continue;
            }
            let emptied_long_ago = now.ms.saturating_sub(g.state_since_ms) >= retention_ms;
            let standalone = g.protocol_type.is_none();
            let expired = |topic: &str, v: &OffsetValue| {
                if !topic_exists(topic) {
                    true
                } else if standalone {
                    now.ms.saturating_sub(v.commit_timestamp_ms) >= retention_ms
                } else {
                    emptied_long_ago
                }
            };
            let remaining = self
                .group_offsets(&g.id)
                .filter(|((_, topic, _), v)| !expired(topic, v))
                .count();
            let drop_group = remaining == 0 && (standalone || emptied_long_ago);
            let tombstones = self.tombstones(&g.id, expired, drop_group && g.stored);
            if drop_group && tombstones.is_empty() {
                // Nothing of it is stored: it goes from memory only.
                forget.push(g.id.clone());
            }
            if !tombstones.is_empty() {
                tracing::info!(group = %g.id, records = tombstones.len(), "offsets retention expired group offsets");
            }
            records.extend(tombstones);
        }
        for g in self.consumer_groups.values() {
            // A consumer group's offsets last while it has members (but not those of
            // deleted topics); once empty, each as long as the retention from its
            // commit. An empty group without offsets goes.
            let empty = g.members.is_empty();
            let expired = |topic: &str, v: &OffsetValue| {
                !topic_exists(topic)
                    || (empty && now.ms.saturating_sub(v.commit_timestamp_ms) >= retention_ms)
            };
            let remaining = self
                .group_offsets(&g.id)
                .filter(|((_, topic, _), v)| !expired(topic, v))
                .count();
            records.extend(self.tombstones(&g.id, expired, false));
            if empty && remaining == 0 {
                records.extend(consumer_group_tombstones(g));
            }
        }
        for id in forget {
            self.groups.map.remove(&id);
        }
        let count = records.len();
        Outcome::records(records, count)
    }

    /// Tombstones for the offsets of `group` that `expired` selects, plus the group's
    /// own key if asked.
    fn tombstones(
        &self,
        group: &str,
        expired: impl Fn(&str, &OffsetValue) -> bool,
        group_too: bool,
    ) -> Vec<GroupRecord> {
        let mut records: Vec<GroupRecord> = self
            .group_offsets(group)
            .filter(|((_, topic, _), v)| expired(topic, v))
            .map(|((_, topic, p), _)| GroupRecord {
                key: offset_key(group, topic, *p),
                value: None,
            })
            .collect();
        if group_too {
            records.push(GroupRecord {
                key: RecordKey::Group {
                    group: group.to_string(),
                },
                value: None,
            });
        }
        records
    }
}

/// Kafka's commit rules: members commit within their generation (a plain commit not
/// while the group awaits the leader's assignment); a simple committer (generation -1,
/// no member id) only to a group without members, except inside a transaction, where
/// a producer may commit without naming a member (older clients do).
fn validate_committer(
    group: Option<&mut Group>,
    req: &CommitRequest,
    transactional: bool,
    now: Now,
) -> Result<(), ResponseError> {
    let as_member = req.generation >= 0 || !req.member_id.is_empty() || req.instance_id.is_some();
    let Some(group) = group else {
        return if as_member {
            Err(ResponseError::UnknownMemberId)
        } else {
            Ok(())
        };
    };
    if group.state == GroupState::Dead {
        return Err(ResponseError::CoordinatorNotAvailable);
    }
    if !as_member {
        return if transactional || group.members.is_empty() {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        };
    }
    if let Some(instance) = &req.instance_id {
        if group.static_members.get(instance) != Some(&req.member_id) {
            return Err(ResponseError::FencedInstanceId);
        }
    }
    let (state, generation) = (group.state, group.generation);
    let Some(member) = group.members.get_mut(&req.member_id) else {
        return Err(ResponseError::UnknownMemberId);
    };
    if req.generation != generation {
        return Err(ResponseError::IllegalGeneration);
    }
    if !transactional && state == GroupState::CompletingRebalance {
        return Err(ResponseError::RebalanceInProgress);
    }
    // A commit is proof of life in Stable and PreparingRebalance (Kafka's
    // OffsetMetadataManager reschedules the member's heartbeat there); a transactional
    // one is not.
    if !transactional && matches!(state, GroupState::Stable | GroupState::PreparingRebalance) {
        member.last_heartbeat = now.at;
    }
    Ok(())
}

/// Topics named in the members' consumer-protocol subscriptions
/// (`i16 version, i32 count, count × string, ...`).
fn subscribed_topics(g: &Group) -> Vec<String> {
    let protocol = g.protocol.clone().unwrap_or_default();
    let mut topics = Vec::new();
    for m in g.members.values() {
        let meta = m.metadata_for(&protocol);
        let mut rest: &[u8] = &meta;
        let Some(count) = rest
            .get(2..6)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            continue;
        };
        rest = &rest[6..];
        for _ in 0..count.max(0) {
            let Some(len) = rest.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]])) else {
                break;
            };
            let len = usize::try_from(len).unwrap_or(0);
            let Some(name) = rest.get(2..2 + len) else {
                break;
            };
            topics.push(String::from_utf8_lossy(name).into_owned());
            rest = &rest[2 + len..];
        }
    }
    topics
}
