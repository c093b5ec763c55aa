//! Partition administration through the controller: leader elections (ElectLeaders)
//! and reassignments (AlterPartitionReassignments / ListPartitionReassignments).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::Client;
use crate::cluster::{retrying, ADMIN_TIMEOUT_MS};
use crate::error::{ClientError, Result};

/// Which leader [`Client::elect_leaders`] installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica in the list, when it is in the ISR.
    Preferred,
    /// Any live replica of a partition with no live ISR member; may lose acknowledged data.
    Unclean,
}

impl ElectionType {
    fn code(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }
}

/// A partition named by topic and index.
pub type TopicPartition = (String, i32);

/// The outcome for one partition of an admin request that addresses many.
#[derive(Debug)]
pub struct PartitionOutcome {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// `Ok` or the broker's error for this partition.
    pub result: Result<()>,
}

/// A reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// Topic.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Every replica during the move (old and new).
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding: Vec<i32>,
    /// Replicas that leave once the added ones are in sync.
    pub removing: Vec<i32>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Groups partitions by topic (topics sorted, partitions in the order given).
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<String, Vec<i32>> {
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, p) in partitions {
        out.entry(topic.clone()).or_default().push(*p);
    }
    out
}

fn ids(brokers: Vec<BrokerId>) -> Vec<i32> {
    brokers.into_iter().map(|b| b.0).collect()
}

impl Client {
    async fn elect_leaders_once(
        &mut self,
        election: ElectionType,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionOutcome>> {
        let conn = self.controller_connection().await?;
        if election == ElectionType::Unclean
            && conn.version(ApiKey::ElectLeaders).is_some_and(|v| v < 1)
        {
            return Err(ClientError::InvalidArgument(
                "this broker only supports preferred leader election (ElectLeaders v0)".into(),
            ));
        }
        let topic_partitions = partitions.map(|ps| {
            by_topic(ps)
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(text(&topic)))
                        .with_partitions(partitions)
                })
                .collect()
        });
        let request = ElectLeadersRequest::default()
            .with_election_type(election.code())
            .with_topic_partitions(topic_partitions)
            .with_timeout_ms(ADMIN_TIMEOUT_MS);
        let response = conn.send(&request).await?;
        ClientError::check(response.error_code, None, || "elect leaders".to_owned())?;
        let mut out = Vec::new();
        for topic in response.replica_election_results {
            let name = topic.topic.0.as_str().to_owned();
            for p in topic.partition_result {
                let result = ClientError::check(
                    p.error_code,
                    p.error_message.as_ref().map(StrBytes::as_str),
                    || format!("elect leader of {name}-{}", p.partition_id),
                );
                out.push(PartitionOutcome {
                    topic: name.clone(),
                    partition: p.partition_id,
                    result,
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    async fn alter_partition_reassignments_once(
        &mut self,
        moves: &[(String, i32, Option<Vec<i32>>)],
    ) -> Result<Vec<PartitionOutcome>> {
        let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
        for (topic, partition, replicas) in moves {
            topics.entry(topic.as_str()).or_default().push(
                ReassignablePartition::default()
                    .with_partition_index(*partition)
                    .with_replicas(
                        replicas
                            .as_ref()
                            .map(|r| r.iter().copied().map(BrokerId).collect()),
                    ),
            );
        }
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        ReassignableTopic::default()
                            .with_name(TopicName(text(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response = self.send_controller(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "alter partition reassignments".to_owned(),
        )?;
        let mut out = Vec::new();
        for topic in response.responses {
            let name = topic.name.0.as_str().to_owned();
            for p in topic.partitions {
                let result = ClientError::check(
                    p.error_code,
                    p.error_message.as_ref().map(StrBytes::as_str),
                    || format!("reassign {name}-{}", p.partition_index),
                );
                out.push(PartitionOutcome {
                    topic: name.clone(),
                    partition: p.partition_index,
                    result,
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    async fn list_partition_reassignments_once(
        &mut self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionReassignment>> {
        let topics = partitions.map(|ps| {
            by_topic(ps)
                .into_iter()
                .map(|(topic, indexes)| {
                    ListPartitionReassignmentsTopics::default()
                        .with_name(TopicName(text(&topic)))
                        .with_partition_indexes(indexes)
                })
                .collect()
        });
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(topics);
        let response = self.send_controller(&request).await?;
        ClientError::check(
            response.error_code,
            response.error_message.as_ref().map(StrBytes::as_str),
            || "list partition reassignments".to_owned(),
        )?;
        let mut out = Vec::new();
        for topic in response.topics {
            let name = topic.name.0.as_str().to_owned();
            for p in topic.partitions {
                out.push(PartitionReassignment {
                    topic: name.clone(),
                    partition: p.partition_index,
                    replicas: ids(p.replicas),
                    adding: ids(p.adding_replicas),
                    removing: ids(p.removing_replicas),
                });
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }
}

impl Client {
    /// Elects leaders of `partitions` (`None`: every partition whose leader is not the
    /// one asked for). Returns one outcome per partition the controller acted on.
    pub async fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionOutcome>> {
        retrying!(self, self.elect_leaders_once(election, partitions).await)
    }

    /// Starts (target replicas) or cancels (`None`) reassignments of partitions. Safe
    /// to repeat: the same target again changes nothing.
    pub async fn alter_partition_reassignments(
        &mut self,
        moves: &[(String, i32, Option<Vec<i32>>)],
    ) -> Result<Vec<PartitionOutcome>> {
        retrying!(self, self.alter_partition_reassignments_once(moves).await)
    }

    /// Reassignments in progress (`None`: all of them), sorted by topic and partition.
    pub async fn list_partition_reassignments(
        &mut self,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<PartitionReassignment>> {
        retrying!(
            self,
            self.list_partition_reassignments_once(partitions).await
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_grouped_by_topic() {
        let grouped = by_topic(&[("b".into(), 1), ("a".into(), 0), ("b".into(), 0)]);
        assert_eq!(
            grouped.into_iter().collect::<Vec<_>>(),
            vec![("a".into(), vec![0]), ("b".into(), vec![1, 0])]
        );
    }
}
