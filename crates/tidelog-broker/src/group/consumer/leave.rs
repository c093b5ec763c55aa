//! Members going: a leave heartbeat (epoch -1, or -2 for a static member that will
//! come back), and the clock fencing members whose session or revocation time ran out.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::heartbeat::{HeartbeatRequest, HeartbeatResponse, Refused, Writer};
use super::topics::group_topics;
use super::{ConsumerKey, ConsumerValue, TopicsView, STATIC_LEFT_EPOCH};
use crate::coordinator::Now;
use crate::group::records::GroupRecord;
use crate::group::shard::GroupShard;

impl GroupShard {
    /// The clock: members whose session ran out, or who did not revoke within their
    /// rebalance timeout, are fenced; their partitions go to the others. Also returns
    /// the groups this turned classic, each with its classic generation.
    pub(crate) fn expire_consumer_members(
        &self,
        now: Now,
    ) -> (Vec<GroupRecord>, Vec<(String, i32)>) {
        let mut records = Vec::new();
        let mut downgraded = Vec::new();
        let mut topics = None;
        for g in self.consumer_groups.values() {
            let group_session = self.config.group_configs.consumer_session_timeout_ms(&g.id);
            let expired: BTreeSet<String> = g
                .members
                .values()
                .filter(|m| {
                    // A classic member's session is its own JoinGroup's.
                    let ms = m
                        .metadata
                        .classic
                        .as_ref()
                        .map_or(group_session, |c| i64::from(c.session_timeout_ms));
                    let session = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
                    now.at.saturating_duration_since(m.last_heartbeat) > session
                        || m.revoke_by.is_some_and(|by| now.at > by)
                })
                .map(|m| m.id.clone())
                .collect();
            if expired.is_empty() {
                continue;
            }
            // Members rarely expire: the topics are read only when some did.
            let topics = topics.get_or_insert_with(|| self.config.topics_view());
            if let Some(more) = self.config.downgrade_fencing(g, &expired, topics, now) {
                tracing::info!(group = %g.id, members = ?expired, "consumer group members fenced: session or rebalance timeout; the classic members stay");
                records.extend(more);
                downgraded.push((g.id.clone(), g.epoch));
                continue;
            }
            let mut group = g.clone();
            let hash = group.metadata_hash;
            let mut w = Writer {
                group: &mut group,
                records: Vec::new(),
                now: now.at,
            };
            for id in &expired {
                tracing::info!(group = %g.id, member = %id, "consumer group member fenced: session or rebalance timeout");
                w.remove_member(id);
                self.config.consumer_stats.forget(&g.id, id);
            }
            w.bump_epoch(hash);
            records.extend(w.records);
            self.config
                .consumer_stats
                .observe(Some(g), &group, None, now.at);
        }
        (records, downgraded)
    }
}

pub(super) fn leave(
    w: &mut Writer<'_>,
    req: &HeartbeatRequest,
    topics: &TopicsView,
) -> Result<HeartbeatResponse, Refused> {
    let member = match (&req.instance_id, req.member_epoch) {
        (Some(instance), STATIC_LEFT_EPOCH) => {
            let Some(id) = w.group.static_members.get(instance) else {
                return Err(Refused(
                    ResponseError::UnknownMemberId,
                    format!("Instance id {instance} is unknown."),
                ));
            };
            if *id != req.member_id {
                return Err(Refused(
                    ResponseError::FencedInstanceId,
                    format!("Instance id {instance} belongs to member {id}."),
                ));
            }
            id.clone()
        }
        _ => {
            if !w.group.members.contains_key(&req.member_id) {
                return Err(Refused(
                    ResponseError::UnknownMemberId,
                    format!(
                        "Member {} is not a member of group {}.",
                        req.member_id, w.group.id
                    ),
                ));
            }
            req.member_id.clone()
        }
    };
    if req.member_epoch == STATIC_LEFT_EPOCH {
        // It keeps its partitions for a session: a restart within it takes them back.
        let mut current = w.group.members[&member].current.clone();
        current.previous_member_epoch = current.member_epoch;
        current.member_epoch = STATIC_LEFT_EPOCH;
        let group = w.group.id.clone();
        w.emit(
            ConsumerKey::CurrentAssignment { group, member },
            Some(ConsumerValue::CurrentAssignment(current)),
        );
    } else {
        w.remove_member(&member);
        let (_, hash) = group_topics(w.group, topics);
        w.bump_epoch(hash);
    }
    Ok(HeartbeatResponse {
        member_id: req.member_id.clone(),
        member_epoch: req.member_epoch,
        ..HeartbeatResponse::default()
    })
}
