//! One round of sending: the oldest batch of every partition with records waiting, one
//! Produce request per leader, all leaders at once. A partition has at most one batch in
//! flight, so its order holds; a batch keeps its bytes (and sequence) across retries.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::buffer::PartitionKey;
use super::config::Acks;
use super::idempotence::{init_producer_id, is_sequence_error};
use super::{now_ms, Producer};
use crate::batch::write_batch;
use crate::client::{is_leadership_error, needs_metadata_refresh};
use crate::error::{ClientError, Result};

/// What a round left to retry. Errors that fail the records are returned as `Err`.
#[derive(Debug, Default)]
pub(super) struct Round {
    /// The last failure a later round may get past (no leader, broken connection,
    /// timeout); `None` when every batch sent was acknowledged.
    pub(super) retriable: Option<ClientError>,
    /// Topics whose metadata turned out stale.
    pub(super) stale: Vec<String>,
}

/// Produce errors the broker answers before appending, so a resend writes nothing twice
/// even without idempotence.
fn refused_before_append(e: ResponseError) -> bool {
    is_leadership_error(e) || e == ResponseError::NotEnoughReplicas
}

type Answer = (
    Vec<(PartitionKey, usize)>,
    Result<Option<kafka_protocol::messages::ProduceResponse>>,
);

impl Producer {
    pub(super) async fn round(&mut self) -> Result<Round> {
        let keys = self.buffer.waiting();
        self.round_of(keys).await
    }

    /// One round over `keys` alone: the oldest batch of each, one per partition in
    /// flight, so order and sequences hold.
    pub(super) async fn round_of(&mut self, keys: Vec<PartitionKey>) -> Result<Round> {
        let mut round = Round::default();
        if self.txn.is_some() && self.identity.is_none() {
            return Err(self.txn_not_ready());
        }
        if self.config.enable_idempotence && self.identity.is_none() {
            match init_producer_id(&mut self.client).await {
                Ok(id) => self.identity = Some(id),
                Err(e) if e.is_retriable() => {
                    round.retriable = Some(e);
                    return Ok(round);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        let now = now_ms();
        let mut by_leader: BTreeMap<i32, Vec<(PartitionKey, Bytes, usize)>> = BTreeMap::new();
        for key in keys {
            match self.client.leader_of(&key.0, key.1).await {
                Ok(leader) => {
                    let (bytes, count) = match self.encoded(&key, now) {
                        Ok(b) => b,
                        Err(e) => return Err(self.fail(e)),
                    };
                    by_leader
                        .entry(leader)
                        .or_default()
                        .push((key, bytes, count));
                }
                Err(e) if needs_metadata_refresh(&e) || e.is_retriable() => {
                    round.stale.push(key.0.clone());
                    round.retriable = Some(e);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        let acks = self.config.acks;
        let mut in_flight = tokio::task::JoinSet::new();
        for (leader, batches) in by_leader {
            let request = self.produce_request(&batches);
            let sent: Vec<(PartitionKey, usize)> =
                batches.into_iter().map(|(k, _, n)| (k, n)).collect();
            let mut conn = match self.client.take_connection(leader).await {
                Ok(c) => c,
                Err(e) if e.is_retriable() => {
                    round.retriable = Some(e);
                    continue;
                }
                Err(e) => return Err(self.fail(e)),
            };
            in_flight.spawn(async move {
                let response = if acks == Acks::None {
                    conn.send_oneway(&request).await.map(|()| None)
                } else {
                    conn.send(&request).await.map(Some)
                };
                (leader, conn, sent, response)
            });
        }
        // Every answer is collected before any is acted on, so a failure of one leader
        // cannot leave another leader's acknowledged batches looking unsent.
        let mut answers: Vec<Answer> = Vec::new();
        while let Some(joined) = in_flight.join_next().await {
            let (leader, conn, sent, response) =
                joined.map_err(|e| ClientError::Protocol(format!("produce task failed: {e}")))?;
            self.client.return_connection(leader, conn);
            answers.push((sent, response));
        }
        let lose_acks = std::mem::take(&mut self.lose_next_acks);
        for (sent, response) in answers {
            let response = match response {
                Ok(r) => r,
                Err(e) if e.is_retriable() => {
                    round.retriable = Some(e);
                    continue;
                }
                Err(e) => return Err(self.fail(e)),
            };
            let Some(response) = response else {
                for (key, _) in &sent {
                    self.buffer.acknowledge(key, -1);
                }
                continue;
            };
            let mut answered: HashMap<PartitionKey, (i16, i64, Option<String>)> = HashMap::new();
            for t in response.responses {
                for p in t.partition_responses {
                    answered.insert(
                        (t.name.0.as_str().to_owned(), p.index),
                        (
                            p.error_code,
                            p.base_offset,
                            p.error_message.map(|m| m.as_str().to_owned()),
                        ),
                    );
                }
            }
            for (key, _count) in sent {
                let Some((code, base, message)) = answered.remove(&key) else {
                    let e = ClientError::Protocol(format!(
                        "produce response lacks {}-{}",
                        key.0, key.1
                    ));
                    return Err(self.fail(e));
                };
                let context = format!("produce to {}-{}", key.0, key.1);
                match ResponseError::try_from_code(code) {
                    // A duplicate is a batch the broker already has: what a retry is for.
                    None | Some(ResponseError::DuplicateSequenceNumber) if lose_acks => {
                        round.retriable = Some(ClientError::Closed {
                            addr: format!("{context} (acknowledgement dropped by a test hook)"),
                        });
                    }
                    None | Some(ResponseError::DuplicateSequenceNumber) => {
                        self.buffer.acknowledge(&key, base);
                    }
                    Some(error) if refused_before_append(error) => {
                        if is_leadership_error(error) {
                            round.stale.push(key.0.clone());
                        }
                        round.retriable = Some(ClientError::Broker {
                            context,
                            error,
                            message,
                        });
                    }
                    Some(error) if is_sequence_error(error) => {
                        let (producer_id, epoch) = self
                            .identity
                            .as_ref()
                            .map_or((-1, -1), |i| (i.producer_id, i.epoch));
                        let e = ClientError::ProducerSequence {
                            topic: key.0.clone(),
                            partition: key.1,
                            producer_id,
                            epoch,
                            error,
                            message,
                        };
                        return Err(self.fail(e));
                    }
                    Some(error) => {
                        let e = ClientError::Broker {
                            context,
                            error,
                            message,
                        };
                        return Err(self.fail(e));
                    }
                }
            }
        }
        Ok(round)
    }

    /// The oldest batch of `key` as sent: encoded (and given its sequence) the first
    /// time, the same bytes on every retry.
    fn encoded(&mut self, key: &PartitionKey, now: i64) -> Result<(Bytes, usize)> {
        let compression = self.config.compression;
        let transactional = self.txn.is_some();
        let Some(batch) = self.buffer.oldest_mut(key) else {
            return Err(ClientError::Protocol(format!(
                "no batch waiting for {}-{}",
                key.0, key.1
            )));
        };
        if let Some(bytes) = &batch.encoded {
            return Ok((bytes.clone(), batch.len()));
        }
        let producer = self.identity.as_mut().map(|id| {
            let sequence = id.take_sequence(key, batch.slots.len());
            (id.producer_id, id.epoch, sequence)
        });
        let bytes = write_batch(&batch.records, compression, now, producer, transactional)?;
        batch.records = Vec::new();
        batch.encoded = Some(bytes.clone());
        Ok((bytes, batch.len()))
    }

    fn produce_request(&self, batches: &[(PartitionKey, Bytes, usize)]) -> ProduceRequest {
        let mut topics: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
        for ((topic, partition), bytes, _) in batches {
            topics.entry(topic).or_default().push(
                PartitionProduceData::default()
                    .with_index(*partition)
                    .with_records(Some(bytes.clone())),
            );
        }
        ProduceRequest::default()
            .with_transactional_id(
                self.txn
                    .as_ref()
                    .map(|t| TransactionalId(StrBytes::from_string(t.id.clone()))),
            )
            .with_acks(self.config.acks.wire())
            .with_timeout_ms(
                i32::try_from(self.config.produce_timeout.as_millis()).unwrap_or(i32::MAX),
            )
            .with_topic_data(
                topics
                    .into_iter()
                    .map(|(name, parts)| {
                        TopicProduceData::default()
                            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                            .with_partition_data(parts)
                    })
                    .collect(),
            )
    }
}
