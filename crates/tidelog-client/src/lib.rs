//! tidelog-client: a native async Kafka-protocol client (producer, fetch, admin) used by
//! the tidelog CLI, plus the seed's three-call facade ([`SimpleLog`]), a group
//! [`Consumer`], the effectively-once [`sink`] and the [`dead_letter`] helper.
//!
//! Works against tidelog and against any Kafka broker: versions are negotiated per
//! connection with ApiVersions, and keys are partitioned exactly like the Java client.
//!
//! ```no_run
//! # async fn demo() -> tidelog_client::Result<()> {
//! use bytes::Bytes;
//! use tidelog_client::{Client, FetchOptions, NewTopic, ProduceRecord, Producer, ProducerConfig};
//!
//! let mut client = Client::connect_to("127.0.0.1:9092").await?;
//! client
//!     .create_topic(&NewTopic {
//!         name: "orders".into(),
//!         partitions: 3,
//!         replication_factor: 1,
//!         configs: vec![],
//!     })
//!     .await?;
//! let mut producer = Producer::new(client, ProducerConfig::default());
//! let record = ProduceRecord::new(Some(Bytes::from("user-1")), Some(Bytes::from("hello")));
//! producer.send("orders", None, record).await?; // queued
//! let written = producer.flush().await?; // one (partition, offset) per record, in send order
//! let fetched = producer
//!     .client()
//!     .fetch("orders", written[0].partition, written[0].offset, &FetchOptions::default())
//!     .await?;
//! assert_eq!(fetched.records[0].value.as_deref(), Some(&b"hello"[..]));
//! # Ok(())
//! # }
//! ```

mod acls;
mod admin;
mod batch;
mod client;
mod cluster;
mod connection;
pub mod consumer;
pub mod dead_letter;
mod error;
mod facade;
mod fetch;
pub mod groups;
mod log_dirs;
mod metadata;
mod partition_admin;
mod partitioner;
mod producer;
mod quotas;
mod records;
mod sasl;
mod scram_admin;
pub mod sink;
mod tls;
mod versions;

pub use acls::{AclBinding, AclCode, AclFilter};
pub use admin::{ConfigEntry, ConfigOp, NewTopic};
pub use client::{Client, ClientConfig};
pub use cluster::{ClusterBroker, ClusterDescription, QuorumInfo, QuorumReplica, METADATA_TOPIC};
pub use connection::{Connection, ConnectionConfig};
pub use consumer::{
    AssignmentStrategy, Consumer, ConsumerConfig, ConsumerLag, ConsumerRecord, GroupProtocol,
    IsolationLevel, OffsetReset, PendingCommit, RebalanceListener,
};
pub use error::{kafka_error_name, ClientError, Result, TransactionErrorKind};
pub use facade::SimpleLog;
pub use fetch::{FetchOptions, FetchedPartition, OffsetSpec};
pub use kafka_protocol::records::Compression;
pub use kafka_protocol::ResponseError;
pub use log_dirs::ReplicaSize;
pub use metadata::{BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata};
pub use partition_admin::{ElectionType, PartitionOutcome, PartitionReassignment, TopicPartition};
pub use partitioner::{murmur2, partition_for_key, to_positive};
pub use producer::{
    Acks, BackgroundProducer, ConsumerGroupMetadata, Producer, ProducerConfig, RecordMetadata,
};
pub use quotas::{EntityQuotas, QuotaEntity, QuotaMatch};
pub use records::{decode_fetched, encode_batch, ConsumedRecord, DecodedRecords, ProduceRecord};
pub use sasl::{SaslCredentials, SaslMechanism};
pub use scram_admin::{ScramCredentialInfo, UserScramCredentials};
pub use tidelog_sasl::scram::ScramMechanism;
pub use tls::ClientTls;
