//! The coordinator's request operations. Each takes the state lock, checks the request
//! against the current state (`state`), writes the next state and answers; an error is
//! the Kafka error code for the client.

use kafka_protocol::error::ResponseError;

use super::state::{Committer, PendingOffset, TxnMeta, TxnState};
use super::{Inner, TxnCoordinator, TXN_TOPIC};
use crate::context::{now_ms, BrokerContext};
use crate::group::OFFSETS_TOPIC;
use crate::internal_topic::{create_if_missing, led_partition_of, Creation, TopicSpec};

impl TxnCoordinator {
    /// Creates `__transaction_state` if needed (compacted, `transaction.state.log.*`
    /// partitions and replication capped by the live brokers) and loads its partitions.
    pub(crate) async fn ensure_topic(&self, ctx: &BrokerContext) -> Result<(), i16> {
        let spec = TopicSpec {
            name: TXN_TOPIC,
            partitions: self.config.num_partitions,
            replication: self.config.replication_factor,
            segment_bytes: "104857600".to_string(),
        };
        if create_if_missing(ctx, spec).await? != Creation::Existed {
            self.load_owned(ctx);
        }
        Ok(())
    }

    /// InitProducerId with a transactional id: a new id gets a producer id from the
    /// controller; a known one gets its epoch bumped, which fences the previous producer
    /// (its open transaction is aborted first, with an epoch in between so the markers
    /// already fence it on every partition).
    pub(crate) async fn init_producer_id(
        &self,
        ctx: &BrokerContext,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
        fenced_code: i16,
    ) -> Result<(i64, i16), i16> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout.code());
        }
        self.ensure_topic(ctx).await?;
        // A fresh producer id comes from the controller, which may be a remote quorum:
        // it is fetched with the state lock released, then the request starts over. An
        // id fetched but not used is simply never handed out.
        let mut fresh = None;
        for _ in 0..3 {
            match self.init_producer_id_locked(
                ctx,
                id,
                timeout_ms,
                current,
                fenced_code,
                &mut fresh,
            )? {
                Some(answer) => {
                    self.acknowledge(ctx, id)?;
                    return Ok(answer);
                }
                None => fresh = Some(allocate_producer_id(ctx).await?),
            }
        }
        Err(ResponseError::CoordinatorNotAvailable.code())
    }

    /// `init_producer_id` under the state lock; `Ok(None)` when it needs a fresh
    /// producer id and `fresh` holds none (checked before anything is written).
    fn init_producer_id_locked(
        &self,
        ctx: &BrokerContext,
        id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
        fenced_code: i16,
        fresh: &mut Option<i64>,
    ) -> Result<Option<(i64, i16)>, i16> {
        let mut inner = self.write_lock();
        let partition = Self::partition_of(ctx, &inner, id)?;
        let now = now_ms();
        let Some(entry) = inner.txns.get(id).cloned() else {
            if current.is_some() {
                return Err(ResponseError::InvalidProducerIdMapping.code());
            }
            let Some(producer_id) = fresh.take() else {
                return Ok(None);
            };
            let meta = TxnMeta::new(producer_id, 0, timeout_ms, now);
            Self::write(ctx, &mut inner, partition, id, Some(meta))?;
            return Ok(Some((producer_id, 0)));
        };
        let meta = entry.meta;
        // A fence and a bump may take the epoch up by two; past that a new id is due.
        if meta.epoch >= i16::MAX - 3 && fresh.is_none() {
            return Ok(None);
        }
        if let Some((pid, epoch)) = current {
            // A producer re-initialising itself (KIP-360) may do so at its own epoch, or
            // one behind after the coordinator aborted its transaction on timeout.
            let own = pid == meta.producer_id
                && (epoch == meta.epoch
                    || (epoch.saturating_add(1) == meta.epoch
                        && meta.state == TxnState::CompleteAbort));
            if !own {
                return Err(fenced_code);
            }
        }
        if meta.state == TxnState::Ongoing {
            Self::write(ctx, &mut inner, partition, id, Some(meta.fence(now)))?;
        }
        if !Self::complete(ctx, &mut inner, id) {
            return Err(ResponseError::ConcurrentTransactions.code());
        }
        let meta = inner
            .txns
            .get(id)
            .map(|e| e.meta.clone())
            .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
        let next = match meta.bumped(timeout_ms, now) {
            Some(next) => next,
            None => {
                let producer_id = fresh
                    .take()
                    .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
                TxnMeta::new(producer_id, 0, timeout_ms, now)
            }
        };
        let answer = (next.producer_id, next.epoch);
        Self::write(ctx, &mut inner, partition, id, Some(next))?;
        Ok(Some(answer))
    }

    /// Runs `f` on the current state of `id` after checking the producer; `f` returns
    /// the next state to write (`None`: nothing changes).
    fn update(
        &self,
        ctx: &BrokerContext,
        id: &str,
        producer: (i64, i16),
        fenced_code: i16,
        f: impl FnOnce(&TxnMeta, i64) -> Result<Option<TxnMeta>, i16>,
    ) -> Result<(), i16> {
        {
            let mut inner = self.write_lock();
            let partition = Self::partition_of(ctx, &inner, id)?;
            let meta = current(&inner, id)?;
            meta.check_producer(producer.0, producer.1, fenced_code)?;
            if let Some(next) = f(&meta, now_ms())? {
                Self::write(ctx, &mut inner, partition, id, Some(next))?;
            }
        }
        self.acknowledge(ctx, id)
    }

    /// AddPartitionsToTxn: the partitions take part in the open transaction (opening it).
    pub(crate) fn add_partitions(
        &self,
        ctx: &BrokerContext,
        id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
        fenced_code: i16,
    ) -> Result<(), i16> {
        self.update(ctx, id, producer, fenced_code, |meta, now| {
            meta.add(partitions, None, now)
        })
    }

    /// AddOffsetsToTxn: the group's offsets take part in the open transaction.
    pub(crate) fn add_offsets(
        &self,
        ctx: &BrokerContext,
        id: &str,
        producer: (i64, i16),
        group: &str,
        fenced_code: i16,
    ) -> Result<(), i16> {
        if group.is_empty() {
            return Err(ResponseError::InvalidGroupId.code());
        }
        self.update(ctx, id, producer, fenced_code, |meta, now| {
            meta.add(&[], Some(group), now)
        })
    }

    /// TxnOffsetCommit: offsets that become the group's committed offsets when the
    /// transaction commits, and are dropped if it aborts.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn txn_offset_commit(
        &self,
        ctx: &BrokerContext,
        id: &str,
        producer: (i64, i16),
        group: &str,
        committer: Committer,
        offsets: &[(String, i32, PendingOffset)],
        fenced_code: i16,
    ) -> Result<(), i16> {
        // The transaction may be coordinated by another node than the group: this node
        // keeps the offsets until that coordinator's marker decides.
        // Sent to a node that no longer coordinates the group (a stale client view):
        // kept with the transaction here, they would reach the group only through this
        // node, so the client is told to find the group's coordinator.
        led_partition_of(ctx, OFFSETS_TOPIC, group)?;
        let not_coordinator = Err(ResponseError::NotCoordinator.code());
        if led_partition_of(ctx, TXN_TOPIC, id) == not_coordinator {
            ctx.groups
                .write_transactional_offsets(ctx, group, producer, offsets)?;
            self.foreign_lock()
                .add(producer.0, group, committer, offsets);
            return Ok(());
        }
        self.update(ctx, id, producer, fenced_code, |meta, now| {
            meta.with_offsets(group, committer, offsets, now).map(Some)
        })
    }

    /// EndTxn: records the decision, then writes the markers at once (a failure there
    /// is retried in the background; the decision already stands).
    pub(crate) fn end_txn(
        &self,
        ctx: &BrokerContext,
        id: &str,
        producer: (i64, i16),
        commit: bool,
        fenced_code: i16,
    ) -> Result<(), i16> {
        {
            let mut inner = self.write_lock();
            let partition = Self::partition_of(ctx, &inner, id)?;
            let meta = current(&inner, id)?;
            meta.check_producer(producer.0, producer.1, fenced_code)?;
            if let Some(next) = meta.end(commit, now_ms())? {
                Self::write(ctx, &mut inner, partition, id, Some(next))?;
                Self::complete(ctx, &mut inner, id);
            }
        }
        self.acknowledge(ctx, id)
    }

    /// Runs `append` only if `topic`/`partition` is part of `id`'s open transaction
    /// with this producer, and keeps the transaction from being decided meanwhile, so
    /// no transactional batch can land after its transaction's marker. A transaction
    /// coordinated by another node cannot be checked here and is let through.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn with_verified_produce<T>(
        &self,
        ctx: &BrokerContext,
        id: &str,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
        append: impl FnOnce() -> T,
    ) -> Result<T, i16> {
        let inner = self.read_lock();
        match Self::partition_of(ctx, &inner, id) {
            Ok(_) => {}
            Err(code) if code == ResponseError::NotCoordinator.code() => return Ok(append()),
            Err(code) if code == ResponseError::CoordinatorNotAvailable.code() => {
                return Err(ResponseError::InvalidTxnState.code());
            }
            Err(code) => return Err(code),
        }
        let meta = current(&inner, id).map_err(|_| ResponseError::InvalidTxnState.code())?;
        if meta.producer_id == producer_id && epoch < meta.epoch {
            return Err(ResponseError::InvalidProducerEpoch.code());
        }
        if !meta.accepts(producer_id, epoch, topic, partition) {
            return Err(ResponseError::InvalidTxnState.code());
        }
        Ok(append())
    }

    /// Whether a transaction not yet completed holds an offset for this group partition:
    /// OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for it.
    pub(crate) fn offset_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (group.to_string(), topic.to_string(), partition);
        let local = self.read_lock().txns.values().any(|e| {
            let may_commit = matches!(e.meta.state, TxnState::Ongoing | TxnState::PrepareCommit);
            may_commit && e.meta.offsets.contains_key(&key)
        });
        local || self.foreign_lock().holds(group, topic, partition)
    }

    /// DescribeTransactions: the state of one transactional id.
    pub(crate) fn describe(&self, ctx: &BrokerContext, id: &str) -> Result<TxnMeta, i16> {
        let inner = self.read_lock();
        Self::partition_of(ctx, &inner, id)?;
        current(&inner, id).map_err(|_| ResponseError::TransactionalIdNotFound.code())
    }

    /// ListTransactions: every transactional id this node coordinates.
    pub(crate) fn list(&self) -> Vec<(String, TxnMeta)> {
        let inner = self.read_lock();
        let mut all: Vec<(String, TxnMeta)> = inner
            .txns
            .iter()
            .map(|(id, e)| (id.clone(), e.meta.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

fn current(inner: &Inner, id: &str) -> Result<TxnMeta, i16> {
    inner
        .txns
        .get(id)
        .map(|e| e.meta.clone())
        .ok_or(ResponseError::InvalidProducerIdMapping.code())
}

async fn allocate_producer_id(ctx: &BrokerContext) -> Result<i64, i16> {
    ctx.metadata
        .allocate_producer_id(ctx.node_id())
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "allocating a producer id failed");
            crate::metadata::producer_id_error(&e)
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Entry, TxnConfig};
    use super::*;

    #[test]
    fn offsets_are_pending_until_the_transaction_is_decided() {
        let coordinator = TxnCoordinator::new(TxnConfig {
            num_partitions: 50,
            replication_factor: 1,
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            timeout_check_every: Duration::from_secs(1),
        });
        let mut meta = TxnMeta::new(1, 0, 60_000, 0)
            .add(&[], Some("g"), 1)
            .unwrap()
            .unwrap();
        let offset = PendingOffset {
            offset: 10,
            leader_epoch: -1,
            metadata: None,
        };
        meta = meta
            .with_offsets("g", Committer::default(), &[("t".into(), 0, offset)], 2)
            .unwrap();
        let set = |meta: &TxnMeta| {
            coordinator.write_lock().txns.insert(
                "tx".into(),
                Entry {
                    partition: 0,
                    meta: meta.clone(),
                },
            );
        };
        set(&meta);
        assert!(coordinator.offset_pending("g", "t", 0));
        assert!(!coordinator.offset_pending("g", "t", 1));
        assert!(!coordinator.offset_pending("other", "t", 0));
        let committing = meta.end(true, 3).unwrap().unwrap();
        set(&committing);
        assert!(coordinator.offset_pending("g", "t", 0));
        set(&meta.end(false, 3).unwrap().unwrap());
        assert!(
            !coordinator.offset_pending("g", "t", 0),
            "an abort drops them"
        );
        set(&committing.completed(4).unwrap());
        assert!(
            !coordinator.offset_pending("g", "t", 0),
            "committed: no longer pending"
        );
    }
}
