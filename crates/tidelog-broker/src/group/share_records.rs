//! A share group's durable records in `__consumer_offsets`, in Kafka's layout (KIP-932):
//! ShareGroupMetadata (key type 11: the group epoch, so an empty share group still
//! exists after its members leave or its coordinator moves) and
//! ShareGroupStatePartitionMetadata (key type 15: the share partitions whose state the
//! share coordinator holds, which DescribeShareGroupOffsets lists and DeleteGroups
//! deletes). Membership stays transient; both values are flexible version 0.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, BytesMut};
use uuid::Uuid;

use super::consumer::records::{put_compact, put_varint};
use super::records::{put_string, FormatError, Reader};

pub(crate) const METADATA_KEY: i16 = 11;
pub(crate) const PARTITION_METADATA_KEY: i16 = 15;

/// Topic id -> (name, partitions with share state).
pub(crate) type ShareTopics = BTreeMap<Uuid, (String, BTreeSet<i32>)>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShareKey {
    Metadata { group: String },
    PartitionMetadata { group: String },
}

impl ShareKey {
    pub(crate) fn group(&self) -> &str {
        match self {
            ShareKey::Metadata { group } | ShareKey::PartitionMetadata { group } => group,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShareValue {
    Metadata {
        epoch: i32,
    },
    /// The share partitions whose state is initialized (tidelog initializes a share
    /// partition's state at its leader, so nothing is left "initializing" or
    /// "deleting": both lists are written empty).
    PartitionMetadata {
        initialized: ShareTopics,
    },
}

pub(crate) fn encode_key(key: &ShareKey, buf: &mut BytesMut) {
    let kind = match key {
        ShareKey::Metadata { .. } => METADATA_KEY,
        ShareKey::PartitionMetadata { .. } => PARTITION_METADATA_KEY,
    };
    buf.put_i16(kind);
    put_string(buf, key.group());
}

pub(crate) fn decode_key(kind: i16, bytes: &[u8]) -> Result<ShareKey, FormatError> {
    let group = Reader(bytes).string()?;
    match kind {
        METADATA_KEY => Ok(ShareKey::Metadata { group }),
        PARTITION_METADATA_KEY => Ok(ShareKey::PartitionMetadata { group }),
        version => Err(FormatError::Version {
            what: "key",
            version,
        }),
    }
}

pub(crate) fn encode_value(value: &ShareValue, buf: &mut BytesMut) {
    buf.put_i16(0);
    match value {
        ShareValue::Metadata { epoch } => {
            buf.put_i32(*epoch);
            // MetadataHash: tidelog recomputes assignments from the image instead.
            buf.put_i64(0);
        }
        ShareValue::PartitionMetadata { initialized } => {
            // InitializingTopics: none.
            put_varint(buf, 1);
            put_varint(buf, initialized.len() as u64 + 1);
            for (id, (name, partitions)) in initialized {
                buf.put_slice(id.as_bytes());
                put_compact(buf, name);
                put_varint(buf, partitions.len() as u64 + 1);
                for p in partitions {
                    buf.put_i32(*p);
                }
                // CreateTimestamp: not kept.
                buf.put_i64(-1);
                put_varint(buf, 0);
            }
            // DeletingTopics: none.
            put_varint(buf, 1);
        }
    }
    put_varint(buf, 0);
}

pub(crate) fn decode_value(key: &ShareKey, bytes: &[u8]) -> Result<ShareValue, FormatError> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(FormatError::Version {
            what: "share group value",
            version,
        });
    }
    let value = match key {
        ShareKey::Metadata { .. } => {
            let epoch = r.i32()?;
            let _metadata_hash = r.i64()?;
            ShareValue::Metadata { epoch }
        }
        ShareKey::PartitionMetadata { .. } => {
            // Initializing and initialized topics both count: a share partition whose
            // state Kafka was still initializing has state once a leader serves it.
            let mut initialized = ShareTopics::new();
            for _ in 0..2 {
                let topics = r.array_len()?;
                for _ in 0..topics {
                    let id = Uuid::from_slice(r.take(16)?).map_err(|_| FormatError::Short)?;
                    let name = r.compact()?;
                    let count = r.array_len()?;
                    let entry = initialized
                        .entry(id)
                        .or_insert_with(|| (name, BTreeSet::new()));
                    for _ in 0..count {
                        entry.1.insert(r.i32()?);
                    }
                    let _create_timestamp = r.i64()?;
                    r.tagged(|_, _| {})?;
                }
            }
            let deleting = r.array_len()?;
            for _ in 0..deleting {
                r.take(16)?;
                r.compact()?;
                r.tagged(|_, _| {})?;
            }
            ShareValue::PartitionMetadata { initialized }
        }
    };
    r.tagged(|_, _| {})?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(key: ShareKey, value: ShareValue) {
        let mut k = BytesMut::new();
        encode_key(&key, &mut k);
        let kind = i16::from_be_bytes([k[0], k[1]]);
        assert_eq!(decode_key(kind, &k[2..]).as_ref(), Ok(&key));
        let mut v = BytesMut::new();
        encode_value(&value, &mut v);
        assert_eq!(decode_value(&key, &v), Ok(value));
    }

    #[test]
    fn share_group_records_round_trip() {
        roundtrip(
            ShareKey::Metadata { group: "g".into() },
            ShareValue::Metadata { epoch: 7 },
        );
        let mut initialized = ShareTopics::new();
        initialized.insert(Uuid::from_u128(3), ("t".into(), [0, 2].into()));
        initialized.insert(Uuid::from_u128(9), ("u".into(), BTreeSet::new()));
        roundtrip(
            ShareKey::PartitionMetadata { group: "g".into() },
            ShareValue::PartitionMetadata { initialized },
        );
    }

    #[test]
    fn metadata_value_is_kafkas_layout() {
        let mut v = BytesMut::new();
        encode_value(&ShareValue::Metadata { epoch: 5 }, &mut v);
        // version 0, epoch, metadata hash, no tagged fields.
        assert_eq!(&v[..], &[0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn truncated_values_are_errors() {
        let key = ShareKey::PartitionMetadata { group: "g".into() };
        let mut initialized = ShareTopics::new();
        initialized.insert(Uuid::from_u128(3), ("t".into(), [0, 1, 2].into()));
        let mut v = BytesMut::new();
        encode_value(&ShareValue::PartitionMetadata { initialized }, &mut v);
        for cut in 0..v.len() {
            assert!(decode_value(&key, &v[..cut]).is_err(), "cut at {cut}");
        }
    }
}
