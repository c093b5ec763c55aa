//! Acknowledging a coordinator's write only once it is replicated (Kafka answers
//! coordinator writes like an acks=all produce): the append returns where the records
//! end and in which leader epoch; the answer waits until the high watermark passes that
//! end, with the coordinator's lock released.
//!
//! The coordinators' request paths are synchronous, so the wait blocks its thread: on a
//! runtime worker through `block_in_place` (the worker's other tasks move to another
//! thread meanwhile), on a blocking-pool thread directly. On a cluster of one the high
//! watermark moves on append, so the answer is known before any blocking.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::replica::{replication_outcome, Appended, Partition, PartitionError};

/// How long a coordinator write waits for its replication (Kafka's
/// `offsets.commit.timeout.ms` default).
pub(crate) const REPLICATION_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a coordinator's write landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) partition: i32,
    /// One past the last record written: the high watermark to wait for.
    pub(crate) end: i64,
    /// The leader epoch the records were written in.
    pub(crate) epoch: i32,
}

impl Written {
    pub(crate) fn of(partition: i32, appended: &Appended) -> Written {
        Written {
            partition,
            end: appended.end_offset,
            epoch: appended.leader_epoch,
        }
    }
}

/// The coordinator error for a failed append to its internal partition: NOT_COORDINATOR
/// when this node no longer leads or hosts it (clients then look the coordinator up
/// again), COORDINATOR_NOT_AVAILABLE otherwise.
pub(crate) fn append_error_code(e: &PartitionError) -> i16 {
    match e {
        PartitionError::Closed | PartitionError::NotLeader => ResponseError::NotCoordinator.code(),
        _ => ResponseError::CoordinatorNotAvailable.code(),
    }
}

/// The coordinator error for a failed replication wait (Kafka's mapping): leadership
/// lost → NOT_COORDINATOR; too few replicas or a timeout → COORDINATOR_NOT_AVAILABLE.
pub(crate) fn coordinator_code(code: i16) -> i16 {
    if code == ResponseError::NotLeaderOrFollower.code()
        || code == ResponseError::FencedLeaderEpoch.code()
    {
        ResponseError::NotCoordinator.code()
    } else {
        ResponseError::CoordinatorNotAvailable.code()
    }
}

/// Whether `written` is committed right now: `Some(outcome)` when decided (errors as
/// for acks=all), `None` while the high watermark has not reached it.
pub(crate) fn replicated_now(p: &Partition, written: Written) -> Option<Result<(), i16>> {
    let snapshot = *p.hw_watch().borrow();
    replication_outcome(&snapshot, written.end, written.epoch)
}

/// Blocks until `written` is replicated to the ISR (high watermark ≥ its end in its
/// epoch), or returns the acks=all error (NOT_LEADER_OR_FOLLOWER,
/// NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT; `coordinator_code` maps them
/// for coordinator answers). Call with no lock held.
pub(crate) fn await_replicated(p: &Partition, written: Written) -> Result<(), i16> {
    if let Some(outcome) = replicated_now(p, written) {
        return outcome;
    }
    let wait = || {
        let handle = Handle::try_current().ok()?;
        if handle.runtime_flavor() != RuntimeFlavor::MultiThread {
            // A current-thread runtime cannot block for its own progress.
            return None;
        }
        let waited = tokio::task::block_in_place(|| {
            handle.block_on(p.wait_replicated(written.end, written.epoch, REPLICATION_TIMEOUT))
        });
        Some(waited)
    };
    match wait() {
        Some(outcome) => outcome,
        None => {
            tracing::warn!(topic = %p.topic, partition = p.index, "cannot wait for replication outside a multi-threaded runtime");
            Err(ResponseError::RequestTimedOut.code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog_storage::{BatchBuilder, Log, LogConfig};
    use uuid::Uuid;

    #[test]
    fn lost_leadership_tells_clients_to_find_the_coordinator_again() {
        let not_coordinator = ResponseError::NotCoordinator.code();
        assert_eq!(
            append_error_code(&PartitionError::NotLeader),
            not_coordinator
        );
        assert_eq!(append_error_code(&PartitionError::Closed), not_coordinator);
        let io = PartitionError::Storage(tidelog_storage::StorageError::Io(std::io::Error::other(
            "disk",
        )));
        assert_eq!(
            append_error_code(&io),
            ResponseError::CoordinatorNotAvailable.code()
        );
        assert_eq!(
            coordinator_code(ResponseError::NotLeaderOrFollower.code()),
            not_coordinator
        );
        for code in [
            ResponseError::RequestTimedOut.code(),
            ResponseError::NotEnoughReplicasAfterAppend.code(),
        ] {
            assert_eq!(
                coordinator_code(code),
                ResponseError::CoordinatorNotAvailable.code()
            );
        }
    }

    #[test]
    fn a_sole_replica_is_replicated_on_append_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(
            &dir.path().join("__consumer_offsets-0"),
            LogConfig::default(),
        )
        .unwrap();
        let p = Partition::new("__consumer_offsets".into(), Uuid::nil(), 0, 4, log);
        let mut batch = BatchBuilder::new()
            .kv(Some(b"k"), Some(b"v"), 1)
            .build()
            .unwrap();
        let written = Written::of(0, &p.append(&mut batch, 1).unwrap());
        assert_eq!((written.end, written.epoch), (1, 4));
        // No runtime here: the answer must be known without blocking.
        assert_eq!(await_replicated(&p, written), Ok(()));
        let later = Written { end: 2, ..written };
        assert_eq!(replicated_now(&p, later), None);
        let other_epoch = Written {
            epoch: 5,
            ..written
        };
        assert_eq!(
            await_replicated(&p, other_epoch),
            Err(ResponseError::NotLeaderOrFollower.code())
        );
    }
}
