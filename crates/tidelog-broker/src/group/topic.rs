//! `__consumer_offsets` creation.

use super::OFFSETS_TOPIC;
use crate::context::BrokerContext;
use crate::internal_topic::{create_if_missing, Creation, TopicSpec};

/// Creates `__consumer_offsets` if it does not exist yet: `offsets.topic.num.partitions`
/// partitions, compacted, replication factor `min(offsets.topic.replication.factor,
/// live brokers)`. Newly created partitions are empty: their shards load at once, and
/// this waits (bounded) until the runtime runs them.
pub(crate) async fn ensure_offsets_topic(ctx: &BrokerContext) -> Result<(), i16> {
    let spec = TopicSpec {
        name: OFFSETS_TOPIC,
        partitions: i32::try_from(ctx.config.get_i64("offsets.topic.num.partitions")).unwrap_or(50),
        replication: ctx
            .config
            .get_i64("offsets.topic.replication.factor")
            .max(1),
        segment_bytes: ctx.config.get("offsets.topic.segment.bytes").to_string(),
    };
    if create_if_missing(ctx, spec).await? == Creation::Created {
        ctx.groups.wait_started().await;
    }
    Ok(())
}
