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
