//! DescribeLogDirs: each of the node's log directories (`log.dirs`) with the size of
//! each hosted partition in it that was asked for (all of them for a null topic list),
//! and from v4 the file system's total and usable bytes.
//!
//! As Kafka: a topic appears only with at least one hosted partition that was asked
//! for, a partition this node does not host is left out, `offset_lag` is how far the
//! log end is below the high watermark (0: tidelog has no future replicas), and a
//! directory whose file system cannot be read answers KAFKA_STORAGE_ERROR.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use tidelog_controller::acl::AclOperation;
use tidelog_protocol::ProtocolError;

use super::Request;
use crate::context::Ctx;
use crate::net::Reply;

pub(crate) const VERSIONS: VersionRange = VersionRange { min: 1, max: 4 };

pub(crate) async fn handle(ctx: &Ctx, mut req: Request) -> Result<Reply, ProtocolError> {
    let request: DescribeLogDirsRequest = req.decode()?;
    // Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
    if let Err(code) = req.access(ctx).require_cluster(AclOperation::Describe) {
        return req.respond(&DescribeLogDirsResponse::default().with_error_code(code));
    }
    let wanted: Option<HashSet<(String, i32)>> = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            .collect()
    });
    let log_dirs = ctx.replicas.log_dirs().to_vec();
    // Per log directory, per topic: the partitions asked for.
    let mut by_dir: Vec<BTreeMap<String, Vec<DescribeLogDirsPartition>>> =
        vec![BTreeMap::new(); log_dirs.len()];
    for p in ctx.replicas.all() {
        let key = (p.topic.clone(), p.index);
        if wanted.as_ref().is_some_and(|w| !w.contains(&key)) {
            continue;
        }
        let Ok((size, lag, parent)) = p.with_log(|log| {
            let size = i64::try_from(log.size_bytes()).unwrap_or(i64::MAX);
            let lag = log
                .high_watermark()
                .saturating_sub(log.log_end_offset())
                .max(0);
            Ok((size, lag, log.dir().parent().map(Path::to_path_buf)))
        }) else {
            continue; // closed meanwhile (deleted, or the node is stopping)
        };
        let Some(i) = parent.and_then(|parent| log_dirs.iter().position(|d| *d == parent)) else {
            continue;
        };
        by_dir[i].entry(key.0).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(key.1)
                .with_partition_size(size)
                .with_offset_lag(lag)
                .with_is_future_key(false),
        );
    }
    let mut results = Vec::with_capacity(log_dirs.len());
    for (dir, topics) in log_dirs.iter().zip(by_dir) {
        results.push(describe_dir(&absolute(dir), topics).await);
    }
    req.respond(&DescribeLogDirsResponse::default().with_results(results))
}

/// One directory's answer: its partitions and its file system's size, or
/// KAFKA_STORAGE_ERROR when the file system cannot be read.
async fn describe_dir(
    dir: &Path,
    topics: BTreeMap<String, Vec<DescribeLogDirsPartition>>,
) -> DescribeLogDirsResult {
    let space = {
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || rustix::fs::statvfs(&dir))
            .await
            .ok()
            .and_then(Result::ok)
    };
    let log_dir = StrBytes::from_string(dir.display().to_string());
    match space {
        Some(fs) => DescribeLogDirsResult::default()
            .with_log_dir(log_dir)
            .with_total_bytes(bytes(fs.f_blocks, fs.f_frsize))
            .with_usable_bytes(bytes(fs.f_bavail, fs.f_frsize))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, mut partitions)| {
                        partitions.sort_by_key(|p| p.partition_index);
                        DescribeLogDirsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            ),
        None => DescribeLogDirsResult::default()
            .with_log_dir(log_dir)
            .with_error_code(ResponseError::KafkaStorageError.code()),
    }
}

fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Blocks times block size, as Kafka's `adjustForLargeFileSystems` (beyond i64: max).
fn bytes(blocks: u64, block_size: u64) -> i64 {
    i64::try_from(blocks.saturating_mul(block_size)).unwrap_or(i64::MAX)
}
