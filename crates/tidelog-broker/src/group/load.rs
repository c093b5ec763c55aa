//! Reading an offsets partition back for replay (start-up, or gaining leadership); the
//! reading itself is shared with the transaction coordinator (`internal_topic`).

use super::records::GroupRecord;
use crate::internal_topic::read_records;
use crate::replica::{Partition, PartitionError};

/// Every group record of the partition, in log order.
/// Also the log end offset the read went to.
pub(crate) fn read_partition(p: &Partition) -> Result<(Vec<GroupRecord>, i64), PartitionError> {
    read_records(p, GroupRecord::decode)
}
