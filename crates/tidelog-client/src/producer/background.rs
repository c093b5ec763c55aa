//! A producer with a background sender: `send` returns at once (within
//! `buffer.memory`), and a task sends a partition's batch when it reaches `batch.size`
//! or has waited `linger.ms`, as Kafka's producers do. It wraps a [`Producer`], so
//! batching, idempotent sequences (one batch in flight per partition, so order holds)
//! and retries are the same code; results wait for `flush` or `close`, as there.
//!
//! The sender holds the producer while it sends a round, so a `send` that comes then
//! waits for that round's answers (bounded by `request.timeout.ms` and the retries).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, Notify};
use tokio::time::Instant;

use super::{Producer, ProducerConfig, RecordMetadata};
use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::records::ProduceRecord;

/// The state the application and the sender share.
#[derive(Debug)]
struct Shared {
    producer: Mutex<Producer>,
    /// Wakes the sender: a batch may have filled, or close was asked for.
    wake: Notify,
    /// A failure of the sender that failed buffered records, for the next call.
    failed: std::sync::Mutex<Option<ClientError>>,
}

/// A [`Producer`] whose batches go out by themselves after `linger.ms` (or when
/// `batch.size` is reached). Not transactional: use [`Producer`] for transactions.
#[derive(Debug)]
pub struct BackgroundProducer {
    shared: Arc<Shared>,
    sender: tokio::task::JoinHandle<()>,
}

impl BackgroundProducer {
    /// Starts the sender task; refuses a transactional configuration.
    pub fn new(client: Client, config: ProducerConfig) -> Result<BackgroundProducer> {
        config.validate()?;
        if config.transactional_id.is_some() {
            return Err(ClientError::InvalidArgument(
                "a BackgroundProducer is not transactional; use Producer for transactions".into(),
            ));
        }
        let linger = config.linger;
        let shared = Arc::new(Shared {
            producer: Mutex::new(Producer::new(client, config)),
            wake: Notify::new(),
            failed: std::sync::Mutex::new(None),
        });
        let sender = tokio::spawn(run(Arc::downgrade(&shared), linger));
        Ok(BackgroundProducer { shared, sender })
    }

    /// Queues a record and returns (see [`Producer::send`]); the sender delivers it.
    pub async fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        record: ProduceRecord,
    ) -> Result<()> {
        self.take_failure()?;
        self.shared
            .producer
            .lock()
            .await
            .send(topic, partition, record)
            .await?;
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Sends what is left and returns every record's result since the last flush, in
    /// `send` order (see [`Producer::flush`]).
    pub async fn flush(&self) -> Result<Vec<RecordMetadata>> {
        self.take_failure()?;
        self.shared.producer.lock().await.flush().await
    }

    /// Flushes, then stops the sender; gives up after `timeout` (the records not
    /// acknowledged by then are dropped, and the error says so).
    pub async fn close(self, timeout: Duration) -> Result<Vec<RecordMetadata>> {
        let flushed = tokio::time::timeout(timeout, self.flush()).await;
        self.sender.abort();
        match flushed {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout {
                addr: String::new(),
                api: "producer close (flush)".into(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    fn take_failure(&self) -> Result<()> {
        let failed = self
            .shared
            .failed
            .lock()
            .map_or(None, |mut slot| slot.take());
        failed.map_or(Ok(()), Err)
    }
}

impl Drop for BackgroundProducer {
    fn drop(&mut self) {
        self.sender.abort();
    }
}

/// Sends due batches until the producer is gone: dropped or closed, which abort this
/// task, or no longer referenced.
async fn run(shared: std::sync::Weak<Shared>, linger: Duration) {
    let mut attempt = 0u32;
    loop {
        let Some(s) = shared.upgrade() else {
            return;
        };
        let mut producer = s.producer.lock().await;
        let (due, next) = producer.buffer.due(linger, std::time::Instant::now());
        let mut pause = next.map_or(Duration::from_secs(1), |at| {
            at.saturating_duration_since(std::time::Instant::now())
        });
        if !due.is_empty() {
            match producer.round_of(due).await {
                Ok(round) => match round.retriable {
                    None => attempt = 0,
                    Some(e) => {
                        for topic in &round.stale {
                            producer.client.invalidate_topic(topic);
                        }
                        pause = producer.client.config().backoff(attempt);
                        attempt = attempt.saturating_add(1);
                        tracing::debug!(error = %e, ?pause, "background send; retrying");
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "background send failed the buffered records");
                    if let Ok(mut slot) = s.failed.lock() {
                        *slot = Some(e);
                    }
                }
            }
            // More may be due already (a full partition with more batches behind).
            pause = pause.min(Duration::from_millis(1));
        }
        drop(producer);
        // notify_one keeps a permit, so a send during the round is not missed.
        let _ = tokio::time::timeout_at(Instant::now() + pause, s.wake.notified()).await;
    }
}
