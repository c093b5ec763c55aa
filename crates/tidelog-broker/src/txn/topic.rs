//! `__transaction_state` creation.

use super::TXN_TOPIC;
use crate::context::BrokerContext;
use crate::internal_topic::{create_if_missing, CoordinatorUnavailable, Creation, TopicSpec};

/// Creates `__transaction_state` if needed (compacted, `transaction.state.log.*`
/// partitions and replication capped by the live brokers); newly created partitions'
/// shards load at once, and this waits (bounded) until the runtime runs them.
pub(crate) async fn ensure_txn_topic(ctx: &BrokerContext) -> Result<(), CoordinatorUnavailable> {
    let spec = TopicSpec {
        name: TXN_TOPIC,
        partitions: ctx.txns.config.num_partitions,
        replication: ctx.txns.config.replication_factor,
        segment_bytes: "104857600".to_string(),
        cleanup_policy: "compact",
        retention_ms: None,
    };
    if create_if_missing(ctx, spec).await? != Creation::Existed {
        ctx.txns.wait_started().await;
    }
    Ok(())
}
