//! Dead letters for consumers of classic (and KIP-848) groups: a record whose handler
//! keeps failing is tried a bounded number of times with backoff, then written to a
//! dead-letter topic, and the partition moves on.
//!
//! [`DeadLetterHandler::process`] runs the application's handler on one record. When an
//! attempt fails it waits ([`Backoff`]) and tries again, up to
//! [`DeadLetterPolicy::max_attempts`]. After the last failed attempt the record is
//! produced to the dead-letter topic (acks=all) and the acknowledgement awaited. The
//! copy keeps the key, value and headers byte for byte and adds the origin headers
//! ([`headers`]): the source topic, partition, offset, the group, the number of
//! attempts as the delivery count, and the last error's `Display` as the message.
//! These are KIP-1191's names, the ones the broker writes on its share-group copies, so
//! one tool ([`DeadLetterOrigin::of`]) reads both kinds of dead-letter topic.
//!
//! **Nothing is lost.** `process` returns `Ok` only once the record was handled or its
//! copy is acknowledged; only then may the caller commit past it. If the copy cannot be
//! written, it returns [`DeadLetterError::Produce`]: do not commit; call
//! [`DeadLetterHandler::dead_letter`] again with the error's attempts and message (the
//! handler is not re-run), or seek back to the record.
//!
//! **Bounded.** At most [`MAX_ATTEMPTS`] attempts, each wait at most
//! [`Backoff::max`] (itself at most [`MAX_BACKOFF`]), one record in hand at a time, and
//! error messages cut to [`headers::MAX_MESSAGE_BYTES`]. The retries run inside the poll
//! loop, so `max_poll_records × (attempts × handler time + worst_case_backoff)` must fit
//! in `max.poll.interval.ms`; [`DeadLetterHandler::for_consumer`] warns when one
//! record's backoff alone takes half of it.
//!
//! The copy goes to partition `source partition % partitions of the dead-letter topic`
//! (as the broker places share-group copies) and is timestamped when it is written, so
//! the dead-letter topic's retention counts from the failure.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use tidelog_client::dead_letter::{DeadLetterHandler, DeadLetterPolicy, Outcome};
//! use tidelog_client::{Client, Consumer, ConsumerConfig, OffsetReset};
//!
//! let mut config = ConsumerConfig::for_group("billing");
//! config.auto_offset_reset = OffsetReset::Earliest;
//! config.enable_auto_commit = false; // commit after each record is settled
//! let mut consumer = Consumer::new(Client::connect_to("127.0.0.1:9092").await?, config)?;
//! consumer.subscribe(&["payments"])?;
//! let mut policy = DeadLetterPolicy::to_topic("dlq.payments");
//! policy.max_attempts = 5;
//! let client = Client::connect_to("127.0.0.1:9092").await?;
//! let mut dlq = DeadLetterHandler::for_consumer(client, &consumer, policy)?;
//! loop {
//!     for record in consumer.poll(Duration::from_secs(1)).await? {
//!         let outcome = dlq
//!             .process(&record, async |r| {
//!                 let text = std::str::from_utf8(r.value.as_deref().unwrap_or_default())?;
//!                 let cents: i64 = text.parse()?; // a poison record fails here, every time
//!                 println!("credit {cents}");
//!                 Ok::<(), Box<dyn std::error::Error>>(())
//!             })
//!             .await?; // Err: the copy was not written; do not commit
//!         if let Outcome::DeadLettered { attempts, .. } = outcome {
//!             eprintln!("offset {} dead-lettered after {attempts} attempts", record.offset);
//!         }
//!         let tp = (record.topic.clone(), record.partition);
//!         consumer.commit_offsets_sync(&[(tp, record.offset + 1)]).await?;
//!     }
//! }
//! # }
//! ```

pub mod headers;
mod policy;

use std::fmt::Display;
use std::time::Duration;

pub use headers::{DeadLetterOrigin, HEADER_NAMES};
pub use policy::{Backoff, DeadLetterPolicy, MAX_ATTEMPTS, MAX_BACKOFF};

use crate::client::Client;
use crate::consumer::{Consumer, ConsumerRecord};
use crate::error::ClientError;
use crate::producer::{Acks, Producer, ProducerConfig, RecordMetadata};
use crate::records::ProduceRecord;

/// What became of a record; either way the caller may commit past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The handler succeeded on attempt `attempts` (1 when it never failed).
    Handled {
        /// Attempts made, the successful one included.
        attempts: u32,
    },
    /// Every attempt failed; the copy is acknowledged at `written`.
    DeadLettered {
        /// Attempts made (the policy's `max_attempts`).
        attempts: u32,
        /// Where the copy landed in the dead-letter topic.
        written: RecordMetadata,
    },
}

/// Why a record is not settled.
#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    /// The policy is out of its bounds.
    #[error("invalid dead-letter policy: {0}")]
    InvalidPolicy(String),
    /// The record failed every attempt and its copy was not acknowledged: it is not
    /// settled, do not commit past it.
    #[error("{topic}-{partition}@{offset} failed {attempts} attempts ({message}) and could not be written to dead-letter topic {dead_letter_topic}: {source}")]
    Produce {
        /// Source topic.
        topic: String,
        /// Source partition.
        partition: i32,
        /// Source offset.
        offset: i64,
        /// Attempts made; pass to [`DeadLetterHandler::dead_letter`] to try the copy again.
        attempts: u32,
        /// The last attempt's error, as the copy carries it.
        message: String,
        /// The dead-letter topic.
        dead_letter_topic: String,
        /// Why the produce failed (boxed: the client's error is large, and this one
        /// travels in every `Result` of the handler).
        #[source]
        source: Box<ClientError>,
    },
}

/// Runs a handler with bounded retries and dead-letters what keeps failing. See the
/// module docs.
#[derive(Debug)]
pub struct DeadLetterHandler {
    producer: Producer,
    group: String,
    policy: DeadLetterPolicy,
}

impl DeadLetterHandler {
    /// A handler for records of `group`, writing copies over `client` (its own
    /// connection: the consumer's stays free for polling).
    pub fn new(
        client: Client,
        group: impl Into<String>,
        policy: DeadLetterPolicy,
    ) -> Result<DeadLetterHandler, DeadLetterError> {
        policy.validate()?;
        let config = ProducerConfig {
            // A copy that is not on every in-sync replica could vanish after its
            // source was committed past.
            acks: Acks::All,
            allow_auto_create: policy.allow_auto_create,
            ..ProducerConfig::default()
        };
        Ok(DeadLetterHandler {
            producer: Producer::new(client, config),
            group: group.into(),
            policy,
        })
    }

    /// A handler for `consumer`'s group; warns when one record's backoff alone can take
    /// half of its `max.poll.interval.ms`.
    pub fn for_consumer(
        client: Client,
        consumer: &Consumer,
        policy: DeadLetterPolicy,
    ) -> Result<DeadLetterHandler, DeadLetterError> {
        let config = consumer.config();
        let Some(group) = config.group_id.clone() else {
            return Err(DeadLetterError::InvalidPolicy(
                "the consumer has no group.id to name in dead letters".into(),
            ));
        };
        let worst = policy.worst_case_backoff();
        if worst >= config.max_poll_interval / 2 {
            tracing::warn!(group = %group, worst_case_backoff_ms = worst.as_millis(),
                max_poll_interval_ms = config.max_poll_interval.as_millis(),
                "a failing record's retries can take half of max.poll.interval.ms; \
                 the member risks being ejected from the group while it retries");
        }
        DeadLetterHandler::new(client, group, policy)
    }

    /// The policy.
    pub fn policy(&self) -> &DeadLetterPolicy {
        &self.policy
    }

    /// Runs `handler` on `record` until it succeeds or the attempts run out, then
    /// dead-letters the record. `Ok` means the record is settled: commit past it.
    pub async fn process<E: Display>(
        &mut self,
        record: &ConsumerRecord,
        mut handler: impl AsyncFnMut(&ConsumerRecord) -> Result<(), E>,
    ) -> Result<Outcome, DeadLetterError> {
        let backoff = self.policy.backoff;
        let tried = attempt(
            self.policy.max_attempts,
            &backoff,
            async || handler(record).await,
            tokio::time::sleep,
        )
        .await;
        match tried {
            Ok(attempts) => Ok(Outcome::Handled { attempts }),
            Err((attempts, message)) => {
                tracing::warn!(topic = %record.topic, partition = record.partition,
                    offset = record.offset, attempts, error = %message,
                    dead_letter_topic = %self.policy.topic, "record failed every attempt; dead-lettering it");
                let written = self.dead_letter(record, attempts, &message).await?;
                Ok(Outcome::DeadLettered { attempts, written })
            }
        }
    }

    /// [`Self::process`] with a synchronous handler.
    pub async fn process_sync<E: Display>(
        &mut self,
        record: &ConsumerRecord,
        mut handler: impl FnMut(&ConsumerRecord) -> Result<(), E>,
    ) -> Result<Outcome, DeadLetterError> {
        self.process(record, async |r| handler(r)).await
    }

    /// Writes `record`'s copy with the origin headers and waits for the
    /// acknowledgement, without running any handler: what `process` does after the
    /// last attempt, and how to retry a copy that [`DeadLetterError::Produce`] reported.
    pub async fn dead_letter(
        &mut self,
        record: &ConsumerRecord,
        attempts: u32,
        message: &str,
    ) -> Result<RecordMetadata, DeadLetterError> {
        let failed = |source: ClientError| DeadLetterError::Produce {
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            attempts,
            message: message.to_owned(),
            dead_letter_topic: self.policy.topic.clone(),
            source: Box::new(source),
        };
        let copy = dead_letter_record(record, &self.group, attempts, message, &self.policy);
        let topic = self.policy.topic.as_str();
        let partitions = self
            .producer
            .client()
            .partition_count(topic, self.policy.allow_auto_create)
            .await
            .map_err(failed)?;
        let partition = record.partition.rem_euclid(partitions.max(1));
        let written = async {
            self.producer.send(topic, Some(partition), copy).await?;
            self.producer.flush().await
        }
        .await
        .map_err(failed)?;
        written
            .into_iter()
            .next()
            .ok_or_else(|| failed(ClientError::Protocol("the copy got no result".into())))
    }
}

/// Calls `handler` up to `max_attempts` times, sleeping `backoff.delay(k)` after the
/// k-th failure except the last. `Ok(attempts)` on success, else the attempts made and
/// the last error's `Display`.
async fn attempt<E: Display>(
    max_attempts: u32,
    backoff: &Backoff,
    mut handler: impl AsyncFnMut() -> Result<(), E>,
    mut sleep: impl AsyncFnMut(Duration),
) -> Result<u32, (u32, String)> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match handler().await {
            Ok(()) => return Ok(attempts),
            Err(e) if attempts >= max_attempts => return Err((attempts, e.to_string())),
            Err(e) => {
                tracing::debug!(attempts, error = %e, "handler failed; retrying after backoff");
                sleep(backoff.delay(attempts)).await;
            }
        }
    }
}

/// The copy of `record`: its key, value and own headers (when the policy copies the
/// record, less any dead-letter headers of an earlier trip), then the origin headers.
fn dead_letter_record(
    record: &ConsumerRecord,
    group: &str,
    attempts: u32,
    message: &str,
    policy: &DeadLetterPolicy,
) -> ProduceRecord {
    let origin = DeadLetterOrigin {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
        group: group.to_owned(),
        delivery_count: attempts,
        message: message.to_owned(),
    };
    let mut copy = ProduceRecord::default();
    if policy.copy_record {
        copy.key = record.key.clone();
        copy.value = record.value.clone();
        copy.headers = record
            .headers
            .iter()
            .filter(|(k, _)| !headers::is_dead_letter_header(k))
            .cloned()
            .collect();
    }
    copy.headers.extend(origin.to_headers());
    copy
}

#[cfg(test)]
mod tests;
