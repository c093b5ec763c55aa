//! Reading a `__transaction_state` partition back for replay (start-up, or gaining
//! leadership): from log start to high watermark in bounded chunks of whole batches.
//! Each batch header says where the next one starts (compaction may have removed the
//! last records of a batch). A record that does not decode is skipped with a warning.

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;
use tidelog_storage::{BatchHeader, StorageError, BATCH_HEADER_LEN};

use super::records::TxnRecord;
use crate::replica::{Partition, PartitionError};

/// Bytes read per step.
const CHUNK_BYTES: usize = 1 << 20;

/// Every record of the partition, in log order.
pub(crate) fn read_partition(p: &Partition) -> Result<Vec<TxnRecord>, PartitionError> {
    let offsets = p.offsets()?;
    let mut next = offsets.log_start;
    let mut out = Vec::new();
    while next < offsets.high_watermark {
        let read = p.read(next, CHUNK_BYTES, false)?;
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
            if !h.is_control() {
                decode_batch(batch, next, &mut out);
            }
            next = batch_end;
        }
        if next == before {
            tracing::warn!(topic = %p.topic, partition = p.index, offset = next, "transaction state unreadable past this offset");
            break;
        }
    }
    Ok(out)
}

fn decode_batch(batch: &[u8], from: i64, out: &mut Vec<TxnRecord>) {
    let mut buf = Bytes::copy_from_slice(batch);
    let set = match RecordBatchDecoder::decode(&mut buf) {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "skipping undecodable batch in __transaction_state");
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
        match TxnRecord::decode(key, record.value.as_deref()) {
            Ok(r) => out.push(r),
            Err(e) => {
                tracing::warn!(offset = record.offset, error = %e, "skipping bad __transaction_state record");
            }
        }
    }
}
