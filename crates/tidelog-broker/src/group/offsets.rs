//! Committed offsets (OffsetCommit, OffsetFetch, OffsetDelete, retention) and the
//! group admin views (ListGroups, DescribeGroups, DeleteGroups).

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::records::{GroupRecord, OffsetValue, RecordKey, RecordValue};
use super::state::{Group, GroupState, Groups};
use super::GroupCoordinator;
use crate::context::{now_ms, BrokerContext};
use crate::group::OFFSETS_TOPIC;
use crate::internal_topic::{append_error_code, Written};

/// An OffsetCommit as the coordinator sees it.
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
    pub(crate) state: &'static str,
    pub(crate) protocol_type: String,
    pub(crate) protocol: String,
    pub(crate) members: Vec<DescribedMember>,
}

/// Per topic: (partition, offset, leader epoch, metadata) — offset -1 when none.
pub(crate) type FetchedOffsets = Vec<(String, Vec<(i32, i64, i32, String)>)>;

fn offset_key(group: &str, topic: &str, partition: i32) -> RecordKey {
    RecordKey::Offset {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    }
}

impl GroupCoordinator {
    /// Stores offsets another node's transaction sent here (TxnOffsetCommit where this
    /// node coordinates the group only) as a transactional batch of `producer`: they
    /// become committed offsets only at that transaction's COMMIT marker (which a reload
    /// of the partition finds after them), never by being written. Answers once the
    /// batch is replicated, so offsets the client was told are kept survive this node.
    pub(crate) fn write_transactional_offsets(
        &self,
        ctx: &BrokerContext,
        group: &str,
        producer: (i64, i16),
        offsets: &[(String, i32, crate::txn::PendingOffset)],
    ) -> Result<(), i16> {
        if offsets.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let records: Vec<GroupRecord> = offsets
            .iter()
            .map(|(topic, p, o)| GroupRecord {
                key: offset_key(group, topic, *p),
                value: Some(RecordValue::Offset(OffsetValue {
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata.clone().unwrap_or_default(),
                    commit_timestamp_ms: now,
                })),
            })
            .collect();
        let written =
            self.with_partition(ctx, group, |_, partition| -> Result<Written, i16> {
                let mut buf = super::encode_batch_of(&records, now, Some(producer))?;
                let p = ctx
                    .replicas
                    .get(OFFSETS_TOPIC, partition)
                    .ok_or(ResponseError::NotCoordinator.code())?;
                let appended = p.append(&mut buf, now).map_err(|e| append_error_code(&e))?;
                Ok(Written::of(partition, &appended))
            })??;
        self.acknowledge(ctx, Some(written))
    }

    /// Validates the committer, then writes one record per partition. Returns one error
    /// code per requested offset, in order.
    /// Answers once the records are replicated (acks=all, as Kafka does).
    pub(crate) fn commit(&self, ctx: &BrokerContext, req: CommitRequest) -> Vec<i16> {
        self.commit_checked(ctx, req, true)
    }

    /// Writes the offsets of a committed transaction. The committer was checked when it
    /// sent TxnOffsetCommit; once the transaction commits, Kafka makes its offsets visible
    /// whatever generation the group has reached since, and so does this. Called under
    /// the transaction coordinator's lock, so it does not wait for replication: the
    /// offsets become visible once replicated (the background tick), and a write that
    /// fails is retried with the marker.
    pub(crate) fn commit_materialized(&self, ctx: &BrokerContext, req: CommitRequest) -> Vec<i16> {
        self.commit_checked(ctx, req, false)
    }

    /// A member's commit (`member`: checked against the group, waited for) or a
    /// committed transaction's.
    fn commit_checked(&self, ctx: &BrokerContext, req: CommitRequest, member: bool) -> Vec<i16> {
        let count = req.offsets.len();
        let image = ctx.metadata.image();
        let result = self.with_partition(ctx, &req.group_id, |inner, partition| {
            let now_ms = now_ms();
            if member {
                if let Err(e) = validate_committer(inner.groups.map.get_mut(&req.group_id), &req) {
                    return (vec![e.code(); count], None);
                }
            }
            let mut codes = Vec::with_capacity(count);
            let mut records = Vec::with_capacity(count);
            for (topic, p, offset, epoch, metadata) in &req.offsets {
                let metadata = metadata.clone().unwrap_or_default();
                let known = image
                    .topic(topic)
                    .is_some_and(|t| t.partitions.contains_key(p));
                codes.push(if !known {
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
                            commit_timestamp_ms: now_ms,
                        })),
                    });
                    0
                });
            }
            match GroupCoordinator::write(ctx, inner, partition, &records) {
                Ok(written) => (codes, written),
                Err(code) => (fail_accepted(codes, code), None),
            }
        });
        match result {
            Ok((codes, written)) if member => match self.acknowledge(ctx, written) {
                Ok(()) => codes,
                Err(code) => fail_accepted(codes, code),
            },
            Ok((codes, _)) => codes,
            Err(code) => vec![code; count],
        }
    }

    /// The committed offsets of `group` for `topics` (every committed one when `None`).
    pub(crate) fn fetch_offsets(
        &self,
        ctx: &BrokerContext,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Result<FetchedOffsets, i16> {
        self.with_partition(ctx, group_id, |inner, _| {
            let empty = BTreeMap::new();
            let offsets = inner
                .groups
                .map
                .get(group_id)
                .map_or(&empty, |g| &g.offsets);
            match topics {
                Some(topics) => topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        let found = partitions
                            .into_iter()
                            .map(|p| match offsets.get(&(topic.clone(), p)) {
                                Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone()),
                                None => (p, -1, -1, String::new()),
                            })
                            .collect();
                        (topic, found)
                    })
                    .collect(),
                None => {
                    let mut by_topic: BTreeMap<String, Vec<(i32, i64, i32, String)>> =
                        BTreeMap::new();
                    for ((topic, p), v) in offsets {
                        by_topic.entry(topic.clone()).or_default().push((
                            *p,
                            v.offset,
                            v.leader_epoch,
                            v.metadata.clone(),
                        ));
                    }
                    by_topic.into_iter().collect()
                }
            }
        })
    }

    pub(crate) fn list_groups(&self) -> Vec<ListedGroup> {
        self.with_all(|inner| {
            let mut out: Vec<ListedGroup> = inner
                .groups
                .map
                .values()
                .map(|g| ListedGroup {
                    group_id: g.id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.state.name(),
                })
                .collect();
            out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
            out
        })
    }

    pub(crate) fn describe(
        &self,
        ctx: &BrokerContext,
        group_id: &str,
    ) -> Result<DescribedGroup, i16> {
        self.with_partition(ctx, group_id, |inner, _| {
            let Some(g) = inner.groups.map.get(group_id) else {
                return DescribedGroup {
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
        })
    }

    /// Deletes an empty group with all its offsets.
    pub(crate) fn delete_group(&self, ctx: &BrokerContext, group_id: &str) -> i16 {
        let result = self.with_partition(ctx, group_id, |inner, partition| {
            let Some(g) = inner.groups.map.get(group_id) else {
                return Err(ResponseError::GroupIdNotFound.code());
            };
            if !g.members.is_empty() || g.state != GroupState::Empty {
                return Err(ResponseError::NonEmptyGroup.code());
            }
            let records = tombstones(g, |_, _| true, true);
            let written = GroupCoordinator::write(ctx, inner, partition, &records)?;
            inner.uncommitted.discard_group(partition, group_id);
            inner.groups.map.remove(group_id);
            Ok(written)
        });
        match result.and_then(|written| written) {
            Ok(written) => self.acknowledge(ctx, written).err().unwrap_or(0),
            Err(code) => code,
        }
    }

    /// OffsetDelete: the top-level error, and one code per (topic, partition).
    pub(crate) fn delete_offsets(
        &self,
        ctx: &BrokerContext,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> (i16, Vec<i16>) {
        let result = self.with_partition(ctx, group_id, |inner, partition| {
            let Some(g) = inner.groups.map.get(group_id) else {
                return (
                    Err(ResponseError::GroupIdNotFound.code()),
                    vec![0; partitions.len()],
                );
            };
            let active = g.state != GroupState::Empty && !g.members.is_empty();
            if active && g.protocol_type.as_deref() != Some("consumer") {
                return (
                    Err(ResponseError::NonEmptyGroup.code()),
                    vec![0; partitions.len()],
                );
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
                if g.offsets.contains_key(&(topic.clone(), *p)) {
                    records.push(GroupRecord {
                        key: offset_key(group_id, topic, *p),
                        value: None,
                    });
                }
                codes.push(0);
            }
            (
                GroupCoordinator::write(ctx, inner, partition, &records),
                codes,
            )
        });
        match result {
            Ok((Ok(written), codes)) => match self.acknowledge(ctx, written) {
                Ok(()) => (0, codes),
                Err(code) => (code, codes),
            },
            Ok((Err(code), codes)) => (code, codes),
            Err(code) => (code, vec![0; partitions.len()]),
        }
    }

    /// Offsets retention: a group that has been empty for `offsets.retention.minutes`
    /// loses its offsets (a group that never had members: each offset that old), and an
    /// empty group without offsets is removed.
    pub(crate) fn expire_offsets(&self, ctx: &BrokerContext) {
        let mut inner = self.lock();
        let image = ctx.metadata.image();
        let exists = |topic: &str| image.topic(topic).is_some();
        let work = retention_work(
            &inner.groups,
            now_ms(),
            self.config.offsets_retention_ms,
            exists,
        );
        for (partition, group_id, records, drop_group) in work {
            match GroupCoordinator::write(ctx, &mut inner, partition, &records) {
                Ok(_) => {
                    tracing::info!(group = %group_id, records = records.len(), "offsets retention expired group offsets");
                    if drop_group {
                        inner.groups.map.remove(&group_id);
                    }
                }
                Err(code) => {
                    tracing::warn!(group = %group_id, code, "offsets retention write failed")
                }
            }
        }
    }
}

/// `codes` with every accepted (0) entry set to `code`.
fn fail_accepted(mut codes: Vec<i16>, code: i16) -> Vec<i16> {
    for c in codes.iter_mut().filter(|c| **c == 0) {
        *c = code;
    }
    codes
}

/// What offsets retention removes at `now_ms`: per group, its partition, the
/// tombstones to write, and whether the group itself goes. Only groups without members
/// qualify; a group that had members loses its offsets `retention_ms` after it emptied,
/// a group that only ever stored offsets loses each one `retention_ms` after its commit.
/// Offsets of topics that no longer exist go from any group.
pub(super) fn retention_work(
    groups: &Groups,
    now_ms: i64,
    retention_ms: i64,
    topic_exists: impl Fn(&str) -> bool,
) -> Vec<(i32, String, Vec<GroupRecord>, bool)> {
    let mut work = Vec::new();
    for g in groups.map.values() {
        if g.state != GroupState::Empty || !g.members.is_empty() || !g.pending.is_empty() {
            let orphans = tombstones(g, |topic, _| !topic_exists(topic), false);
            if !orphans.is_empty() {
                work.push((g.partition, g.id.clone(), orphans, false));
            }
            continue;
        }
        let emptied_long_ago = now_ms.saturating_sub(g.state_since_ms) >= retention_ms;
        let standalone = g.protocol_type.is_none();
        let expired = |topic: &str, v: &OffsetValue| {
            if !topic_exists(topic) {
                true
            } else if standalone {
                now_ms.saturating_sub(v.commit_timestamp_ms) >= retention_ms
            } else {
                emptied_long_ago
            }
        };
        let remaining = g
            .offsets
            .iter()
            .filter(|((topic, _), v)| !expired(topic, v))
            .count();
        let drop_group = remaining == 0 && (standalone || emptied_long_ago);
        let records = tombstones(g, expired, drop_group && g.stored);
        if !records.is_empty() || drop_group {
            work.push((g.partition, g.id.clone(), records, drop_group));
        }
    }
    work
}

/// Tombstones for the offsets `expired` selects, plus the group's own key if asked.
fn tombstones(
    g: &Group,
    expired: impl Fn(&str, &OffsetValue) -> bool,
    group_too: bool,
) -> Vec<GroupRecord> {
    let mut records: Vec<GroupRecord> = g
        .offsets
        .iter()
        .filter(|((topic, _), v)| expired(topic, v))
        .map(|((topic, p), _)| GroupRecord {
            key: offset_key(&g.id, topic, *p),
            value: None,
        })
        .collect();
    if group_too {
        records.push(GroupRecord {
            key: RecordKey::Group {
                group: g.id.clone(),
            },
            value: None,
        });
    }
    records
}

/// Kafka's commit rules: members commit within their generation (not while the group
/// awaits the leader's assignment); a simple committer (generation -1, no member id)
/// only to a group without members.
fn validate_committer(group: Option<&mut Group>, req: &CommitRequest) -> Result<(), ResponseError> {
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
        return if group.members.is_empty() {
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
    let Some(member) = group.members.get_mut(&req.member_id) else {
        return Err(ResponseError::UnknownMemberId);
    };
    if req.generation != group.generation {
        return Err(ResponseError::IllegalGeneration);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(ResponseError::RebalanceInProgress);
    }
    // A commit is proof of life.
    member.last_heartbeat = Instant::now();
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
