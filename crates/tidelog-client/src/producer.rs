//! Producing: records are buffered per partition and sent as one RecordBatch per partition
//! per Produce request, grouped by leader.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;

use crate::client::{is_leadership_error, Client};
use crate::error::{ClientError, Result};
use crate::partitioner::{partition_for_key, StickyPartitioner};
use crate::records::{encode_batch, ProduceRecord};

/// How many replicas must have a batch before the broker answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Fire and forget: the broker sends no response, offsets are unknown (-1).
    None,
    /// The leader appended it.
    Leader,
    /// Every in-sync replica has it.
    All,
}

impl Acks {
    fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

impl std::str::FromStr for Acks {
    type Err = ClientError;
    fn from_str(s: &str) -> Result<Acks> {
        match s {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(ClientError::InvalidArgument(format!(
                "acks must be 0, 1 or all, not {other:?}"
            ))),
        }
    }
}

/// Settings of a [`Producer`].
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Acknowledgement level.
    pub acks: Acks,
    /// Codec of every batch.
    pub compression: Compression,
    /// Records of one partition are split into batches of about this many bytes.
    pub max_batch_bytes: usize,
    /// The broker-side `timeout_ms` of a Produce request (acks=all wait).
    pub produce_timeout: Duration,
    /// Ask the broker to auto-create unknown topics (when it allows that).
    pub allow_auto_create: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            compression: Compression::None,
            max_batch_bytes: 1024 * 1024,
            produce_timeout: Duration::from_secs(30),
            allow_auto_create: true,
        }
    }
}

/// Where a record was written. `offset` is -1 with acks=0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Partition.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
}

type PartitionKey = (String, i32);
/// Records of one partition, each with its position in `send` order.
type Chunk = Vec<(usize, ProduceRecord)>;

/// A buffering producer. [`Producer::send`] only queues; [`Producer::flush`] writes
/// everything queued and returns each record's (partition, offset) in `send` order.
#[derive(Debug)]
pub struct Producer {
    client: Client,
    config: ProducerConfig,
    pending: BTreeMap<PartitionKey, Chunk>,
    queued: usize,
    queued_bytes: usize,
    sticky: HashMap<String, StickyPartitioner>,
}

impl Producer {
    /// A producer over an existing client.
    pub fn new(client: Client, config: ProducerConfig) -> Producer {
        Producer {
            client,
            config,
            pending: BTreeMap::new(),
            queued: 0,
            queued_bytes: 0,
            sticky: HashMap::new(),
        }
    }

    /// The underlying client.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Records and approximate bytes queued since the last flush.
    pub fn buffered(&self) -> (usize, usize) {
        (self.queued, self.queued_bytes)
    }

    /// Queues a record. The partition is `partition` when given, else murmur2 of the key
    /// (Java client compatible), else sticky for keyless records.
    pub async fn send(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        record: ProduceRecord,
    ) -> Result<()> {
        let count = self
            .client
            .partition_count(topic, self.config.allow_auto_create)
            .await?;
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
        self.queued_bytes += record.approx_size();
        self.pending
            .entry((topic.to_owned(), chosen))
            .or_default()
            .push((self.queued, record));
        self.queued += 1;
        Ok(())
    }

    /// Sends everything queued. Leader changes are retried; any other error fails the flush.
    pub async fn flush(&mut self) -> Result<Vec<RecordMetadata>> {
        let total = self.queued;
        let pending = std::mem::take(&mut self.pending);
        self.queued = 0;
        self.queued_bytes = 0;
        for s in self.sticky.values_mut() {
            s.rotate();
        }
        let mut results: Vec<Option<RecordMetadata>> = vec![None; total];
        let mut queues: BTreeMap<PartitionKey, VecDeque<Chunk>> = pending
            .into_iter()
            .map(|(k, records)| (k, self.chunk(records)))
            .collect();
        let mut attempt = 0;
        while !queues.is_empty() {
            let round: Vec<(PartitionKey, Chunk)> = queues
                .iter_mut()
                .filter_map(|(k, q)| q.pop_front().map(|c| (k.clone(), c)))
                .collect();
            queues.retain(|_, q| !q.is_empty());
            let retry = self.send_round(round, &mut results).await?;
            if retry.is_empty() {
                continue;
            }
            attempt += 1;
            if attempt > self.client.config().retries {
                let ((topic, partition), _) = &retry[0];
                return Err(ClientError::NoLeader {
                    topic: topic.clone(),
                    partition: *partition,
                });
            }
            for ((topic, _), _) in &retry {
                self.client.invalidate_topic(topic);
            }
            tokio::time::sleep(self.client.config().retry_backoff).await;
            for (k, chunk) in retry {
                queues.entry(k).or_default().push_front(chunk);
            }
        }
        results
            .into_iter()
            .map(|r| r.ok_or_else(|| ClientError::Protocol("a record got no result".into())))
            .collect()
    }

    fn chunk(&self, records: Chunk) -> VecDeque<Chunk> {
        let mut out = VecDeque::new();
        let mut current = Vec::new();
        let mut bytes = 0;
        for (seq, r) in records {
            let size = r.approx_size();
            if !current.is_empty() && bytes + size > self.config.max_batch_bytes {
                out.push_back(std::mem::take(&mut current));
                bytes = 0;
            }
            bytes += size;
            current.push((seq, r));
        }
        if !current.is_empty() {
            out.push_back(current);
        }
        out
    }

    /// Sends one batch per partition, one request per leader. Returns the chunks to retry.
    async fn send_round(
        &mut self,
        round: Vec<(PartitionKey, Chunk)>,
        results: &mut [Option<RecordMetadata>],
    ) -> Result<Vec<(PartitionKey, Chunk)>> {
        let mut by_leader: BTreeMap<i32, Vec<(PartitionKey, Chunk)>> = BTreeMap::new();
        let mut retry = Vec::new();
        for (key, chunk) in round {
            match self.client.leader_of(&key.0, key.1).await {
                Ok(leader) => by_leader.entry(leader).or_default().push((key, chunk)),
                Err(ClientError::NoLeader { .. }) => retry.push((key, chunk)),
                Err(e) => return Err(e),
            }
        }
        let now = now_ms();
        // One request per leader, all in flight at once; a partition has at most one batch
        // in flight, so its order is kept.
        let acks = self.config.acks;
        let mut in_flight = tokio::task::JoinSet::new();
        let mut sent = HashMap::new();
        for (leader, batches) in by_leader {
            let request = self.produce_request(&batches, now)?;
            let mut conn = self.client.take_connection(leader).await?;
            in_flight.spawn(async move {
                let response = if acks == Acks::None {
                    conn.send_oneway(&request).await.map(|()| None)
                } else {
                    conn.send(&request).await.map(Some)
                };
                (leader, conn, response)
            });
            sent.insert(leader, batches);
        }
        let mut answers = Vec::new();
        while let Some(joined) = in_flight.join_next().await {
            let (leader, conn, response) =
                joined.map_err(|e| ClientError::Protocol(format!("produce task failed: {e}")))?;
            self.client.return_connection(leader, conn);
            answers.push((sent.remove(&leader).unwrap_or_default(), response));
        }
        for (batches, response) in answers {
            let Some(response) = response? else {
                for ((_, partition), chunk) in &batches {
                    for (seq, _) in chunk {
                        set(results, *seq, *partition, -1);
                    }
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
            for (key, chunk) in batches {
                let Some((code, base, message)) = answered.remove(&key) else {
                    return Err(ClientError::Protocol(format!(
                        "produce response lacks {}-{}",
                        key.0, key.1
                    )));
                };
                match ResponseError::try_from_code(code) {
                    None => {
                        for (i, (seq, _)) in chunk.iter().enumerate() {
                            let offset = i64::try_from(i).map_or(-1, |i| base + i);
                            set(results, *seq, key.1, offset);
                        }
                    }
                    Some(e) if is_leadership_error(e) => retry.push((key, chunk)),
                    Some(error) => {
                        return Err(ClientError::Broker {
                            context: format!("produce to {}-{}", key.0, key.1),
                            error,
                            message,
                        })
                    }
                }
            }
        }
        Ok(retry)
    }

    fn produce_request(
        &self,
        batches: &[(PartitionKey, Chunk)],
        now: i64,
    ) -> Result<ProduceRequest> {
        let mut topics: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
        for ((topic, partition), chunk) in batches {
            let records: Vec<ProduceRecord> = chunk.iter().map(|(_, r)| r.clone()).collect();
            let bytes = encode_batch(&records, self.config.compression, now)?;
            topics.entry(topic).or_default().push(
                PartitionProduceData::default()
                    .with_index(*partition)
                    .with_records(Some(bytes)),
            );
        }
        Ok(ProduceRequest::default()
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
            ))
    }
}

fn set(results: &mut [Option<RecordMetadata>], seq: usize, partition: i32, offset: i64) {
    if let Some(slot) = results.get_mut(seq) {
        *slot = Some(RecordMetadata { partition, offset });
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
