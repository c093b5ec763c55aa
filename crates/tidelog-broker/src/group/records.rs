//! The records of `__consumer_offsets`: what a coordinator writes and replays.
//!
//! Every record has a non-null key (the topic is compacted: the newest record per key
//! wins) and a value, or a null value (a tombstone that deletes the key). All integers
//! are big-endian; a `string` is an i16 length then UTF-8 bytes (length -1 = null, only
//! where marked nullable); `bytes` is an i32 length then the bytes. The layouts are
//! Kafka's, so Kafka's own tools can read a tidelog offsets topic.
//!
//! Keys (the leading i16 says which kind):
//! - **offset commit key**, version 0 or 1: `i16 version, string group, string topic,
//!   i32 partition`. We write version 1.
//! - **group metadata key**, version 2: `i16 version, string group`.
//! - keys 3 to 8 and 16: a consumer-protocol group's records (see `consumer::records`).
//!
//! Values:
//! - **offset commit value**, we write version 3: `i16 version=3, i64 offset,
//!   i32 leader_epoch, string metadata, i64 commit_timestamp_ms`. Versions 0–2 are read
//!   too (v0/v2: `offset, metadata, commit_ts`; v1: `offset, metadata, commit_ts,
//!   expire_ts`).
//! - **group metadata value**, version 3: `i16 version=3, string protocol_type,
//!   i32 generation, nullable string protocol, nullable string leader,
//!   i64 current_state_timestamp_ms, i32 member_count`, then per member: `string
//!   member_id, nullable string group_instance_id, string client_id, string client_host,
//!   i32 rebalance_timeout_ms, i32 session_timeout_ms, bytes subscription,
//!   bytes assignment`.
//!
//! Integrity comes from the record batch's CRC-32C (checked by storage on append and
//! on recovery); after a crash the coordinator's state is rebuilt by replaying the
//! partition from its log start (see `load`). Every length read here is checked
//! against the bytes that remain before anything is allocated.

use bytes::{BufMut, Bytes, BytesMut};

use super::consumer::records as consumer_records;
use super::consumer::{ConsumerKey, ConsumerValue};
use super::share_records::{self, ShareKey, ShareValue};

/// A key of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// A consumer-protocol group's record (key types 3 to 8).
    Consumer(ConsumerKey),
    /// A share group's record (key types 11 and 15).
    Share(ShareKey),
}

impl RecordKey {
    #[cfg(test)]
    pub(crate) fn group(&self) -> &str {
        match self {
            RecordKey::Offset { group, .. } | RecordKey::Group { group } => group,
            RecordKey::Consumer(key) => key.group(),
            RecordKey::Share(key) => key.group(),
        }
    }
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OffsetValue {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_timestamp_ms: i64,
}

/// One member as stored in a group's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredMember {
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    pub(crate) subscription: Bytes,
    pub(crate) assignment: Bytes,
}

/// A group's last completed generation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupValue {
    pub(crate) protocol_type: String,
    pub(crate) generation: i32,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) state_timestamp_ms: i64,
    pub(crate) members: Vec<StoredMember>,
}

/// A decoded value; `None` in [`GroupRecord::value`] is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecordValue {
    Offset(OffsetValue),
    Group(GroupValue),
    Consumer(ConsumerValue),
    Share(ShareValue),
}

/// One record of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupRecord {
    pub(crate) key: RecordKey,
    pub(crate) value: Option<RecordValue>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FormatError {
    #[error("record ends early")]
    Short,
    #[error("unknown {what} version {version}")]
    Version { what: &'static str, version: i16 },
    #[error("negative length")]
    NegativeLength,
    #[error("text is not UTF-8")]
    Utf8,
}

impl GroupRecord {
    pub(crate) fn encode_key(&self) -> Bytes {
        let mut buf = BytesMut::new();
        match &self.key {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => {
                buf.put_i16(1);
                put_string(&mut buf, group);
                put_string(&mut buf, topic);
                buf.put_i32(*partition);
            }
            RecordKey::Group { group } => {
                buf.put_i16(2);
                put_string(&mut buf, group);
            }
            RecordKey::Consumer(key) => consumer_records::encode_key(key, &mut buf),
            RecordKey::Share(key) => share_records::encode_key(key, &mut buf),
        }
        buf.freeze()
    }

    pub(crate) fn encode_value(&self) -> Option<Bytes> {
        let mut buf = BytesMut::new();
        match self.value.as_ref()? {
            RecordValue::Consumer(v) => consumer_records::encode_value(v, &mut buf),
            RecordValue::Share(v) => share_records::encode_value(v, &mut buf),
            RecordValue::Offset(v) => {
                buf.put_i16(3);
                buf.put_i64(v.offset);
                buf.put_i32(v.leader_epoch);
                put_string(&mut buf, &v.metadata);
                buf.put_i64(v.commit_timestamp_ms);
            }
            RecordValue::Group(g) => {
                buf.put_i16(3);
                put_string(&mut buf, &g.protocol_type);
                buf.put_i32(g.generation);
                put_nullable_string(&mut buf, g.protocol.as_deref());
                put_nullable_string(&mut buf, g.leader.as_deref());
                buf.put_i64(g.state_timestamp_ms);
                buf.put_i32(i32::try_from(g.members.len()).unwrap_or(i32::MAX));
                for m in &g.members {
                    put_string(&mut buf, &m.member_id);
                    put_nullable_string(&mut buf, m.instance_id.as_deref());
                    put_string(&mut buf, &m.client_id);
                    put_string(&mut buf, &m.client_host);
                    buf.put_i32(m.rebalance_timeout_ms);
                    buf.put_i32(m.session_timeout_ms);
                    put_bytes(&mut buf, &m.subscription);
                    put_bytes(&mut buf, &m.assignment);
                }
            }
        }
        Some(buf.freeze())
    }

    pub(crate) fn decode(key: &[u8], value: Option<&[u8]>) -> Result<GroupRecord, FormatError> {
        let mut k = Reader(key);
        let key = match k.i16()? {
            0 | 1 => RecordKey::Offset {
                group: k.string()?,
                topic: k.string()?,
                partition: k.i32()?,
            },
            2 => RecordKey::Group { group: k.string()? },
            kind @ (3..=8 | consumer_records::REGEX_KEY) => {
                RecordKey::Consumer(consumer_records::decode_key(kind, k.0)?)
            }
            kind @ (share_records::METADATA_KEY | share_records::PARTITION_METADATA_KEY) => {
                RecordKey::Share(share_records::decode_key(kind, k.0)?)
            }
            version => {
                return Err(FormatError::Version {
                    what: "key",
                    version,
                })
            }
        };
        let Some(value) = value else {
            return Ok(GroupRecord { key, value: None });
        };
        if let RecordKey::Consumer(k) = &key {
            let value = RecordValue::Consumer(consumer_records::decode_value(k, value)?);
            return Ok(GroupRecord {
                key,
                value: Some(value),
            });
        }
        if let RecordKey::Share(k) = &key {
            let value = RecordValue::Share(share_records::decode_value(k, value)?);
            return Ok(GroupRecord {
                key,
                value: Some(value),
            });
        }
        let mut v = Reader(value);
        let version = v.i16()?;
        let value = match &key {
            RecordKey::Offset { .. } => RecordValue::Offset(decode_offset(&mut v, version)?),
            RecordKey::Group { .. } | RecordKey::Consumer(_) | RecordKey::Share(_) => {
                RecordValue::Group(decode_group(&mut v, version)?)
            }
        };
        Ok(GroupRecord {
            key,
            value: Some(value),
        })
    }
}

fn decode_offset(v: &mut Reader<'_>, version: i16) -> Result<OffsetValue, FormatError> {
    let offset = v.i64()?;
    let (leader_epoch, metadata, commit_timestamp_ms) = match version {
        0..=2 => {
            let metadata = v.string()?;
            (-1, metadata, v.i64()?)
        }
        3 => {
            let epoch = v.i32()?;
            let metadata = v.string()?;
            (epoch, metadata, v.i64()?)
        }
        version => {
            return Err(FormatError::Version {
                what: "offset commit value",
                version,
            })
        }
    };
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

fn decode_group(v: &mut Reader<'_>, version: i16) -> Result<GroupValue, FormatError> {
    if !(0..=3).contains(&version) {
        return Err(FormatError::Version {
            what: "group metadata value",
            version,
        });
    }
    let protocol_type = v.string()?;
    let generation = v.i32()?;
    let protocol = v.nullable_string()?;
    let leader = v.nullable_string()?;
    let state_timestamp_ms = if version >= 2 { v.i64()? } else { -1 };
    let count = v.i32()?;
    let count = usize::try_from(count).map_err(|_| FormatError::NegativeLength)?;
    // A member takes at least 20 bytes; never trust the count beyond that.
    let mut members = Vec::with_capacity(count.min(v.0.len() / 20));
    for _ in 0..count {
        let member_id = v.string()?;
        let instance_id = if version >= 3 {
            v.nullable_string()?
        } else {
            None
        };
        let client_id = v.string()?;
        let client_host = v.string()?;
        let rebalance_timeout_ms = if version >= 1 { v.i32()? } else { -1 };
        let session_timeout_ms = v.i32()?;
        let subscription = v.bytes()?;
        let assignment = v.bytes()?;
        members.push(StoredMember {
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp_ms,
        members,
    })
}

pub(crate) fn put_string(buf: &mut BytesMut, s: &str) {
    // Longer text is refused before it gets here (see `MAX_NAME_BYTES` in join.rs and
    // the group id check); cutting at a character boundary keeps a record decodable
    // should anything longer slip through.
    let mut end = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    buf.put_i16(end as i16);
    buf.put_slice(&s.as_bytes()[..end]);
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
    buf.put_slice(b);
}

/// A bounds-checked big-endian reader (the consumer-group records add Kafka's flexible
/// encoding to it, in `consumer/records.rs`).
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl Reader<'_> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&[u8], FormatError> {
        if self.0.len() < n {
            return Err(FormatError::Short);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, FormatError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, FormatError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, FormatError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let raw = self.take(len as usize)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| FormatError::Utf8)
    }

    pub(crate) fn string(&mut self) -> Result<String, FormatError> {
        self.nullable_string()?.ok_or(FormatError::NegativeLength)
    }

    fn bytes(&mut self) -> Result<Bytes, FormatError> {
        let len = usize::try_from(self.i32()?).map_err(|_| FormatError::NegativeLength)?;
        Ok(Bytes::copy_from_slice(self.take(len)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(record: &GroupRecord) -> GroupRecord {
        let key = record.encode_key();
        let value = record.encode_value();
        GroupRecord::decode(&key, value.as_deref()).unwrap()
    }

    #[test]
    fn offset_commit_bytes_are_kafkas_layout() {
        let record = GroupRecord {
            key: RecordKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3,
            },
            value: Some(RecordValue::Offset(OffsetValue {
                offset: 42,
                leader_epoch: 7,
                metadata: "m".into(),
                commit_timestamp_ms: 1000,
            })),
        };
        assert_eq!(
            record.encode_key().as_ref(),
            &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]
        );
        let value = record.encode_value().unwrap();
        assert_eq!(
            value.as_ref(),
            &[0, 3, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 7, 0, 1, b'm', 0, 0, 0, 0, 0, 0, 3, 232]
        );
        assert_eq!(roundtrip(&record), record);
    }

    #[test]
    fn group_metadata_round_trips_with_members_and_tombstones() {
        let record = GroupRecord {
            key: RecordKey::Group { group: "g".into() },
            value: Some(RecordValue::Group(GroupValue {
                protocol_type: "consumer".into(),
                generation: 5,
                protocol: Some("range".into()),
                leader: Some("m1".into()),
                state_timestamp_ms: 99,
                members: vec![StoredMember {
                    member_id: "m1".into(),
                    instance_id: Some("i1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 10_000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"asg"),
                }],
            })),
        };
        assert_eq!(roundtrip(&record), record);
        let tombstone = GroupRecord {
            key: RecordKey::Group { group: "g".into() },
            value: None,
        };
        assert_eq!(tombstone.encode_value(), None);
        assert_eq!(roundtrip(&tombstone), tombstone);
    }

    #[test]
    fn hostile_bytes_are_errors_not_panics() {
        assert_eq!(GroupRecord::decode(&[], None), Err(FormatError::Short));
        assert!(matches!(
            GroupRecord::decode(&[0, 9], None),
            Err(FormatError::Version { .. })
        ));
        // Group value claiming i32::MAX members in a few bytes.
        let key = [0, 2, 0, 1, b'g'];
        let value = [
            0, 3, 0, 0, 0, 0, 0, 1, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 127, 255, 255, 255,
        ];
        assert_eq!(
            GroupRecord::decode(&key, Some(&value)),
            Err(FormatError::Short)
        );
        // A string longer than what remains.
        assert_eq!(
            GroupRecord::decode(&[0, 2, 0, 50, b'g'], None),
            Err(FormatError::Short)
        );
    }
}
