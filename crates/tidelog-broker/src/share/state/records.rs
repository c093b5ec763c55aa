//! The share coordinator's records in `__share_group_state`, in Kafka's layouts:
//! key `i16 type=0` (ShareSnapshot) then `group` (i16-length string), `topic id` (16
//! bytes), `partition` (i32); value `i16 version=0` then a flexible struct: snapshot
//! epoch (u16), state epoch, leader epoch (i32), start offset (i64), and the state
//! batches (compact array of first offset, last offset, delivery state, delivery
//! count, each with an empty tagged-field section). Kafka's ShareUpdate (type 1) is
//! read and skipped: this coordinator writes whole snapshots.

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

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ShareSnapshot {
    pub(crate) snapshot_epoch: u16,
    pub(crate) state_epoch: i32,
    pub(crate) leader_epoch: i32,
    pub(crate) start_offset: i64,
    pub(crate) batches: Vec<StateBatch>,
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
    put_varint(&mut buf, 0);
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
    v.tagged(|_, _| {})?;
    Ok(ShareStateRecord::Snapshot(
        key,
        Some(ShareSnapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
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
}
