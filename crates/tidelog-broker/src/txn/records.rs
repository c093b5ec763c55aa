//! The records of `__transaction_state`: one per change of a transactional id's state.
//!
//! The topic is compacted, so only the newest record per key matters; replaying a
//! partition from its start rebuilds every transaction it holds.
//!
//! Key, big-endian: `version i16 (0), transactional_id string (i16 length + UTF-8)`.
//!
//! Value (absent = tombstone: the id expired), big-endian; the first fields follow
//! Kafka's `TransactionLogValue` v0 in order, the last two are tidelog's:
//! `version i16 (0), producer_id i64, producer_epoch i16, timeout_ms i32, state i8,
//! partitions i32 count x { topic string, ids i32 count x i32 }, last_update_ms i64,
//! start_ms i64, groups i32 count x { group string, generation i32, member_id string,
//! instance_id nullable string }, offsets i32 count x { group string,
//! topic string, partition i32, offset i64, leader_epoch i32, metadata nullable string
//! (i16 length, -1 = null) }`.
//!
//! Value version 1 is version 0 followed by the transaction-version-2 fields (KIP-890
//! part 2): `tv2 i8 (0/1), next_producer_id i64, previous_producer_id i64`. It is written
//! only when one of them is not its default (false, -1, -1), so a TV1 transaction's
//! records stay byte for byte those of version 0.
//!
//! `groups` are the consumer groups added by AddOffsetsToTxn (with the member that
//! sent their TxnOffsetCommits); `offsets` are the
//! TxnOffsetCommits of the open transaction, which become committed offsets when it
//! commits (keeping them here makes a commit interrupted by a crash finish with them).
//! Not checksummed here: the batch CRC covers the record. A record that does not decode
//! is skipped on replay.

use std::collections::{BTreeMap, BTreeSet};

use super::state::{Committer, PendingOffset, TxnMeta, TxnState};

/// One `__transaction_state` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnRecord {
    pub(crate) transactional_id: String,
    /// `None`: tombstone.
    pub(crate) value: Option<TxnMeta>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FormatError {
    #[error("record ends early")]
    Short,
    #[error("unknown record version {0}")]
    Version(i16),
    #[error("string is not UTF-8")]
    Utf8,
    #[error("negative length {0}")]
    Negative(i32),
    #[error("unknown transaction state {0}")]
    State(i8),
    #[error("a string is longer than 32767 bytes")]
    TooLong,
}

impl TxnRecord {
    pub(crate) fn encode_key(&self) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::with_capacity(4 + self.transactional_id.len());
        out.extend_from_slice(&0i16.to_be_bytes());
        put_str(&mut out, &self.transactional_id)?;
        Ok(out)
    }

    pub(crate) fn encode_value(&self) -> Result<Option<Vec<u8>>, FormatError> {
        let Some(m) = &self.value else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(64);
        let v2_fields = m.tv2 || m.next_producer_id != -1 || m.previous_producer_id != -1;
        out.extend_from_slice(&i16::from(v2_fields).to_be_bytes());
        out.extend_from_slice(&m.producer_id.to_be_bytes());
        out.extend_from_slice(&m.epoch.to_be_bytes());
        out.extend_from_slice(&m.timeout_ms.to_be_bytes());
        out.push(m.state.code() as u8);
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, p) in &m.partitions {
            by_topic.entry(topic).or_default().push(*p);
        }
        put_len(&mut out, by_topic.len());
        for (topic, ids) in by_topic {
            put_str(&mut out, topic)?;
            put_len(&mut out, ids.len());
            for id in ids {
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
        out.extend_from_slice(&m.last_update_ms.to_be_bytes());
        out.extend_from_slice(&m.start_ms.to_be_bytes());
        put_len(&mut out, m.groups.len());
        for (g, c) in &m.groups {
            put_str(&mut out, g)?;
            out.extend_from_slice(&c.generation.to_be_bytes());
            put_str(&mut out, &c.member_id)?;
            put_nullable_str(&mut out, c.instance_id.as_deref())?;
        }
        put_len(&mut out, m.offsets.len());
        for ((group, topic, partition), o) in &m.offsets {
            put_str(&mut out, group)?;
            put_str(&mut out, topic)?;
            out.extend_from_slice(&partition.to_be_bytes());
            out.extend_from_slice(&o.offset.to_be_bytes());
            out.extend_from_slice(&o.leader_epoch.to_be_bytes());
            put_nullable_str(&mut out, o.metadata.as_deref())?;
        }
        if v2_fields {
            out.push(u8::from(m.tv2));
            out.extend_from_slice(&m.next_producer_id.to_be_bytes());
            out.extend_from_slice(&m.previous_producer_id.to_be_bytes());
        }
        Ok(Some(out))
    }

    pub(crate) fn decode(key: &[u8], value: Option<&[u8]>) -> Result<TxnRecord, FormatError> {
        let mut k = Reader(key);
        let version = k.i16()?;
        if version != 0 {
            return Err(FormatError::Version(version));
        }
        let transactional_id = k.string()?;
        let value = match value {
            None => None,
            Some(v) => Some(decode_value(&mut Reader(v))?),
        };
        Ok(TxnRecord {
            transactional_id,
            value,
        })
    }
}

fn decode_value(r: &mut Reader<'_>) -> Result<TxnMeta, FormatError> {
    let version = r.i16()?;
    if version != 0 && version != 1 {
        return Err(FormatError::Version(version));
    }
    let producer_id = r.i64()?;
    let epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state_code = r.i8()?;
    let state = TxnState::from_code(state_code).ok_or(FormatError::State(state_code))?;
    let mut partitions = BTreeSet::new();
    // Every element takes at least 4 bytes, so a count beyond remaining/4 is a lie.
    for _ in 0..r.count(4)? {
        let topic = r.string()?;
        for _ in 0..r.count(4)? {
            partitions.insert((topic.clone(), r.i32()?));
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut groups = BTreeMap::new();
    for _ in 0..r.count(10)? {
        let group = r.string()?;
        let generation = r.i32()?;
        let member_id = r.string()?;
        let instance_id = r.nullable_string()?;
        groups.insert(
            group,
            Committer {
                generation,
                member_id,
                instance_id,
            },
        );
    }
    let mut offsets = BTreeMap::new();
    for _ in 0..r.count(22)? {
        let group = r.string()?;
        let topic = r.string()?;
        let partition = r.i32()?;
        let offset = r.i64()?;
        let leader_epoch = r.i32()?;
        let metadata = r.nullable_string()?;
        offsets.insert(
            (group, topic, partition),
            PendingOffset {
                offset,
                leader_epoch,
                metadata,
            },
        );
    }
    let (tv2, next_producer_id, previous_producer_id) = if version == 1 {
        (r.i8()? != 0, r.i64()?, r.i64()?)
    } else {
        (false, -1, -1)
    };
    Ok(TxnMeta {
        tv2,
        next_producer_id,
        previous_producer_id,
        producer_id,
        epoch,
        timeout_ms,
        state,
        partitions,
        groups,
        offsets,
        last_update_ms,
        start_ms,
    })
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
}

fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) -> Result<(), FormatError> {
    match s {
        Some(s) => put_str(out, s),
        None => {
            out.extend_from_slice(&(-1i16).to_be_bytes());
            Ok(())
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) -> Result<(), FormatError> {
    let len = i16::try_from(s.len()).map_err(|_| FormatError::TooLong)?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// Bounds-checked big-endian reads.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let (head, rest) = self.0.split_at_checked(N).ok_or(FormatError::Short)?;
        self.0 = rest;
        let mut out = [0u8; N];
        out.copy_from_slice(head);
        Ok(out)
    }
    fn i8(&mut self) -> Result<i8, FormatError> {
        Ok(i8::from_be_bytes(self.take()?))
    }
    fn i16(&mut self) -> Result<i16, FormatError> {
        Ok(i16::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, FormatError> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, FormatError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
    /// An element count, refused if the remaining bytes cannot hold that many elements
    /// of at least `min_size` bytes.
    fn count(&mut self, min_size: usize) -> Result<usize, FormatError> {
        let n = self.i32()?;
        let n = usize::try_from(n).map_err(|_| FormatError::Negative(n))?;
        if n.saturating_mul(min_size) > self.0.len() {
            return Err(FormatError::Short);
        }
        Ok(n)
    }
    fn bytes(&mut self, len: i16) -> Result<String, FormatError> {
        let len = usize::try_from(len).map_err(|_| FormatError::Negative(i32::from(len)))?;
        let (head, rest) = self.0.split_at_checked(len).ok_or(FormatError::Short)?;
        self.0 = rest;
        String::from_utf8(head.to_vec()).map_err(|_| FormatError::Utf8)
    }
    fn string(&mut self) -> Result<String, FormatError> {
        let len = self.i16()?;
        self.bytes(len)
    }
    fn nullable_string(&mut self) -> Result<Option<String>, FormatError> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        self.bytes(len).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnRecord {
        let mut m = TxnMeta::new(42, 3, 60_000, 1_000);
        m.state = TxnState::PrepareCommit;
        m.partitions.insert(("out".into(), 0));
        m.partitions.insert(("out".into(), 2));
        m.partitions.insert(("other".into(), 1));
        m.groups.insert(
            "copier".into(),
            Committer {
                generation: 3,
                member_id: "m-1".into(),
                instance_id: None,
            },
        );
        m.groups.insert("other".into(), Committer::default());
        m.offsets.insert(
            ("copier".into(), "in".into(), 5),
            PendingOffset {
                offset: 1234,
                leader_epoch: 7,
                metadata: None,
            },
        );
        m.offsets.insert(
            ("copier".into(), "in".into(), 6),
            PendingOffset {
                offset: 99,
                leader_epoch: -1,
                metadata: Some("meta".into()),
            },
        );
        m.start_ms = 1_500;
        m.last_update_ms = 2_000;
        TxnRecord {
            transactional_id: "tx-1".into(),
            value: Some(m),
        }
    }

    #[test]
    fn round_trips_exactly() {
        let r = sample();
        let key = r.encode_key().unwrap();
        let value = r.encode_value().unwrap().unwrap();
        assert_eq!(TxnRecord::decode(&key, Some(&value)).unwrap(), r);
        let tomb = TxnRecord {
            transactional_id: "tx-1".into(),
            value: None,
        };
        assert_eq!(tomb.encode_value().unwrap(), None);
        assert_eq!(TxnRecord::decode(&key, None).unwrap(), tomb);
    }

    #[test]
    fn tv2_fields_round_trip_as_version_1_and_tv1_stays_version_0() {
        let tv1 = sample();
        let key = tv1.encode_key().unwrap();
        let v0 = tv1.encode_value().unwrap().unwrap();
        assert_eq!(&v0[..2], &[0, 0]);
        let mut r = sample();
        if let Some(m) = r.value.as_mut() {
            m.tv2 = true;
            m.next_producer_id = 77;
            m.previous_producer_id = 41;
        }
        let v1 = r.encode_value().unwrap().unwrap();
        assert_eq!(&v1[..2], &[0, 1]);
        assert_eq!(v1.len(), v0.len() + 17);
        assert_eq!(TxnRecord::decode(&key, Some(&v1)).unwrap(), r);
        assert!(TxnRecord::decode(&key, Some(&v1[..v1.len() - 1])).is_err());
    }

    #[test]
    fn key_layout_is_version_then_string() {
        let key = sample().encode_key().unwrap();
        assert_eq!(key, [0, 0, 0, 4, b't', b'x', b'-', b'1']);
    }

    #[test]
    fn truncated_or_lying_values_are_refused() {
        let r = sample();
        let key = r.encode_key().unwrap();
        let value = r.encode_value().unwrap().unwrap();
        for cut in 0..value.len() {
            assert!(
                TxnRecord::decode(&key, Some(&value[..cut])).is_err(),
                "cut {cut}"
            );
        }
        // A partition count of i32::MAX right after the fixed fields.
        let mut lying = value[..17].to_vec();
        lying.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            TxnRecord::decode(&key, Some(&lying)),
            Err(FormatError::Short)
        );
        let mut bad_state = value.clone();
        bad_state[16] = 99;
        assert_eq!(
            TxnRecord::decode(&key, Some(&bad_state)),
            Err(FormatError::State(99))
        );
    }
}
