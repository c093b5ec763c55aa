//! One share partition's state at the partition leader (KIP-932): which records of the
//! log a share group has in flight, in what state, for whom, and until when.
//!
//! The share-partition start offset (SPSO) is the first offset not yet finished with;
//! everything below it is done (acknowledged or archived). The end offset (SPEO) is one
//! past the last offset ever acquired. Every offset in between is in flight, with
//! Kafka's states: AVAILABLE (to be delivered again), ACQUIRED (locked for one member
//! until its acquisition lock runs out), ACKNOWLEDGED, ARCHIVED. A record released or
//! whose lock expired goes back to AVAILABLE unless it reached the delivery limit, then
//! it is ARCHIVED. The window between SPSO and SPEO is bounded by the in-flight limit
//! (`group.share.partition.max.record.locks`).
//!
//! With a dead-letter topic (KIP-1191: the group's `errors.deadletterqueue.topic.name`),
//! a record REJECTed, or whose delivery count reached the limit, goes to ARCHIVING
//! instead (Kafka's state 3, stored as such): it is not delivered again and holds the
//! SPSO until its copy is on the dead-letter topic (`dead_letters`, then
//! `dead_lettered`), when it becomes ARCHIVED. A new leader restores ARCHIVING and
//! writes the copy again, so a failover can duplicate a copy but never lose one.
//!
//! This type is a pure state machine: no clock of its own (callers pass `now`), no I/O.
//! Lock expiry is applied when the partition is next looked at (`expire_locks`), which
//! is when a fetch could hand the record out again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::state::records::StateBatch;

/// Kafka's acknowledge types as they travel in ShareFetch / ShareAcknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckType {
    /// An offset the client saw no record for (a compacted or control offset).
    Gap,
    Accept,
    Release,
    Reject,
    /// KIP-1222 (ShareFetch / ShareAcknowledge v2): the member keeps the record and its
    /// acquisition lock starts again, for a record that takes longer to process than
    /// one lock; the delivery count does not change (it is not a new delivery).
    Renew,
}

impl AckType {
    pub(crate) fn from_code(code: i8) -> Option<AckType> {
        match code {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    /// On its way to the dead-letter topic (KIP-1191): not deliverable, not finished.
    Archiving,
    Archived,
}

/// Why a record goes to the dead-letter topic: the `__dlq.errors.message` header,
/// Kafka's `ShareGroupDLQManager.CLIENT_REJECT` and `DELIVERY_COUNT_EXCEEDED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadLetterCause {
    ClientReject,
    DeliveryCountExceeded,
}

impl DeadLetterCause {
    pub(crate) fn message(self) -> &'static str {
        match self {
            DeadLetterCause::ClientReject => "Offset rejected by client.",
            DeadLetterCause::DeliveryCountExceeded => {
                "Offset delivery count exceeded the threshold."
            }
        }
    }
}

/// One record to copy to the dead-letter topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeadLetter {
    pub(crate) offset: i64,
    pub(crate) delivery_count: i16,
    pub(crate) cause: DeadLetterCause,
}

impl RecordState {
    fn finished(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

#[derive(Debug, Clone)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
    /// The member holding the acquisition lock, and when it runs out.
    lock: Option<(String, Instant)>,
    /// ARCHIVING: why, and whether its copy is being written now.
    dead_letter: Option<(DeadLetterCause, bool)>,
}

impl InFlight {
    /// REJECTed or at the delivery limit: ARCHIVING with a dead-letter topic, else
    /// ARCHIVED. Counted in `archived`.
    fn give_up(&mut self, cause: DeadLetterCause, dead_letter: bool, archived: &mut u64) {
        *archived = archived.saturating_add(1);
        self.lock = None;
        if dead_letter {
            self.state = RecordState::Archiving;
            self.dead_letter = Some((cause, false));
        } else {
            self.state = RecordState::Archived;
        }
    }
}

/// The limits a share partition works under (the group's, see `share::config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShareLimits {
    pub(crate) lock_duration: Duration,
    pub(crate) delivery_limit: i16,
    pub(crate) max_in_flight: i64,
    /// The group has a dead-letter topic (KIP-1191).
    pub(crate) dead_letter: bool,
}

/// A contiguous run of records acquired by one fetch, all with the same delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Acquired {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) delivery_count: i16,
}

/// Why an acknowledgement was refused (Kafka's INVALID_RECORD_STATE / INVALID_REQUEST).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AckError {
    #[error("offset {0} is not acquired by this member")]
    NotAcquired(i64),
    #[error("acknowledgement batch {0}..={1} is malformed")]
    Malformed(i64, i64),
}

/// What a share partition holds now, for its gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShareGauges {
    /// Records between SPSO and SPEO not finished with (available, acquired, or on
    /// their way to the dead-letter topic).
    pub(crate) in_flight: u64,
    /// Records acquired by a member now.
    pub(crate) acquired: u64,
    /// Records finished with above SPSO (they wait for the records below them).
    pub(crate) finished_above_start: u64,
}

/// Transitions since they were last taken (`take_transitions`), for the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ShareTransitions {
    /// Records acquired again (a delivery count above 1).
    pub(crate) redelivered: u64,
    /// Records given up on (REJECTed, or at the delivery limit).
    pub(crate) archived: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct SharePartition {
    start: i64,
    end: i64,
    in_flight: BTreeMap<i64, InFlight>,
    limits: ShareLimits,
    /// No dead-letter copy is handed out before this (after a failed write).
    dead_letter_retry_at: Option<Instant>,
    transitions: ShareTransitions,
}

impl SharePartition {
    /// A share partition that starts at `start` (from `share.auto.offset.reset`, or the
    /// state the share coordinator kept).
    pub(crate) fn new(start: i64, limits: ShareLimits) -> SharePartition {
        SharePartition {
            start,
            end: start,
            in_flight: BTreeMap::new(),
            limits,
            dead_letter_retry_at: None,
            transitions: ShareTransitions::default(),
        }
    }

    /// The gauges' values now.
    pub(crate) fn gauges(&self) -> ShareGauges {
        let mut gauges = ShareGauges {
            in_flight: 0,
            acquired: 0,
            finished_above_start: 0,
        };
        for r in self.in_flight.values() {
            if r.state.finished() {
                gauges.finished_above_start += 1;
            } else {
                gauges.in_flight += 1;
            }
            if r.state == RecordState::Acquired {
                gauges.acquired += 1;
            }
        }
        gauges
    }

    /// The transitions counted since the last call.
    pub(crate) fn take_transitions(&mut self) -> ShareTransitions {
        std::mem::take(&mut self.transitions)
    }

    /// The share-partition start offset (SPSO): every record below it is done with.
    pub(crate) fn start_offset(&self) -> i64 {
        self.start
    }

    #[cfg(test)]
    pub(crate) fn end_offset(&self) -> i64 {
        self.end
    }

    pub(crate) fn set_limits(&mut self, limits: ShareLimits) {
        self.limits = limits;
    }

    /// Records in flight between SPSO and SPEO, and how many of them are acquired.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let acquired = self
            .in_flight
            .values()
            .filter(|r| r.state == RecordState::Acquired)
            .count();
        (self.in_flight.len(), acquired)
    }

    #[cfg(test)]
    pub(crate) fn state_of(&self, offset: i64) -> Option<(RecordState, i16)> {
        self.in_flight
            .get(&offset)
            .map(|r| (r.state, r.delivery_count))
    }

    /// Where the next fetch should read from: the first record to deliver again, else
    /// the end offset.
    pub(crate) fn next_fetch_offset(&self) -> i64 {
        self.in_flight
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map(|(o, _)| *o)
            .unwrap_or(self.end)
    }

    /// The earliest acquisition lock deadline, for a parked fetch to wake at.
    pub(crate) fn next_lock_deadline(&self) -> Option<Instant> {
        self.in_flight
            .values()
            .filter_map(|r| r.lock.as_ref().map(|(_, at)| *at))
            .min()
    }

    /// The log moved its start past records we still hold (retention, DeleteRecords):
    /// they are gone, and so is their place in the window.
    pub(crate) fn log_start_moved(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.in_flight = self.in_flight.split_off(&log_start);
        self.start = log_start;
        self.end = self.end.max(log_start);
    }

    /// Acquires, for `member`, up to `max_records` records of the log batches `batches`
    /// (inclusive offset ranges of whole batches as read): records to deliver again
    /// first where they fall in the batches, then new records past the end offset while
    /// the in-flight window has room.
    pub(crate) fn acquire(
        &mut self,
        member: &str,
        batches: &[(i64, i64)],
        max_records: usize,
        now: Instant,
    ) -> Vec<Acquired> {
        let deadline = now + self.limits.lock_duration;
        let mut out: Vec<Acquired> = Vec::new();
        let mut taken = 0usize;
        for &(first, last) in batches {
            let mut offset = first.max(self.start);
            while offset <= last && taken < max_records {
                let delivery_count = if offset < self.end {
                    match self.in_flight.get_mut(&offset) {
                        Some(r) if r.state == RecordState::Available => {
                            r.state = RecordState::Acquired;
                            r.delivery_count = r.delivery_count.saturating_add(1);
                            if r.delivery_count > 1 {
                                self.transitions.redelivered += 1;
                            }
                            r.lock = Some((member.to_string(), deadline));
                            Some(r.delivery_count)
                        }
                        _ => None,
                    }
                } else if self.end - self.start < self.limits.max_in_flight {
                    // Offsets between the end and this batch hold no records.
                    self.end = offset + 1;
                    self.in_flight.insert(
                        offset,
                        InFlight {
                            state: RecordState::Acquired,
                            delivery_count: 1,
                            lock: Some((member.to_string(), deadline)),
                            dead_letter: None,
                        },
                    );
                    Some(1)
                } else {
                    break;
                };
                if let Some(count) = delivery_count {
                    taken += 1;
                    match out.last_mut() {
                        Some(run) if run.last + 1 == offset && run.delivery_count == count => {
                            run.last = offset;
                        }
                        _ => out.push(Acquired {
                            first: offset,
                            last: offset,
                            delivery_count: count,
                        }),
                    }
                }
                offset += 1;
            }
        }
        self.advance_start();
        out
    }

    /// Applies one acknowledgement batch of `member` at `now`: `types` holds one type
    /// for the whole range or one per offset. All or nothing: a batch naming an offset
    /// the member does not hold (never acquired, acquired by another, or whose lock ran
    /// out by `now`) changes nothing.
    pub(crate) fn acknowledge(
        &mut self,
        member: &str,
        first: i64,
        last: i64,
        types: &[AckType],
        now: Instant,
    ) -> Result<(), AckError> {
        let span = last
            .checked_sub(first)
            .and_then(|d| d.checked_add(1))
            .filter(|n| *n > 0)
            .ok_or(AckError::Malformed(first, last))?;
        if types.is_empty() || (types.len() != 1 && i64::try_from(types.len()) != Ok(span)) {
            return Err(AckError::Malformed(first, last));
        }
        let type_at = |offset: i64| {
            let i = usize::try_from(offset - first).unwrap_or(0);
            types.get(i).copied().unwrap_or(types[0])
        };
        for offset in first..=last {
            let kind = if types.len() == 1 {
                types[0]
            } else {
                type_at(offset)
            };
            if kind == AckType::Gap
                && (offset < self.start || !self.in_flight.contains_key(&offset))
            {
                continue;
            }
            // A lock that ran out is not held even before `expire_locks` has seen it:
            // the record may already be promised to another member's fetch.
            let held = self.in_flight.get(&offset).is_some_and(|r| {
                r.state == RecordState::Acquired
                    && r.lock
                        .as_ref()
                        .is_some_and(|(m, at)| m == member && *at > now)
            });
            if !held {
                return Err(AckError::NotAcquired(offset));
            }
        }
        for offset in first..=last {
            let kind = if types.len() == 1 {
                types[0]
            } else {
                type_at(offset)
            };
            let limit = self.limits.delivery_limit;
            let dead_letter = self.limits.dead_letter;
            let renewed_until = now + self.limits.lock_duration;
            if let Some(r) = self.in_flight.get_mut(&offset) {
                r.lock = None;
                match kind {
                    AckType::Accept => r.state = RecordState::Acknowledged,
                    // An offset without a record has nothing to copy.
                    AckType::Gap => r.state = RecordState::Archived,
                    AckType::Reject => r.give_up(
                        DeadLetterCause::ClientReject,
                        dead_letter,
                        &mut self.transitions.archived,
                    ),
                    AckType::Release if r.delivery_count >= limit => {
                        r.give_up(
                            DeadLetterCause::DeliveryCountExceeded,
                            dead_letter,
                            &mut self.transitions.archived,
                        );
                    }
                    AckType::Release => r.state = RecordState::Available,
                    // Still ACQUIRED, same delivery count, a whole new lock.
                    AckType::Renew => r.lock = Some((member.to_string(), renewed_until)),
                }
            }
        }
        self.advance_start();
        Ok(())
    }

    /// Records whose acquisition lock ran out go back to AVAILABLE (or are ARCHIVED at
    /// the delivery limit). Returns whether any became deliverable.
    pub(crate) fn expire_locks(&mut self, now: Instant) -> bool {
        let limit = self.limits.delivery_limit;
        let dead_letter = self.limits.dead_letter;
        let mut freed = false;
        for r in self.in_flight.values_mut() {
            if r.state == RecordState::Acquired && r.lock.as_ref().is_some_and(|(_, at)| *at <= now)
            {
                r.lock = None;
                if r.delivery_count >= limit {
                    r.give_up(
                        DeadLetterCause::DeliveryCountExceeded,
                        dead_letter,
                        &mut self.transitions.archived,
                    );
                } else {
                    r.state = RecordState::Available;
                    freed = true;
                }
            }
        }
        self.advance_start();
        freed
    }

    /// A member's share session ended: what it holds is released (delivery counts stay).
    pub(crate) fn release_member(&mut self, member: &str) -> bool {
        let limit = self.limits.delivery_limit;
        let dead_letter = self.limits.dead_letter;
        let mut freed = false;
        for r in self.in_flight.values_mut() {
            if r.state == RecordState::Acquired && r.lock.as_ref().is_some_and(|(m, _)| m == member)
            {
                r.lock = None;
                if r.delivery_count >= limit {
                    r.give_up(
                        DeadLetterCause::DeliveryCountExceeded,
                        dead_letter,
                        &mut self.transitions.archived,
                    );
                } else {
                    r.state = RecordState::Available;
                    freed = true;
                }
            }
        }
        self.advance_start();
        freed
    }

    /// The durable part of the state (Kafka's share snapshot): the start offset and
    /// every in-flight run of offsets with one delivery state and count. An acquired
    /// record is stored as available: its lock does not outlive this leader.
    pub(crate) fn snapshot(&self) -> (i64, Vec<StateBatch>) {
        let mut batches: Vec<StateBatch> = Vec::new();
        for (offset, r) in &self.in_flight {
            let state = match r.state {
                RecordState::Available | RecordState::Acquired => 0,
                RecordState::Acknowledged => 2,
                RecordState::Archiving => 3,
                RecordState::Archived => 4,
            };
            match batches.last_mut() {
                Some(b)
                    if b.last + 1 == *offset
                        && b.state == state
                        && b.delivery_count == r.delivery_count =>
                {
                    b.last = *offset;
                }
                _ => batches.push(StateBatch {
                    first: *offset,
                    last: *offset,
                    state,
                    delivery_count: r.delivery_count,
                }),
            }
        }
        (self.start, batches)
    }

    /// A share partition from its stored state (at most `limits.max_in_flight`
    /// offsets past the start are taken: a snapshot is never larger).
    pub(crate) fn from_snapshot(
        start: i64,
        batches: &[StateBatch],
        limits: ShareLimits,
    ) -> SharePartition {
        let mut sp = SharePartition::new(start, limits);
        for b in batches {
            let last = b
                .last
                .min(start.saturating_add(limits.max_in_flight).saturating_sub(1));
            for offset in b.first.max(start)..=last {
                let state = match b.state {
                    2 => RecordState::Acknowledged,
                    3 => RecordState::Archiving,
                    4 => RecordState::Archived,
                    _ => RecordState::Available,
                };
                // The cause is not stored: as Kafka's `maybeResumeDlqArchiving`, a
                // record at the delivery limit used it up, any other was rejected.
                let dead_letter = (state == RecordState::Archiving).then(|| {
                    let cause = if b.delivery_count >= limits.delivery_limit {
                        DeadLetterCause::DeliveryCountExceeded
                    } else {
                        DeadLetterCause::ClientReject
                    };
                    (cause, false)
                });
                sp.in_flight.insert(
                    offset,
                    InFlight {
                        state,
                        delivery_count: b.delivery_count,
                        lock: None,
                        dead_letter,
                    },
                );
                sp.end = sp.end.max(offset + 1);
            }
        }
        sp.advance_start();
        sp
    }

    /// The ARCHIVING records whose copy is not being written (at most `max`), now
    /// marked as being written; none before the retry time of a failed write.
    pub(crate) fn dead_letters(&mut self, max: usize, now: Instant) -> Vec<DeadLetter> {
        if self.dead_letter_retry_at.is_some_and(|at| now < at) {
            return Vec::new();
        }
        self.dead_letter_retry_at = None;
        let mut out = Vec::new();
        for (offset, r) in &mut self.in_flight {
            if out.len() >= max {
                break;
            }
            if let Some((cause, sending @ false)) = r.dead_letter.as_mut() {
                *sending = true;
                out.push(DeadLetter {
                    offset: *offset,
                    delivery_count: r.delivery_count,
                    cause: *cause,
                });
            }
        }
        out
    }

    /// The copies of `offsets` are on the dead-letter topic (or, misconfigured, will
    /// never be): ARCHIVING becomes ARCHIVED.
    pub(crate) fn dead_lettered(&mut self, offsets: &[i64]) {
        for offset in offsets {
            if let Some(r) = self.in_flight.get_mut(offset) {
                if r.state == RecordState::Archiving {
                    r.state = RecordState::Archived;
                    r.dead_letter = None;
                }
            }
        }
        self.advance_start();
    }

    /// Writing the copies of `offsets` failed: they are handed out again from
    /// `retry_at`.
    pub(crate) fn dead_letter_failed(&mut self, offsets: &[i64], retry_at: Instant) {
        for offset in offsets {
            if let Some((_, sending)) = self
                .in_flight
                .get_mut(offset)
                .and_then(|r| r.dead_letter.as_mut())
            {
                *sending = false;
            }
        }
        self.dead_letter_retry_at = Some(retry_at);
    }

    /// Finished records at the front leave the window: SPSO moves to the first record
    /// still in flight (or to SPEO when none is).
    fn advance_start(&mut self) {
        while let Some(entry) = self.in_flight.first_entry() {
            if !entry.get().state.finished() {
                break;
            }
            entry.remove();
        }
        self.start = self
            .in_flight
            .keys()
            .next()
            .copied()
            .unwrap_or(self.end)
            .max(self.start);
    }
}
