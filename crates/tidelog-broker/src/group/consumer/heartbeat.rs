//! ConsumerGroupHeartbeat as a step on the shard, and the clock's fencing of members
//! whose session or revocation time ran out.
//!
//! A step works on a copy of the group: every record it returns is replayed into the
//! copy as it is made, so what the step computes next (the target assignment, the
//! member's reconciliation) sees exactly the state the records will make; the runtime
//! then replays the same records into the shard.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::assignor::{self, AssignMember};
use super::reconcile::reconcile;
pub(crate) use super::topics::group_assignor;
use super::topics::{compile_regex, group_topics, member_topics, refresh_regexes};
use super::{
    Assignment, ClassicProtocols, ConsumerGroup, ConsumerKey, ConsumerMember, ConsumerValue,
    CurrentAssignment, TopicsView, STATIC_LEFT_EPOCH,
};
use crate::coordinator::{Now, Outcome};
use crate::group::records::{GroupRecord, RecordKey, RecordValue};
use crate::group::shard::GroupShard;
use crate::group::GroupConfig;

/// A ConsumerGroupHeartbeat as the coordinator sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct HeartbeatRequest {
    pub(crate) group_id: String,
    pub(crate) member_id: String,
    pub(crate) member_epoch: i32,
    pub(crate) instance_id: Option<String>,
    pub(crate) rack_id: Option<String>,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) subscribed_topic_names: Option<Vec<String>>,
    pub(crate) subscribed_topic_regex: Option<String>,
    pub(crate) server_assignor: Option<String>,
    pub(crate) owned: Option<Assignment>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    /// A classic member's JoinGroup (see `classic`), else None.
    pub(crate) classic: Option<ClassicProtocols>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HeartbeatResponse {
    pub(crate) error: i16,
    pub(crate) message: Option<String>,
    pub(crate) member_id: String,
    pub(crate) member_epoch: i32,
    pub(crate) heartbeat_interval_ms: i32,
    pub(crate) assignment: Option<Assignment>,
}

/// A heartbeat step's answer, its group, and the generation of the classic group the
/// step turned it into, if it did.
type Stepped = (HeartbeatResponse, String, Option<i32>);

/// The member epoch of a member leaving for good.
const LEAVE_EPOCH: i32 = -1;

pub(super) struct Refused(pub(super) ResponseError, pub(super) String);

impl Refused {
    fn response(self, member_id: String) -> HeartbeatResponse {
        HeartbeatResponse {
            error: self.0.code(),
            message: Some(self.1),
            member_id,
            member_epoch: -1,
            ..HeartbeatResponse::default()
        }
    }
}

/// Records of one step, replayed into the step's copy of the group as they are made.
pub(super) struct Writer<'a> {
    pub(super) group: &'a mut ConsumerGroup,
    pub(super) records: Vec<GroupRecord>,
    pub(super) now: std::time::Instant,
}

impl Writer<'_> {
    pub(super) fn emit(&mut self, key: ConsumerKey, value: Option<ConsumerValue>) {
        self.group.replay(&key, value.clone(), self.now);
        self.records.push(GroupRecord {
            key: RecordKey::Consumer(key),
            value: value.map(RecordValue::Consumer),
        });
    }

    /// Removes `member`, and the regex it subscribed with once nobody else uses it.
    pub(super) fn remove_member(&mut self, member: &str) {
        let regex = self
            .group
            .members
            .get(member)
            .and_then(|m| m.metadata.subscribed_topic_regex.clone());
        self.remove_member_records(member);
        if let Some(regex) = regex {
            let still_used = self
                .group
                .members
                .values()
                .any(|m| m.metadata.subscribed_topic_regex.as_ref() == Some(&regex));
            if !still_used && self.group.regexes.contains_key(&regex) {
                let group = self.group.id.clone();
                self.emit(ConsumerKey::Regex { group, regex }, None);
            }
        }
    }

    fn remove_member_records(&mut self, member: &str) {
        let (group, member) = (self.group.id.clone(), member.to_string());
        self.emit(
            ConsumerKey::CurrentAssignment {
                group: group.clone(),
                member: member.clone(),
            },
            None,
        );
        self.emit(
            ConsumerKey::TargetMember {
                group: group.clone(),
                member: member.clone(),
            },
            None,
        );
        self.emit(ConsumerKey::Member { group, member }, None);
    }

    pub(super) fn bump_epoch(&mut self, metadata_hash: i64) {
        let epoch = self.group.epoch.saturating_add(1);
        let group = self.group.id.clone();
        self.emit(
            ConsumerKey::Metadata { group },
            Some(ConsumerValue::Metadata {
                epoch,
                metadata_hash,
            }),
        );
    }
}

fn validate(req: &HeartbeatRequest, config: &GroupConfig) -> Result<(), Refused> {
    let invalid = |m: &str| Err(Refused(ResponseError::InvalidRequest, m.to_string()));
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    // Stored keys hold ids as i16-length strings.
    let too_long = |s: &str| s.len() > usize::from(crate::group::join::MAX_NAME_BYTES);
    if too_long(&req.member_id) || req.instance_id.as_deref().is_some_and(too_long) {
        return invalid("MemberId and InstanceId must be at most 32767 bytes.");
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if !req.owned.as_ref().is_some_and(|o| o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        STATIC_LEFT_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < STATIC_LEFT_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(a) = req.server_assignor.as_deref().filter(|a| !a.is_empty()) {
        if !config.consumer_assignors.iter().any(|c| c == a) {
            return Err(Refused(
                ResponseError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    config.consumer_assignors.join(", ")
                ),
            ));
        }
    }
    if let Some(re) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = compile_regex(re) {
            return Err(Refused(
                ResponseError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{re}` is not a valid regular expression: {e}"),
            ));
        }
    }
    Ok(())
}

impl GroupShard {
    /// ConsumerGroupHeartbeat: joins, leaves, or keeps a member alive and moves it one
    /// step towards its target assignment.
    pub(crate) fn consumer_heartbeat(
        &mut self,
        req: HeartbeatRequest,
        topics: &TopicsView,
        now: Now,
    ) -> Outcome<Self, HeartbeatResponse> {
        let member_id = req.member_id.clone();
        match self.heartbeat_records(req, topics, now) {
            Ok((records, (response, group, Some(generation)))) => {
                // The last consumer-protocol member left: the group went classic.
                let downgraded = vec![(group, generation)];
                Outcome::records(records, response).then(move |shard: &mut GroupShard, written| {
                    if written.is_ok() {
                        shard.rebalance_downgraded(&downgraded, now);
                    }
                })
            }
            Ok((records, response)) => {
                if !self.consumer_groups.contains_key(&response.1) {
                    // An upgraded classic group: whoever waits on it rejoins.
                    if let Some(classic) = self.groups.map.remove(&response.1) {
                        super::classic::fail_waiters(classic);
                    }
                }
                if let Some(m) = self
                    .consumer_groups
                    .get_mut(&response.1)
                    .and_then(|g| g.members.get_mut(&response.0.member_id))
                {
                    m.last_heartbeat = now.at;
                }
                Outcome::records(records, response.0)
            }
            Err(refused) => Outcome::answer(refused.response(member_id)),
        }
    }

    fn heartbeat_records(
        &self,
        req: HeartbeatRequest,
        topics: &TopicsView,
        now: Now,
    ) -> Result<(Vec<GroupRecord>, Stepped), Refused> {
        let config = &self.config;
        validate(&req, config)?;
        let existing = self.consumer_groups.get(&req.group_id);
        let mut records = Vec::new();
        if existing.is_none() {
            if self.share_groups.contains_key(&req.group_id) {
                return Err(Refused(
                    ResponseError::GroupIdNotFound,
                    format!("Group {} is not a consumer group.", req.group_id),
                ));
            }
            if let Some(classic) = self.groups.map.get(&req.group_id) {
                if !classic.members.is_empty() || !classic.pending.is_empty() {
                    // A classic group with members moves to this protocol when its
                    // first consumer-protocol member joins (KIP-848's online upgrade).
                    let upgraded = (req.member_epoch == 0)
                        .then(|| super::classic::upgrade(classic, topics, config, now.at))
                        .flatten();
                    let Some((group, records)) = upgraded else {
                        return Err(Refused(
                            ResponseError::GroupIdNotFound,
                            format!("Group {} is not a consumer group.", req.group_id),
                        ));
                    };
                    return self.step(req, topics, now, Some(group), records);
                }
                if classic.stored {
                    // An empty classic group becomes a consumer group: its offsets stay.
                    records.push(GroupRecord {
                        key: RecordKey::Group {
                            group: req.group_id.clone(),
                        },
                        value: None,
                    });
                }
            }
            if req.member_epoch != 0 {
                return Err(Refused(
                    ResponseError::UnknownMemberId,
                    format!(
                        "Member {} is not a member of group {}.",
                        req.member_id, req.group_id
                    ),
                ));
            }
        }
        self.step(req, topics, now, existing.cloned(), records)
    }

    /// The heartbeat's step on `group` (None: a new one), after `records`.
    fn step(
        &self,
        req: HeartbeatRequest,
        topics: &TopicsView,
        now: Now,
        group: Option<ConsumerGroup>,
        records: Vec<GroupRecord>,
    ) -> Result<(Vec<GroupRecord>, Stepped), Refused> {
        let config = &self.config;
        let existing = self.consumer_groups.get(&req.group_id);
        let mut group = group.unwrap_or_else(|| ConsumerGroup::new(req.group_id.clone()));
        let mut records = records;
        if req.member_epoch == LEAVE_EPOCH && group.members.contains_key(&req.member_id) {
            let leaving = BTreeSet::from([req.member_id.clone()]);
            if let Some(more) = config.downgrade_fencing(&group, &leaving, topics, now) {
                records.extend(more);
                let response = HeartbeatResponse {
                    member_id: req.member_id.clone(),
                    member_epoch: LEAVE_EPOCH,
                    ..HeartbeatResponse::default()
                };
                return Ok((records, (response, req.group_id, Some(group.epoch))));
            }
        }
        let mut w = Writer {
            group: &mut group,
            records,
            now: now.at,
        };
        let response = if req.member_epoch < 0 {
            super::leave::leave(&mut w, &req, topics)?
        } else {
            join_or_heartbeat(&mut w, &req, topics, config)?
        };
        let records = w.records;
        config
            .consumer_stats
            .observe(existing, &group, Some(&response.member_id), now.at);
        Ok((records, (response, req.group_id, None)))
    }
}

pub(super) fn join_or_heartbeat(
    w: &mut Writer<'_>,
    req: &HeartbeatRequest,
    topics: &TopicsView,
    config: &GroupConfig,
) -> Result<HeartbeatResponse, Refused> {
    let group_id = w.group.id.clone();
    let member_id = req.member_id.clone();
    let not_member = || {
        Refused(
            ResponseError::UnknownMemberId,
            format!("Member {member_id} is not a member of group {group_id}."),
        )
    };
    // The member as it was (a replaced static member's as the old one's), and the id
    // of the static member it replaces.
    let (before, replaces): (Option<ConsumerMember>, Option<String>) = if req.member_epoch == 0 {
        let by_instance = req
            .instance_id
            .as_ref()
            .and_then(|i| w.group.static_members.get(i).cloned());
        match by_instance {
            Some(old) if old != member_id => {
                let old_member = &w.group.members[&old];
                // A classic static member takes its instance over at once, as in a
                // classic group; a consumer-protocol one only once it was released.
                if old_member.current.member_epoch != STATIC_LEFT_EPOCH && req.classic.is_none() {
                    return Err(Refused(
                        ResponseError::UnreleasedInstanceId,
                        format!(
                            "Static member {old} with instance id {} is not released yet.",
                            req.instance_id.as_deref().unwrap_or_default()
                        ),
                    ));
                }
                (Some(old_member.clone()), Some(old))
            }
            _ => (w.group.members.get(&member_id).cloned(), None),
        }
    } else {
        let member = w.group.members.get(&member_id).ok_or_else(not_member)?;
        if req.instance_id.is_some() && member.metadata.instance_id != req.instance_id {
            return Err(Refused(
                ResponseError::FencedInstanceId,
                format!("Member {member_id} does not own its instance id."),
            ));
        }
        let epoch = member.current.member_epoch;
        let acceptable_previous = req.member_epoch == member.current.previous_member_epoch
            && req.owned.as_ref().is_none_or(|owned| {
                owned.iter().all(|(t, ps)| {
                    member
                        .current
                        .assigned
                        .get(t)
                        .is_some_and(|a| ps.is_subset(a))
                })
            });
        if req.member_epoch > epoch || (req.member_epoch < epoch && !acceptable_previous) {
            return Err(Refused(
                ResponseError::FencedMemberEpoch,
                format!(
                    "The consumer group member has a member epoch ({}) which differs from the \
                     one the coordinator expects ({epoch}).",
                    req.member_epoch
                ),
            ));
        }
        (Some(member.clone()), None)
    };
    let is_new = before.is_none();
    if is_new && w.group.members.len() >= config.consumer_max_size {
        return Err(Refused(
            ResponseError::GroupMaxSizeReached,
            format!(
                "The consumer group has reached its maximum capacity of {} members.",
                config.consumer_max_size
            ),
        ));
    }
    let old_meta = before
        .as_ref()
        .map(|m| m.metadata.clone())
        .unwrap_or_default();
    let mut meta = old_meta.clone();
    if req.instance_id.is_some() {
        meta.instance_id = req.instance_id.clone();
    }
    if req.rack_id.is_some() {
        meta.rack_id = req.rack_id.clone();
    }
    meta.client_id = req.client_id.clone();
    meta.client_host = req.client_host.clone();
    if let Some(names) = &req.subscribed_topic_names {
        let mut names = names.clone();
        names.sort_unstable();
        names.dedup();
        meta.subscribed_topic_names = names;
    }
    if let Some(re) = &req.subscribed_topic_regex {
        meta.subscribed_topic_regex = Some(re.clone()).filter(|r| !r.is_empty());
    }
    if req.rebalance_timeout_ms != -1 {
        meta.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(a) = &req.server_assignor {
        meta.server_assignor = Some(a.clone()).filter(|a| !a.is_empty());
    }
    if req.classic.is_some() || req.member_epoch == 0 {
        meta.classic = req.classic.clone();
    }
    let subscription_changed = is_new
        || meta.subscribed_topic_names != old_meta.subscribed_topic_names
        || meta.subscribed_topic_regex != old_meta.subscribed_topic_regex
        || meta.server_assignor != old_meta.server_assignor;

    if let Some(old) = &replaces {
        w.remove_member(old);
    }
    let key = |member: &str| (group_id.clone(), member.to_string());
    if replaces.is_some() || meta != old_meta || is_new {
        let (group, member) = key(&member_id);
        w.emit(
            ConsumerKey::Member { group, member },
            Some(ConsumerValue::Member(meta)),
        );
    }
    if let (Some(old), Some(_)) = (&before, &replaces) {
        // The new instance takes the old one's place: its partitions and its target.
        let (group, member) = key(&member_id);
        w.emit(
            ConsumerKey::TargetMember {
                group: group.clone(),
                member: member.clone(),
            },
            Some(ConsumerValue::TargetMember(old.target.clone())),
        );
        let current = CurrentAssignment {
            member_epoch: 0,
            previous_member_epoch: 0,
            state: super::MemberState::Stable,
            assigned: old.current.assigned.clone(),
            pending_revocation: Assignment::new(),
        };
        w.emit(
            ConsumerKey::CurrentAssignment { group, member },
            Some(ConsumerValue::CurrentAssignment(current)),
        );
    }

    refresh_regexes(w, topics);
    let (subscribed, hash) = group_topics(w.group, topics);
    if subscription_changed || hash != w.group.metadata_hash {
        w.bump_epoch(hash);
    }
    if w.group.epoch > w.group.assignment_epoch {
        update_target(w, topics, &subscribed, config);
    }

    let member = &w.group.members[&member_id];
    let next = reconcile(
        &member.current,
        &member.target,
        w.group.assignment_epoch,
        req.owned.as_ref(),
        |t, p| w.group.owned_by_other(t, p, &member_id),
    );
    let assigned_before = member.current.assigned.clone();
    if next != member.current {
        let (group, member) = key(&member_id);
        w.emit(
            ConsumerKey::CurrentAssignment { group, member },
            Some(ConsumerValue::CurrentAssignment(next)),
        );
    }
    let member = &w.group.members[&member_id];
    let full = req.member_epoch == 0
        || (req.rebalance_timeout_ms != -1
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
            && req.owned.is_some());
    let changed = member.current.assigned != assigned_before
        || before
            .as_ref()
            .is_some_and(|b| b.current.assigned != member.current.assigned);
    Ok(HeartbeatResponse {
        error: 0,
        message: None,
        member_id: member_id.clone(),
        member_epoch: member.current.member_epoch,
        heartbeat_interval_ms: config
            .group_configs
            .consumer_heartbeat_interval_ms(&w.group.id),
        assignment: (full || changed).then(|| member.current.assigned.clone()),
    })
}

/// A new target assignment for the group's epoch.
fn update_target(
    w: &mut Writer<'_>,
    topics: &TopicsView,
    subscribed: &BTreeMap<Uuid, i32>,
    config: &GroupConfig,
) {
    let assignor = group_assignor(w.group, config);
    let members: Vec<AssignMember> = w
        .group
        .members
        .values()
        .map(|m| AssignMember {
            id: m.id.clone(),
            topics: member_topics(&m.metadata, &w.group.regexes, topics),
            previous: m.target.clone(),
        })
        .collect();
    let target = assignor::assign(&assignor, &members, subscribed);
    let group = w.group.id.clone();
    for (member, assignment) in target {
        let unchanged = w
            .group
            .members
            .get(&member)
            .is_some_and(|m| m.target == assignment);
        if !unchanged {
            w.emit(
                ConsumerKey::TargetMember {
                    group: group.clone(),
                    member,
                },
                Some(ConsumerValue::TargetMember(assignment)),
            );
        }
    }
    let assignment_epoch = w.group.epoch;
    w.emit(
        ConsumerKey::TargetMetadata { group },
        Some(ConsumerValue::TargetMetadata { assignment_epoch }),
    );
}
