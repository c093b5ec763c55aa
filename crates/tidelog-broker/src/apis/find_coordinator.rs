//! FindCoordinator: the node that coordinates a group (or a transactional id). Creates
//! `__consumer_offsets` (or `__transaction_state`) on first use.
//! Versions 0–3 ask for one key; v4+ batch several. v6 adds key type 2, the share
//! coordinator of a share partition (KIP-932), keyed `group:topic id:partition`, which
//! brokers ask for (CLUSTER_ACTION); it creates `__share_group_state` on first use.
//! Clients find a share group's coordinator with key type 0, as for any group.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::{AclOperation, ResourceType};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::group::{coordinator_for, ensure_offsets_topic, str_bytes, Coordinates, OFFSETS_TOPIC};
use crate::net::Reply;
use crate::share::state::SHARE_STATE_TOPIC;
use crate::txn::TXN_TOPIC;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: FindCoordinatorRequest = req.decode()?;
    let version = req.version();
    let keys = if version >= 4 {
        request.coordinator_keys.clone()
    } else {
        vec![request.key.clone()]
    };
    let mut found = Vec::with_capacity(keys.len());
    // DESCRIBE on the group or transactional id the key names.
    let access = req.access(ctx);
    for key in keys {
        let refused = match request.key_type {
            0 => access.refused(AclOperation::Describe, ResourceType::Group, key.as_str()),
            1 => access.refused(
                AclOperation::Describe,
                ResourceType::TransactionalId,
                key.as_str(),
            ),
            2 => access.require_cluster(AclOperation::ClusterAction).err(),
            _ => None,
        };
        let result = match request.key_type {
            _ if refused.is_some() => Err(refused.unwrap_or_default()),
            0 => ensure_offsets_topic(ctx)
                .await
                .and_then(|()| coordinator_for(ctx, OFFSETS_TOPIC, &key, &req.session.listener))
                .map_err(|e| e.code()),
            1 => crate::txn::ensure_txn_topic(ctx)
                .await
                .and_then(|()| coordinator_for(ctx, TXN_TOPIC, &key, &req.session.listener))
                .map_err(|e| e.code()),
            // Kafka answers a share key asked before v6 as malformed.
            2 if version < 6 || !is_share_key(&key) => Err(ResponseError::InvalidRequest.code()),
            2 => match ctx.share_state.ensure_topic(ctx).await {
                Ok(()) => coordinator_for(ctx, SHARE_STATE_TOPIC, &key, &req.session.listener)
                    .map_err(|e| e.code()),
                Err(e) => Err(e.code()),
            },
            _ => Err(ResponseError::InvalidRequest.code()),
        };
        found.push((key, result));
    }
    let response = FindCoordinatorResponse::default();
    if version >= 4 {
        let coordinators = found
            .into_iter()
            .map(|(key, result)| {
                let (c, error) = split(result);
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(c.node_id))
                    .with_host(str_bytes(&c.host))
                    .with_port(c.port)
                    .with_error_code(error)
            })
            .collect();
        return req.respond(&response.with_coordinators(coordinators));
    }
    let result = found
        .into_iter()
        .next()
        .map_or(Err(ResponseError::InvalidRequest.code()), |(_, r)| r);
    let (c, error) = split(result);
    let message =
        (error != 0 && version >= 1).then(|| StrBytes::from_static_str("coordinator unavailable"));
    req.respond(
        &response
            .with_node_id(BrokerId(c.node_id))
            .with_host(str_bytes(&c.host))
            .with_port(c.port)
            .with_error_code(error)
            .with_error_message(message),
    )
}

fn split(result: Result<Coordinates, i16>) -> (Coordinates, i16) {
    match result {
        Ok(c) => (c, 0),
        Err(code) => (
            Coordinates {
                node_id: -1,
                host: String::new(),
                port: -1,
            },
            code,
        ),
    }
}

/// Kafka's share-coordinator key: `group:topic id:partition`, the topic id in Kafka's
/// text form (22 characters of URL-safe base64), the group any text (colons too).
fn is_share_key(key: &str) -> bool {
    use base64::Engine;
    let mut parts = key.rsplitn(3, ':');
    let (Some(partition), Some(topic_id), Some(group)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !group.is_empty()
        && partition.parse::<i32>().is_ok_and(|p| p >= 0)
        && base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(topic_id)
            .is_ok_and(|id| id.len() == 16)
}

#[cfg(test)]
mod tests {
    use super::is_share_key;

    #[test]
    fn share_keys_are_group_kafka_topic_id_and_partition() {
        assert!(is_share_key("g:ASNFZ4mrze8BI0VniavN7w:3"));
        assert!(
            is_share_key("a:b:ASNFZ4mrze8BI0VniavN7w:0"),
            "a group may hold colons"
        );
        assert!(!is_share_key(":ASNFZ4mrze8BI0VniavN7w:3"), "no group");
        assert!(!is_share_key("g:ASNFZ4mrze8BI0VniavN7w:-1"));
        assert!(!is_share_key("g:ASNFZ4mrze8BI0VniavN7w"));
        assert!(
            !is_share_key("g:01234567-89ab-cdef-0123-456789abcdef:3"),
            "not Kafka's text form"
        );
        assert!(!is_share_key("g:ASNFZ4mrze8:3"), "too short");
    }
}
