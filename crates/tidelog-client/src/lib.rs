//! tidelog-client: a native async Kafka-protocol client (producer, fetch, admin) used by
//! the tidelog CLI, plus the seed's three-call facade ([`SimpleLog`]).
//!
//! Works against tidelog and against any Kafka broker: versions are negotiated per
//! connection with ApiVersions, and keys are partitioned exactly like the Java client.

mod admin;
mod batch;
mod client;
mod connection;
mod error;
mod facade;
mod fetch;
mod metadata;
mod partitioner;
mod producer;
mod records;
mod versions;

pub use admin::{ConfigEntry, ConfigOp, NewTopic};
pub use client::{Client, ClientConfig};
pub use connection::{Connection, ConnectionConfig};
pub use error::{kafka_error_name, ClientError, Result};
pub use facade::SimpleLog;
pub use fetch::{FetchOptions, FetchedPartition, OffsetSpec};
pub use kafka_protocol::records::Compression;
pub use kafka_protocol::ResponseError;
pub use metadata::{BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata};
pub use partitioner::{murmur2, partition_for_key, to_positive};
pub use producer::{Acks, Producer, ProducerConfig, RecordMetadata};
pub use records::{decode_fetched, encode_batch, ConsumedRecord, DecodedRecords, ProduceRecord};
