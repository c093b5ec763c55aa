//! Reading an internal topic's partition back for replay (start-up, or gaining
//! leadership).
//!
//! The partition is read from its log start to its log end (the caller checks that the
//! high watermark has reached that end) in bounded chunks of whole batches. Each batch's own header says where the next one starts (compaction
//! may leave a batch whose last records were removed, so the offsets of the surviving
//! records cannot tell). Control batches (transaction markers) carry no coordinator
//! state and are stepped over. A record that does not decode is skipped with a warning:
//! one bad record must not keep a coordinator from loading.

use std::fmt::Display;

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tidelog_storage::{BatchHeader, StorageError, BATCH_HEADER_LEN};

use crate::replica::{Partition, PartitionError};

/// Bytes read per step.
const CHUNK_BYTES: usize = 1 << 20;

/// Every record of the partition that `decode` (given a key and an optional value)
/// accepts, in log order, and the log end offset the read went to.
pub(crate) fn read_records<R, E: Display>(
    p: &Partition,
    decode: impl Fn(&[u8], Option<&[u8]>) -> Result<R, E>,
) -> Result<(Vec<R>, i64), PartitionError> {
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
            if !h.is_control() {
                decode_batch(p, batch, next, &decode, &mut out);
            }
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
    out: &mut Vec<R>,
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
        if record.control || record.offset < from {
            continue;
        }
        let Some(key) = record.key.as_deref() else {
            continue;
        };
        match decode(key, record.value.as_deref()) {
            Ok(r) => out.push(r),
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, offset = record.offset, error = %e, "skipping bad record");
            }
        }
    }
}
