//! The metadata records: the only way the metadata image ever changes.
//!
//! Encoding (version 1): each record is serde-JSON, externally tagged by variant name,
//! e.g. `{"Topic":{"name":"orders","topic_id":"6f1c…"}}`. Variant and field names ARE the
//! on-disk format: renaming one requires a new encoding version in the log frame.
//! Adding a new variant or a new `Option` field (with `#[serde(default)]`) is compatible.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::AclEntry;

/// One change to the cluster metadata. Produced by the controller's request handlers,
/// appended to the metadata log (later: replicated through Raft), then replayed into
/// [`crate::MetadataImage`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// A broker (re)registered. `epoch` is the broker epoch: the log offset at which the
    /// registration was written, so it grows with every registration.
    RegisterBroker {
        broker_id: i32,
        incarnation: Uuid,
        epoch: i64,
        listeners: Vec<Endpoint>,
        rack: Option<String>,
    },
    /// The broker missed heartbeats for `broker.session.timeout.ms`: it gets no new
    /// replicas or leaderships. Ignored unless `epoch` is the broker's current epoch, so
    /// a late fence cannot hit a newer registration.
    FenceBroker { broker_id: i32, epoch: i64 },
    /// The fenced broker heartbeats again with its current `epoch`.
    UnfenceBroker { broker_id: i32, epoch: i64 },
    /// A topic exists. Its partitions and configs follow as separate records.
    Topic { name: String, topic_id: Uuid },
    /// The full state of one partition (new partition, or reset after reassignment).
    /// `adding_replicas` / `removing_replicas` are non-empty only while a reassignment
    /// is in flight, and are left out of the JSON when empty.
    Partition {
        topic_id: Uuid,
        partition: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        adding_replicas: Vec<i32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        removing_replicas: Vec<i32>,
    },
    /// A partial change of one partition. Replay bumps `partition_epoch` always and
    /// `leader_epoch` when the leader changes, as Kafka does. `adding_replicas` /
    /// `removing_replicas` (`Some(vec![])` clears) are left out of the JSON when `None`.
    PartitionChange {
        topic_id: Uuid,
        partition: i32,
        leader: Option<i32>,
        isr: Option<Vec<i32>>,
        replicas: Option<Vec<i32>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adding_replicas: Option<Vec<i32>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        removing_replicas: Option<Vec<i32>>,
    },
    /// Set (`Some`) or delete (`None`) one config entry.
    Config {
        resource: ConfigResource,
        name: String,
        value: Option<String>,
    },
    /// The topic, its partitions and its configs are gone.
    RemoveTopic { topic_id: Uuid },
    /// A block of producer ids was handed to `broker_id`: the block ends just before
    /// `next_producer_id`, which is the first id never handed out.
    ProducerIds {
        broker_id: i32,
        broker_epoch: i64,
        next_producer_id: i64,
    },
    /// A user's SCRAM credential for one mechanism, set or replaced (Kafka's
    /// UserScramCredentialRecord).
    ScramCredential(crate::scram::ScramCredentialImage),
    /// A user's SCRAM credential for one mechanism is gone (Kafka's
    /// RemoveUserScramCredentialRecord).
    RemoveScramCredential { name: String, mechanism: i8 },
    /// An ACL exists (Kafka's AccessControlEntryRecord). `id` is unique among live
    /// ACLs; an identical entry is never added twice.
    AccessControlEntry { id: Uuid, acl: AclEntry },
    /// The ACL `id` is gone (Kafka's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry { id: Uuid },
    /// One client quota of one entity set (`Some`) or removed (`None`) (Kafka's
    /// QuotaRecord, whose `remove` flag is `value: None` here).
    ClientQuota {
        entity: crate::quota::QuotaEntity,
        key: String,
        value: Option<crate::quota::QuotaValue>,
    },
}

/// One listener of a broker, as advertised to clients.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// What a config entry belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConfigResource {
    /// A topic, by name (as Kafka's ConfigRecord does).
    Topic(String),
    /// One broker's dynamic config.
    Broker(i32),
    /// The cluster-wide dynamic default (Kafka's broker resource with an empty name).
    Cluster,
    /// One group's configs (Kafka's GROUP resource, KIP-848), by group id.
    Group(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_encoding_is_stable() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let rec = MetadataRecord::Topic {
            name: "orders".into(),
            topic_id: id,
        };
        let text = serde_json::to_string(&rec).unwrap();
        assert_eq!(
            text,
            r#"{"Topic":{"name":"orders","topic_id":"01234567-89ab-cdef-0123-456789abcdef"}}"#
        );
        let cfg = MetadataRecord::Config {
            resource: ConfigResource::Cluster,
            name: "retention.ms".into(),
            value: None,
        };
        let text = serde_json::to_string(&cfg).unwrap();
        assert_eq!(
            text,
            r#"{"Config":{"resource":"Cluster","name":"retention.ms","value":null}}"#
        );
        let back: MetadataRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn reassignment_fields_are_optional_in_json() {
        let id = Uuid::from_u128(7);
        // A record written before the fields existed still reads, with them empty.
        let old = r#"{"PartitionChange":{"topic_id":"00000000-0000-0000-0000-000000000007","partition":1,"leader":2,"isr":null,"replicas":null}}"#;
        let rec: MetadataRecord = serde_json::from_str(old).unwrap();
        let plain = MetadataRecord::PartitionChange {
            topic_id: id,
            partition: 1,
            leader: Some(2),
            isr: None,
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
        };
        assert_eq!(rec, plain);
        // ... and a record without a reassignment is written exactly as before.
        assert_eq!(serde_json::to_string(&plain).unwrap(), old);
        let moving = MetadataRecord::Partition {
            topic_id: id,
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![3],
            removing_replicas: vec![],
        };
        let text = serde_json::to_string(&moving).unwrap();
        assert!(text.contains(r#""adding_replicas":[3]"#), "{text}");
        assert!(!text.contains("removing_replicas"), "{text}");
        let back: MetadataRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, moving);
    }
}
