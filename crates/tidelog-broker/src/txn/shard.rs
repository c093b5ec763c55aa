//! [`TxnShard`]: the transaction coordinator's state for one `__transaction_state`
//! partition, and its steps (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn, the completion of a decided transaction, and the clock). Pure: each step
//! returns the next state of a transactional id as a record, and the markers a
//! decision needs as an effect ([`MarkerJob`]) for the marker worker (`markers`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::records::TxnRecord;
use super::state::{EndV2, PendingOffset, TxnError, TxnMeta, TxnState};
use super::TxnConfig;
use crate::coordinator::timeline::Timeline;
use crate::coordinator::{CoordinatorError, Now, Outcome, Shard};

/// How long a decided transaction's markers may take before they are handed out again
/// (the worker forgets jobs it could not finish, e.g. after a restart of this node).
const MARKER_RETRY: Duration = Duration::from_secs(5);

/// The markers one decided transaction still needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MarkerJob {
    pub(crate) transactional_id: String,
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) commit: bool,
    /// The leader epoch of the coordinator's partition, stamped into every marker.
    pub(crate) coordinator_epoch: i32,
    pub(crate) partitions: Vec<(String, i32)>,
    /// Offsets an earlier release kept in the transaction itself (group -> offsets):
    /// on commit they are handed to their groups before the markers are written.
    pub(crate) legacy_offsets: BTreeMap<String, Vec<(String, i32, PendingOffset)>>,
}

/// What InitProducerId comes to.
#[derive(Debug)]
pub(crate) enum InitAnswer {
    Done {
        producer_id: i64,
        epoch: i16,
    },
    /// A fresh producer id is needed: ask the controller, then run the step again.
    NeedProducerId,
    Failed(TxnError),
}

/// What EndTxn comes to.
#[derive(Debug)]
pub(crate) enum EndAnswer {
    Done {
        /// Fires when every marker is written (`None`: a retry of a completed end).
        completed: Option<oneshot::Receiver<()>>,
        /// The producer the client continues with (TV2: the bumped epoch, or a new id).
        producer: (i64, i16),
    },
    /// TV2 with an exhausted epoch: ask the controller for an id, then run again.
    NeedProducerId,
}

pub(crate) struct TxnShard {
    coordinator_epoch: i32,
    config: Arc<TxnConfig>,
    txns: Timeline<String, TxnMeta>,
    /// Decided transactions whose markers were handed to the worker, and when.
    handed_out: HashMap<String, Instant>,
    /// EndTxn callers waiting for their transaction to be complete.
    completions: HashMap<String, Vec<oneshot::Sender<()>>>,
    last_timeout_check: Option<Instant>,
}

impl TxnShard {
    pub(crate) fn new(coordinator_epoch: i32, config: Arc<TxnConfig>) -> TxnShard {
        TxnShard {
            coordinator_epoch,
            config,
            txns: Timeline::default(),
            handed_out: HashMap::new(),
            completions: HashMap::new(),
            last_timeout_check: None,
        }
    }

    fn record(id: &str, meta: Option<TxnMeta>) -> TxnRecord {
        TxnRecord {
            transactional_id: id.to_string(),
            value: meta,
        }
    }

    fn job(&self, id: &str, meta: &TxnMeta) -> Option<MarkerJob> {
        let commit = meta.state.marker_commits()?;
        let mut legacy_offsets: BTreeMap<String, Vec<(String, i32, PendingOffset)>> =
            BTreeMap::new();
        if commit {
            for ((group, topic, partition), offset) in &meta.offsets {
                legacy_offsets.entry(group.clone()).or_default().push((
                    topic.clone(),
                    *partition,
                    offset.clone(),
                ));
            }
        }
        Some(MarkerJob {
            transactional_id: id.to_string(),
            producer_id: meta.producer_id,
            producer_epoch: meta.epoch,
            commit,
            coordinator_epoch: self.coordinator_epoch,
            partitions: meta.partitions.iter().cloned().collect(),
            legacy_offsets,
        })
    }

    /// Writes `meta` as the new state of `id`, with the marker job it implies.
    fn write(&mut self, id: &str, meta: TxnMeta, now: Now) -> (Vec<TxnRecord>, Vec<MarkerJob>) {
        let job = self.job(id, &meta);
        if job.is_some() {
            self.handed_out.insert(id.to_string(), now.at);
        }
        (
            vec![Self::record(id, Some(meta))],
            job.into_iter().collect(),
        )
    }

    /// InitProducerId for `id`. `current`: the producer re-initialising itself (KIP-360);
    /// `fresh`: a producer id from the controller, when the step asked for one.
    pub(crate) fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
        fresh: Option<i64>,
        now: Now,
    ) -> Outcome<Self, InitAnswer> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Outcome::answer(InitAnswer::Failed(TxnError::InvalidTransactionTimeout));
        }
        let Some(meta) = self.txns.get(&id.to_string()).cloned() else {
            if current.is_some() {
                return Outcome::answer(InitAnswer::Failed(TxnError::InvalidProducerIdMapping));
            }
            let Some(producer_id) = fresh else {
                return Outcome::answer(InitAnswer::NeedProducerId);
            };
            let meta = TxnMeta::new(producer_id, 0, timeout_ms, now.ms);
            let (records, _) = self.write(id, meta, now);
            return Outcome::records(
                records,
                InitAnswer::Done {
                    producer_id,
                    epoch: 0,
                },
            );
        };
        // A fence and a bump may take the epoch up by two; past that a new id is due.
        if meta.epoch >= i16::MAX - 3 && fresh.is_none() {
            return Outcome::answer(InitAnswer::NeedProducerId);
        }
        if let Some((pid, epoch)) = current {
            // A producer re-initialising itself may do so at its own epoch, or one
            // behind after the coordinator aborted its transaction on timeout.
            let own = pid == meta.producer_id
                && (epoch == meta.epoch
                    || (epoch.saturating_add(1) == meta.epoch
                        && meta.state == TxnState::CompleteAbort));
            if !own {
                return Outcome::answer(InitAnswer::Failed(TxnError::Fenced));
            }
        }
        match meta.state {
            TxnState::Ongoing => {
                // Kafka's answer: abort the open transaction under a new epoch (so its
                // markers fence the old producer everywhere) and let the client retry
                // once that is done; its retry bumps the epoch again.
                let (records, jobs) = self.write(id, meta.fence(now.ms), now);
                Outcome::records(
                    records,
                    InitAnswer::Failed(TxnError::ConcurrentTransactions),
                )
                .with_effects(jobs)
            }
            state if state.is_preparing() => {
                Outcome::answer(InitAnswer::Failed(TxnError::ConcurrentTransactions))
            }
            _ => {
                let next = match (meta.bumped(timeout_ms, now.ms), fresh) {
                    (Some(next), _) => next,
                    (None, Some(producer_id)) => TxnMeta::new(producer_id, 0, timeout_ms, now.ms),
                    (None, None) => return Outcome::answer(InitAnswer::NeedProducerId),
                };
                let answer = InitAnswer::Done {
                    producer_id: next.producer_id,
                    epoch: next.epoch,
                };
                let (records, _) = self.write(id, next, now);
                Outcome::records(records, answer)
            }
        }
    }

    /// The state of `id` for a request of `producer`.
    fn current(&self, id: &str, producer: (i64, i16)) -> Result<TxnMeta, TxnError> {
        let meta = self
            .txns
            .get(&id.to_string())
            .cloned()
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        meta.check_producer(producer.0, producer.1)?;
        Ok(meta)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn, and the implicit adds of TV2 (Produce v12+,
    /// TxnOffsetCommit v5): the partitions (and the group) take part in the open
    /// transaction, which opens it. `tv2`: the request is a TV2 client's.
    pub(crate) fn add(
        &mut self,
        id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
        group: Option<&str>,
        tv2: bool,
        now: Now,
    ) -> Outcome<Self, Result<(), TxnError>> {
        let next = match self.current(id, producer).and_then(|meta| {
            let opens = meta.state != TxnState::Ongoing;
            let next = meta.add(partitions, group, now.ms)?;
            Ok(next.map(|mut n| {
                n.tv2 = tv2 || (!opens && meta.tv2);
                n
            }))
        }) {
            Ok(next) => next,
            Err(e) => return Outcome::answer(Err(e)),
        };
        let Some(next) = next else {
            return Outcome::answer(Ok(()));
        };
        let (records, _) = self.write(id, next, now);
        Outcome::records(records, Ok(()))
    }

    /// EndTxn: records the decision; the answer (once it is replicated) carries a
    /// receiver that fires when every marker is written and the transaction complete.
    pub(crate) fn end(
        &mut self,
        id: &str,
        producer: (i64, i16),
        commit: bool,
        now: Now,
    ) -> Outcome<Self, Result<Option<oneshot::Receiver<()>>, TxnError>> {
        let next = match self
            .current(id, producer)
            .and_then(|meta| meta.end(commit, now.ms))
        {
            Ok(next) => next,
            Err(e) => return Outcome::answer(Err(e)),
        };
        let Some(next) = next else {
            // The same decision, already complete: a retried EndTxn.
            return Outcome::answer(Ok(None));
        };
        let (records, jobs) = self.write(id, next, now);
        let (tx, rx) = oneshot::channel();
        self.completions.entry(id.to_string()).or_default().push(tx);
        Outcome::records(records, Ok(Some(rx))).with_effects(jobs)
    }

    /// EndTxn v5 (TV2): the decision under a bumped epoch; the answer names the producer
    /// the client continues with. `fresh`: a new producer id, when the step asked.
    pub(crate) fn end_v2(
        &mut self,
        id: &str,
        producer: (i64, i16),
        commit: bool,
        fresh: Option<i64>,
        now: Now,
    ) -> Outcome<Self, Result<EndAnswer, TxnError>> {
        let Some(meta) = self.txns.get(&id.to_string()).cloned() else {
            return Outcome::answer(Err(TxnError::InvalidProducerIdMapping));
        };
        let next = match meta.end_v2(producer, commit, fresh, now.ms) {
            Ok(EndV2::Decide(next)) => next,
            Ok(EndV2::Retry) => {
                return Outcome::answer(Ok(EndAnswer::Done {
                    completed: None,
                    producer: meta.continue_with(),
                }))
            }
            Ok(EndV2::NeedProducerId) => return Outcome::answer(Ok(EndAnswer::NeedProducerId)),
            Err(e) => return Outcome::answer(Err(e)),
        };
        let producer = next.continue_with();
        let (records, jobs) = self.write(id, next, now);
        let (tx, rx) = oneshot::channel();
        self.completions.entry(id.to_string()).or_default().push(tx);
        Outcome::records(
            records,
            Ok(EndAnswer::Done {
                completed: Some(rx),
                producer,
            }),
        )
        .with_effects(jobs)
    }

    /// Every marker of `id`'s decided transaction (of `producer_id` at `epoch`) is
    /// written: its Complete state. Nothing when the transaction has moved on.
    pub(crate) fn complete(
        &mut self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        now: Now,
    ) -> Outcome<Self, ()> {
        let Some(meta) = self.txns.get(&id.to_string()).cloned() else {
            return Outcome::answer(());
        };
        if meta.producer_id != producer_id || meta.epoch != epoch || !meta.state.is_preparing() {
            return Outcome::answer(());
        }
        let Some(next) = meta.completed(now.ms) else {
            return Outcome::answer(());
        };
        let id = id.to_string();
        Outcome::records(vec![Self::record(&id, Some(next))], ()).then(
            move |shard: &mut TxnShard, written| {
                if written.is_ok() {
                    shard.handed_out.remove(&id);
                    for waiter in shard.completions.remove(&id).unwrap_or_default() {
                        let _ = waiter.send(());
                    }
                }
            },
        )
    }

    /// Whether `topic`/`partition` may take `producer_id`'s transactional batches now
    /// (the latest state: what AddPartitionsToTxn answered).
    pub(crate) fn verify(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), TxnError> {
        let meta = self
            .txns
            .get(&id.to_string())
            .ok_or(TxnError::InvalidTxnState)?;
        if meta.producer_id == producer_id && epoch < meta.epoch {
            return Err(TxnError::Fenced);
        }
        if !meta.accepts(producer_id, epoch, topic, partition) {
            return Err(TxnError::InvalidTxnState);
        }
        Ok(())
    }

    /// AddPartitionsToTxn v4+ with `verify_only`, with Kafka's answers: whether each
    /// partition is in the open transaction of `producer` (a current producer id and
    /// epoch, and no decision being written, come first).
    pub(crate) fn verify_only(
        &self,
        id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        let meta = self
            .txns
            .get(&id.to_string())
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        meta.check_producer(producer.0, producer.1)?;
        if matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|p| meta.partitions.contains(p))
            .collect())
    }

    /// DescribeTransactions: the committed state of `id`.
    pub(crate) fn describe(&self, id: &str) -> Option<TxnMeta> {
        self.txns.get_committed(&id.to_string()).cloned()
    }

    /// ListTransactions: every committed transactional id of this partition.
    pub(crate) fn list(&self) -> Vec<(String, TxnMeta)> {
        self.txns
            .committed_where(&String::new(), |_| true)
            .into_iter()
            .collect()
    }

    /// The jobs of every decided transaction not handed out within `MARKER_RETRY`.
    fn undone_jobs(&mut self, now: Now) -> Vec<MarkerJob> {
        let due: Vec<(String, TxnMeta)> = self
            .txns
            .iter()
            .filter(|(_, m)| m.state.is_preparing())
            .filter(|(id, _)| {
                self.handed_out
                    .get(*id)
                    .is_none_or(|at| now.at.saturating_duration_since(*at) >= MARKER_RETRY)
            })
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect();
        due.into_iter()
            .filter_map(|(id, meta)| {
                self.handed_out.insert(id.clone(), now.at);
                self.job(&id, &meta)
            })
            .collect()
    }
}

impl Shard for TxnShard {
    type Record = TxnRecord;
    type Effect = MarkerJob;

    fn encode(record: &TxnRecord) -> Result<(Vec<u8>, Option<Vec<u8>>), CoordinatorError> {
        let key = record
            .encode_key()
            .map_err(|e| CoordinatorError::NotAvailable(e.to_string()))?;
        let value = record
            .encode_value()
            .map_err(|e| CoordinatorError::NotAvailable(e.to_string()))?;
        Ok((key, value))
    }

    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<TxnRecord, String> {
        TxnRecord::decode(key, value).map_err(|e| e.to_string())
    }

    fn replay(&mut self, offset: i64, _producer: Option<i64>, record: TxnRecord) {
        match record.value {
            Some(meta) => self.txns.insert(offset, record.transactional_id, meta),
            None => self.txns.remove(offset, &record.transactional_id),
        }
    }

    fn commit(&mut self, offset: i64) {
        self.txns.commit(offset);
    }

    fn loaded(&mut self, now: Now) -> Vec<MarkerJob> {
        // Transactions the last coordinator decided but did not complete.
        self.undone_jobs(now)
    }

    fn tick(&mut self, now: Now) -> Outcome<Self, ()> {
        let due = self
            .last_timeout_check
            .is_none_or(|t| now.at.saturating_duration_since(t) >= self.config.timeout_check_every);
        if !due {
            return Outcome::answer(());
        }
        self.last_timeout_check = Some(now.at);
        let mut records = Vec::new();
        let mut jobs = self.undone_jobs(now);
        let expired: Vec<(String, TxnMeta)> = self
            .txns
            .iter()
            .filter(|(_, m)| m.expired(now.ms))
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect();
        for (id, meta) in expired {
            tracing::info!(transactional_id = %id, producer_id = meta.producer_id, "aborting a transaction open past its timeout");
            let (fence, job) = self.write(&id, meta.fence(now.ms), now);
            records.extend(fence);
            jobs.extend(job);
        }
        let idle: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) && now.ms.saturating_sub(m.last_update_ms) > self.config.id_expiration_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            tracing::info!(transactional_id = %id, "transactional id expired");
            records.push(Self::record(&id, None));
        }
        Outcome::records(records, ()).with_effects(jobs)
    }

    fn unload(&mut self) {
        // EndTxn callers hear their answer anyway: the decision is written, and the
        // next coordinator completes it.
        self.completions.clear();
    }
}
