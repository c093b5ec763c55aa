//! OffsetFetch: committed offsets of one group (v1–7) or several (v8+); -1 where none.
//! With `require_stable` (v7+), a partition whose offset an unfinished transaction may
//! still change answers UNSTABLE_OFFSET_COMMIT, and the client asks again later.
//! From v10 topics are named by id (KIP-848): an id is resolved through the metadata
//! image (UNKNOWN_TOPIC_ID for every partition of one this node does not know), and the
//! answer names topics by id; listing all of a group's offsets leaves out topics that no
//! longer exist (they have no id to name them by).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::auth::Access;
use crate::context::Ctx;
use crate::group::str_bytes;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 10 };

type Wanted = Option<Vec<(String, Vec<i32>)>>;

/// One partition's answer: index, offset, leader epoch, metadata, error code.
type Answer = (i32, i64, i32, String, i16);

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: OffsetFetchRequest = req.decode()?;
    let version = req.version();
    let stable = request.require_stable;
    let access = req.access(ctx);
    if version >= 8 {
        let by_id = version >= 10;
        let image = ctx.metadata.image();
        let mut groups = Vec::with_capacity(request.groups.len());
        for g in &request.groups {
            // v10: topics whose id this node does not know, answered UNKNOWN_TOPIC_ID.
            let mut unknown = Vec::new();
            let wanted: Wanted = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .filter_map(|t| {
                        let name = if by_id {
                            image
                                .topic_by_id(&t.topic_id)
                                .map(|found| found.name.clone())
                        } else {
                            Some(t.name.0.to_string())
                        };
                        if name.is_none() {
                            unknown.push((t.topic_id, t.partition_indexes.clone()));
                        }
                        name.map(|n| (n, t.partition_indexes.clone()))
                    })
                    .collect()
            });
            let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
            // v9+: a consumer-protocol member names itself (KIP-848).
            let member = (version >= 9)
                .then(|| {
                    (
                        g.member_id.as_ref().map_or("", |m| m.as_str()),
                        g.member_epoch,
                    )
                })
                .filter(|(id, epoch)| !id.is_empty() || *epoch >= 0)
                .map(|(id, epoch)| (id.to_string(), epoch));
            groups.push(
                match lookup(ctx, &access, &g.group_id.0, wanted, stable, member).await {
                    Err(code) => group.with_error_code(code),
                    Ok(found) => {
                        let mut topics: Vec<OffsetFetchResponseTopics> = found
                            .into_iter()
                            .filter_map(|(topic, parts)| {
                                let answer = OffsetFetchResponseTopics::default()
                                    .with_partitions(parts.into_iter().map(v8_partition).collect());
                                if by_id {
                                    let id = image.topic(&topic)?.topic_id;
                                    Some(answer.with_topic_id(id))
                                } else {
                                    Some(answer.with_name(TopicName(str_bytes(&topic))))
                                }
                            })
                            .collect();
                        topics.extend(unknown.into_iter().map(|(id, partitions)| {
                            let code = ResponseError::UnknownTopicId.code();
                            OffsetFetchResponseTopics::default()
                                .with_topic_id(id)
                                .with_partitions(
                                    partitions
                                        .into_iter()
                                        .map(|p| v8_partition((p, -1, -1, String::new(), code)))
                                        .collect(),
                                )
                        }));
                        group.with_topics(topics)
                    }
                },
            );
        }
        return req.respond(&OffsetFetchResponse::default().with_groups(groups));
    }
    let wanted: Wanted = request.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let response = OffsetFetchResponse::default();
    let response = match lookup(
        ctx,
        &access,
        &request.group_id.0,
        wanted.clone(),
        stable,
        None,
    )
    .await
    {
        Ok(found) => response.with_topics(v1_topics(found)),
        // v1 has no top-level error: every partition carries it.
        Err(code) if version < 2 => {
            let found = wanted
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| {
                    let parts = ps
                        .into_iter()
                        .map(|p| (p, -1, -1, String::new(), code))
                        .collect();
                    (t, parts)
                })
                .collect();
            response.with_topics(v1_topics(found))
        }
        Err(code) => response.with_error_code(code),
    };
    req.respond(&response)
}

/// The committed offsets, each unstable one replaced by UNSTABLE_OFFSET_COMMIT when
/// `require_stable` asks for it. Needs DESCRIBE on the group (else
/// GROUP_AUTHORIZATION_FAILED); a topic without DESCRIBE answers
/// TOPIC_AUTHORIZATION_FAILED when named, and is left out when all are asked for.
async fn lookup(
    ctx: &Ctx,
    access: &Access,
    group: &str,
    wanted: Wanted,
    require_stable: bool,
    member: Option<(String, i32)>,
) -> Result<Vec<(String, Vec<Answer>)>, i16> {
    if let Some(code) = access.refused(AclOperation::Describe, ResourceType::Group, group) {
        return Err(code);
    }
    let all_topics = wanted.is_none();
    let found = ctx
        .groups
        .fetch_offsets(group.to_string(), wanted, member)
        .await
        .map_err(|e| e.code())?;
    Ok(found
        .into_iter()
        .filter_map(|(topic, parts)| {
            let refused = access.refused(AclOperation::Describe, ResourceType::Topic, &topic);
            if refused.is_some() && all_topics {
                return None;
            }
            let parts = parts
                .into_iter()
                .map(|(p, offset, epoch, meta, pending)| {
                    if let Some(code) = refused {
                        (p, -1, -1, String::new(), code)
                    } else if require_stable && pending {
                        (
                            p,
                            -1,
                            -1,
                            String::new(),
                            ResponseError::UnstableOffsetCommit.code(),
                        )
                    } else {
                        (p, offset, epoch, meta, 0)
                    }
                })
                .collect();
            Some((topic, parts))
        })
        .collect())
}

fn v8_partition((p, offset, epoch, meta, error): Answer) -> OffsetFetchResponsePartitions {
    OffsetFetchResponsePartitions::default()
        .with_partition_index(p)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(epoch)
        .with_metadata(Some(str_bytes(&meta)))
        .with_error_code(error)
}

fn v1_topics(found: Vec<(String, Vec<Answer>)>) -> Vec<OffsetFetchResponseTopic> {
    found
        .into_iter()
        .map(|(topic, parts)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(str_bytes(&topic)))
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, offset, epoch, meta, error)| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(epoch)
                                .with_metadata(Some(str_bytes(&meta)))
                                .with_error_code(error)
                        })
                        .collect(),
                )
        })
        .collect()
}
