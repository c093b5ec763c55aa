//! `__consumer_offsets` creation.

use super::OFFSETS_TOPIC;
use crate::context::BrokerContext;
use crate::internal_topic::{create_if_missing, CoordinatorUnavailable, Creation, TopicSpec};
use crate::settings;

/// Creates `__consumer_offsets` if it does not exist yet: `offsets.topic.num.partitions`
/// partitions, compacted, replication factor `min(offsets.topic.replication.factor,
/// live brokers)`. Newly created partitions are empty: their shards load at once, and
/// this waits (bounded) until the runtime runs them.
pub(crate) async fn ensure_offsets_topic(
    ctx: &BrokerContext,
) -> Result<(), CoordinatorUnavailable> {
    let spec = TopicSpec {
        name: OFFSETS_TOPIC,
        partitions: ctx.config.count(settings::OFFSETS_TOPIC_NUM_PARTITIONS),
        replication: ctx
            .config
            .get(settings::OFFSETS_TOPIC_REPLICATION_FACTOR)
            .max(1),
        segment_bytes: ctx
            .config
            .get(settings::OFFSETS_TOPIC_SEGMENT_BYTES)
            .to_string(),
        cleanup_policy: "compact",
        retention_ms: None,
    };
    if create_if_missing(ctx, spec).await? != Creation::Existed {
        ctx.groups.wait_started().await;
    }
    Ok(())
}
