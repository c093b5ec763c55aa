//! IncrementalAlterConfigs and DescribeConfigs on the GROUP resource (KIP-848): the
//! broker that takes the request checks the whole set of configs the group would have
//! (`crate::group_config`, Kafka's `GroupConfig.validate`), then the controller writes
//! the changes as records.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use tidelog_controller::ConfigResource;

use super::broker_configs::{self, Op, APPEND, DELETE, SET, SUBTRACT};
use crate::context::Ctx;
use crate::dynamic_config::BrokerEntry;
use crate::group_config;

pub(crate) const RESOURCE_GROUP: i8 = 32;

type Refusal = (i16, String);

fn invalid_config(message: String) -> Refusal {
    (ResponseError::InvalidConfig.code(), message)
}

fn check_name(group_id: &str) -> Result<(), Refusal> {
    if group_id.is_empty() {
        return Err((
            ResponseError::InvalidRequest.code(),
            "Group name must not be empty".into(),
        ));
    }
    Ok(())
}

/// The group's configs after `ops`. None of Kafka's group configs is a list, so
/// APPEND and SUBTRACT are refused as Kafka's `ConfigurationControlManager` refuses
/// them on a non-list key.
fn apply(
    mut configs: BTreeMap<String, String>,
    ops: &[Op],
) -> Result<BTreeMap<String, String>, Refusal> {
    for o in ops {
        match o.op {
            SET => {
                configs.insert(o.name.clone(), o.value.clone().unwrap_or_default());
            }
            DELETE => {
                configs.remove(&o.name);
            }
            APPEND | SUBTRACT => {
                let verb = if o.op == APPEND { "APPEND" } else { "SUBTRACT" };
                return Err(invalid_config(format!(
                    "Can't {verb} to key {} because its type is not LIST.",
                    o.name
                )));
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("Unknown operations type {other}"),
                ))
            }
        }
    }
    Ok(configs)
}

/// IncrementalAlterConfigs of one GROUP resource.
pub(crate) async fn alter_incremental(
    ctx: &Ctx,
    group_id: &str,
    ops: &[Op],
    validate_only: bool,
) -> Result<(), Refusal> {
    check_name(group_id)?;
    broker_configs::precheck_ops(ops)?;
    let before = ctx
        .metadata
        .image()
        .group_configs(group_id)
        .cloned()
        .unwrap_or_default();
    let after = apply(before.clone(), ops)?;
    ctx.groups
        .config
        .group_configs
        .defaults()
        .validate(&after)
        .map_err(invalid_config)?;
    let changes = broker_configs::changes(&before, &after);
    if changes.is_empty() {
        return Ok(());
    }
    ctx.metadata
        .alter_broker_configs(
            ConfigResource::Group(group_id.to_string()),
            changes,
            validate_only,
        )
        .await
        .map_err(|e| (e.error_code(), e.to_string()))
}

/// AlterConfigs (the legacy, whole-set form) of one GROUP resource: the given configs
/// replace every one the group had (Kafka takes GROUP there too).
pub(crate) async fn alter_whole(
    ctx: &Ctx,
    group_id: &str,
    sets: &[Op],
    validate_only: bool,
) -> Result<(), Refusal> {
    broker_configs::precheck_ops(sets)?;
    let current = ctx
        .metadata
        .image()
        .group_configs(group_id)
        .cloned()
        .unwrap_or_default();
    let mut ops: Vec<Op> = current
        .keys()
        .filter(|k| !sets.iter().any(|o| &o.name == *k))
        .map(|k| Op {
            name: k.clone(),
            op: DELETE,
            value: None,
        })
        .collect();
    ops.extend(sets.iter().cloned());
    alter_incremental(ctx, group_id, &ops, validate_only).await
}

/// Every group config of `group_id` as DescribeConfigs reports it: the group's own
/// value (GROUP_CONFIG) or the broker's default (DEFAULT_CONFIG).
pub(crate) fn describe(ctx: &Ctx, group_id: &str) -> Result<Vec<BrokerEntry>, Refusal> {
    check_name(group_id)?;
    let image = ctx.metadata.image();
    let defaults = ctx.groups.config.group_configs.defaults();
    Ok(group_config::describe(defaults, &image, group_id)
        .into_iter()
        .map(|(name, value, source)| BrokerEntry {
            synonyms: vec![(name.clone(), value.clone(), source)],
            name,
            value,
            source,
            read_only: false,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, op: i8, value: Option<&str>) -> Op {
        Op {
            name: name.into(),
            op,
            value: value.map(String::from),
        }
    }

    #[test]
    fn set_and_delete_apply_and_list_operations_are_refused() {
        let start = BTreeMap::from([(
            "share.isolation.level".to_string(),
            "read_committed".to_string(),
        )]);
        let after = apply(
            start.clone(),
            &[
                op("share.isolation.level", DELETE, None),
                op("consumer.session.timeout.ms", SET, Some("50000")),
            ],
        )
        .unwrap();
        assert_eq!(
            after,
            BTreeMap::from([(
                "consumer.session.timeout.ms".to_string(),
                "50000".to_string()
            )])
        );
        let (code, message) = apply(
            start,
            &[op("consumer.session.timeout.ms", APPEND, Some("1"))],
        )
        .unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig.code());
        assert_eq!(
            message,
            "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."
        );
    }
}
