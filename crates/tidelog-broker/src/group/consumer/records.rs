//! The consumer-protocol (KIP-848) records of `__consumer_offsets`, in Kafka's layouts.
//!
//! Keys are Kafka's non-flexible key schemas: `i16 type` then i16-length strings.
//! - 3 group metadata `(group)`; 4 partition metadata `(group)` (Kafka before 4.1; read
//!   and ignored, never written); 5 member metadata `(group, member)`; 6 target
//!   assignment metadata `(group)`; 7 target assignment member `(group, member)`;
//!   8 current member assignment `(group, member)`; 16 a resolved subscription regex
//!   `(group, regular expression)` (Kafka's ConsumerGroupRegularExpression).
//!
//! Values are `i16 version=0` then a flexible struct: compact strings and arrays
//! (unsigned varint length + 1, 0 = null), 16-byte uuids, and a tagged-field section
//! at the end of every struct (we write tag 0 of the group metadata, its metadata hash,
//! and tag 0 of a classic member's metadata, its `ClassicMemberMetadata`; we skip every
//! tag we do not know when reading).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, BytesMut};
use uuid::Uuid;

use super::{
    Assignment, ClassicProtocols, CurrentAssignment, MemberMetadata, MemberState, ResolvedRegex,
};
use crate::group::records::{put_string, FormatError, Reader};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConsumerKey {
    Metadata { group: String },
    PartitionMetadata { group: String },
    Member { group: String, member: String },
    TargetMetadata { group: String },
    TargetMember { group: String, member: String },
    CurrentAssignment { group: String, member: String },
    Regex { group: String, regex: String },
}

/// Kafka's key type of a resolved subscription regex.
pub(crate) const REGEX_KEY: i16 = 16;

impl ConsumerKey {
    pub(crate) fn group(&self) -> &str {
        match self {
            ConsumerKey::Metadata { group }
            | ConsumerKey::PartitionMetadata { group }
            | ConsumerKey::TargetMetadata { group }
            | ConsumerKey::Member { group, .. }
            | ConsumerKey::TargetMember { group, .. }
            | ConsumerKey::CurrentAssignment { group, .. }
            | ConsumerKey::Regex { group, .. } => group,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConsumerValue {
    /// The group epoch and the hash of its subscribed topics' metadata.
    Metadata {
        epoch: i32,
        metadata_hash: i64,
    },
    /// Kafka's pre-4.1 subscription metadata: read, not used.
    PartitionMetadata,
    Member(MemberMetadata),
    TargetMetadata {
        assignment_epoch: i32,
    },
    TargetMember(Assignment),
    CurrentAssignment(CurrentAssignment),
    Regex(ResolvedRegex),
}

pub(crate) fn encode_key(key: &ConsumerKey, buf: &mut BytesMut) {
    let (kind, group, member) = match key {
        ConsumerKey::Metadata { group } => (3, group, None),
        ConsumerKey::PartitionMetadata { group } => (4, group, None),
        ConsumerKey::Member { group, member } => (5, group, Some(member)),
        ConsumerKey::TargetMetadata { group } => (6, group, None),
        ConsumerKey::TargetMember { group, member } => (7, group, Some(member)),
        ConsumerKey::CurrentAssignment { group, member } => (8, group, Some(member)),
        ConsumerKey::Regex { group, regex } => (REGEX_KEY, group, Some(regex)),
    };
    buf.put_i16(kind);
    put_string(buf, group);
    if let Some(member) = member {
        put_string(buf, member);
    }
}

/// The key of type `kind` (3..=8, 16) from the bytes after the type.
pub(crate) fn decode_key(kind: i16, bytes: &[u8]) -> Result<ConsumerKey, FormatError> {
    let mut r = Reader(bytes);
    let group = r.string()?;
    Ok(match kind {
        3 => ConsumerKey::Metadata { group },
        4 => ConsumerKey::PartitionMetadata { group },
        6 => ConsumerKey::TargetMetadata { group },
        5 => ConsumerKey::Member {
            group,
            member: r.string()?,
        },
        7 => ConsumerKey::TargetMember {
            group,
            member: r.string()?,
        },
        8 => ConsumerKey::CurrentAssignment {
            group,
            member: r.string()?,
        },
        REGEX_KEY => ConsumerKey::Regex {
            group,
            regex: r.string()?,
        },
        version => {
            return Err(FormatError::Version {
                what: "key",
                version,
            })
        }
    })
}

pub(crate) fn encode_value(value: &ConsumerValue, buf: &mut BytesMut) {
    buf.put_i16(0);
    match value {
        ConsumerValue::Metadata {
            epoch,
            metadata_hash,
        } => {
            buf.put_i32(*epoch);
            // One tagged field: tag 0 (MetadataHash), 8 bytes.
            put_varint(buf, 1);
            put_varint(buf, 0);
            put_varint(buf, 8);
            buf.put_i64(*metadata_hash);
        }
        ConsumerValue::PartitionMetadata => {
            // An empty topic list: never written by us, but kept encodable.
            put_varint(buf, 1);
            put_varint(buf, 0);
        }
        ConsumerValue::Member(m) => {
            put_compact_nullable(buf, m.instance_id.as_deref());
            put_compact_nullable(buf, m.rack_id.as_deref());
            put_compact(buf, &m.client_id);
            put_compact(buf, &m.client_host);
            put_varint(buf, m.subscribed_topic_names.len() as u64 + 1);
            for t in &m.subscribed_topic_names {
                put_compact(buf, t);
            }
            put_compact_nullable(buf, m.subscribed_topic_regex.as_deref());
            buf.put_i32(m.rebalance_timeout_ms);
            put_compact_nullable(buf, m.server_assignor.as_deref());
            match &m.classic {
                None => put_varint(buf, 0),
                Some(classic) => {
                    let mut field = BytesMut::new();
                    put_classic(&mut field, classic);
                    put_varint(buf, 1);
                    put_varint(buf, 0);
                    put_varint(buf, field.len() as u64);
                    buf.put_slice(&field);
                }
            }
        }
        ConsumerValue::TargetMetadata { assignment_epoch } => {
            buf.put_i32(*assignment_epoch);
            put_varint(buf, 0);
        }
        ConsumerValue::TargetMember(a) => {
            put_assignment(buf, a);
            put_varint(buf, 0);
        }
        ConsumerValue::CurrentAssignment(c) => {
            buf.put_i32(c.member_epoch);
            buf.put_i32(c.previous_member_epoch);
            buf.put_i8(c.state as i8);
            put_assignment(buf, &c.assigned);
            put_assignment(buf, &c.pending_revocation);
            put_varint(buf, 0);
        }
        ConsumerValue::Regex(resolved) => {
            put_varint(buf, resolved.topics.len() as u64 + 1);
            for t in &resolved.topics {
                put_compact(buf, t);
            }
            buf.put_i64(resolved.version);
            buf.put_i64(resolved.timestamp_ms);
            put_varint(buf, 0);
        }
    }
}

pub(crate) fn decode_value(key: &ConsumerKey, bytes: &[u8]) -> Result<ConsumerValue, FormatError> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(FormatError::Version {
            what: "consumer group value",
            version,
        });
    }
    Ok(match key {
        ConsumerKey::Metadata { .. } => {
            let epoch = r.i32()?;
            let mut metadata_hash = 0;
            r.tagged(|tag, data| {
                if tag == 0 && data.len() == 8 {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(data);
                    metadata_hash = i64::from_be_bytes(b);
                }
            })?;
            ConsumerValue::Metadata {
                epoch,
                metadata_hash,
            }
        }
        ConsumerKey::PartitionMetadata { .. } => ConsumerValue::PartitionMetadata,
        ConsumerKey::Member { .. } => {
            let instance_id = r.compact_nullable()?;
            let rack_id = r.compact_nullable()?;
            let client_id = r.compact()?;
            let client_host = r.compact()?;
            let count = r.array_len()?;
            let mut subscribed_topic_names = Vec::with_capacity(count.min(r.0.len()));
            for _ in 0..count {
                subscribed_topic_names.push(r.compact()?);
            }
            let subscribed_topic_regex = r.compact_nullable()?;
            let rebalance_timeout_ms = r.i32()?;
            let server_assignor = r.compact_nullable()?;
            let mut classic = None;
            let mut malformed = None;
            r.tagged(|tag, data| {
                if tag == 0 {
                    match Reader(data).classic() {
                        Ok(c) => classic = c,
                        Err(e) => malformed = Some(e),
                    }
                }
            })?;
            if let Some(e) = malformed {
                return Err(e);
            }
            ConsumerValue::Member(MemberMetadata {
                instance_id,
                rack_id,
                client_id,
                client_host,
                subscribed_topic_names,
                subscribed_topic_regex,
                rebalance_timeout_ms,
                server_assignor,
                classic,
            })
        }
        ConsumerKey::TargetMetadata { .. } => {
            let assignment_epoch = r.i32()?;
            r.tagged(|_, _| {})?;
            ConsumerValue::TargetMetadata { assignment_epoch }
        }
        ConsumerKey::TargetMember { .. } => {
            let a = r.assignment()?;
            r.tagged(|_, _| {})?;
            ConsumerValue::TargetMember(a)
        }
        ConsumerKey::CurrentAssignment { .. } => {
            let member_epoch = r.i32()?;
            let previous_member_epoch = r.i32()?;
            let state = MemberState::from_code(r.take(1)?[0] as i8);
            let assigned = r.assignment()?;
            let pending_revocation = r.assignment()?;
            r.tagged(|_, _| {})?;
            ConsumerValue::CurrentAssignment(CurrentAssignment {
                member_epoch,
                previous_member_epoch,
                state,
                assigned,
                pending_revocation,
            })
        }
        ConsumerKey::Regex { .. } => {
            let count = r.array_len()?;
            let mut topics = BTreeSet::new();
            for _ in 0..count {
                topics.insert(r.compact()?);
            }
            let version = r.i64()?;
            let timestamp_ms = r.i64()?;
            r.tagged(|_, _| {})?;
            ConsumerValue::Regex(ResolvedRegex {
                topics,
                version,
                timestamp_ms,
            })
        }
    })
}

pub(crate) fn put_varint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

pub(crate) fn put_compact(buf: &mut BytesMut, s: &str) {
    put_varint(buf, s.len() as u64 + 1);
    buf.put_slice(s.as_bytes());
}

fn put_compact_nullable(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact(buf, s),
        None => put_varint(buf, 0),
    }
}

/// A nullable struct: a presence byte (1), the session timeout, `[]ClassicProtocol`
/// (compact name, compact bytes, tags) and the struct's own tags.
fn put_classic(buf: &mut BytesMut, c: &ClassicProtocols) {
    buf.put_i8(1);
    buf.put_i32(c.session_timeout_ms);
    put_varint(buf, c.protocols.len() as u64 + 1);
    for (name, metadata) in &c.protocols {
        put_compact(buf, name);
        put_varint(buf, metadata.len() as u64 + 1);
        buf.put_slice(metadata);
        put_varint(buf, 0);
    }
    put_varint(buf, 0);
}

/// `[]TopicPartitions`: topic id, partitions, and an empty tagged section per topic.
fn put_assignment(buf: &mut BytesMut, a: &Assignment) {
    put_varint(buf, a.len() as u64 + 1);
    for (topic, partitions) in a {
        buf.put_slice(topic.as_bytes());
        put_varint(buf, partitions.len() as u64 + 1);
        for p in partitions {
            buf.put_i32(*p);
        }
        put_varint(buf, 0);
    }
}

/// Kafka's flexible encoding, on the group records' reader.
impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, FormatError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(FormatError::Short)
    }

    /// A compact length: `None` for null; never more than the bytes that remain.
    fn compact_len(&mut self) -> Result<Option<usize>, FormatError> {
        match self.varint()? {
            0 => Ok(None),
            n => {
                let n = usize::try_from(n - 1).map_err(|_| FormatError::Short)?;
                if n > self.0.len() {
                    return Err(FormatError::Short);
                }
                Ok(Some(n))
            }
        }
    }

    pub(crate) fn array_len(&mut self) -> Result<usize, FormatError> {
        self.compact_len()?.ok_or(FormatError::NegativeLength)
    }

    fn compact_nullable(&mut self) -> Result<Option<String>, FormatError> {
        let Some(len) = self.compact_len()? else {
            return Ok(None);
        };
        let raw = self.take(len)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| FormatError::Utf8)
    }

    pub(crate) fn compact(&mut self) -> Result<String, FormatError> {
        self.compact_nullable()?.ok_or(FormatError::NegativeLength)
    }

    pub(crate) fn tagged(&mut self, mut each: impl FnMut(u64, &[u8])) -> Result<(), FormatError> {
        let count = self.varint()?;
        for _ in 0..count {
            let tag = self.varint()?;
            let size = usize::try_from(self.varint()?).map_err(|_| FormatError::Short)?;
            each(tag, self.take(size)?);
        }
        Ok(())
    }

    fn classic(&mut self) -> Result<Option<ClassicProtocols>, FormatError> {
        if self.take(1)?[0] as i8 == -1 {
            return Ok(None);
        }
        let session_timeout_ms = self.i32()?;
        let count = self.array_len()?;
        let mut protocols = Vec::with_capacity(count.min(self.0.len()));
        for _ in 0..count {
            let name = self.compact()?;
            let len = self.compact_len()?.ok_or(FormatError::NegativeLength)?;
            let metadata = bytes::Bytes::copy_from_slice(self.take(len)?);
            self.tagged(|_, _| {})?;
            protocols.push((name, metadata));
        }
        self.tagged(|_, _| {})?;
        Ok(Some(ClassicProtocols {
            session_timeout_ms,
            protocols,
        }))
    }

    fn assignment(&mut self) -> Result<Assignment, FormatError> {
        let topics = self.array_len()?;
        let mut out: Assignment = BTreeMap::new();
        for _ in 0..topics {
            let id = Uuid::from_slice(self.take(16)?).map_err(|_| FormatError::Short)?;
            let count = self.array_len()?;
            let mut partitions = BTreeSet::new();
            for _ in 0..count {
                partitions.insert(self.i32()?);
            }
            self.tagged(|_, _| {})?;
            out.insert(id, partitions);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(key: ConsumerKey, value: ConsumerValue) {
        let mut k = BytesMut::new();
        encode_key(&key, &mut k);
        let kind = i16::from_be_bytes([k[0], k[1]]);
        let decoded_key = decode_key(kind, &k[2..]).unwrap();
        assert_eq!(decoded_key, key);
        let mut v = BytesMut::new();
        encode_value(&value, &mut v);
        assert_eq!(decode_value(&key, &v).unwrap(), value);
    }

    #[test]
    fn consumer_records_round_trip() {
        let topic = Uuid::from_u128(7);
        let assigned: Assignment = [(topic, [0, 2].into_iter().collect())].into();
        let group = "g".to_string();
        let member = "m".to_string();
        roundtrip(
            ConsumerKey::Metadata {
                group: group.clone(),
            },
            ConsumerValue::Metadata {
                epoch: 4,
                metadata_hash: -3,
            },
        );
        roundtrip(
            ConsumerKey::Member {
                group: group.clone(),
                member: member.clone(),
            },
            ConsumerValue::Member(MemberMetadata {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["a".into(), "b".into()],
                subscribed_topic_regex: Some("t.*".into()),
                rebalance_timeout_ms: 300_000,
                server_assignor: Some("uniform".into()),
                classic: None,
            }),
        );
        roundtrip(
            ConsumerKey::Member {
                group: group.clone(),
                member: member.clone(),
            },
            ConsumerValue::Member(MemberMetadata {
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["a".into()],
                rebalance_timeout_ms: 60_000,
                classic: Some(ClassicProtocols {
                    session_timeout_ms: 45_000,
                    protocols: vec![
                        ("range".into(), bytes::Bytes::from_static(&[0, 1, 2])),
                        ("roundrobin".into(), bytes::Bytes::new()),
                    ],
                }),
                ..MemberMetadata::default()
            }),
        );
        roundtrip(
            ConsumerKey::TargetMember {
                group: group.clone(),
                member: member.clone(),
            },
            ConsumerValue::TargetMember(assigned.clone()),
        );
        roundtrip(
            ConsumerKey::CurrentAssignment { group, member },
            ConsumerValue::CurrentAssignment(CurrentAssignment {
                member_epoch: 3,
                previous_member_epoch: 2,
                state: MemberState::UnrevokedPartitions,
                assigned: assigned.clone(),
                pending_revocation: assigned,
            }),
        );
    }

    #[test]
    fn a_resolved_regex_is_kafkas_layout_and_round_trips() {
        let key = ConsumerKey::Regex {
            group: "g".into(),
            regex: "t.*".into(),
        };
        let value = ConsumerValue::Regex(ResolvedRegex {
            topics: ["t1".to_string()].into(),
            version: 7,
            timestamp_ms: 9,
        });
        roundtrip(key.clone(), value.clone());
        let mut k = BytesMut::new();
        encode_key(&key, &mut k);
        assert_eq!(k.as_ref(), &[0, 16, 0, 1, b'g', 0, 3, b't', b'.', b'*']);
        let mut v = BytesMut::new();
        encode_value(&value, &mut v);
        let mut expected = vec![0, 0, 2, 3, b't', b'1'];
        expected.extend(7i64.to_be_bytes());
        expected.extend(9i64.to_be_bytes());
        expected.push(0);
        assert_eq!(v.as_ref(), expected.as_slice());
    }

    #[test]
    fn member_metadata_value_is_kafkas_layout() {
        let mut v = BytesMut::new();
        encode_value(
            &ConsumerValue::Member(MemberMetadata {
                instance_id: None,
                rack_id: None,
                client_id: "c".into(),
                client_host: "h".into(),
                subscribed_topic_names: vec!["t".into()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 1,
                server_assignor: None,
                classic: None,
            }),
            &mut v,
        );
        assert_eq!(
            v.as_ref(),
            &[0, 0, 0, 0, 2, b'c', 2, b'h', 2, 2, b't', 0, 0, 0, 0, 1, 0, 0]
        );
    }

    #[test]
    fn hostile_values_are_errors() {
        let key = ConsumerKey::CurrentAssignment {
            group: "g".into(),
            member: "m".into(),
        };
        // An assignment claiming a huge topic count in a few bytes.
        let bytes = [0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(decode_value(&key, &bytes), Err(FormatError::Short));
        assert!(decode_key(9, &[0, 1, b'g']).is_err());
    }
}
