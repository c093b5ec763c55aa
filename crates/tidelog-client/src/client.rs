//! Bootstrap, metadata and one connection per broker.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;

use crate::connection::{Connection, ConnectionConfig};
use crate::error::{ClientError, Result};
use crate::metadata::{ClusterMetadata, TopicMetadata};

/// Settings of a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bootstrap addresses, `host:port` each.
    pub bootstrap: Vec<String>,
    /// Per-connection settings.
    pub connection: ConnectionConfig,
    /// How often a produce or fetch that failed with a retriable error is retried.
    pub retries: u32,
    /// First pause between retries, doubled after each one up to `retry_backoff_max`
    /// (Kafka's `retry.backoff.ms`, 100; metadata is refreshed in between).
    pub retry_backoff: Duration,
    /// Longest pause between retries (Kafka's `retry.backoff.max.ms`, 1000).
    pub retry_backoff_max: Duration,
    /// How long connecting and each admin request keep retrying retriable errors
    /// ([`ClientError::is_retriable`]) across every known broker and bootstrap address
    /// before they fail (Kafka's `default.api.timeout.ms`, 60 s).
    pub api_timeout: Duration,
    /// Called before each retry with the error that caused it and the pause before the
    /// next attempt (e.g. to tell a person what is being waited for).
    pub on_retry: Option<fn(&ClientError, Duration)>,
}

impl ClientConfig {
    /// Parses a bootstrap list `host:port[,host:port]...`.
    pub fn new(bootstrap: &str) -> Result<ClientConfig> {
        let servers: Vec<String> = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if servers.is_empty() {
            return Err(ClientError::InvalidArgument(
                "the bootstrap list is empty".into(),
            ));
        }
        for s in &servers {
            let port_ok = s
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !port_ok {
                return Err(ClientError::InvalidArgument(format!(
                    "bootstrap server {s:?} is not host:port"
                )));
            }
        }
        Ok(ClientConfig {
            bootstrap: servers,
            connection: ConnectionConfig::default(),
            retries: 5,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_millis(1000),
            api_timeout: Duration::from_secs(60),
            on_retry: None,
        })
    }

    /// The pause before retry number `attempt` (0 for the first): `retry_backoff`
    /// doubled per attempt, at most `retry_backoff_max`, with ±20 % jitter so that
    /// clients started together do not retry in step.
    pub fn backoff(&self, attempt: u32) -> Duration {
        use std::hash::{BuildHasher, Hasher};
        let exponential = self
            .retry_backoff
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.retry_backoff_max);
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(attempt);
        // 0.8 ..= 1.2
        let factor = 0.8 + (hasher.finish() % 401) as f64 / 1000.0;
        exponential.mul_f64(factor)
    }
}

/// Broker errors that mean "your metadata is stale": refresh it and try again. The broker
/// guarantees nothing was written when it answers with one of these.
pub(crate) fn is_leadership_error(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::NotLeaderOrFollower
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::LeaderNotAvailable
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::NotController
    )
}

/// Errors after which a request is retried once metadata has been refreshed.
pub(crate) fn needs_metadata_refresh(e: &ClientError) -> bool {
    e.response_error().is_some_and(is_leadership_error) || matches!(e, ClientError::NoLeader { .. })
}

/// A cluster handle: knows the brokers and topics and holds one connection per broker.
/// Methods take `&mut self`; one request is in flight per broker at a time.
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    metadata: ClusterMetadata,
    connections: HashMap<i32, Connection>,
    bootstrap: Option<Connection>,
}

impl Client {
    /// Connects to the first bootstrap server that answers and loads the broker list;
    /// while none answers, tries them all again with backoff until
    /// [`ClientConfig::api_timeout`] runs out.
    pub async fn connect(config: ClientConfig) -> Result<Client> {
        let mut client = Client {
            config,
            metadata: ClusterMetadata::default(),
            connections: HashMap::new(),
            bootstrap: None,
        };
        let started = tokio::time::Instant::now();
        let mut attempt = 0;
        loop {
            match client.refresh_metadata(Some(&[]), false).await {
                Ok(_) => return Ok(client),
                Err(e) if e.is_retriable() => {
                    client.before_retry(e, attempt, started, false).await?;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Between two attempts of a request that failed with a retriable error: gives up
    /// (with [`ClientError::GaveUp`]) once the API timeout has passed; otherwise waits
    /// the backoff (cut short so that a last attempt starts at the deadline), forgets
    /// broken connections, and (with `refresh`) reloads the broker list and the
    /// controller from any broker that answers.
    pub(crate) async fn before_retry(
        &mut self,
        error: ClientError,
        attempt: u32,
        started: tokio::time::Instant,
        refresh: bool,
    ) -> Result<()> {
        let timeout = self.config.api_timeout;
        if timeout.is_zero() {
            return Err(error);
        }
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(ClientError::GaveUp {
                after: elapsed,
                last: Box::new(error),
            });
        }
        let pause = self.config.backoff(attempt).min(timeout - elapsed);
        tracing::debug!(error = %error, attempt, ?pause, "retrying");
        if let Some(notify) = self.config.on_retry {
            notify(&error, pause);
        }
        tokio::time::sleep(pause).await;
        self.connections.retain(|_, c| !c.is_broken());
        if self.bootstrap.as_ref().is_some_and(Connection::is_broken) {
            self.bootstrap = None;
        }
        if refresh {
            // Best effort: the next attempt reports what still fails.
            let _ = self.refresh_metadata(Some(&[]), false).await;
        }
        Ok(())
    }

    /// Shorthand for `Client::connect(ClientConfig::new(bootstrap)?)`.
    pub async fn connect_to(bootstrap: &str) -> Result<Client> {
        Client::connect(ClientConfig::new(bootstrap)?).await
    }

    /// The client's settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The metadata learnt so far (no request is made).
    pub fn cached_metadata(&self) -> &ClusterMetadata {
        &self.metadata
    }

    /// A connection to any live broker: the bootstrap one if still healthy, else the known
    /// brokers, else the bootstrap list again.
    pub async fn any_connection(&mut self) -> Result<&mut Connection> {
        if self.bootstrap.as_ref().is_some_and(Connection::is_broken) {
            self.bootstrap = None;
        }
        if self.bootstrap.is_none() {
            let mut candidates: Vec<String> = self
                .metadata
                .brokers
                .values()
                .map(|b| b.address())
                .collect();
            candidates.extend(self.config.bootstrap.iter().cloned());
            let mut last = None;
            for addr in &candidates {
                match Connection::connect(addr, &self.config.connection).await {
                    Ok(c) => {
                        self.bootstrap = Some(c);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            if self.bootstrap.is_none() {
                return Err(match last {
                    // One address: its own error says it all.
                    Some(e) if candidates.len() == 1 => e,
                    Some(e) => ClientError::Bootstrap {
                        tried: candidates.join(","),
                        last: Box::new(e),
                    },
                    None => ClientError::InvalidArgument("no bootstrap servers".into()),
                });
            }
        }
        self.bootstrap
            .as_mut()
            .ok_or_else(|| ClientError::InvalidArgument("no bootstrap servers".into()))
    }

    /// The connection to broker `node_id`, opened (or reopened) when needed.
    pub async fn broker_connection(&mut self, node_id: i32) -> Result<&mut Connection> {
        if self
            .connections
            .get(&node_id)
            .is_some_and(Connection::is_broken)
        {
            self.connections.remove(&node_id);
        }
        if !self.connections.contains_key(&node_id) {
            let addr = self
                .metadata
                .brokers
                .get(&node_id)
                .map(|b| b.address())
                .ok_or_else(|| {
                    ClientError::InvalidArgument(format!("broker {node_id} is not in metadata"))
                })?;
            let conn = Connection::connect(&addr, &self.config.connection).await?;
            self.connections.insert(node_id, conn);
        }
        self.connections
            .get_mut(&node_id)
            .ok_or_else(|| ClientError::InvalidArgument(format!("broker {node_id} vanished")))
    }

    /// Takes broker `node_id`'s connection out of the pool (opening it when needed) so it
    /// can be used from another task; hand it back with [`Client::return_connection`].
    pub(crate) async fn take_connection(&mut self, node_id: i32) -> Result<Connection> {
        self.broker_connection(node_id).await?;
        self.connections
            .remove(&node_id)
            .ok_or_else(|| ClientError::InvalidArgument(format!("broker {node_id} vanished")))
    }

    /// Puts back a connection from [`Client::take_connection`]; broken ones are dropped.
    pub(crate) fn return_connection(&mut self, node_id: i32, conn: Connection) {
        if !conn.is_broken() {
            self.connections.insert(node_id, conn);
        }
    }

    /// The connection to the controller (admin requests), or any broker when none is known.
    pub async fn controller_connection(&mut self) -> Result<&mut Connection> {
        let id = self.metadata.controller_id;
        if id >= 0 && self.metadata.brokers.contains_key(&id) {
            self.broker_connection(id).await
        } else {
            self.any_connection().await
        }
    }

    /// Sends `request` to any broker.
    pub async fn send_any<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        self.any_connection().await?.send(request).await
    }

    /// Sends `request` to the controller.
    pub async fn send_controller<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        self.controller_connection().await?.send(request).await
    }

    /// Asks for metadata: `None` = every topic, `Some(&[])` = brokers only. Returns the
    /// updated cache. Topic-level errors are dropped from the cache (see [`Client::topic`]).
    pub async fn refresh_metadata(
        &mut self,
        topics: Option<&[&str]>,
        allow_auto_create: bool,
    ) -> Result<&ClusterMetadata> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|n| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string((*n).to_owned()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(allow_auto_create);
        let response = self.send_any(&request).await?;
        let _topic_errors = self.metadata.apply(response, topics.is_none());
        Ok(&self.metadata)
    }

    /// Metadata of one topic, from cache or from the broker. Retries while the topic's
    /// leaders are being elected (e.g. right after auto-creation).
    pub async fn topic(&mut self, name: &str, allow_auto_create: bool) -> Result<TopicMetadata> {
        if let Some(t) = self.metadata.topics.get(name) {
            if !t.partitions.is_empty() && t.partitions.iter().all(|p| p.leader >= 0) {
                return Ok(t.clone());
            }
        }
        let mut attempt = 0;
        loop {
            let request = MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))]))
                .with_allow_auto_topic_creation(allow_auto_create);
            let response = self.send_any(&request).await?;
            let errors = self.metadata.apply(response, false);
            let error = errors.into_iter().find(|e| e.name == name).map(|e| e.error);
            let retriable = match error {
                None => match self.metadata.topics.get(name) {
                    Some(t)
                        if !t.partitions.is_empty()
                            && t.partitions.iter().all(|p| p.leader >= 0) =>
                    {
                        return Ok(t.clone())
                    }
                    Some(_) => true,
                    None => return Err(ClientError::UnknownTopic(name.to_owned())),
                },
                Some(ResponseError::UnknownTopicOrPartition) if !allow_auto_create => {
                    return Err(ClientError::UnknownTopic(name.to_owned()))
                }
                Some(
                    ResponseError::LeaderNotAvailable | ResponseError::UnknownTopicOrPartition,
                ) => true,
                Some(error) => {
                    return Err(ClientError::Broker {
                        context: format!("metadata for topic {name}"),
                        error,
                        message: None,
                    })
                }
            };
            attempt += 1;
            if !retriable || attempt > self.config.retries {
                return match self.metadata.topics.get(name) {
                    Some(t) => Ok(t.clone()),
                    None => Err(ClientError::UnknownTopic(name.to_owned())),
                };
            }
            tokio::time::sleep(self.config.retry_backoff).await;
        }
    }

    /// Partition count of a topic; answered from cache without copying when possible.
    pub async fn partition_count(&mut self, topic: &str, allow_auto_create: bool) -> Result<i32> {
        match self.metadata.topics.get(topic) {
            Some(t) if !t.partitions.is_empty() => Ok(t.partition_count()),
            _ => Ok(self
                .topic(topic, allow_auto_create)
                .await?
                .partition_count()),
        }
    }

    /// Forgets what is known about `topic`, so the next use asks the broker again.
    pub fn invalidate_topic(&mut self, topic: &str) {
        self.metadata.topics.remove(topic);
    }

    /// The leader's node id for a partition (from metadata, refreshed when missing).
    pub async fn leader_of(&mut self, topic: &str, partition: i32) -> Result<i32> {
        let t = self.topic(topic, false).await?;
        let p = t
            .partition(partition)
            .ok_or_else(|| ClientError::UnknownPartition {
                topic: topic.to_owned(),
                partition,
            })?;
        if p.leader < 0 || !self.metadata.brokers.contains_key(&p.leader) {
            return Err(ClientError::NoLeader {
                topic: topic.to_owned(),
                partition,
            });
        }
        Ok(p.leader)
    }

    /// Connection to the leader of `topic`-`partition`.
    pub async fn leader_connection(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<&mut Connection> {
        let leader = self.leader_of(topic, partition).await?;
        self.broker_connection(leader).await
    }

    /// Called between retries: drop the topic's metadata and wait the backoff.
    pub(crate) async fn backoff_and_forget(&mut self, topic: &str) {
        self.invalidate_topic(topic);
        tokio::time::sleep(self.config.retry_backoff).await;
    }
}
