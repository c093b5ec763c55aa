//! IncrementalAlterConfigs and AlterConfigs on the BROKER resource (KIP-226), as
//! Kafka's `ConfigAdminManager` handles them: the broker that takes the request checks
//! the resource name (this broker's id, or `""` for the cluster default) and validates
//! the whole set of configs the resource would have (`crate::dynamic_config`), then
//! the controller writes the changes as records.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use tidelog_controller::ConfigResource;

use crate::context::Ctx;
use crate::dynamic_config;

pub(crate) const SET: i8 = 0;
pub(crate) const DELETE: i8 = 1;
pub(crate) const APPEND: i8 = 2;
pub(crate) const SUBTRACT: i8 = 3;

type Refusal = (i16, String);

fn invalid_request(message: String) -> Refusal {
    (ResponseError::InvalidRequest.code(), message)
}

/// One entry of a request: name, operation (SET for AlterConfigs), value.
#[derive(Clone)]
pub(crate) struct Op {
    pub(crate) name: String,
    pub(crate) op: i8,
    pub(crate) value: Option<String>,
}

/// The checks Kafka makes before looking at the values: no name twice, no null value
/// except for a DELETE, and a resource name that is this broker's id or empty.
fn precheck(ctx: &Ctx, resource_name: &str, ops: &[Op]) -> Result<ConfigResource, Refusal> {
    precheck_ops(ops)?;
    dynamic_config::check_resource_name(resource_name, ctx.node_id()).map_err(invalid_request)?;
    Ok(if resource_name.is_empty() {
        ConfigResource::Cluster
    } else {
        ConfigResource::Broker(ctx.node_id())
    })
}

/// Kafka's checks of any resource's entries: no name twice, no null value except for
/// a DELETE.
pub(crate) fn precheck_ops(ops: &[Op]) -> Result<(), Refusal> {
    for (i, op) in ops.iter().enumerate() {
        if ops[..i].iter().any(|o| o.name == op.name) {
            return Err(invalid_request("Error due to duplicate config keys".into()));
        }
    }
    let nulls: Vec<&str> = ops
        .iter()
        .filter(|o| o.op != DELETE && o.value.is_none())
        .map(|o| o.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err(invalid_request(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    Ok(())
}

fn stored(ctx: &Ctx, resource: &ConfigResource) -> BTreeMap<String, String> {
    let image = ctx.metadata.image();
    match resource {
        ConfigResource::Broker(id) => image.broker_configs(*id),
        _ => image.cluster_configs().clone(),
    }
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The resource's configs after `ops` (Kafka's `prepareIncrementalConfigs`): APPEND
/// and SUBTRACT work on the value stored at this level, else the setting's default.
fn incremental(
    mut configs: BTreeMap<String, String>,
    ops: &[Op],
) -> Result<BTreeMap<String, String>, Refusal> {
    let not_list = |verb: &str, name: &str| {
        (
            ResponseError::InvalidConfig.code(),
            format!("Config value {verb} is not allowed for config key: {name}"),
        )
    };
    for o in ops {
        let value = o.value.clone().unwrap_or_default();
        match o.op {
            SET => {
                configs.insert(o.name.clone(), value);
            }
            DELETE => {
                configs.remove(&o.name);
            }
            APPEND | SUBTRACT => {
                if !dynamic_config::is_list(&o.name) {
                    let verb = if o.op == APPEND { "append" } else { "subtract" };
                    return Err(not_list(verb, &o.name));
                }
                let base = configs
                    .get(&o.name)
                    .cloned()
                    .or_else(|| default_of(&o.name))
                    .unwrap_or_default();
                let mut items = split_list(&base);
                let given = split_list(&value);
                if o.op == APPEND {
                    for v in given {
                        if !items.contains(&v) {
                            items.push(v);
                        }
                    }
                } else {
                    items.retain(|i| !given.contains(i));
                }
                configs.insert(o.name.clone(), items.join(","));
            }
            other => return Err(invalid_request(format!("Unknown operations type {other}"))),
        }
    }
    Ok(configs)
}

fn default_of(name: &str) -> Option<String> {
    crate::settings::ALL
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, d, _)| d.to_string())
}

/// The records' worth of difference between two sets of configs.
pub(crate) fn changes(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<(String, Option<String>)> {
    let removed = before
        .keys()
        .filter(|k| !after.contains_key(*k))
        .map(|k| (k.clone(), None));
    let set = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())));
    removed.chain(set).collect()
}

/// IncrementalAlterConfigs of one BROKER resource.
pub(crate) async fn alter_incremental(
    ctx: &Ctx,
    resource_name: &str,
    ops: &[Op],
    validate_only: bool,
) -> Result<(), Refusal> {
    alter(ctx, resource_name, ops, validate_only, incremental).await
}

/// AlterConfigs (legacy) of one BROKER resource: `ops` become its whole set.
pub(crate) async fn alter_whole(
    ctx: &Ctx,
    resource_name: &str,
    ops: &[Op],
    validate_only: bool,
) -> Result<(), Refusal> {
    alter(ctx, resource_name, ops, validate_only, |_, ops| {
        Ok(ops
            .iter()
            .map(|o| (o.name.clone(), o.value.clone().unwrap_or_default()))
            .collect())
    })
    .await
}

/// Checks `ops`, derives the resource's new set from its stored one with `new_set`,
/// and has the controller write the difference.
async fn alter(
    ctx: &Ctx,
    resource_name: &str,
    ops: &[Op],
    validate_only: bool,
    new_set: impl FnOnce(BTreeMap<String, String>, &[Op]) -> Result<BTreeMap<String, String>, Refusal>,
) -> Result<(), Refusal> {
    let resource = precheck(ctx, resource_name, ops)?;
    let before = stored(ctx, &resource);
    let after = new_set(before.clone(), ops)?;
    persist(ctx, resource, &before, &after, validate_only).await
}

async fn persist(
    ctx: &Ctx,
    resource: ConfigResource,
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), Refusal> {
    dynamic_config::validate(after).map_err(invalid_request)?;
    let changes = changes(before, after);
    if changes.is_empty() {
        return Ok(());
    }
    ctx.metadata
        .alter_broker_configs(resource, changes, validate_only)
        .await
        .map_err(|e| (e.error_code(), e.to_string()))
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
    fn incremental_operations_follow_kafka() {
        let start = BTreeMap::from([("log.retention.ms".to_string(), "1000".to_string())]);
        let after = incremental(
            start.clone(),
            &[
                op("log.retention.ms", DELETE, None),
                op("log.cleanup.policy", APPEND, Some("compact")),
                op("log.segment.bytes", SET, Some("1048576")),
            ],
        )
        .unwrap();
        assert_eq!(after.get("log.retention.ms"), None);
        // APPEND starts from the default (delete) when the level has no value.
        assert_eq!(
            after.get("log.cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        let after =
            incremental(after, &[op("log.cleanup.policy", SUBTRACT, Some("delete"))]).unwrap();
        assert_eq!(
            after.get("log.cleanup.policy").map(String::as_str),
            Some("compact")
        );
        let (code, message) =
            incremental(start.clone(), &[op("log.retention.ms", APPEND, Some("1"))]).unwrap_err();
        assert_eq!(code, ResponseError::InvalidConfig.code());
        assert_eq!(
            message,
            "Config value append is not allowed for config key: log.retention.ms"
        );
        assert_eq!(
            changes(&start, &after),
            vec![
                ("log.retention.ms".to_string(), None),
                (
                    "log.cleanup.policy".to_string(),
                    Some("compact".to_string())
                ),
                ("log.segment.bytes".to_string(), Some("1048576".to_string())),
            ]
        );
    }
}
