//! The coordinator runtime: what the group and the transaction coordinators (and the
//! next ones) share, after Kafka's `CoordinatorRuntime`.
//!
//! A coordinator is a pure state machine, a [`Shard`] per partition of its internal
//! topic: a step is a function of (state, request, now) that returns the records to
//! append and the response ([`Outcome`]), and touches no disk, network or clock. The
//! runtime ([`CoordinatorRuntime`]) runs one task per partition this node leads, which
//! owns the shard and its partition ([`CoordinatorLog`]) and runs every step in turn:
//!
//! 1. the step runs on the shard;
//! 2. its records are appended as one batch (or its marker as a control batch); if the
//!    append fails nothing was written and nothing is replayed, so the state is still
//!    the last written one, and the caller gets the error;
//! 3. the appended records are replayed into the shard at once ([`Shard::replay`], the
//!    same code that loads the partition), so the next step builds on them;
//! 4. the answer waits until the high watermark passes the records (or, for a step that
//!    wrote nothing, every record written before it): only then does the caller hear it
//!    and the step's follow-up ([`Outcome::then`]) and effects run. Readers see only
//!    committed state ([`timeline::Timeline`]);
//! 5. when leadership moves (the partition's leader or epoch changes) the task stops:
//!    waiting callers get NOT_COORDINATOR and the in-memory state is dropped, which
//!    rolls it back to the committed log: the next leader, this node included, loads
//!    the partition again from its log start up to the high watermark.
//!
//! Loading replays the partition (read off the async workers) once its high watermark
//! has reached the log end, so nothing served from memory can be truncated later; until
//! then requests get COORDINATOR_LOAD_IN_PROGRESS. A clock tick drives each shard's
//! timers ([`Shard::tick`]), whose writes take the same path. No step ever waits: what
//! needs the network (transaction markers) is an effect ([`Shard::Effect`]), handed
//! once committed to a worker of the coordinator, which reports back with a new step.

mod log;
#[cfg(test)]
mod partition_log_tests;
mod runtime;
#[cfg(test)]
mod runtime_tests;
pub(crate) mod timeline;

use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

#[cfg(test)]
pub(crate) use log::CoordinatorLog;
#[cfg(test)]
pub(crate) use log::MemoryLog;
pub(crate) use log::{LogSource, PartitionLogs};
pub(crate) use runtime::{CoordinatorRuntime, RuntimeConfig};

/// The time a step runs at: the runtime reads the clock, steps never do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    pub(crate) at: Instant,
    /// Milliseconds since the Unix epoch (Kafka's timestamps).
    pub(crate) ms: i64,
}

/// What a step writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write<R> {
    Nothing,
    /// Records in one batch; a transactional batch of `producer` (id, epoch) if given.
    Records {
        records: Vec<R>,
        producer: Option<(i64, i16)>,
    },
    /// A transaction marker (control batch) for `producer_id`'s transaction.
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
}

/// A step's follow-up: runs on the shard once the step's write is committed (`Ok`) or
/// has failed; may change only the shard's in-memory state.
pub(crate) type Then<S> = Box<dyn FnOnce(&mut S, Result<(), CoordinatorError>) + Send>;

/// What a step returns: what to write, what to answer, and what to do after.
pub(crate) struct Outcome<S: Shard, R> {
    pub(crate) write: Write<S::Record>,
    pub(crate) response: R,
    /// Handed to the coordinator's effect worker once the write is committed.
    pub(crate) effects: Vec<S::Effect>,
    pub(crate) then: Option<Then<S>>,
}

impl<S: Shard, R> Outcome<S, R> {
    /// Writes nothing, answers `response`.
    pub(crate) fn answer(response: R) -> Self {
        Outcome {
            write: Write::Nothing,
            response,
            effects: Vec::new(),
            then: None,
        }
    }

    /// Writes `records` (nothing if empty), answers `response`.
    pub(crate) fn records(records: Vec<S::Record>, response: R) -> Self {
        let write = if records.is_empty() {
            Write::Nothing
        } else {
            Write::Records {
                records,
                producer: None,
            }
        };
        Outcome {
            write,
            response,
            effects: Vec::new(),
            then: None,
        }
    }

    pub(crate) fn with_effects(mut self, effects: Vec<S::Effect>) -> Self {
        self.effects = effects;
        self
    }

    pub(crate) fn then(
        mut self,
        then: impl FnOnce(&mut S, Result<(), CoordinatorError>) + Send + 'static,
    ) -> Self {
        self.then = Some(Box::new(then));
        self
    }
}

/// One partition's coordinator state machine.
pub(crate) trait Shard: Send + Sized + 'static {
    type Record: Send + 'static;
    /// Work for the coordinator outside the shard (e.g. transaction markers).
    type Effect: Send + 'static;

    /// The record's key and value (`None`: a tombstone) as stored.
    fn encode(record: &Self::Record) -> Result<(Vec<u8>, Option<Vec<u8>>), CoordinatorError>;

    /// A stored record back; `Err` is logged and the record skipped on load.
    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self::Record, String>;

    /// Applies the record at `offset` (of `producer`'s transaction when it came in a
    /// transactional batch): the only way durable state changes, at load and after an
    /// append alike.
    fn replay(&mut self, offset: i64, producer: Option<i64>, record: Self::Record);

    /// Applies a transaction marker at `offset`.
    fn replay_marker(&mut self, offset: i64, producer_id: i64, commit: bool) {
        let _ = (offset, producer_id, commit);
    }

    /// Every record below `offset` is committed.
    fn commit(&mut self, offset: i64);

    /// The partition is loaded: effects it implies (e.g. markers of transactions that
    /// were deciding when the last leader stopped).
    fn loaded(&mut self, now: Now) -> Vec<Self::Effect> {
        let _ = now;
        Vec::new()
    }

    /// The clock moved on (every [`RuntimeConfig::tick`]).
    fn tick(&mut self, now: Now) -> Outcome<Self, ()>;

    /// This node stops coordinating the partition: answer whatever is parked.
    fn unload(&mut self) {}
}

/// Why a coordinator request could not be served, as the runtime sees it; the Kafka
/// error code comes from [`CoordinatorError::code`] at the protocol edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CoordinatorError {
    #[error("this node does not coordinate the key's partition")]
    NotCoordinator,
    #[error("the coordinator is loading its partition")]
    LoadInProgress,
    #[error("the coordinator cannot serve right now: {0}")]
    NotAvailable(String),
    #[error("the write was not replicated within {0:?}")]
    Timeout(Duration),
    #[error("the records are larger than the partition accepts")]
    TooLarge,
    /// A transaction marker the partition refused as older than what it holds.
    #[error(transparent)]
    StaleMarker(#[from] crate::replica::StaleMarker),
}

impl CoordinatorError {
    /// Kafka's codes for a coordinator failure: clients look the coordinator up again
    /// on NOT_COORDINATOR and retry the others.
    pub(crate) fn code(&self) -> i16 {
        match self {
            CoordinatorError::NotCoordinator => ResponseError::NotCoordinator.code(),
            CoordinatorError::LoadInProgress => ResponseError::CoordinatorLoadInProgress.code(),
            CoordinatorError::NotAvailable(_) | CoordinatorError::Timeout(_) => {
                ResponseError::CoordinatorNotAvailable.code()
            }
            CoordinatorError::TooLarge => ResponseError::RecordListTooLarge.code(),
            CoordinatorError::StaleMarker(e) => e.code(),
        }
    }
}
