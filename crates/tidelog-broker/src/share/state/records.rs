//! The share coordinator's records in `__share_group_state`, in Kafka's layouts:
//! key `i16 type=0` (ShareSnapshot) then `group` (i16-length string), `topic id` (16
//! bytes), `partition` (i32); value `i16 version=0` then a flexible struct: snapshot
//! epoch (u16), state epoch, leader epoch (i32), start offset (i64), and the state
//! batches (compact array of first offset, last offset, delivery state, delivery
//! count, each with an empty tagged-field section). Kafka's ShareUpdate (type 1) is
//! read and skipped: this coordinator writes whole snapshots.
//!
//! The delivery-complete count (KIP-1226; Kafka's snapshot records carry it since 4.2)
//! is the value's tagged field 0, an int32, written when it is known: a tagged field
//! keeps the records written before it readable (they read as unknown, Kafka's -1), and
//! those written with it readable by a node that does not know it (it skips the tag).

use bytes::{BufMut, BytesMut};
use uuid::Uuid;

use crate::group::consumer::records::put_varint;
use crate::group::records::{put_string, FormatError, Reader};

/// (group, topic id, partition).
pub(crate) type StateKey = (String, Uuid, i32);

/// One run of offsets in the same delivery state with the same delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateBatch {
    pub(crate) first: i64,
    pub(crate) last: i64,
    /// 0 AVAILABLE, 2 ACKNOWLEDGED, 3 ARCHIVING (its dead-letter copy under way,
    /// KIP-1191), 4 ARCHIVED (Kafka's codes; ACQUIRED is stored as AVAILABLE: a lock
    /// does not outlive its leader).
    pub(crate) state: i8,
    pub(crate) delivery_count: i16,
}

/// Kafka's value of a delivery-complete count no leader has written (a state from
/// before KIP-1226, or initialized without a start offset).
pub(crate) const UNKNOWN_DELIVERY_COMPLETE_COUNT: i32 = -1;
/// The tag of the delivery-complete count in a snapshot value.
const DELIVERY_COMPLETE_COUNT_TAG: u64 = 0;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShareSnapshot {
    pub(crate) snapshot_epoch: u16,
    pub(crate) state_epoch: i32,
    pub(crate) leader_epoch: i32,
    pub(crate) start_offset: i64,
    /// KIP-1226: the records at or above the start offset whose delivery is complete
    /// (ACKNOWLEDGED or ARCHIVED), as the leader counted them; -1 when not known. The
    /// share-partition lag is high watermark - start offset - this.
    pub(crate) delivery_complete_count: i32,
    pub(crate) batches: Vec<StateBatch>,
}

impl Default for ShareSnapshot {
    fn default() -> ShareSnapshot {
        ShareSnapshot {
            snapshot_epoch: 0,
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 0,
            delivery_complete_count: UNKNOWN_DELIVERY_COMPLETE_COUNT,
            batches: Vec::new(),
        }
    }
}

/// The delivery-complete count of a leader's in-flight window: every offset of its
/// ACKNOWLEDGED (2) and ARCHIVED (4) runs. ARCHIVING (3) is not complete yet: its
/// dead-letter copy is under way. Saturates at `i32::MAX` (the wire's type).
pub(crate) fn delivery_complete_count(batches: &[StateBatch]) -> i32 {
    let complete: i64 = batches
        .iter()
        .filter(|b| matches!(b.state, 2 | 4))
        .map(|b| b.last.saturating_sub(b.first).saturating_add(1).max(0))
        .fold(0i64, i64::saturating_add);
    i32::try_from(complete).unwrap_or(i32::MAX)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShareStateRecord {
    Snapshot(StateKey, Option<ShareSnapshot>),
    /// A record this coordinator does not apply (Kafka's ShareUpdate).
    Skipped,
}

pub(crate) fn encode_key(key: &StateKey) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    put_string(&mut buf, &key.0);
    buf.put_slice(key.1.as_bytes());
    buf.put_i32(key.2);
    buf.to_vec()
}

pub(crate) fn encode_value(s: &ShareSnapshot) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    buf.put_u16(s.snapshot_epoch);
    buf.put_i32(s.state_epoch);
    buf.put_i32(s.leader_epoch);
    buf.put_i64(s.start_offset);
    put_varint(&mut buf, s.batches.len() as u64 + 1);
    for b in &s.batches {
        buf.put_i64(b.first);
        buf.put_i64(b.last);
        buf.put_i8(b.state);
        buf.put_i16(b.delivery_count);
        put_varint(&mut buf, 0);
    }
    if s.delivery_complete_count >= 0 {
        put_varint(&mut buf, 1);
        put_varint(&mut buf, DELIVERY_COMPLETE_COUNT_TAG);
        put_varint(&mut buf, 4);
        buf.put_i32(s.delivery_complete_count);
    } else {
        put_varint(&mut buf, 0);
    }
    buf.to_vec()
}

pub(crate) fn decode(key: &[u8], value: Option<&[u8]>) -> Result<ShareStateRecord, FormatError> {
    let mut k = Reader(key);
    let kind = k.i16()?;
    if kind != 0 {
        return Ok(ShareStateRecord::Skipped);
    }
    let group = k.string()?;
    let mut id = [0u8; 16];
    id.copy_from_slice(k.take(16)?);
    let partition = k.i32()?;
    let key = (group, Uuid::from_bytes(id), partition);
    let Some(value) = value else {
        return Ok(ShareStateRecord::Snapshot(key, None));
    };
    let mut v = Reader(value);
    let version = v.i16()?;
    if version != 0 {
        return Err(FormatError::Version {
            what: "share snapshot value",
            version,
        });
    }
    let mut epoch = [0u8; 2];
    epoch.copy_from_slice(v.take(2)?);
    let snapshot_epoch = u16::from_be_bytes(epoch);
    let state_epoch = v.i32()?;
    let leader_epoch = v.i32()?;
    let start_offset = v.i64()?;
    let count = v.array_len()?;
    // A batch takes 20 bytes on the wire; never trust the count beyond that.
    let mut batches = Vec::with_capacity(count.min(v.0.len() / 20));
    for _ in 0..count {
        let first = v.i64()?;
        let last = v.i64()?;
        let state = i8::from_be_bytes([v.take(1)?[0]]);
        let delivery_count = v.i16()?;
        v.tagged(|_, _| {})?;
        batches.push(StateBatch {
            first,
            last,
            state,
            delivery_count,
        });
    }
    let mut delivery_complete_count = UNKNOWN_DELIVERY_COMPLETE_COUNT;
    let mut malformed = false;
    v.tagged(|tag, bytes| {
        if tag == DELIVERY_COMPLETE_COUNT_TAG {
            match <[u8; 4]>::try_from(bytes) {
                Ok(b) => delivery_complete_count = i32::from_be_bytes(b),
                Err(_) => malformed = true,
            }
        }
    })?;
    if malformed {
        return Err(FormatError::Short);
    }
    Ok(ShareStateRecord::Snapshot(
        key,
        Some(ShareSnapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count,
            batches,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_and_hostile_bytes_are_errors() {
        let key = ("g".to_string(), Uuid::from_u128(9), 3);
        let snap = ShareSnapshot {
            snapshot_epoch: 7,
            state_epoch: 1,
            leader_epoch: 2,
            start_offset: 100,
            delivery_complete_count: 5,
            batches: vec![StateBatch {
                first: 100,
                last: 104,
                state: 2,
                delivery_count: 1,
            }],
        };
        let (k, v) = (encode_key(&key), encode_value(&snap));
        // Kafka's key layout: type 0, i16-length group, 16-byte uuid, i32 partition.
        assert_eq!(k.len(), 2 + 2 + 1 + 16 + 4);
        assert_eq!(
            decode(&k, Some(&v)),
            Ok(ShareStateRecord::Snapshot(key.clone(), Some(snap)))
        );
        assert_eq!(decode(&k, None), Ok(ShareStateRecord::Snapshot(key, None)));
        for cut in 0..v.len() {
            assert!(decode(&k, Some(&v[..cut])).is_err(), "cut at {cut}");
        }
        assert!(decode(&[0, 0, 0x7f, 0xff], None).is_err());
        assert_eq!(decode(&[0, 1, 0, 0], None), Ok(ShareStateRecord::Skipped));
    }

    #[test]
    fn the_delivery_complete_count_is_kept_and_a_record_without_it_reads_as_unknown() {
        let key = ("g".to_string(), Uuid::from_u128(9), 3);
        let snap = ShareSnapshot {
            start_offset: 100,
            delivery_complete_count: 42,
            ..ShareSnapshot::default()
        };
        let (k, v) = (encode_key(&key), encode_value(&snap));
        let Ok(ShareStateRecord::Snapshot(_, Some(read))) = decode(&k, Some(&v)) else {
            panic!("not a snapshot");
        };
        assert_eq!(read.delivery_complete_count, 42);
        // A value as written before KIP-1226: no tagged field.
        let old = encode_value(&ShareSnapshot {
            delivery_complete_count: UNKNOWN_DELIVERY_COMPLETE_COUNT,
            ..snap.clone()
        });
        assert_eq!(old.len() + 6, v.len(), "count, tag, size and an int32");
        let Ok(ShareStateRecord::Snapshot(_, Some(read))) = decode(&k, Some(&old)) else {
            panic!("not a snapshot");
        };
        assert_eq!(read.delivery_complete_count, -1);
        // A count that is not an int32 is an error, not a guess.
        let mut bad = v.clone();
        let at = bad.len() - 5;
        bad[at] = 3;
        bad.truncate(bad.len() - 1);
        assert!(decode(&k, Some(&bad)).is_err());
    }

    #[test]
    fn the_delivery_complete_count_counts_acknowledged_and_archived_offsets() {
        let run = |first, last, state| StateBatch {
            first,
            last,
            state,
            delivery_count: 1,
        };
        let batches = [
            run(10, 12, 2), // acknowledged: 3
            run(13, 13, 0), // available
            run(14, 15, 3), // archiving: not yet complete
            run(16, 19, 4), // archived: 4
        ];
        assert_eq!(delivery_complete_count(&batches), 7);
        assert_eq!(delivery_complete_count(&[]), 0);
        assert_eq!(
            delivery_complete_count(&[run(0, i64::MAX, 2)]),
            i32::MAX,
            "saturates"
        );
    }
}
