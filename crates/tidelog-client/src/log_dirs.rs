//! DescribeLogDirs: how many bytes of each partition a broker holds, which is what a
//! replica being added to a partition has copied so far.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{DescribeLogDirsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::Client;
use crate::cluster::retrying;
use crate::error::{ClientError, Result};
use crate::partition_admin::TopicPartition;

/// One partition's replica on one broker, as DescribeLogDirs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSize {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Bytes of the replica's log on disk.
    pub bytes: i64,
}

impl Client {
    /// The size of each of `partitions` that broker `node_id` hosts (a partition it
    /// does not host is left out), summed over its log directories.
    pub async fn replica_sizes(
        &mut self,
        node_id: i32,
        partitions: &[TopicPartition],
    ) -> Result<Vec<ReplicaSize>> {
        retrying!(self, self.replica_sizes_once(node_id, partitions).await)
    }

    async fn replica_sizes_once(
        &mut self,
        node_id: i32,
        partitions: &[TopicPartition],
    ) -> Result<Vec<ReplicaSize>> {
        let mut wanted: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in partitions {
            wanted.entry(topic).or_default().push(*partition);
        }
        let topics = wanted
            .into_iter()
            .map(|(topic, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partitions(partitions)
            })
            .collect();
        let request = DescribeLogDirsRequest::default().with_topics(Some(topics));
        let response = self
            .broker_connection(node_id)
            .await?
            .send(&request)
            .await?;
        ClientError::check(response.error_code, None, || {
            format!("describe log dirs of broker {node_id}")
        })?;
        let mut sizes: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for dir in response.results {
            ClientError::check(dir.error_code, None, || {
                format!("log dir {} of broker {node_id}", dir.log_dir.as_str())
            })?;
            for topic in dir.topics {
                for p in topic.partitions {
                    *sizes
                        .entry((topic.name.0.to_string(), p.partition_index))
                        .or_default() += p.partition_size;
                }
            }
        }
        Ok(sizes
            .into_iter()
            .map(|((topic, partition), bytes)| ReplicaSize {
                topic,
                partition,
                bytes,
            })
            .collect())
    }
}
