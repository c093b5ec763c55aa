//! Delete records: moves partitions' log start offset forward with DeleteRecords, sent
//! to each partition's leader, which answers once its in-sync replicas moved theirs. A
//! dry run reads each partition's log start and high watermark from its leader and says
//! how many records would go; nothing is deleted.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
use kafka_protocol::messages::ApiKey;
use serde::Deserialize;

use super::calls::{by_leader, call, topic_name, LogBounds, LATEST};
use super::{parse, ActionAnswer, Refusal};
use crate::metrics::{error_name, NodeView};

/// How long a leader may wait for its followers to move their log start.
const FOLLOWERS_WAIT_MS: i32 = 10_000;
const DELETE_RECORDS_VERSION: i16 = 2;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRecords {
    /// Partition → the offset before which records go; -1 is the high watermark
    /// (everything readable), as in DeleteRecords.
    offsets: BTreeMap<i32, i64>,
    #[serde(default)]
    dry_run: bool,
}

pub(super) async fn delete(
    node: &NodeView,
    topic: &str,
    body: &[u8],
) -> Result<ActionAnswer, Refusal> {
    let action: DeleteRecords = parse(body, "delete-records")?;
    if action.offsets.is_empty() {
        return Err(Refusal::bad_request("no partition named"));
    }
    if let Some((p, o)) = action.offsets.iter().find(|(_, o)| **o < LATEST) {
        return Err(Refusal::bad_request(format!(
            "offset {o} for partition {p}: an offset is at least 0, or -1 for the high watermark"
        )));
    }
    let partitions: Vec<i32> = action.offsets.keys().copied().collect();
    let bounds = LogBounds::ask(node, topic, &partitions).await?;
    let mut plan = Vec::with_capacity(partitions.len());
    for (p, wanted) in &action.offsets {
        let (start, end) = bounds.of(topic, *p)?;
        let before = if *wanted == LATEST { end } else { *wanted };
        if before > end {
            return Err(Refusal::kafka(
                ResponseError::OffsetOutOfRange.code(),
                format!("offset {before} of {topic}-{p} is past its high watermark {end}"),
            ));
        }
        plan.push(serde_json::json!({
            "partition": p,
            "log_start_offset": start,
            "high_watermark": end,
            "new_log_start_offset": before.max(start),
            "records_deleted": (before - start).max(0),
        }));
    }
    if action.dry_run {
        return Ok(ActionAnswer::ok(serde_json::json!({
            "topic": topic, "dry_run": true, "partitions": plan,
        })));
    }
    let mut low_watermarks = BTreeMap::new();
    for (leader, led) in by_leader(node, topic, &partitions)? {
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(FOLLOWERS_WAIT_MS)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    led.iter()
                        .map(|p| {
                            DeleteRecordsPartition::default()
                                .with_partition_index(*p)
                                .with_offset(action.offsets.get(p).copied().unwrap_or(LATEST))
                        })
                        .collect(),
                )]);
        let answer: DeleteRecordsResponse = call(
            node,
            leader,
            ApiKey::DeleteRecords,
            DELETE_RECORDS_VERSION,
            &request,
        )
        .await?;
        for p in answer.topics.iter().flat_map(|t| &t.partitions) {
            if p.error_code != 0 {
                return Err(Refusal::kafka(
                    p.error_code,
                    format!(
                        "{topic}-{}: {} (partitions before it in the request may be deleted already)",
                        p.partition_index,
                        error_name(p.error_code)
                    ),
                ));
            }
            low_watermarks.insert(p.partition_index, p.low_watermark);
        }
    }
    for entry in &mut plan {
        let p = entry["partition"].as_i64().unwrap_or(-1);
        if let Some(low) = i32::try_from(p).ok().and_then(|p| low_watermarks.get(&p)) {
            entry["new_log_start_offset"] = (*low).into();
        }
    }
    Ok(ActionAnswer::ok(serde_json::json!({
        "topic": topic, "dry_run": false, "partitions": plan,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_names_partitions_by_number_and_nothing_else() {
        let d: DeleteRecords =
            parse(br#"{"offsets": {"0": 10, "3": -1}, "dry_run": true}"#, "d").unwrap();
        assert_eq!(d.offsets, BTreeMap::from([(0, 10), (3, -1)]));
        assert!(d.dry_run);
        assert!(parse::<DeleteRecords>(br#"{"offsets": {"x": 1}}"#, "d").is_err());
        assert!(parse::<DeleteRecords>(br#"{"offsets": {}, "all": true}"#, "d").is_err());
    }
}
