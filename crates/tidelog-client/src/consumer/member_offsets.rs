//! OffsetFetch as a consumer-protocol member (v9, KIP-848): the request names the member
//! and its epoch, so a member the coordinator fenced cannot start from offsets it no
//! longer has a right to. Sent by the heartbeat task, whose epoch is always the latest
//! the coordinator gave.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{GroupId, TopicName};

use crate::error::{ClientError, Result};
use crate::groups::{text, RawConnection};
use crate::partition_admin::TopicPartition;

/// OffsetFetch v9: groups by name, with member id and epoch.
const VERSION: i16 = 9;

/// The committed next offsets of `partitions` (absent where none is committed).
pub(crate) async fn fetch(
    conn: &mut RawConnection,
    group: &str,
    member_id: &str,
    member_epoch: i32,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, i64>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_member_id(Some(text(member_id)))
            .with_member_epoch(member_epoch)
            .with_topics(Some(
                by_topic
                    .into_iter()
                    .map(|(name, indexes)| {
                        OffsetFetchRequestTopics::default()
                            .with_name(TopicName(text(name)))
                            .with_partition_indexes(indexes)
                    })
                    .collect(),
            ))]);
    let response = conn
        .call_retrying(&request, VERSION, |r| {
            r.groups.first().map_or(r.error_code, |g| g.error_code)
        })
        .await?;
    let mut out = BTreeMap::new();
    for g in response.groups {
        ClientError::check(g.error_code, None, || format!("offsets of group {group}"))?;
        for t in g.topics {
            for p in t.partitions {
                ClientError::check(p.error_code, None, || {
                    format!("offset of {}-{}", t.name.0.as_str(), p.partition_index)
                })?;
                if p.committed_offset >= 0 {
                    out.insert(
                        (t.name.0.to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
    }
    Ok(out)
}
