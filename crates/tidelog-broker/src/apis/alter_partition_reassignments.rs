//! AlterPartitionReassignments: moves a partition's replicas to a new set of brokers
//! (the new ones catch up and join the ISR, then the old ones leave), or cancels a move
//! in progress (`replicas` null).
//!
//! What can be checked against this node's image is checked here, per partition, so a
//! bad entry never reaches the controller: unknown partitions, an empty or duplicated
//! replica list, brokers that are not registered, a changed replication factor when
//! the request forbids it (v1). The rest goes to the controller in one call. On a
//! cluster of one there is nowhere to move to: only the current assignment is accepted.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_partition_reassignments_request::AlterPartitionReassignmentsRequest;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    AlterPartitionReassignmentsResponse, ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::MetadataImage;
use tidelog_protocol::ProtocolError;

use super::partition_outcome::{record_controller_reply, Outcome};
use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// One requested change: topic, partition, target replicas (`None` cancels).
type Change = (String, i32, Option<Vec<i32>>);

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AlterPartitionReassignmentsRequest = req.decode()?;
    // Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Alter) {
        return req.respond(&AlterPartitionReassignmentsResponse::default().with_error_code(code));
    }
    let version = req.version();
    let allow_rf_change = version < 1 || request.allow_replication_factor_change;
    let image = ctx.metadata.image();
    // Topics answer in request order; partitions in the order each topic listed them.
    let mut order: Vec<(String, Vec<i32>)> = Vec::new();
    let mut outcomes: BTreeMap<(String, i32), Outcome> = BTreeMap::new();
    let mut valid: Vec<Change> = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.as_str().to_owned();
        let mut listed = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let key = (name.clone(), p.partition_index);
            listed.push(p.partition_index);
            let seen_valid = valid
                .iter()
                .position(|(t, i, _)| (t, *i) == (&key.0, key.1));
            if seen_valid.is_some() || outcomes.contains_key(&key) {
                // Which of the two entries was meant is unknowable: neither is applied.
                if let Some(at) = seen_valid {
                    valid.remove(at);
                }
                outcomes.insert(
                    key,
                    Some(error(
                        ResponseError::InvalidRequest,
                        "partition listed twice",
                    )),
                );
                continue;
            }
            let replicas = p
                .replicas
                .map(|r| r.into_iter().map(|b| b.0).collect::<Vec<i32>>());
            match check(
                &image,
                &name,
                p.partition_index,
                replicas.as_deref(),
                allow_rf_change,
            ) {
                Err(e) => {
                    outcomes.insert(key, Some(e));
                }
                Ok(()) => valid.push((name.clone(), p.partition_index, replicas)),
            }
        }
        order.push((name, listed));
    }
    let mut top_level: Option<(i16, String)> = None;
    if !valid.is_empty() {
        let keys: Vec<(String, i32)> = valid.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let reply = ctx.metadata.controller().alter_reassignments(valid).await;
        top_level = record_controller_reply(&mut outcomes, reply, keys);
    }
    let mut response = AlterPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_responses(to_responses(order, &outcomes));
    if let Some((code, message)) = top_level {
        response.error_code = code;
        response.error_message = Some(StrBytes::from_string(message));
    }
    if version >= 1 {
        response.allow_replication_factor_change = request.allow_replication_factor_change;
    }
    req.respond(&response)
}

fn error(e: ResponseError, message: impl Into<String>) -> (i16, String) {
    (e.code(), message.into())
}

/// What this node can tell about one entry before the controller sees it.
fn check(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    replicas: Option<&[i32]>,
    allow_rf_change: bool,
) -> Result<(), (i16, String)> {
    let Some(current) = image
        .topic(topic)
        .and_then(|t| t.partitions.get(&partition))
    else {
        return Err(error(
            ResponseError::UnknownTopicOrPartition,
            format!("{topic}-{partition} does not exist"),
        ));
    };
    let Some(replicas) = replicas else {
        return Ok(());
    };
    let invalid = |m: String| Err(error(ResponseError::InvalidReplicaAssignment, m));
    if replicas.is_empty() {
        return invalid("the replica list is empty".into());
    }
    let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
    if distinct.len() != replicas.len() {
        return invalid(format!(
            "the replica list {replicas:?} names a broker twice"
        ));
    }
    if !allow_rf_change && replicas.len() != current.replicas.len() {
        return Err(error(
            ResponseError::InvalidReplicationFactor,
            format!(
                "the replication factor would change from {} to {} and the request forbids it",
                current.replicas.len(),
                replicas.len()
            ),
        ));
    }
    if let Some(unknown) = replicas.iter().find(|id| image.broker(**id).is_none()) {
        return invalid(format!("broker {unknown} is not registered"));
    }
    Ok(())
}

fn to_responses(
    order: Vec<(String, Vec<i32>)>,
    outcomes: &BTreeMap<(String, i32), Outcome>,
) -> Vec<ReassignableTopicResponse> {
    order
        .into_iter()
        .map(|(topic, partitions)| {
            let mut seen = BTreeSet::new();
            let partitions = partitions
                .into_iter()
                .filter(|p| seen.insert(*p))
                .map(|p| {
                    let outcome = outcomes.get(&(topic.clone(), p)).cloned().flatten();
                    let (code, message) = match outcome {
                        None => (0, None),
                        Some((code, m)) => (code, Some(StrBytes::from_string(m))),
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                        .with_error_message(message)
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                    topic,
                )))
                .with_partitions(partitions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::partition_outcome::image_with_orders;

    #[test]
    fn bad_entries_get_their_error_codes() {
        let image = image_with_orders(1);
        let code = |t: &str, p: i32, r: Option<&[i32]>, allow: bool| {
            check(&image, t, p, r, allow).err().map(|(c, _)| c)
        };
        assert_eq!(code("nope", 0, Some(&[1]), true), Some(3));
        assert_eq!(code("orders", 5, Some(&[1]), true), Some(3));
        assert_eq!(code("orders", 0, Some(&[]), true), Some(39));
        assert_eq!(code("orders", 0, Some(&[1, 1]), true), Some(39));
        assert_eq!(code("orders", 0, Some(&[1, 9]), true), Some(39));
        assert_eq!(code("orders", 0, None, true), None);
        assert_eq!(code("orders", 0, Some(&[1]), false), None);
        assert_eq!(code("orders", 0, Some(&[1, 2]), false), Some(38));
        assert_eq!(code("orders", 0, Some(&[1, 2]), true), Some(39));
    }
}
