//! Reading an internal topic's partition back for replay (start-up, or gaining
//! leadership).
//!
//! The partition is read from its log start to its log end (the caller checks that the
//! high watermark has reached that end) in bounded chunks of whole batches. Each batch's own header says where the next one starts (compaction
//! may leave a batch whose last records were removed, so the offsets of the surviving
//! records cannot tell). Records of transactional batches are told apart (the group
//! coordinator keeps another node's transactional offsets that way, as Kafka does), and
//! transaction markers are returned as such; the transaction coordinator's own topic
//! has neither. A record that does not decode is skipped with a warning: one bad record
//! must not keep a coordinator from loading.

use std::fmt::Display;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tidelog_storage::{BatchHeader, StorageError, BATCH_HEADER_LEN};

use crate::replica::{Partition, PartitionError};

/// Bytes read per step.
const CHUNK_BYTES: usize = 1 << 20;

/// One thing read back from an internal topic, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry<R> {
    /// A record written outside any transaction.
    Plain(R),
    /// A record of a transactional batch: it counts only once a COMMIT marker of the
    /// same producer follows.
    Transactional { producer_id: i64, record: R },
    /// A transaction marker.
    Marker { producer_id: i64, commit: bool },
}

/// Every record of the partition that `decode` (given a key and an optional value)
/// accepts, transactional or not, in log order, and the log end offset the read went to.
pub(crate) fn read_records<R, E: Display>(
    p: &Partition,
    decode: impl Fn(&[u8], Option<&[u8]>) -> Result<R, E>,
) -> Result<(Vec<R>, i64), PartitionError> {
    let (entries, end) = read_entries(p, decode)?;
    let records = entries
        .into_iter()
        .filter_map(|e| match e {
            Entry::Plain(r) | Entry::Transactional { record: r, .. } => Some(r),
            Entry::Marker { .. } => None,
        })
        .collect();
    Ok((records, end))
}

/// Every record `decode` accepts and every transaction marker of the partition, in log
/// order, and the log end offset the read went to.
pub(crate) fn read_entries<R, E: Display>(
    p: &Partition,
    decode: impl Fn(&[u8], Option<&[u8]>) -> Result<R, E>,
) -> Result<(Vec<Entry<R>>, i64), PartitionError> {
    let (log_start, log_end) =
        p.with_log(|log| Ok((log.log_start_offset(), log.log_end_offset())))?;
    let mut next = log_start;
    let mut out = Vec::new();
    while next < log_end {
        let read = p.read_for_follower(next, CHUNK_BYTES)?;
        let Some(slice) = read.slice else { break };
        let bytes = slice
            .read_to_vec()
            .map_err(|e| PartitionError::Storage(StorageError::Io(e)))?;
        let before = next;
        let mut rest = bytes.as_slice();
        while rest.len() >= BATCH_HEADER_LEN {
            let Ok(h) = BatchHeader::new(rest) else { break };
            let Some(size) = h.total_size().filter(|s| *s <= rest.len()) else {
                break;
            };
            let batch_end = h.last_offset().saturating_add(1);
            let (batch, tail) = rest.split_at(size);
            rest = tail;
            if batch_end <= next {
                continue;
            }
            if h.base_offset() >= log_end {
                break;
            }
            decode_batch(p, batch, next, &decode, &mut out);
            next = batch_end;
        }
        if next == before {
            tracing::warn!(topic = %p.topic, partition = p.index, offset = next, "internal topic unreadable past this offset");
            break;
        }
    }
    Ok((out, log_end))
}

fn decode_batch<R, E: Display>(
    p: &Partition,
    batch: &[u8],
    from: i64,
    decode: &impl Fn(&[u8], Option<&[u8]>) -> Result<R, E>,
    out: &mut Vec<Entry<R>>,
) {
    let mut buf = Bytes::copy_from_slice(batch);
    let set = match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "skipping undecodable batch");
            return;
        }
    };
    for record in set.records {
        if record.offset < from {
            continue;
        }
        let Some(key) = record.key.as_deref() else {
            continue;
        };
        if record.control {
            // Key: version i16, type i16 (0 ABORT, 1 COMMIT).
            if let [_, _, 0, kind @ (0 | 1), ..] = key {
                out.push(Entry::Marker {
                    producer_id: record.producer_id,
                    commit: *kind == 1,
                });
            }
            continue;
        }
        match decode(key, record.value.as_deref()) {
            Ok(r) if record.transactional => out.push(Entry::Transactional {
                producer_id: record.producer_id,
                record: r,
            }),
            Ok(r) => out.push(Entry::Plain(r)),
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, offset = record.offset, error = %e, "skipping bad record");
            }
        }
    }
}
