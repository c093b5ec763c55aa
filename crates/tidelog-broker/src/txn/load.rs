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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::{TxnMeta, TxnState};
    use tidelog_storage::{Log, LogConfig};
    use uuid::Uuid;

    #[test]
    fn reads_back_every_record_in_order_skipping_markers_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(
            &dir.path().join("__transaction_state-0"),
            LogConfig::default(),
        )
        .unwrap();
        let p = Partition::new("__transaction_state".into(), Uuid::nil(), 0, 0, log);
        let mut meta = TxnMeta::new(3, 0, 60_000, 10);
        let mut written = Vec::new();
        for (i, state) in [TxnState::Empty, TxnState::Ongoing, TxnState::PrepareCommit]
            .into_iter()
            .enumerate()
        {
            meta.state = state;
            meta.last_update_ms = 10 + i as i64;
            let record = TxnRecord {
                transactional_id: format!("tx-{}", i % 2),
                value: Some(meta.clone()),
            };
            p.append(&mut record.to_batch(100).unwrap(), 100).unwrap();
            written.push(record);
        }
        // A record whose key is not ours, and a transaction marker: both skipped.
        let mut junk = tidelog_storage::BatchBuilder::new()
            .kv(Some(b"\x00\x07nope"), Some(b"x"), 100)
            .build()
            .unwrap();
        p.append(&mut junk, 100).unwrap();
        let mut marker = tidelog_storage::BatchBuilder::control_marker(3, 0, true, 0, 100)
            .build()
            .unwrap();
        p.append_control(&mut marker, 100).unwrap();
        let tomb = TxnRecord {
            transactional_id: "tx-0".into(),
            value: None,
        };
        p.append(&mut tomb.to_batch(100).unwrap(), 100).unwrap();
        written.push(tomb);
        assert_eq!(read_partition(&p).unwrap(), written);
    }
}
