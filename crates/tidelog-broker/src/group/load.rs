//! Reading an offsets partition back for replay (start-up, or gaining leadership).
//!
//! The partition is read from its log start to its high watermark in bounded chunks of
//! whole batches. Each batch's own header says where the next one starts (compaction
//! may leave a batch whose last records were removed, so the offsets of the surviving
//! records cannot tell). A record that does not decode is skipped with a warning: one
//! bad record must not keep a coordinator from loading.

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::records::GroupRecord;
use crate::replica::{Partition, PartitionError};

/// Bytes read per step.
const CHUNK_BYTES: usize = 1 << 20;
/// RecordBatch v2: baseOffset i64, batchLength i32, ..., lastOffsetDelta i32 at byte 23.
const BATCH_HEADER_BYTES: usize = 61;

/// Every record of the partition, in log order.
pub(crate) fn read_partition(p: &Partition) -> Result<Vec<GroupRecord>, PartitionError> {
    let offsets = p.offsets()?;
    let mut next = offsets.log_start;
    let mut out = Vec::new();
    while next < offsets.high_watermark {
        let read = p.read(next, CHUNK_BYTES, false)?;
        let Some(slice) = read.slice else { break };
        let bytes = slice
            .read_to_vec()
            .map_err(|e| PartitionError::Storage(tidelog_storage::StorageError::Io(e)))?;
        let before = next;
        let mut rest = bytes.as_slice();
        while rest.len() >= BATCH_HEADER_BYTES {
            let base = i64::from_be_bytes(header_bytes(rest, 0));
            let length = i32::from_be_bytes(header_bytes(rest, 8));
            let last_delta = i32::from_be_bytes(header_bytes(rest, 23));
            let Some(size) = usize::try_from(length).ok().and_then(|l| l.checked_add(12)) else {
                break;
            };
            if size > rest.len() || size < BATCH_HEADER_BYTES {
                break;
            }
            let (batch, tail) = rest.split_at(size);
            rest = tail;
            let batch_end = base.saturating_add(i64::from(last_delta)).saturating_add(1);
            if batch_end <= next {
                continue;
            }
            decode_batch(batch, next, &mut out);
            next = batch_end;
        }
        if next == before {
            tracing::warn!(topic = %p.topic, partition = p.index, offset = next, "offsets partition unreadable past this offset");
            break;
        }
    }
    Ok(out)
}

fn header_bytes<const N: usize>(batch: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = batch.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

fn decode_batch(batch: &[u8], from: i64, out: &mut Vec<GroupRecord>) {
    let mut buf = Bytes::copy_from_slice(batch);
    let set = match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "skipping undecodable batch in __consumer_offsets");
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
        match GroupRecord::decode(key, record.value.as_deref()) {
            Ok(r) => out.push(r),
            Err(e) => {
                tracing::warn!(offset = record.offset, error = %e, "skipping bad __consumer_offsets record");
            }
        }
    }
}
