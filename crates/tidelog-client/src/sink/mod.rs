//! The effectively-once sink: the chapter's *idempotent consumer*. Delivery is
//! at-least-once; when the effect lands in a database, writing a dedup key in the same
//! database transaction as the effect makes a redelivery a no-op.
//!
//! **The key is the producer's identity for the message, never topic:partition:offset.**
//! An unclean leader election truncates the log, the idempotent producer re-sends, and
//! the same logical message comes back at another offset: keyed on the offset it would
//! be applied twice. The key here is (producer, idempotency key):
//!
//! - the idempotency key is the value of the record header [`IDEMPOTENCY_KEY_HEADER`]
//!   (`idempotency-key`), minted by the producer once per logical message and re-sent
//!   unchanged on every retry;
//! - the producer is the header [`PRODUCER_ID_HEADER`] (`producer-id`) when the
//!   application sets one (an identity that survives producer restarts), else the
//!   record batch's Kafka producer id (idempotent producers; it changes when the
//!   producer restarts, so a re-send after a producer restart is not caught).
//!
//! A record without an idempotency key, or without any producer identity, is refused
//! ([`SinkError::NoIdempotencyKey`]) rather than applied without protection.
//!
//! **The effect's rowcount is checked.** An UPDATE that matches no row does not fail; if
//! its key were committed, the effect would be lost and the redelivery that could fix it
//! refused. An effect reporting 0 rows rolls back the whole transaction, key included.
//!
//! **The dedup window** ([`DedupWindow`]) is the longest time the *system* may redeliver
//! a message: the group's `session.timeout.ms` plus the rebalance time, as the consumer
//! measured it. Keys older than that are expired. A deliberate replay (a `seek` far
//! back) is outside the window by design and will apply effects again: the sink warns
//! loudly when it sees one.

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use std::collections::HashMap;
use std::time::Duration;

use crate::consumer::ConsumerRecord;
use crate::partition_admin::TopicPartition;

/// The record header carrying the producer-minted idempotency key.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The optional record header naming the producer (overrides the batch's producer id).
pub const PRODUCER_ID_HEADER: &str = "producer-id";

/// What applying a record did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The key was new: the effect ran and was committed with it.
    Applied,
    /// The key was already there: nothing was done.
    Duplicate,
}

/// Why a record was not applied.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The record carries no idempotency key or no producer identity.
    #[error(
        "{topic}-{partition}@{offset}: no dedup key ({reason}); refusing to apply it unprotected"
    )]
    NoIdempotencyKey {
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
        /// Offset.
        offset: i64,
        /// What is missing.
        reason: &'static str,
    },
    /// The effect matched no row; the transaction (key included) was rolled back.
    #[error("the effect for {key} changed no row; rolled back, key not recorded")]
    NoOpEffect {
        /// The dedup key, as `producer:idempotency-key`.
        key: String,
    },
    /// The database failed.
    #[cfg(feature = "sqlite")]
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database failed (with the server's message, which tokio-postgres keeps in
    /// the error's source).
    #[cfg(feature = "postgres")]
    #[error("postgres: {}", postgres_detail(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// A PostgreSQL step did not finish in time; an `apply` cut short is rolled back
    /// unless its commit had reached the server, and is safe to redeliver either way.
    #[cfg(feature = "postgres")]
    #[error("postgres: {what} took longer than {limit:?}")]
    PostgresTimeout {
        /// The step.
        what: &'static str,
        /// Its bound.
        limit: Duration,
    },
}

/// tokio-postgres shows only the error's kind ("db error"); the server's message
/// (`ERROR: relation "x" does not exist`) is its source.
#[cfg(feature = "postgres")]
fn postgres_detail(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// A message's identity as its producer minted it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DedupKey {
    /// The producer: the `producer-id` header, else the batch's producer id in decimal.
    pub producer: String,
    /// The `idempotency-key` header's bytes.
    pub idempotency_key: Vec<u8>,
}

impl DedupKey {
    /// The key of `record` (see the module docs); the offset plays no part.
    pub fn of(record: &ConsumerRecord) -> Result<DedupKey, SinkError> {
        let refuse = |reason| SinkError::NoIdempotencyKey {
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            reason,
        };
        let header = |name: &str| {
            record
                .headers
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.as_ref())
        };
        let idempotency_key = header(IDEMPOTENCY_KEY_HEADER)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| refuse("no idempotency-key header"))?
            .to_vec();
        let producer = match header(PRODUCER_ID_HEADER) {
            Some(v) if !v.is_empty() => String::from_utf8_lossy(v).into_owned(),
            _ if record.producer_id >= 0 => record.producer_id.to_string(),
            _ => {
                return Err(refuse(
                    "no producer-id header and the producer is not idempotent",
                ))
            }
        };
        Ok(DedupKey {
            producer,
            idempotency_key,
        })
    }
}

impl std::fmt::Display for DedupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}",
            self.producer,
            String::from_utf8_lossy(&self.idempotency_key)
        )
    }
}

/// How long dedup keys must be remembered: the redelivery horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupWindow {
    /// The group's `session.timeout.ms`.
    pub session_timeout: Duration,
    /// The rebalance time (e.g. [`crate::Consumer::measured_rebalance_time`]).
    pub rebalance_time: Duration,
}

impl DedupWindow {
    /// The window of a consumer's group: its session timeout plus the longest rebalance
    /// it measured.
    pub fn of_consumer(consumer: &crate::Consumer) -> DedupWindow {
        DedupWindow {
            session_timeout: consumer.config().session_timeout,
            rebalance_time: consumer.measured_rebalance_time(),
        }
    }

    /// The horizon: session timeout + rebalance time (the chapter's 45 + 15 = 60 s).
    pub fn length(&self) -> Duration {
        self.session_timeout + self.rebalance_time
    }

    /// Dedup state the window holds at `messages_per_second` and `bytes_per_key`
    /// (the chapter's 1 M/s × 60 s × 16 B = 960 MB).
    pub fn state_bytes(&self, messages_per_second: u64, bytes_per_key: u64) -> u64 {
        let seconds = self.length().as_secs();
        messages_per_second
            .saturating_mul(seconds)
            .saturating_mul(bytes_per_key)
    }
}

/// Notices replays: a partition's offsets going back to records older than the window.
#[derive(Debug, Default)]
pub(crate) struct ReplayGuard {
    highest: HashMap<TopicPartition, i64>,
}

impl ReplayGuard {
    /// Returns true (and warns) when `record` comes after a rewind of its partition and
    /// is older than the window: its effect may be applied a second time.
    pub(crate) fn check(&mut self, record: &ConsumerRecord, window: Duration, now_ms: i64) -> bool {
        let tp = (record.topic.clone(), record.partition);
        let highest = self.highest.entry(tp).or_insert(record.offset);
        let rewound = record.offset < *highest;
        *highest = (*highest).max(record.offset);
        let age_ms = now_ms.saturating_sub(record.timestamp);
        let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        if rewound && age_ms > window_ms {
            tracing::error!(
                topic = %record.topic, partition = record.partition, offset = record.offset,
                age_ms, window_ms,
                "REPLAY BEYOND THE DEDUP WINDOW: this record is older than the dedup keys \
                 kept; a replay re-applies effects whose keys have expired"
            );
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::records::ConsumedRecord;
    use bytes::Bytes;

    pub(crate) fn record(
        offset: i64,
        headers: &[(&str, &str)],
        producer_id: i64,
    ) -> ConsumerRecord {
        ConsumerRecord {
            topic: "payments".into(),
            record: ConsumedRecord {
                partition: 0,
                offset,
                timestamp: 1_000_000,
                log_append_time: false,
                key: None,
                value: None,
                headers: headers
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Some(Bytes::from(v.to_string()))))
                    .collect(),
                producer_id,
            },
        }
    }

    #[test]
    fn the_key_ignores_the_offset_and_needs_a_producer_identity() {
        let a = record(7, &[("idempotency-key", "txn-9")], 4000);
        let b = record(3, &[("idempotency-key", "txn-9")], 4000);
        assert_eq!(DedupKey::of(&a).unwrap(), DedupKey::of(&b).unwrap());
        assert_eq!(DedupKey::of(&a).unwrap().to_string(), "4000:txn-9");
        let named = record(
            7,
            &[("idempotency-key", "txn-9"), ("producer-id", "p7")],
            4000,
        );
        assert_eq!(DedupKey::of(&named).unwrap().to_string(), "p7:txn-9");
        assert!(DedupKey::of(&record(1, &[], 4000)).is_err());
        assert!(DedupKey::of(&record(1, &[("idempotency-key", "k")], -1)).is_err());
    }

    #[test]
    fn the_window_is_session_timeout_plus_rebalance_time() {
        let w = DedupWindow {
            session_timeout: Duration::from_secs(45),
            rebalance_time: Duration::from_secs(15),
        };
        assert_eq!(w.length(), Duration::from_secs(60));
        assert_eq!(w.state_bytes(1_000_000, 16), 960_000_000);
    }

    #[test]
    fn a_rewind_to_old_records_is_flagged_and_a_recent_one_is_not() {
        let mut guard = ReplayGuard::default();
        let window = Duration::from_secs(60);
        let now = 1_000_000 + 30_000; // the records are 30 s old
        assert!(!guard.check(&record(10, &[], 1), window, now));
        // Offsets back (an unclean election) but within the window: the keys still exist.
        assert!(!guard.check(&record(3, &[], 1), window, now));
        // The same rewind an hour later: a replay past the window.
        assert!(guard.check(&record(4, &[], 1), window, now + 3_600_000));
    }
}
