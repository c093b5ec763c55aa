//! Reading a `__transaction_state` partition back for replay (start-up, or gaining
//! leadership); the reading itself is shared with the group coordinator
//! (`internal_topic`).

use super::records::TxnRecord;
use crate::internal_topic::read_records;
use crate::replica::{Partition, PartitionError};

/// Every transaction state record of the partition, in log order.
/// Also the log end offset the read went to.
pub(crate) fn read_partition(p: &Partition) -> Result<(Vec<TxnRecord>, i64), PartitionError> {
    read_records(p, TxnRecord::decode)
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
        assert_eq!(read_partition(&p).unwrap().0, written);
    }
}
