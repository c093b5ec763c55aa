//! Topic administration: create, delete, configs, partitions, list.

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::client::Client;
use crate::cluster::retrying;
use crate::error::{ClientError, Result};
use crate::metadata::TopicMetadata;

/// Kafka's ConfigResource type for topics.
const RESOURCE_TOPIC: i8 = 2;
/// Kafka's ConfigResource type for brokers (named by node id).
const RESOURCE_BROKER: i8 = 4;
/// Kafka's `ConfigResource.Type.GROUP` (KIP-848 group configs).
const RESOURCE_GROUP: i8 = 32;
/// Admin requests ask the broker to finish within this long.
const ADMIN_TIMEOUT_MS: i32 = 30_000;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count (-1: the broker's `num.partitions`).
    pub partitions: i32,
    /// Replication factor (-1: the broker's `default.replication.factor`).
    pub replication_factor: i16,
    /// Topic configs, e.g. `("retention.ms", "60000")`.
    pub configs: Vec<(String, String)>,
}

/// One config of a topic as DescribeConfigs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Config name.
    pub name: String,
    /// Value (`None` for sensitive or unset values).
    pub value: Option<String>,
    /// Read-only configs cannot be altered.
    pub read_only: bool,
    /// Kafka's ConfigSource: 1 = topic override, 4/5 = broker config, 5 = default ...
    pub source: i8,
    /// True when the value is hidden.
    pub sensitive: bool,
}

impl ConfigEntry {
    /// True when the value was set on the topic itself (not inherited).
    pub fn is_topic_override(&self) -> bool {
        self.source == 1
    }
}

/// One change of [`Client::alter_topic_configs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    /// Set `name` to `value`.
    Set(String, String),
    /// Remove the topic's override of `name` (back to the default).
    Delete(String),
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl Client {
    /// Creates a topic (sent to the controller).
    async fn create_topic_once(&mut self, topic: &NewTopic) -> Result<()> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(name(&topic.name)))
                .with_num_partitions(topic.partitions)
                .with_replication_factor(topic.replication_factor)
                .with_configs(
                    topic
                        .configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(name(k))
                                .with_value(Some(name(v)))
                        })
                        .collect(),
                )]);
        let response = self.send_controller(&request).await?;
        let result = response
            .topics
            .into_iter()
            .find(|t| t.name.0.as_str() == topic.name)
            .ok_or_else(|| ClientError::Protocol("create topics response is empty".into()))?;
        self.invalidate_topic(&topic.name);
        ClientError::check(
            result.error_code,
            result.error_message.as_ref().map(StrBytes::as_str),
            || format!("create topic {}", topic.name),
        )
    }

    /// Deletes a topic and its data.
    async fn delete_topic_once(&mut self, topic: &str) -> Result<()> {
        let request = DeleteTopicsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topic_names(vec![TopicName(name(topic))]);
        let response = self.send_controller(&request).await?;
        self.invalidate_topic(topic);
        let result = response
            .responses
            .into_iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            .ok_or_else(|| ClientError::Protocol("delete topics response is empty".into()))?;
        ClientError::check(
            result.error_code,
            result.error_message.as_ref().map(StrBytes::as_str),
            || format!("delete topic {topic}"),
        )
    }

    /// Every config of a topic, sorted by name.
    async fn describe_topic_configs_once(&mut self, topic: &str) -> Result<Vec<ConfigEntry>> {
        let request = describe_configs_request(RESOURCE_TOPIC, topic);
        let response = self.send_any(&request).await?;
        config_entries(response, topic, || {
            format!("describe configs of topic {topic}")
        })
    }

    /// Every config of broker `node_id`, asked of that broker (which alone knows its
    /// static settings), sorted by name.
    async fn describe_broker_configs_once(&mut self, node_id: i32) -> Result<Vec<ConfigEntry>> {
        let id = node_id.to_string();
        let request = describe_configs_request(RESOURCE_BROKER, &id);
        let response = self
            .broker_connection(node_id)
            .await?
            .send(&request)
            .await?;
        config_entries(response, &id, || format!("describe configs of broker {id}"))
    }

    /// Sets and deletes topic config overrides in one IncrementalAlterConfigs request.
    async fn alter_topic_configs_once(&mut self, topic: &str, ops: &[ConfigOp]) -> Result<()> {
        let request = alter_configs_request(RESOURCE_TOPIC, topic, ops);
        let response = self.send_controller(&request).await?;
        alter_outcome(response, topic, || {
            format!("alter configs of topic {topic}")
        })
    }

    /// Every config of the cluster-wide dynamic default (the BROKER resource `""`):
    /// only those set. Any broker answers it.
    async fn describe_broker_default_configs_once(&mut self) -> Result<Vec<ConfigEntry>> {
        let request = describe_configs_request(RESOURCE_BROKER, "");
        let response = self.send_any(&request).await?;
        config_entries(response, "", || {
            "describe the cluster-wide broker configs".to_string()
        })
    }

    /// Sets and deletes dynamic broker configs (KIP-226): of broker `node_id` (asked
    /// of that broker, which validates its own), or the cluster-wide default (`None`,
    /// any broker).
    async fn alter_broker_configs_once(
        &mut self,
        node_id: Option<i32>,
        ops: &[ConfigOp],
    ) -> Result<()> {
        let id = node_id.map(|n| n.to_string()).unwrap_or_default();
        let request = alter_configs_request(RESOURCE_BROKER, &id, ops);
        let response = match node_id {
            Some(n) => self.broker_connection(n).await?.send(&request).await?,
            None => self.send_any(&request).await?,
        };
        alter_outcome(response, &id, || match node_id {
            Some(n) => format!("alter configs of broker {n}"),
            None => "alter the cluster-wide broker configs".to_string(),
        })
    }

    /// Every group config of `group` (its own values and the broker's defaults).
    /// Any broker answers it.
    async fn describe_group_configs_once(&mut self, group: &str) -> Result<Vec<ConfigEntry>> {
        let request = describe_configs_request(RESOURCE_GROUP, group);
        let response = self.send_any(&request).await?;
        config_entries(response, group, || {
            format!("describe configs of group {group}")
        })
    }

    /// Sets and deletes group configs; the controller stores them.
    async fn alter_group_configs_once(&mut self, group: &str, ops: &[ConfigOp]) -> Result<()> {
        let request = alter_configs_request(RESOURCE_GROUP, group, ops);
        let response = self.send_any(&request).await?;
        alter_outcome(response, group, || {
            format!("alter configs of group {group}")
        })
    }

    /// Grows a topic to `total` partitions.
    async fn create_partitions_once(&mut self, topic: &str, total: i32) -> Result<()> {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(name(topic)))
                .with_count(total)
                .with_assignments(None)]);
        let response = self.send_controller(&request).await?;
        self.invalidate_topic(topic);
        let result = response
            .results
            .into_iter()
            .find(|r| r.name.0.as_str() == topic)
            .ok_or_else(|| ClientError::Protocol("create partitions response is empty".into()))?;
        ClientError::check(
            result.error_code,
            result.error_message.as_ref().map(StrBytes::as_str),
            || format!("create partitions of topic {topic}"),
        )
    }

    /// Every topic in the cluster (internal ones included), sorted by name.
    async fn list_topics_once(&mut self) -> Result<Vec<TopicMetadata>> {
        let metadata = self.refresh_metadata(None, false).await?;
        Ok(metadata.topics.values().cloned().collect())
    }
}

fn describe_configs_request(resource_type: i8, resource: &str) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(name(resource))
        .with_configuration_keys(None)])
}

fn alter_configs_request(
    resource_type: i8,
    resource: &str,
    ops: &[ConfigOp],
) -> IncrementalAlterConfigsRequest {
    let configs = ops
        .iter()
        .map(|op| match op {
            ConfigOp::Set(k, v) => AlterableConfig::default()
                .with_name(name(k))
                .with_config_operation(0)
                .with_value(Some(name(v))),
            ConfigOp::Delete(k) => AlterableConfig::default()
                .with_name(name(k))
                .with_config_operation(1)
                .with_value(None),
        })
        .collect();
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(name(resource))
        .with_configs(configs)])
}

fn alter_outcome(
    response: IncrementalAlterConfigsResponse,
    resource: &str,
    what: impl FnOnce() -> String,
) -> Result<()> {
    let result = response
        .responses
        .into_iter()
        .find(|r| r.resource_name.as_str() == resource)
        .ok_or_else(|| ClientError::Protocol("alter configs response is empty".into()))?;
    ClientError::check(
        result.error_code,
        result.error_message.as_ref().map(StrBytes::as_str),
        what,
    )
}

/// The configs of `resource` in a DescribeConfigs answer, sorted by name.
fn config_entries(
    response: DescribeConfigsResponse,
    resource: &str,
    what: impl FnOnce() -> String,
) -> Result<Vec<ConfigEntry>> {
    let result = response
        .results
        .into_iter()
        .find(|r| r.resource_name.as_str() == resource)
        .ok_or_else(|| ClientError::Protocol("describe configs response is empty".into()))?;
    ClientError::check(
        result.error_code,
        result.error_message.as_ref().map(StrBytes::as_str),
        what,
    )?;
    let mut entries: Vec<ConfigEntry> = result
        .configs
        .into_iter()
        .map(|c| ConfigEntry {
            name: c.name.as_str().to_owned(),
            value: c.value.map(|v| v.as_str().to_owned()),
            read_only: c.read_only,
            source: c.config_source,
            sensitive: c.is_sensitive,
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// The admin calls, each retried while it fails with a retriable error
/// ([`ClientError::is_retriable`]) within the client's API timeout.
impl Client {
    /// Creates a topic (sent to the controller). An attempt whose answer was lost (a
    /// timeout, the controller stopping) may have created it: TOPIC_ALREADY_EXISTS on a
    /// retry is then this call's own success. On a first attempt it is an error.
    pub async fn create_topic(&mut self, topic: &NewTopic) -> Result<()> {
        let mut retried = false;
        let outcome = retrying!(self, {
            let attempt = self.create_topic_once(topic).await;
            if attempt.as_ref().is_err_and(ClientError::is_retriable) {
                retried = true;
            }
            attempt
        });
        match outcome {
            Err(e) if retried && e.response_error() == Some(ResponseError::TopicAlreadyExists) => {
                Ok(())
            }
            other => other,
        }
    }

    /// Deletes a topic and its data.
    pub async fn delete_topic(&mut self, topic: &str) -> Result<()> {
        retrying!(self, self.delete_topic_once(topic).await)
    }

    /// Every config of a topic, sorted by name.
    pub async fn describe_topic_configs(&mut self, topic: &str) -> Result<Vec<ConfigEntry>> {
        retrying!(self, self.describe_topic_configs_once(topic).await)
    }

    /// Every config of broker `node_id`, sorted by name.
    pub async fn describe_broker_configs(&mut self, node_id: i32) -> Result<Vec<ConfigEntry>> {
        retrying!(self, self.describe_broker_configs_once(node_id).await)
    }

    /// Sets and deletes topic config overrides in one IncrementalAlterConfigs request.
    pub async fn alter_topic_configs(&mut self, topic: &str, ops: &[ConfigOp]) -> Result<()> {
        retrying!(self, self.alter_topic_configs_once(topic, ops).await)
    }

    /// The cluster-wide dynamic broker configs that are set.
    pub async fn describe_broker_default_configs(&mut self) -> Result<Vec<ConfigEntry>> {
        retrying!(self, self.describe_broker_default_configs_once().await)
    }

    /// Sets and deletes dynamic configs of broker `node_id`, or of the cluster-wide
    /// default when `None`.
    pub async fn alter_broker_configs(
        &mut self,
        node_id: Option<i32>,
        ops: &[ConfigOp],
    ) -> Result<()> {
        retrying!(self, self.alter_broker_configs_once(node_id, ops).await)
    }

    /// Every group config of `group`, sorted by name.
    pub async fn describe_group_configs(&mut self, group: &str) -> Result<Vec<ConfigEntry>> {
        retrying!(self, self.describe_group_configs_once(group).await)
    }

    /// Sets and deletes configs of `group` in one IncrementalAlterConfigs request.
    pub async fn alter_group_configs(&mut self, group: &str, ops: &[ConfigOp]) -> Result<()> {
        retrying!(self, self.alter_group_configs_once(group, ops).await)
    }

    /// Grows a topic to `total` partitions.
    pub async fn create_partitions(&mut self, topic: &str, total: i32) -> Result<()> {
        retrying!(self, self.create_partitions_once(topic, total).await)
    }

    /// Every topic in the cluster (internal ones included), sorted by name.
    pub async fn list_topics(&mut self) -> Result<Vec<TopicMetadata>> {
        retrying!(self, self.list_topics_once().await)
    }
}
