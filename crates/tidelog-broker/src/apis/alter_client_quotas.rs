//! AlterClientQuotas: needs ALTER_CONFIGS on the cluster (else every entry answers
//! CLUSTER_AUTHORIZATION_FAILED); the entries go to the controller, which checks each
//! as Kafka's `ClientQuotaControlManager` does (entity types and combinations, keys,
//! values: INVALID_REQUEST with Kafka's reason) and writes the valid ones as quota
//! records together, or nothing with `validate_only`. Each entry is answered with its
//! entity as sent.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::AlterClientQuotasRequest;
use kafka_protocol::messages::alter_client_quotas_response::{
    AlterClientQuotasResponse, EntityData, EntryData,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_controller::quota::{QuotaAlteration, QuotaEntity};
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// How long the handler waits for this node's image to show the change, so a
/// DescribeClientQuotas right after (and the quota manager) sees it.
const IMAGE_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: AlterClientQuotasRequest = req.decode()?;
    let alterations: Vec<QuotaAlteration> = request
        .entries
        .iter()
        .map(|entry| QuotaAlteration {
            entity: entry
                .entity
                .iter()
                .map(|e| {
                    (
                        e.entity_type.to_string(),
                        e.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect(),
            ops: entry
                .ops
                .iter()
                .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                .collect(),
        })
        .collect();
    let refused = req
        .access(ctx)
        .require_cluster(AclOperation::AlterConfigs)
        .err();
    // A NaN or infinite value is refused here: JSON, in which a request is forwarded
    // to the controller, cannot carry one (NaN would arrive as a removal).
    let non_finite: Vec<Option<String>> = alterations
        .iter()
        .map(|a| {
            a.ops.iter().find_map(|(key, value)| {
                value
                    .filter(|v| !v.is_finite())
                    .map(|v| format!("Configuration {key} must be a positive number, not {v}"))
            })
        })
        .collect();
    let forwarded: Vec<QuotaAlteration> = alterations
        .iter()
        .zip(&non_finite)
        .filter(|(_, bad)| bad.is_none())
        .map(|(a, _)| a.clone())
        .collect();
    let forwarded_outcomes: Vec<(i16, Option<String>)> = match refused {
        // Refused as a whole below.
        Some(_) => Vec::new(),
        None if forwarded.is_empty() => Vec::new(),
        None => match ctx
            .metadata
            .controller()
            .alter_client_quotas(forwarded.clone(), request.validate_only)
            .await
        {
            Ok(results) => {
                if !request.validate_only {
                    wait_for_image(ctx, &forwarded, &results).await;
                }
                results.into_iter().map(|(_, c, m)| (c, m)).collect()
            }
            Err(e) => forwarded
                .iter()
                .map(|_| (e.error_code(), Some(e.to_string())))
                .collect(),
        },
    };
    let mut forwarded_outcomes = forwarded_outcomes.into_iter();
    let outcomes: Vec<(i16, Option<String>)> = non_finite
        .into_iter()
        .map(|bad| match (bad, refused) {
            (_, Some(code)) => (code, Some("Cluster authorization failed.".to_string())),
            (Some(message), None) => (ResponseError::InvalidRequest.code(), Some(message)),
            (None, None) => forwarded_outcomes
                .next()
                .unwrap_or((ResponseError::UnknownServerError.code(), None)),
        })
        .collect();
    let entries = alterations
        .iter()
        .zip(outcomes.into_iter().chain(std::iter::repeat((
            ResponseError::UnknownServerError.code(),
            None,
        ))))
        .map(|(alteration, (code, message))| {
            let entity = alteration
                .entity
                .iter()
                .map(|(kind, name)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_string(kind.clone()))
                        .with_entity_name(name.clone().map(StrBytes::from_string))
                })
                .collect();
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_entity(entity)
        })
        .collect();
    req.respond(&AlterClientQuotasResponse::default().with_entries(entries))
}

/// Waits (bounded) until every key an accepted entry set or removed reads back so
/// from this node's image.
async fn wait_for_image(
    ctx: &Ctx,
    alterations: &[QuotaAlteration],
    results: &[tidelog_controller::quota::QuotaResult],
) {
    let applied: Vec<(QuotaEntity, &str, Option<f64>)> = alterations
        .iter()
        .zip(results)
        .filter(|(_, (_, code, _))| *code == 0)
        .flat_map(|(a, _)| {
            let entity = QuotaEntity(a.entity.iter().cloned().collect());
            a.ops
                .iter()
                .map(move |(k, v)| (entity.clone(), k.as_str(), *v))
        })
        .collect();
    ctx.metadata
        .wait_for(IMAGE_CATCH_UP, |image| {
            applied.iter().all(|(entity, key, value)| {
                let now = image
                    .client_quota(entity)
                    .and_then(|q| q.get(*key))
                    .map(|v| v.0);
                now == *value
            })
        })
        .await;
}
