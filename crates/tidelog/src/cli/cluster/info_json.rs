//! `tidelog cluster info --output json`: the same three views as the text (quorum,
//! brokers, partition health), as one document; nothing is cut to the first 20.

use std::collections::BTreeSet;

use anyhow::Context;
use serde_json::{json, Value};
use tidelog_client::Client;

use super::{replica_holders, PartitionHealth};

pub(super) async fn info_json(client: &mut Client) -> anyhow::Result<Value> {
    let cluster = client
        .describe_cluster()
        .await
        .context("describing the cluster")?;
    let quorum = match client.describe_quorum().await {
        Ok(q) => {
            let voters: Vec<Value> = q
                .voters
                .iter()
                .map(|v| {
                    json!({
                        "node_id": v.node_id,
                        "role": if v.node_id == q.leader_id { "leader" } else { "follower" },
                        "log_end_offset": (v.log_end_offset >= 0).then_some(v.log_end_offset),
                        "lag": q.lag_of(v),
                    })
                })
                .collect();
            json!({
                "leader": (q.leader_id >= 0).then_some(q.leader_id),
                "epoch": q.leader_epoch, "high_watermark": q.high_watermark,
                "voters": voters, "error": null,
            })
        }
        Err(e) => json!({"leader": null, "voters": [], "error": e.to_string()}),
    };
    let metadata = client.refresh_metadata(None, false).await?.clone();
    let mut listed = BTreeSet::new();
    let mut brokers: Vec<Value> = cluster
        .brokers
        .iter()
        .map(|b| {
            listed.insert(b.node_id);
            let state = match (cluster.includes_fenced, b.fenced) {
                (true, true) => "fenced",
                (true, false) => "unfenced",
                (false, _) => "live",
            };
            json!({"node_id": b.node_id, "address": b.address, "rack": b.rack, "state": state})
        })
        .collect();
    for id in replica_holders(&metadata).difference(&listed) {
        brokers.push(json!({"node_id": id, "address": null, "rack": null, "state": "not live (holds replicas)"}));
    }
    let health = PartitionHealth::of(metadata.topics.values());
    Ok(json!({
        "cluster_id": cluster.cluster_id,
        "quorum": quorum,
        "brokers": brokers,
        "partitions": {
            "total": health.total, "topics": metadata.topics.len(),
            "under_replicated": health.under_replicated, "offline": health.offline,
            "leader_not_preferred": health.not_preferred,
        },
    }))
}
