//! OffsetFetch: committed offsets of one group (v1–7) or several (v8+); -1 where none.
//! `require_stable` needs no wait here: no transactional offset commit can be pending
//! until the transaction coordinator exists.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::VersionRange;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::{str_bytes, FetchedOffsets};
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 9 };

type Wanted = Option<Vec<(String, Vec<i32>)>>;

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: OffsetFetchRequest = req.decode()?;
    let version = req.version();
    if version >= 8 {
        let groups = request
            .groups
            .iter()
            .map(|g| {
                let wanted: Wanted = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let group = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                match ctx.groups.fetch_offsets(ctx, &g.group_id.0, wanted) {
                    Err(code) => group.with_error_code(code),
                    Ok(found) => group.with_topics(
                        found
                            .into_iter()
                            .map(|(topic, parts)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(str_bytes(&topic)))
                                    .with_partitions(
                                        parts
                                            .into_iter()
                                            .map(|(p, offset, epoch, meta)| {
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_committed_offset(offset)
                                                    .with_committed_leader_epoch(epoch)
                                                    .with_metadata(Some(str_bytes(&meta)))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    ),
                }
            })
            .collect();
        return req.respond(&OffsetFetchResponse::default().with_groups(groups));
    }
    let wanted: Wanted = request.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let response = OffsetFetchResponse::default();
    let response = match ctx
        .groups
        .fetch_offsets(ctx, &request.group_id.0, wanted.clone())
    {
        Ok(found) => response.with_topics(v1_topics(found, 0)),
        // v1 has no top-level error: every partition carries it.
        Err(code) if version < 2 => {
            let found = wanted
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| {
                    (
                        t,
                        ps.into_iter().map(|p| (p, -1, -1, String::new())).collect(),
                    )
                })
                .collect();
            response.with_topics(v1_topics(found, code))
        }
        Err(code) => response.with_error_code(code),
    };
    req.respond(&response)
}

fn v1_topics(found: FetchedOffsets, error: i16) -> Vec<OffsetFetchResponseTopic> {
    found
        .into_iter()
        .map(|(topic, parts)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(str_bytes(&topic)))
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, offset, epoch, meta)| {
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
