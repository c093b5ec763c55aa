//! A transactional id's state and the rules for moving it. Every function here is pure:
//! it looks at the current state and a request and answers with the next state to
//! write (or why not, a [`TxnError`]). The coordinator writes that state as a record and
//! only replaying the record changes memory.
//!
//! ```text
//! Empty / CompleteCommit / CompleteAbort --AddPartitions/AddOffsets--> Ongoing
//! Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
//! Ongoing --EndTxn(abort)--> PrepareAbort --markers written--> CompleteAbort
//! Ongoing --timeout, or InitProducerId fencing--> PrepareEpochFence (epoch + 1)
//!         --ABORT markers with the new epoch written--> CompleteAbort
//! ```
//!
//! Transaction version 2 (KIP-890 part 2; EndTxn v5): the decision itself bumps the
//! epoch (Ongoing --EndTxn v5--> PrepareCommit/PrepareAbort at epoch + 1), so the markers
//! carry the new epoch and fence any late write of the old one, and the client goes on
//! with the new epoch. An epoch that would reach `i16::MAX` after that bump takes a new
//! producer id, which replaces the old one when the transaction completes (the markers
//! still go out under the old id). A retried EndTxn v5 (the old epoch, one below) is
//! recognised and answered with the producer to continue with.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use crate::coordinator::CoordinatorError;

/// Why a transaction request is refused; its Kafka code at the protocol edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TxnError {
    #[error("the producer id is not this transactional id's")]
    InvalidProducerIdMapping,
    #[error("a newer producer has taken over this transactional id")]
    Fenced,
    #[error("the transaction's last decision is still being written")]
    ConcurrentTransactions,
    #[error("the transaction is not in a state that allows this")]
    InvalidTxnState,
    #[error("the transaction timeout is out of range")]
    InvalidTransactionTimeout,
    #[error("no such transactional id")]
    TransactionalIdNotFound,
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    #[error("no producer id could be had")]
    NoProducerId { code: i16 },
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
}

impl TxnError {
    /// "Not now": the transaction's last decision is being written, or its coordinator
    /// is elsewhere or loading. A produce answers these with NOT_ENOUGH_REPLICAS.
    pub(crate) fn is_retriable(&self) -> bool {
        matches!(
            self,
            TxnError::ConcurrentTransactions | TxnError::Coordinator(_)
        )
    }

    /// The Kafka code; `producer_fenced` tells whether the request's version knows
    /// PRODUCER_FENCED (older ones hear INVALID_PRODUCER_EPOCH).
    pub(crate) fn code(&self, producer_fenced: bool) -> i16 {
        match self {
            TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping.code(),
            TxnError::Fenced if producer_fenced => ResponseError::ProducerFenced.code(),
            TxnError::Fenced => ResponseError::InvalidProducerEpoch.code(),
            TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions.code(),
            TxnError::InvalidTxnState => ResponseError::InvalidTxnState.code(),
            TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout.code(),
            TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound.code(),
            TxnError::InvalidRequest(_) => ResponseError::InvalidRequest.code(),
            TxnError::NoProducerId { code } => *code,
            TxnError::Coordinator(e) => e.code(),
        }
    }
}

/// Kafka's transaction states, with the codes its transaction log uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub(crate) fn code(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub(crate) fn from_code(code: i8) -> Option<TxnState> {
        Some(match code {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<TxnState> {
        (0..=7)
            .filter_map(TxnState::from_code)
            .find(|s| s.name() == name)
    }

    /// Decided but its markers are not all written yet.
    pub(crate) fn is_preparing(self) -> bool {
        matches!(
            self,
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence
        )
    }

    /// What the markers of a preparing transaction say: `Some(true)` for COMMIT.
    pub(crate) fn marker_commits(self) -> Option<bool> {
        match self {
            TxnState::PrepareCommit => Some(true),
            TxnState::PrepareAbort | TxnState::PrepareEpochFence => Some(false),
            _ => None,
        }
    }
}

/// A TxnOffsetCommit waiting for its transaction to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingOffset {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: Option<String>,
}

/// (group, topic, partition).
pub(crate) type OffsetKey = (String, String, i32);

/// The group member that sent a group's TxnOffsetCommits; the offsets are committed in
/// its name when the transaction commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Committer {
    pub(crate) generation: i32,
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
}

impl Default for Committer {
    fn default() -> Self {
        Committer {
            generation: -1,
            member_id: String::new(),
            instance_id: None,
        }
    }
}

/// What the coordinator remembers about one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnMeta {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) timeout_ms: i32,
    pub(crate) state: TxnState,
    /// Partitions written in the current transaction (they get markers).
    pub(crate) partitions: BTreeSet<(String, i32)>,
    /// Consumer groups added with AddOffsetsToTxn, and who commits for each.
    pub(crate) groups: BTreeMap<String, Committer>,
    pub(crate) offsets: BTreeMap<OffsetKey, PendingOffset>,
    pub(crate) last_update_ms: i64,
    /// When the current transaction began (-1 when none is open).
    pub(crate) start_ms: i64,
    /// The transaction is ended the TV2 way (EndTxn v5, or opened by a TV2 request).
    pub(crate) tv2: bool,
    /// TV2 only: the producer id that takes over when this decided transaction
    /// completes, because its epoch is exhausted (-1: none).
    pub(crate) next_producer_id: i64,
    /// The producer id before the last such rotation (-1: none), so that a retried
    /// EndTxn of the old id is recognised.
    pub(crate) previous_producer_id: i64,
}

/// What EndTxn v5 (TV2) comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EndV2 {
    /// The decision to write, its epoch bumped.
    Decide(TxnMeta),
    /// The same decision was already completed: a retry, answered with success.
    Retry,
    /// The epoch is exhausted: a new producer id is needed first.
    NeedProducerId,
}

/// The highest epoch that may still be bumped by a TV2 decision (Kafka's
/// `isEpochExhausted`: `epoch >= Short.MAX_VALUE - 1`).
fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

impl TxnMeta {
    pub(crate) fn new(producer_id: i64, epoch: i16, timeout_ms: i32, now_ms: i64) -> TxnMeta {
        TxnMeta {
            producer_id,
            epoch,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeMap::new(),
            offsets: BTreeMap::new(),
            last_update_ms: now_ms,
            start_ms: -1,
            tv2: false,
            next_producer_id: -1,
            previous_producer_id: -1,
        }
    }

    /// The producer a TV2 client continues with once this decision completes: the new
    /// producer id at epoch 0 after a rotation, else this one.
    pub(crate) fn continue_with(&self) -> (i64, i16) {
        if self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.epoch)
        }
    }

    /// EndTxn v5: the decision under a bumped epoch. `fresh` is a new producer id for
    /// when the epoch is exhausted. The epoch rules are Kafka's for TV2: a transaction
    /// already decided accepts only a retry (the epoch one below the bumped one, or the
    /// last epoch of the previous producer id after a rotation); else the epoch must
    /// be the current one.
    pub(crate) fn end_v2(
        &self,
        producer: (i64, i16),
        commit: bool,
        fresh: Option<i64>,
        now_ms: i64,
    ) -> Result<EndV2, TxnError> {
        let (producer_id, epoch) = producer;
        let decided_v2 = self.tv2 && self.state != TxnState::PrepareEpochFence;
        let retry_bump = decided_v2
            && producer_id == self.producer_id
            && epoch.checked_add(1) == Some(self.epoch);
        let retry_rotation = decided_v2
            && self.previous_producer_id == producer_id
            && epoch == i16::MAX - 1
            && self.epoch == 0;
        if producer_id != self.producer_id && !retry_rotation {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let valid = match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort if decided_v2 => retry_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort if decided_v2 => {
                retry_bump || retry_rotation
            }
            _ => epoch == self.epoch,
        };
        if !valid {
            return Err(TxnError::Fenced);
        }
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                let next_producer_id = if epoch_exhausted(self.epoch) {
                    match fresh {
                        Some(id) => id,
                        None => return Ok(EndV2::NeedProducerId),
                    }
                } else {
                    -1
                };
                let mut next = self.touched(now_ms);
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                // Not past i16::MAX: an exhausted epoch (MAX - 1) is bumped once more,
                // for the markers, and then the new producer id takes over.
                next.epoch = self.epoch.saturating_add(1);
                next.tv2 = true;
                next.next_producer_id = next_producer_id;
                Ok(EndV2::Decide(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(EndV2::Retry),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    fn touched(&self, now_ms: i64) -> TxnMeta {
        let mut next = self.clone();
        next.last_update_ms = now_ms;
        next
    }

    /// The error for a request carrying `producer_id`/`epoch`, if they are not current.
    pub(crate) fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if epoch != self.epoch {
            return Err(TxnError::Fenced);
        }
        Ok(())
    }

    /// The state after adding partitions or a consumer group; `None` when nothing changes.
    pub(crate) fn add(
        &self,
        partitions: &[(String, i32)],
        group: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<TxnMeta>, TxnError> {
        match self.state {
            TxnState::Ongoing => {
                let known = partitions.iter().all(|p| self.partitions.contains(p))
                    && group.is_none_or(|g| self.groups.contains_key(g));
                if known {
                    return Ok(None);
                }
                let mut next = self.touched(now_ms);
                next.partitions.extend(partitions.iter().cloned());
                if let Some(g) = group {
                    next.groups.entry(g.to_string()).or_default();
                }
                Ok(Some(next))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = self.touched(now_ms);
                next.state = TxnState::Ongoing;
                next.start_ms = now_ms;
                next.partitions = partitions.iter().cloned().collect();
                next.groups = group
                    .map(|g| (g.to_string(), Committer::default()))
                    .into_iter()
                    .collect();
                next.offsets.clear();
                Ok(Some(next))
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead => Err(TxnError::InvalidTxnState),
        }
    }

    /// The state after a TxnOffsetCommit as an earlier release recorded it: the offsets
    /// kept in the transaction itself (today they go to the group's coordinator; a
    /// transaction loaded with such offsets hands them over before its markers).
    #[cfg(test)]
    pub(crate) fn with_offsets(
        &self,
        group: &str,
        committer: Committer,
        offsets: &[(String, i32, PendingOffset)],
        now_ms: i64,
    ) -> Result<TxnMeta, TxnError> {
        if self.state != TxnState::Ongoing || !self.groups.contains_key(group) {
            return Err(TxnError::InvalidTxnState);
        }
        let mut next = self.touched(now_ms);
        next.groups.insert(group.to_string(), committer);
        for (topic, partition, o) in offsets {
            next.offsets
                .insert((group.to_string(), topic.clone(), *partition), o.clone());
        }
        Ok(next)
    }

    /// The state after EndTxn; `None` when the same decision was already completed (a
    /// retried EndTxn), which is answered with success.
    pub(crate) fn end(&self, commit: bool, now_ms: i64) -> Result<Option<TxnMeta>, TxnError> {
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = self.touched(now_ms);
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                Ok(Some(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The abort the coordinator forces on an open transaction (timeout, or a new
    /// producer with the same transactional id): the epoch moves on so the old producer
    /// is fenced at the coordinator and, through the markers, at every partition.
    pub(crate) fn fence(&self, now_ms: i64) -> TxnMeta {
        let mut next = self.touched(now_ms);
        next.state = TxnState::PrepareEpochFence;
        next.epoch = self.epoch.saturating_add(1);
        next
    }

    /// The state once every marker of a preparing transaction is written.
    pub(crate) fn completed(&self, now_ms: i64) -> Option<TxnMeta> {
        let commit = self.state.marker_commits()?;
        let mut next = self.touched(now_ms);
        next.state = if commit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        next.partitions.clear();
        next.groups.clear();
        next.offsets.clear();
        next.start_ms = -1;
        if self.next_producer_id >= 0 {
            // TV2 with an exhausted epoch: the markers went out under the old id; the
            // client goes on with the new one.
            next.previous_producer_id = self.producer_id;
            next.producer_id = self.next_producer_id;
            next.epoch = 0;
            next.next_producer_id = -1;
        }
        Some(next)
    }

    /// A new producer session for this id (InitProducerId): the epoch moves on, or a new
    /// producer id is needed (`None`) when the epoch is exhausted.
    pub(crate) fn bumped(&self, timeout_ms: i32, now_ms: i64) -> Option<TxnMeta> {
        if self.epoch >= i16::MAX - 1 {
            return None;
        }
        let mut next = TxnMeta::new(self.producer_id, self.epoch + 1, timeout_ms, now_ms);
        next.state = TxnState::Empty;
        Some(next)
    }

    /// Whether an open transaction has run past its timeout at `now_ms`.
    pub(crate) fn expired(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.start_ms >= 0
            && now_ms.saturating_sub(self.start_ms) > i64::from(self.timeout_ms)
    }

    /// Whether `topic`/`partition` may take this producer's transactional batches now.
    pub(crate) fn accepts(
        &self,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
    ) -> bool {
        self.state == TxnState::Ongoing
            && self.producer_id == producer_id
            && self.epoch == epoch
            && self.partitions.contains(&(topic.to_string(), partition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(t: &str, p: i32) -> (String, i32) {
        (t.to_string(), p)
    }

    #[test]
    fn commit_path() {
        let m = TxnMeta::new(7, 0, 1000, 10);
        let on = m.add(&[part("a", 0)], None, 20).unwrap().unwrap();
        assert_eq!(on.state, TxnState::Ongoing);
        assert_eq!(on.start_ms, 20);
        assert!(on.accepts(7, 0, "a", 0));
        assert!(!on.accepts(7, 0, "a", 1));
        assert!(!on.accepts(7, 1, "a", 0));
        assert_eq!(on.add(&[part("a", 0)], None, 30).unwrap(), None);
        let on = on.add(&[part("b", 1)], Some("g"), 30).unwrap().unwrap();
        assert_eq!(on.start_ms, 20, "adding more keeps the start time");
        let on = on
            .with_offsets(
                "g",
                Committer::default(),
                &[(
                    "in".into(),
                    3,
                    PendingOffset {
                        offset: 5,
                        leader_epoch: -1,
                        metadata: None,
                    },
                )],
                35,
            )
            .unwrap();
        assert_eq!(on.offsets.len(), 1);
        let prep = on.end(true, 40).unwrap().unwrap();
        assert_eq!(prep.state, TxnState::PrepareCommit);
        assert_eq!(prep.partitions.len(), 2);
        assert_eq!(prep.state.marker_commits(), Some(true));
        assert_eq!(prep.end(true, 41), Err(TxnError::ConcurrentTransactions));
        assert_eq!(
            prep.add(&[part("a", 0)], None, 41),
            Err(TxnError::ConcurrentTransactions)
        );
        let done = prep.completed(50).unwrap();
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty() && done.offsets.is_empty());
        assert_eq!(done.end(true, 60).unwrap(), None, "retried commit succeeds");
        assert_eq!(done.end(false, 60), Err(TxnError::InvalidTxnState));
        let again = done.add(&[part("c", 0)], None, 70).unwrap().unwrap();
        assert_eq!(again.partitions.len(), 1);
        assert_eq!(again.start_ms, 70);
    }

    #[test]
    fn offsets_need_the_group_added_and_an_open_transaction() {
        // TxnOffsetCommit is verified as a write to the group's offsets partition.
        let offsets = ("__consumer_offsets".to_string(), 12);
        let m = TxnMeta::new(7, 0, 1000, 10);
        assert!(
            !m.accepts(7, 0, &offsets.0, offsets.1),
            "no open transaction"
        );
        let on = m.add(&[part("a", 0)], None, 20).unwrap().unwrap();
        assert!(
            !on.accepts(7, 0, &offsets.0, offsets.1),
            "the group was not added"
        );
        let on = on
            .add(std::slice::from_ref(&offsets), Some("g"), 21)
            .unwrap()
            .unwrap();
        assert!(on.accepts(7, 0, &offsets.0, offsets.1));
        assert!(!on.accepts(7, 1, &offsets.0, offsets.1), "another epoch");
    }

    #[test]
    fn fencing_and_timeouts_abort_with_a_new_epoch() {
        let m = TxnMeta::new(7, 4, 1000, 0);
        let on = m.add(&[part("a", 0)], None, 100).unwrap().unwrap();
        assert!(!on.expired(1100));
        assert!(on.expired(1101));
        let fenced = on.fence(1200);
        assert_eq!(fenced.epoch, 5);
        assert_eq!(fenced.state, TxnState::PrepareEpochFence);
        assert_eq!(fenced.state.marker_commits(), Some(false));
        assert_eq!(fenced.check_producer(7, 4), Err(TxnError::Fenced));
        assert_eq!(
            fenced.check_producer(8, 5),
            Err(TxnError::InvalidProducerIdMapping)
        );
        let done = fenced.completed(1300).unwrap();
        assert_eq!(done.state, TxnState::CompleteAbort);
        let next = done.bumped(5000, 1400).unwrap();
        assert_eq!(
            (next.producer_id, next.epoch, next.timeout_ms),
            (7, 6, 5000)
        );
        assert_eq!(next.state, TxnState::Empty);
        let worn = TxnMeta::new(7, i16::MAX - 1, 1000, 0);
        assert_eq!(worn.bumped(1000, 1), None);
    }

    #[test]
    fn state_codes_and_names_round_trip() {
        for code in 0..=7 {
            let s = TxnState::from_code(code).unwrap();
            assert_eq!(s.code(), code);
            assert_eq!(TxnState::from_name(s.name()), Some(s));
        }
        assert_eq!(TxnState::from_code(8), None);
    }
}
