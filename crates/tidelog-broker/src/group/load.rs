//! Reading an offsets partition back for replay (start-up, or gaining leadership); the
//! reading itself is shared with the transaction coordinator (`internal_topic`).
//!
//! Offsets another node's transaction sent here (TxnOffsetCommit where this node
//! coordinates the group but not the transaction) are stored as a transactional batch
//! of ordinary offset records, as Kafka stores them: they count once a COMMIT marker of
//! the same producer follows, are dropped by an ABORT marker, and are still pending
//! (`txn::foreign`) when no marker has come yet.

use std::collections::BTreeMap;

use super::records::{GroupRecord, RecordKey, RecordValue};
use crate::internal_topic::{read_entries, Entry};
use crate::replica::{Partition, PartitionError};
use crate::txn::PendingOffset;

/// Every group record and transaction marker of the partition, in log order.
/// Also the log end offset the read went to.
pub(crate) fn read_partition(
    p: &Partition,
) -> Result<(Vec<Entry<GroupRecord>>, i64), PartitionError> {
    read_entries(p, GroupRecord::decode)
}

/// Offsets of transactions still undecided at the end of a load, per producer id:
/// (group, topic, partition, offset).
pub(crate) type PendingByProducer = BTreeMap<i64, Vec<(String, String, i32, PendingOffset)>>;

/// Splits loaded entries into the records to replay, in log order (plain ones, and
/// transactional ones at their COMMIT marker), and the transactional offsets no marker
/// has decided yet.
pub(crate) fn resolve(entries: Vec<Entry<GroupRecord>>) -> (Vec<GroupRecord>, PendingByProducer) {
    let mut replay = Vec::with_capacity(entries.len());
    let mut open: BTreeMap<i64, Vec<GroupRecord>> = BTreeMap::new();
    for entry in entries {
        match entry {
            Entry::Plain(record) => replay.push(record),
            Entry::Transactional {
                producer_id,
                record,
            } => open.entry(producer_id).or_default().push(record),
            Entry::Marker {
                producer_id,
                commit,
            } => {
                let records = open.remove(&producer_id).unwrap_or_default();
                if commit {
                    replay.extend(records);
                }
            }
        }
    }
    let pending = open
        .into_iter()
        .map(|(producer_id, records)| {
            let offsets = records.into_iter().filter_map(pending_offset).collect();
            (producer_id, offsets)
        })
        .collect();
    (replay, pending)
}

fn pending_offset(record: GroupRecord) -> Option<(String, String, i32, PendingOffset)> {
    match (record.key, record.value) {
        (
            RecordKey::Offset {
                group,
                topic,
                partition,
            },
            Some(RecordValue::Offset(v)),
        ) => Some((
            group,
            topic,
            partition,
            PendingOffset {
                offset: v.offset,
                leader_epoch: v.leader_epoch,
                metadata: Some(v.metadata),
            },
        )),
        _ => None,
    }
}
