//! `__consumer_offsets` creation and coordinator lookup (FindCoordinator).

use kafka_protocol::error::ResponseError;
use tidelog_controller::{CreateTopic, TopicError};

use super::{partition_for, OFFSETS_TOPIC};
use crate::context::BrokerContext;

/// Where a coordinator is: a node and its advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Coordinates {
    pub(crate) node_id: i32,
    pub(crate) host: String,
    pub(crate) port: i32,
}

/// Creates `__consumer_offsets` if it does not exist yet: `offsets.topic.num.partitions`
/// partitions, compacted, replication factor `min(offsets.topic.replication.factor,
/// live brokers)`. Newly created partitions are empty, so they are loaded at once.
pub(crate) fn ensure_offsets_topic(ctx: &BrokerContext) -> Result<(), i16> {
    if ctx.metadata.image().topic(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let partitions = i32::try_from(ctx.config.get_i64("offsets.topic.num.partitions"))
        .unwrap_or(50)
        .max(1);
    let live = ctx.metadata.image().live_broker_ids().len().max(1);
    let wanted = ctx
        .config
        .get_i64("offsets.topic.replication.factor")
        .max(1);
    let replication = i16::try_from(wanted.min(live as i64)).unwrap_or(1);
    let create = CreateTopic {
        name: OFFSETS_TOPIC.to_string(),
        num_partitions: partitions,
        replication_factor: replication,
        assignments: Vec::new(),
        configs: vec![
            ("cleanup.policy".to_string(), Some("compact".to_string())),
            (
                "segment.bytes".to_string(),
                Some(ctx.config.get("offsets.topic.segment.bytes").to_string()),
            ),
        ],
    };
    let outcome = ctx.metadata.change(&ctx.replicas, &ctx.config, |c| {
        c.create_topic(create, false)
    });
    match outcome {
        Ok(_) => {
            tracing::info!(partitions, replication, "created {OFFSETS_TOPIC}");
            ctx.groups.load_owned(ctx);
            Ok(())
        }
        Err(TopicError::TopicAlreadyExists) => Ok(()),
        Err(e) => {
            tracing::error!(error = %e, "creating {OFFSETS_TOPIC} failed");
            Err(ResponseError::CoordinatorNotAvailable.code())
        }
    }
}

/// The coordinator of `key` in `topic` (group or transactional id): the leader of its
/// partition. Without the topic, this node (it creates the topic on first use).
pub(crate) fn coordinator_for(
    ctx: &BrokerContext,
    topic: &str,
    key: &str,
) -> Result<Coordinates, i16> {
    let image = ctx.metadata.image();
    let node_id = match image.topic(topic) {
        Some(t) => {
            let p = partition_for(key, t.partition_count());
            match t.partitions.get(&p) {
                Some(p) if p.leader >= 0 => p.leader,
                _ => return Err(ResponseError::CoordinatorNotAvailable.code()),
            }
        }
        None => ctx.node_id(),
    };
    let broker = image
        .broker(node_id)
        .filter(|b| !b.fenced)
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    let endpoint = broker
        .listeners
        .first()
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    Ok(Coordinates {
        node_id,
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
    })
}
