//! The idempotent producer's identity (producer id and epoch from InitProducerId) and
//! its per-partition sequence numbers, which the broker uses to write a retried batch
//! only once.

use std::collections::HashMap;

use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
use kafka_protocol::ResponseError;

use super::buffer::PartitionKey;
use crate::client::Client;
use crate::error::{ClientError, Result};

/// Kafka's `transaction.timeout.ms` default, which InitProducerId carries even without a
/// transactional id.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;

#[derive(Debug)]
pub(super) struct Identity {
    pub(super) producer_id: i64,
    pub(super) epoch: i16,
    next: HashMap<PartitionKey, i32>,
}

impl Identity {
    /// A producer id and epoch with every sequence at 0.
    pub(super) fn new(producer_id: i64, epoch: i16) -> Identity {
        Identity {
            producer_id,
            epoch,
            next: HashMap::new(),
        }
    }

    /// The base sequence of a new batch of `count` records to `key`; the next batch
    /// starts after it.
    pub(super) fn take_sequence(&mut self, key: &PartitionKey, count: usize) -> i32 {
        let next = self.next.entry(key.clone()).or_insert(0);
        let base = *next;
        *next = increment(base, i32::try_from(count).unwrap_or(i32::MAX));
        base
    }
}

/// Sequence arithmetic as Kafka does it: after `i32::MAX` comes 0.
pub(super) fn increment(sequence: i32, by: i32) -> i32 {
    if sequence > i32::MAX - by {
        by - (i32::MAX - sequence) - 1
    } else {
        sequence + by
    }
}

/// Errors after which the broker will never accept this producer's sequence again as it
/// stands: retrying would reorder or lose records, so they fail the batch.
pub(super) fn is_sequence_error(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::OutOfOrderSequenceNumber
            | ResponseError::UnknownProducerId
            | ResponseError::InvalidProducerEpoch
            | ResponseError::ProducerFenced
    )
}

/// Asks any broker for a producer id (no transactional id: a fresh id, epoch 0).
pub(super) async fn init_producer_id(client: &mut Client) -> Result<Identity> {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = client.send_any(&request).await?;
    ClientError::check(response.error_code, None, || "InitProducerId".into())?;
    if response.producer_id.0 < 0 {
        return Err(ClientError::Protocol(format!(
            "InitProducerId answered producer id {}",
            response.producer_id.0
        )));
    }
    Ok(Identity {
        producer_id: response.producer_id.0,
        epoch: response.producer_epoch,
        next: HashMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_consecutive_per_partition_and_wrap_like_kafka() {
        let mut id = Identity {
            producer_id: 1,
            epoch: 0,
            next: HashMap::new(),
        };
        let a = ("t".to_owned(), 0);
        let b = ("t".to_owned(), 1);
        assert_eq!(id.take_sequence(&a, 3), 0);
        assert_eq!(id.take_sequence(&a, 2), 3);
        assert_eq!(id.take_sequence(&b, 1), 0);
        assert_eq!(id.take_sequence(&a, 1), 5);
        assert_eq!(increment(i32::MAX, 1), 0);
        assert_eq!(increment(i32::MAX - 1, 3), 1);
        assert_eq!(increment(7, 3), 10);
    }
}
