//! Transactions (KIP-98) as Kafka's Java producer and librdkafka drive them, client side
//! (AddPartitionsToTxn v3 and below, not KIP-890's broker-side verification).
//!
//! `init_transactions` finds the transaction coordinator (FindCoordinator key type 1) and
//! asks it for the producer id and epoch of the `transactional.id`; the coordinator bumps
//! the epoch, which fences any older instance and aborts its open transaction.
//! `begin_transaction` opens a transaction locally; each send to a partition not yet in
//! it adds the partition (AddPartitionsToTxn) before its first batch; every batch carries
//! the transactional flag. `send_offsets_to_transaction` is AddOffsetsToTxn to the
//! transaction coordinator, then TxnOffsetCommit to the group coordinator.
//! `commit_transaction` flushes and sends EndTxn(commit); `abort_transaction` drops what
//! is buffered, sends EndTxn(abort) and then bumps the epoch (InitProducerId again), so
//! the sequences of batches whose fate is unknown are never sent again under the same
//! epoch.
//!
//! Coordinator errors that pass (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
//! COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, broken connections) are retried
//! with backoff for at most `max.block.ms`. PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED are fatal: the producer refuses every later
//! call. A failed send inside a transaction leaves it abortable only.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, GroupId, InitProducerIdRequest,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::buffer::PartitionKey;
use super::idempotence::Identity;
use super::{millis, Producer, RecordMetadata};
use crate::client::Client;
use crate::connection::Connection;
use crate::error::{ClientError, Result, TransactionErrorKind};
use crate::groups::text;

/// The consumer group whose offsets a transaction commits
/// ([`Producer::send_offsets_to_transaction`]): its id and, for a member of the group,
/// its generation and member id, which the coordinator checks (a zombie member of an
/// older generation is refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The member's generation, -1 when not a member (manually assigned consumer).
    pub generation_id: i32,
    /// The member id, empty when not a member.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// A group without member checks (generation -1, no member id).
    pub fn new(group_id: &str) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata {
            group_id: group_id.to_owned(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// Where a transactional producer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    /// `init_transactions` has not succeeded yet (or must run again after an abort).
    Uninitialized,
    /// Initialized, no transaction open.
    Ready,
    /// A transaction is open.
    InTransaction,
    /// A send in the open transaction failed: only abort is allowed.
    Abortable(String),
    /// Fenced or not authorized: nothing is allowed.
    Fatal(String),
}

/// The calls whose admissibility depends on the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Init,
    Begin,
    Send,
    SendOffsets,
    Commit,
    Abort,
}

impl State {
    /// Whether `op` may run now; else what kind of refusal and why.
    pub(super) fn allows(&self, op: Op) -> std::result::Result<(), (TransactionErrorKind, String)> {
        let invalid = |why: &str| Err((TransactionErrorKind::InvalidState, why.to_owned()));
        match (self, op) {
            (State::Fatal(reason), _) => Err((
                TransactionErrorKind::Fatal,
                format!("the producer can no longer be used ({reason}); create a new one"),
            )),
            (State::Uninitialized, Op::Init) => Ok(()),
            (State::Uninitialized, _) => invalid("call init_transactions() first"),
            (_, Op::Init) => invalid("init_transactions() was already called"),
            (State::Ready, Op::Begin) => Ok(()),
            (State::Ready, _) => invalid("no transaction is open; call begin_transaction() first"),
            (State::InTransaction, Op::Begin) => invalid("a transaction is already open"),
            (State::InTransaction, _) => Ok(()),
            (State::Abortable(_), Op::Abort) => Ok(()),
            (State::Abortable(reason), Op::Begin) => Err((
                TransactionErrorKind::Abortable,
                format!("the open transaction failed ({reason}); abort it first"),
            )),
            (State::Abortable(reason), _) => Err((
                TransactionErrorKind::Abortable,
                format!(
                    "the transaction failed ({reason}) and can only be aborted; call abort_transaction()"
                ),
            )),
        }
    }
}

/// The transactional part of a producer.
#[derive(Debug)]
pub(super) struct Transactional {
    pub(super) id: String,
    timeout_ms: i32,
    pub(super) state: State,
    /// The transaction coordinator's connection, once found.
    coordinator: Option<Connection>,
    /// Partitions added to the open transaction.
    added: BTreeSet<PartitionKey>,
    /// Groups added to the open transaction (AddOffsetsToTxn).
    groups: BTreeSet<String>,
}

impl Transactional {
    pub(super) fn new(id: String, timeout: std::time::Duration) -> Transactional {
        Transactional {
            id,
            timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            state: State::Uninitialized,
            coordinator: None,
            added: BTreeSet::new(),
            groups: BTreeSet::new(),
        }
    }

    fn error(&self, kind: TransactionErrorKind, reason: String) -> ClientError {
        ClientError::Transaction {
            transactional_id: self.id.clone(),
            kind,
            error: None,
            reason,
        }
    }

    fn check(&self, op: Op) -> Result<()> {
        self.state
            .allows(op)
            .map_err(|(kind, reason)| self.error(kind, reason))
    }

    /// Turns a fatal broker error into the fatal state (and its typed error); other
    /// errors pass unchanged.
    fn fatal_or(&mut self, e: ClientError) -> ClientError {
        match e.response_error() {
            Some(code) if is_fatal(code) => {
                let reason = match code {
                    ResponseError::TransactionalIdAuthorizationFailed => {
                        "not authorized for this transactional.id".to_owned()
                    }
                    _ => "fenced: another producer with the same transactional.id took over"
                        .to_owned(),
                };
                self.state = State::Fatal(reason.clone());
                ClientError::Transaction {
                    transactional_id: self.id.clone(),
                    kind: TransactionErrorKind::Fatal,
                    error: Some(code),
                    reason: format!("{reason}; the producer can no longer be used ({e})"),
                }
            }
            _ => e,
        }
    }

    /// After a failed send or flush: fatal errors make the producer unusable, others
    /// leave the open transaction abortable only.
    pub(super) fn failed(&mut self, e: ClientError) -> ClientError {
        let e = self.fatal_or(e);
        if self.state == State::InTransaction {
            self.state = State::Abortable(e.to_string());
        }
        e
    }
}

/// Errors after which this producer instance may never be used again.
fn is_fatal(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::ProducerFenced
            | ResponseError::InvalidProducerEpoch
            | ResponseError::TransactionalIdAuthorizationFailed
    )
}

/// Coordinator errors that a later try, perhaps at another coordinator, gets past.
fn is_retriable_coordinator(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::CoordinatorNotAvailable
            | ResponseError::NotCoordinator
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::ConcurrentTransactions
            | ResponseError::RequestTimedOut
            | ResponseError::NetworkException
    )
}

/// Finds the coordinator of `key` (key type 0 = group, 1 = transactional id) and
/// connects to it.
async fn find_coordinator(client: &mut Client, key: &str, key_type: i8) -> Result<Connection> {
    let request = FindCoordinatorRequest::default()
        .with_key(text(key))
        .with_key_type(key_type);
    let response = client.send_any(&request).await?;
    ClientError::check(
        response.error_code,
        response.error_message.as_deref(),
        || format!("find coordinator of {key}"),
    )?;
    let addr = format!("{}:{}", response.host.as_str(), response.port);
    Connection::connect(&addr, &client.config().connection).await
}

/// Sends `request` to the coordinator of `key` (found when `slot` is empty), retrying
/// passing errors with backoff until `deadline`. `code` picks the response's first
/// error code.
async fn call<R: Request>(
    client: &mut Client,
    slot: &mut Option<Connection>,
    (key, key_type): (&str, i8),
    what: &str,
    request: &R,
    code: impl Fn(&R::Response) -> i16,
    deadline: Instant,
) -> Result<R::Response> {
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        let outcome = async {
            if slot.is_none() {
                *slot = Some(find_coordinator(client, key, key_type).await?);
            }
            let conn = slot
                .as_mut()
                .ok_or_else(|| ClientError::Protocol("no coordinator".into()))?;
            let response = conn.send(request).await?;
            ClientError::check(code(&response), None, || what.to_owned())?;
            Ok(response)
        };
        let e = match tokio::time::timeout_at(deadline, outcome).await {
            Ok(Ok(response)) => return Ok(response),
            Ok(Err(e)) => e,
            Err(_) => ClientError::Timeout {
                addr: format!("coordinator of {key}"),
                api: format!("{what} (max.block.ms)"),
                timeout_ms: millis(started.elapsed()),
            },
        };
        let passing = match e.response_error() {
            Some(code) => is_retriable_coordinator(code),
            None => e.is_retriable(),
        };
        if !passing {
            return Err(e);
        }
        if !matches!(
            e.response_error(),
            Some(ResponseError::ConcurrentTransactions | ResponseError::CoordinatorLoadInProgress)
        ) {
            *slot = None;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(ClientError::GaveUp {
                after: started.elapsed(),
                last: Box::new(e),
            });
        }
        let pause = client
            .config()
            .backoff(attempt)
            .min(deadline.saturating_duration_since(now));
        tracing::debug!(error = %e, ?pause, "transactional request retried");
        attempt += 1;
        tokio::time::sleep(pause).await;
    }
}

impl Producer {
    fn txn_mut(&mut self) -> Result<&mut Transactional> {
        self.txn.as_mut().ok_or_else(|| {
            ClientError::InvalidArgument(
                "not a transactional producer: set transactional.id".into(),
            )
        })
    }

    /// The error of a transactional producer that sends before `init_transactions`.
    pub(super) fn txn_not_ready(&self) -> ClientError {
        match &self.txn {
            Some(t) => t.error(
                TransactionErrorKind::InvalidState,
                "call init_transactions() before sending".into(),
            ),
            None => ClientError::Protocol("not a transactional producer".into()),
        }
    }

    /// Refuses `op` when the transactional producer's state does not allow it; `Ok` for
    /// a producer without `transactional.id` when `op` is a send.
    pub(super) fn txn_check(&self, op: Op) -> Result<()> {
        match &self.txn {
            Some(t) => t.check(op),
            None if op == Op::Send => Ok(()),
            None => Err(ClientError::InvalidArgument(
                "not a transactional producer: set transactional.id".into(),
            )),
        }
    }

    fn txn_deadline(&self) -> Instant {
        Instant::now() + self.config.max_block
    }

    /// Registers the transactional id with its coordinator and gets the producer id and
    /// a new epoch: an older producer with the same `transactional.id` is fenced and its
    /// open transaction aborted. Call once, before `begin_transaction`.
    pub async fn init_transactions(&mut self) -> Result<()> {
        self.config.validate()?;
        self.txn_mut()?.check(Op::Init)?;
        let deadline = self.txn_deadline();
        let Some(txn) = self.txn.as_mut() else {
            return Err(self.txn_not_ready());
        };
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(text(&txn.id))))
            .with_transaction_timeout_ms(txn.timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let id = txn.id.clone();
        let response = call(
            &mut self.client,
            &mut txn.coordinator,
            (&id, 1),
            "InitProducerId",
            &request,
            |r| r.error_code,
            deadline,
        )
        .await
        .map_err(|e| txn.fatal_or(e))?;
        if response.producer_id.0 < 0 {
            return Err(ClientError::Protocol(format!(
                "InitProducerId answered producer id {}",
                response.producer_id.0
            )));
        }
        self.identity = Some(Identity::new(
            response.producer_id.0,
            response.producer_epoch,
        ));
        txn.state = State::Ready;
        txn.added.clear();
        txn.groups.clear();
        Ok(())
    }

    /// Opens a transaction (locally; the coordinator learns of it with the first
    /// partition or group added).
    pub fn begin_transaction(&mut self) -> Result<()> {
        let txn = self.txn_mut()?;
        txn.check(Op::Begin)?;
        txn.state = State::InTransaction;
        txn.added.clear();
        txn.groups.clear();
        Ok(())
    }

    /// Adds `key` to the open transaction unless it is in already.
    pub(super) async fn add_partition(
        &mut self,
        key: &PartitionKey,
        deadline: Instant,
    ) -> Result<()> {
        let (producer_id, epoch) = self
            .identity
            .as_ref()
            .map_or((-1, -1), |i| (i.producer_id, i.epoch));
        let Some(txn) = self.txn.as_mut() else {
            return Ok(());
        };
        if txn.added.contains(key) {
            return Ok(());
        }
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(&txn.id)))
            .with_v3_and_below_producer_id(ProducerId(producer_id))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(text(&key.0)))
                .with_partitions(vec![key.1])]);
        let id = txn.id.clone();
        call(
            &mut self.client,
            &mut txn.coordinator,
            (&id, 1),
            &format!("AddPartitionsToTxn {}-{}", key.0, key.1),
            &request,
            |r| {
                r.results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| t.results_by_partition.iter())
                    .map(|p| p.partition_error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0)
            },
            deadline,
        )
        .await?;
        txn.added.insert(key.clone());
        Ok(())
    }

    /// Commits consumer offsets as part of the open transaction: they become the group's
    /// committed offsets only if the transaction commits (AddOffsetsToTxn, then
    /// TxnOffsetCommit to the group coordinator, with the member's generation and id
    /// when `group` has them). `offsets` maps (topic, partition) to the next offset to
    /// read.
    pub async fn send_offsets_to_transaction(
        &mut self,
        offsets: &BTreeMap<(String, i32), i64>,
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        self.txn_mut()?.check(Op::SendOffsets)?;
        let result = self.send_offsets(offsets, group).await;
        result.map_err(|e| match self.txn.as_mut() {
            Some(t) => t.failed(e),
            None => e,
        })
    }

    async fn send_offsets(
        &mut self,
        offsets: &BTreeMap<(String, i32), i64>,
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        let deadline = self.txn_deadline();
        let (producer_id, epoch) = self
            .identity
            .as_ref()
            .map_or((-1, -1), |i| (i.producer_id, i.epoch));
        let Some(txn) = self.txn.as_mut() else {
            return Err(self.txn_not_ready());
        };
        let id = txn.id.clone();
        if !txn.groups.contains(&group.group_id) {
            let request = AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(text(&id)))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(text(&group.group_id)));
            call(
                &mut self.client,
                &mut txn.coordinator,
                (&id, 1),
                &format!("AddOffsetsToTxn {}", group.group_id),
                &request,
                |r| r.error_code,
                deadline,
            )
            .await?;
            txn.groups.insert(group.group_id.clone());
        }
        let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), offset) in offsets {
            topics.entry(topic).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(text(""))),
            );
        }
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(text(&id)))
            .with_group_id(GroupId(text(&group.group_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_generation_id(group.generation_id)
            .with_member_id(text(&group.member_id))
            .with_group_instance_id(group.group_instance_id.as_deref().map(text))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let mut group_coordinator = None;
        call(
            &mut self.client,
            &mut group_coordinator,
            (&group.group_id, 0),
            &format!("TxnOffsetCommit {}", group.group_id),
            &request,
            |r| {
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| p.error_code)
                    .find(|c| *c != 0)
                    .unwrap_or(0)
            },
            deadline,
        )
        .await?;
        Ok(())
    }

    /// Sends everything buffered, then commits the transaction (EndTxn): its records
    /// become visible to read_committed consumers and its offsets the group's. Returns
    /// each record's result in `send` order, as [`Producer::flush`]. Refused (with
    /// [`TransactionErrorKind::Abortable`]) when a send in the transaction failed.
    pub async fn commit_transaction(&mut self) -> Result<Vec<RecordMetadata>> {
        self.txn_mut()?.check(Op::Commit)?;
        let results = self.flush().await?;
        self.end_transaction(true).await?;
        Ok(results)
    }

    /// Aborts the open transaction: records not yet sent are dropped, the coordinator
    /// writes abort markers for what was sent (read_committed consumers skip it), and
    /// the producer takes a new epoch so that no sequence of a batch whose fate is
    /// unknown is used again. The producer is ready for `begin_transaction` afterwards;
    /// should the new epoch fail, call `init_transactions` again.
    pub async fn abort_transaction(&mut self) -> Result<()> {
        self.txn_mut()?.check(Op::Abort)?;
        self.buffer.clear();
        self.end_transaction(false).await?;
        if let Some(txn) = self.txn.as_mut() {
            txn.state = State::Uninitialized;
        }
        self.identity = None;
        self.init_transactions().await
    }

    /// EndTxn, when the coordinator knows the transaction (something was added).
    async fn end_transaction(&mut self, commit: bool) -> Result<()> {
        let deadline = self.txn_deadline();
        let (producer_id, epoch) = self
            .identity
            .as_ref()
            .map_or((-1, -1), |i| (i.producer_id, i.epoch));
        let Some(txn) = self.txn.as_mut() else {
            return Err(self.txn_not_ready());
        };
        if !txn.added.is_empty() || !txn.groups.is_empty() {
            let id = txn.id.clone();
            let request = EndTxnRequest::default()
                .with_transactional_id(TransactionalId(text(&id)))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_committed(commit);
            let what = if commit {
                "EndTxn(commit)"
            } else {
                "EndTxn(abort)"
            };
            let ended = call(
                &mut self.client,
                &mut txn.coordinator,
                (&id, 1),
                what,
                &request,
                |r| r.error_code,
                deadline,
            )
            .await;
            if let Err(e) = ended {
                let e = txn.fatal_or(e);
                // A commit that kept failing on passing errors may be tried again; any
                // other failure leaves only abort.
                if commit
                    && !matches!(
                        e,
                        ClientError::GaveUp { .. } | ClientError::Transaction { .. }
                    )
                {
                    txn.state = State::Abortable(e.to_string());
                }
                return Err(e);
            }
        }
        txn.state = State::Ready;
        txn.added.clear();
        txn.groups.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Op; 6] = [
        Op::Init,
        Op::Begin,
        Op::Send,
        Op::SendOffsets,
        Op::Commit,
        Op::Abort,
    ];

    fn allowed(state: &State) -> Vec<Op> {
        ALL.into_iter()
            .filter(|op| state.allows(*op).is_ok())
            .collect()
    }

    #[test]
    fn each_state_allows_only_its_calls() {
        assert_eq!(allowed(&State::Uninitialized), vec![Op::Init]);
        assert_eq!(allowed(&State::Ready), vec![Op::Begin]);
        assert_eq!(
            allowed(&State::InTransaction),
            vec![Op::Send, Op::SendOffsets, Op::Commit, Op::Abort]
        );
        assert_eq!(allowed(&State::Abortable("x".into())), vec![Op::Abort]);
        assert_eq!(allowed(&State::Fatal("fenced".into())), Vec::<Op>::new());
    }

    #[test]
    fn refusals_say_what_is_left() {
        let kind = |s: &State, op| s.allows(op).unwrap_err().0;
        assert_eq!(
            kind(&State::Abortable("send failed".into()), Op::Commit),
            TransactionErrorKind::Abortable
        );
        let (_, why) = State::Abortable("send failed".into())
            .allows(Op::Commit)
            .unwrap_err();
        assert!(
            why.contains("abort_transaction") && why.contains("send failed"),
            "{why}"
        );
        assert_eq!(
            kind(&State::Fatal("fenced".into()), Op::Abort),
            TransactionErrorKind::Fatal
        );
        assert_eq!(
            kind(&State::Ready, Op::Commit),
            TransactionErrorKind::InvalidState
        );
        assert_eq!(
            kind(&State::InTransaction, Op::Begin),
            TransactionErrorKind::InvalidState
        );
        assert_eq!(
            kind(&State::Ready, Op::Init),
            TransactionErrorKind::InvalidState
        );
    }

    #[test]
    fn failures_make_the_transaction_abortable_and_fencing_fatal() {
        let mut t = Transactional::new("t".into(), std::time::Duration::from_secs(60));
        t.state = State::InTransaction;
        let e = t.failed(ClientError::Closed { addr: "x".into() });
        assert!(matches!(e, ClientError::Closed { .. }));
        assert!(matches!(t.state, State::Abortable(_)));
        assert!(t.check(Op::Abort).is_ok());
        let e = t.failed(ClientError::Broker {
            context: "EndTxn".into(),
            error: ResponseError::ProducerFenced,
            message: None,
        });
        assert!(matches!(
            e,
            ClientError::Transaction {
                kind: TransactionErrorKind::Fatal,
                error: Some(ResponseError::ProducerFenced),
                ..
            }
        ));
        assert!(matches!(t.state, State::Fatal(_)));
        assert!(t.check(Op::Abort).is_err());
        // An idempotent batch refused for its epoch means the same.
        let mut t = Transactional::new("t".into(), std::time::Duration::from_secs(60));
        t.state = State::InTransaction;
        t.failed(ClientError::ProducerSequence {
            topic: "x".into(),
            partition: 0,
            producer_id: 1,
            epoch: 0,
            error: ResponseError::InvalidProducerEpoch,
            message: None,
        });
        assert!(matches!(t.state, State::Fatal(_)));
    }
}
