//! Producing: records wait in a bounded buffer (`buffer.memory`), batched per partition,
//! until [`Producer::flush`] sends them, or until the buffer is full, when `send` sends
//! the oldest batches itself and waits (up to `max.block.ms`) for the acknowledgements
//! that free room.

mod background;
mod buffer;
mod config;
mod dispatch;
mod idempotence;
mod transaction;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::partitioner::{partition_for_key, StickyPartitioner};
use crate::records::ProduceRecord;

pub use background::BackgroundProducer;
pub use config::{Acks, ProducerConfig};
pub use transaction::ConsumerGroupMetadata;

use buffer::Buffer;
use idempotence::Identity;
use transaction::{Op, Transactional};

/// Where a record was written. `offset` is -1 with acks=0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Partition.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
}

/// A buffering producer. [`Producer::send`] queues and returns at once while the buffer
/// has room; [`Producer::flush`] writes everything queued and returns each record's
/// (partition, offset) in `send` order.
///
/// Idempotent by default (`enable.idempotence`): the first send asks for a producer id,
/// and a batch retried after a lost answer is written once.
///
/// With `transactional.id` it writes transactions: [`Producer::init_transactions`], then
/// per transaction [`Producer::begin_transaction`], sends (and
/// [`Producer::send_offsets_to_transaction`]), and [`Producer::commit_transaction`] or
/// [`Producer::abort_transaction`]. See `docs/client.md`.
#[derive(Debug)]
pub struct Producer {
    client: Client,
    config: ProducerConfig,
    buffer: Buffer,
    sticky: HashMap<String, StickyPartitioner>,
    /// The producer id, epoch and sequences; `None` until first needed, and again after
    /// an error that failed buffered records (the sequences have a gap then).
    identity: Option<Identity>,
    /// Test hook: treat the next round's acknowledgements as lost.
    lose_next_acks: bool,
    /// The transactional state, with `transactional.id`.
    txn: Option<Transactional>,
}

impl Producer {
    /// A producer over an existing client. The settings are checked on first use
    /// ([`ProducerConfig::validate`]).
    pub fn new(client: Client, config: ProducerConfig) -> Producer {
        let txn = config
            .transactional_id
            .clone()
            .map(|id| Transactional::new(id, config.transaction_timeout));
        Producer {
            buffer: Buffer::new(config.buffer_memory, config.max_batch_bytes),
            client,
            config,
            sticky: HashMap::new(),
            identity: None,
            lose_next_acks: false,
            txn,
        }
    }

    /// The underlying client.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Records sent since the last flush, and the approximate bytes of those not yet
    /// acknowledged by the broker.
    pub fn buffered(&self) -> (usize, usize) {
        self.buffer.counts()
    }

    /// The producer id and epoch the broker gave this idempotent producer, once it has
    /// sent something.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.identity.as_ref().map(|i| (i.producer_id, i.epoch))
    }

    /// Test hook: the broker's next acknowledgements are dropped as if the connection
    /// broke after the broker wrote the batches, so they are sent again, exactly as a
    /// retry after a lost answer. Not part of the API.
    #[doc(hidden)]
    pub fn lose_next_acknowledgements(&mut self) {
        self.lose_next_acks = true;
    }

    /// Queues a record. The partition is `partition` when given, else murmur2 of the key
    /// (Java client compatible), else sticky for keyless records.
    ///
    /// Returns at once while the record fits in `buffer.memory`. When it does not, sends
    /// the oldest batch of every partition and waits for their acknowledgements, retrying
    /// while the broker is unreachable, for at most `max.block.ms`; then fails with
    /// [`ClientError::BufferFull`] and the record is not queued (the buffered ones stay).
    /// An error that fails the buffered records while it sends them (see
    /// [`Producer::flush`]) is returned here instead.
    ///
    /// A transactional producer sends only inside a transaction; a partition's first
    /// record in it adds the partition to the transaction (AddPartitionsToTxn). An error
    /// leaves the transaction abortable only.
    pub async fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        record: ProduceRecord,
    ) -> Result<()> {
        self.config.validate()?;
        self.txn_check(Op::Send)?;
        let sent = self.send_inner(topic, partition, record).await;
        match (sent, self.txn.as_mut()) {
            (Err(e), Some(txn))
                if !matches!(
                    e,
                    ClientError::InvalidArgument(_)
                        | ClientError::UnknownPartition { .. }
                        | ClientError::Transaction { .. }
                ) =>
            {
                Err(txn.failed(e))
            }
            (sent, _) => sent,
        }
    }

    async fn send_inner(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        record: ProduceRecord,
    ) -> Result<()> {
        let started = Instant::now();
        let deadline = started + self.config.max_block;
        let size = record.approx_size();
        if !self.buffer.could_fit(size) {
            return Err(ClientError::InvalidArgument(format!(
                "a record of about {size} bytes can never fit in buffer.memory={} bytes",
                self.config.buffer_memory
            )));
        }
        let count = match tokio::time::timeout_at(
            deadline,
            self.client
                .partition_count(topic, self.config.allow_auto_create),
        )
        .await
        {
            Ok(count) => count?,
            Err(_) => {
                return Err(ClientError::Timeout {
                    addr: self.client.config().bootstrap.join(","),
                    api: format!("Metadata for {topic} (max.block.ms)"),
                    timeout_ms: millis(self.config.max_block),
                })
            }
        };
        let chosen = match (partition, &record.key) {
            (Some(p), _) => Some(p).filter(|p| (0..count).contains(p)),
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => self
                .sticky
                .entry(topic.to_owned())
                .or_default()
                .partition(count),
        };
        let chosen = chosen.ok_or_else(|| ClientError::UnknownPartition {
            topic: topic.to_owned(),
            partition: partition.unwrap_or(0),
        })?;
        let key = (topic.to_owned(), chosen);
        if self.txn.is_some() {
            self.add_partition(&key, deadline).await?;
        }
        if !self.buffer.has_room(size) {
            self.make_room(size, started, deadline).await?;
        }
        self.buffer.push(key, record);
        Ok(())
    }

    /// Sends the oldest batches until a record of `size` bytes fits or `deadline` passes.
    async fn make_room(&mut self, size: usize, started: Instant, deadline: Instant) -> Result<()> {
        let mut last: Option<ClientError> = None;
        let mut attempt = 0;
        while !self.buffer.has_room(size) {
            let now = Instant::now();
            // Without unacknowledged records only a flush frees room (result slots):
            // waiting could not help.
            if now >= deadline || !self.buffer.has_unacked() {
                return Err(self.buffer_full(size, started, last));
            }
            let round = match tokio::time::timeout_at(deadline, self.round()).await {
                Ok(round) => round?,
                // Dropping the round abandons its requests; their batches stay buffered
                // with their sequences, so the retry is the same batch.
                Err(_) => {
                    return Err(self.buffer_full(size, started, last));
                }
            };
            // The keyless records' batches just went out: the next ones start a batch
            // on another partition (KIP-480 switches when a batch is sent).
            for s in self.sticky.values_mut() {
                s.rotate();
            }
            if let Some(e) = round.retriable {
                for topic in &round.stale {
                    self.client.invalidate_topic(topic);
                }
                let pause = self
                    .client
                    .config()
                    .backoff(attempt)
                    .min(deadline.saturating_duration_since(Instant::now()));
                tracing::debug!(error = %e, ?pause, "producer buffer full; retrying");
                last = Some(e);
                attempt += 1;
                tokio::time::sleep(pause).await;
            }
        }
        Ok(())
    }

    fn buffer_full(&self, size: usize, started: Instant, last: Option<ClientError>) -> ClientError {
        ClientError::BufferFull {
            buffer_memory: self.config.buffer_memory,
            used: self.buffer.used(),
            record: size,
            max_block_ms: millis(self.config.max_block),
            waited_ms: millis(started.elapsed()),
            last: last.map(Box::new),
        }
    }

    /// Sends everything queued and returns every record's result in `send` order. Leader
    /// changes and broken connections are retried (`retries` times); when retries run
    /// out the records stay buffered for the next flush. Any other error fails every
    /// buffered record.
    ///
    /// In a transaction, an error leaves the transaction abortable only.
    pub async fn flush(&mut self) -> Result<Vec<RecordMetadata>> {
        self.config.validate()?;
        if let Some(txn) = &self.txn {
            if let transaction::State::Fatal(_) = txn.state {
                self.txn_check(Op::Send)?;
            }
        }
        let flushed = self.flush_inner().await;
        match (flushed, self.txn.as_mut()) {
            (Err(e), Some(txn)) => Err(txn.failed(e)),
            (flushed, _) => flushed,
        }
    }

    async fn flush_inner(&mut self) -> Result<Vec<RecordMetadata>> {
        for s in self.sticky.values_mut() {
            s.rotate();
        }
        let mut attempt = 0;
        while self.buffer.has_unacked() {
            let round = self.round().await?;
            let Some(e) = round.retriable else {
                continue;
            };
            if attempt >= self.client.config().retries {
                return Err(e);
            }
            for topic in &round.stale {
                self.client.invalidate_topic(topic);
            }
            tokio::time::sleep(self.client.config().backoff(attempt)).await;
            attempt += 1;
        }
        self.buffer
            .take_results()
            .ok_or_else(|| ClientError::Protocol("a record got no result".into()))
    }

    /// An error that fails every buffered record: they are dropped, and an idempotent
    /// producer starts over with a new producer id (its sequences now have a gap).
    ///
    /// A transactional producer keeps its id and epoch (abort needs them, and takes a
    /// new epoch afterwards); its transaction becomes abortable only, or the producer
    /// unusable when it was fenced.
    fn fail(&mut self, error: ClientError) -> ClientError {
        self.buffer.clear();
        if let Some(txn) = self.txn.as_mut() {
            return txn.failed(error);
        }
        self.identity = None;
        error
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
