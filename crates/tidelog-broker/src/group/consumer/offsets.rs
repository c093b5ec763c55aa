//! Committed offsets of consumer-protocol groups: who may commit, and the records
//! that delete a group.

use kafka_protocol::error::ResponseError;

use super::{ConsumerGroup, ConsumerKey};
use crate::group::offsets::CommitRequest;
use crate::group::records::{GroupRecord, RecordKey};

/// The records that delete a consumer group without members: its resolved regexes,
/// then its target assignment metadata, and its metadata last.
pub(crate) fn consumer_group_tombstones(group: &ConsumerGroup) -> Vec<GroupRecord> {
    let id = &group.id;
    let regexes = group.regexes.keys().map(|regex| ConsumerKey::Regex {
        group: id.clone(),
        regex: regex.clone(),
    });
    regexes
        .chain([
            ConsumerKey::TargetMetadata { group: id.clone() },
            ConsumerKey::Metadata { group: id.clone() },
        ])
        .map(|key| GroupRecord {
            key: RecordKey::Consumer(key),
            value: None,
        })
        .collect()
}

/// Kafka's commit rules for a consumer-protocol group: a member commits at its current
/// member epoch (STALE_MEMBER_EPOCH otherwise); a commit naming no member (epoch -1)
/// only to a group without members.
pub(crate) fn validate_consumer_committer(
    group: &ConsumerGroup,
    req: &CommitRequest,
) -> Result<(), ResponseError> {
    if req.generation < 0 && req.member_id.is_empty() {
        return if group.members.is_empty() {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        };
    }
    let Some(member) = group.members.get(&req.member_id) else {
        return Err(ResponseError::UnknownMemberId);
    };
    if req.generation != member.current.member_epoch {
        return Err(ResponseError::StaleMemberEpoch);
    }
    Ok(())
}

/// Kafka's fetch rule for a consumer-protocol group (OffsetFetch v9+): a request naming
/// no member (the admin client, an older client) is answered; one naming a member must
/// carry that member's current epoch.
pub(crate) fn validate_consumer_fetcher(
    group: &ConsumerGroup,
    member_id: &str,
    member_epoch: i32,
) -> Result<(), ResponseError> {
    if member_id.is_empty() && member_epoch < 0 {
        return Ok(());
    }
    let Some(member) = group.members.get(member_id) else {
        return Err(ResponseError::UnknownMemberId);
    };
    if member_epoch != member.current.member_epoch {
        return Err(ResponseError::StaleMemberEpoch);
    }
    Ok(())
}
