//! A lighter reference producer built on the workspace's own protocol code (not
//! librdkafka): one record batch is encoded once, and the same bytes are sent again and
//! again in pipelined Produce requests (acks=1, a bounded number in flight, partitions in
//! turn). The broker assigns every batch its offsets, so each request is real, validated
//! work for it. It shows what the broker ingests when the client costs almost nothing;
//! the librdkafka figure stays the target's value.

use std::io::{IoSlice, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_client::{encode_batch, Compression, ProduceRecord};
use tidelog_protocol::client::{decode_response, encode_request};

use crate::stats::mb_per_s;

/// Produce v8: the last version without flexible headers, so a request's correlation id
/// sits at a fixed place (bytes 8..12 of the frame).
const PRODUCE_VERSION: i16 = 8;
const CORRELATION_AT: usize = 8;
/// Requests a connection keeps in flight unless told otherwise.
pub(crate) const DEFAULT_IN_FLIGHT: usize = 8;
/// A response larger than this is not a Produce response to our small requests.
const MAX_RESPONSE: usize = 1 << 20;

/// What to send: over each of `connections` connections, up to `batches` requests of one
/// `batch_records` × `record_size` batch each, `in_flight` at a time.
pub(crate) struct NativeProduceSpec<'a> {
    pub(crate) bootstrap: &'a str,
    pub(crate) topic: &'a str,
    pub(crate) record_size: usize,
    pub(crate) batch_records: usize,
    pub(crate) batches: u64,
    /// Stop sending after this long; what was sent is still waited for.
    pub(crate) duration: Option<Duration>,
    pub(crate) connections: usize,
    pub(crate) in_flight: usize,
    pub(crate) timeout: Duration,
}

impl<'a> NativeProduceSpec<'a> {
    /// `batches` requests of `batch_records` × `record_size` over one connection,
    /// [`DEFAULT_IN_FLIGHT`] at a time.
    pub(crate) fn new(
        bootstrap: &'a str,
        topic: &'a str,
        record_size: usize,
        batch_records: usize,
        batches: u64,
    ) -> Self {
        NativeProduceSpec {
            bootstrap,
            topic,
            record_size,
            batch_records,
            batches,
            duration: None,
            connections: 1,
            in_flight: DEFAULT_IN_FLIGHT,
            timeout: Duration::from_secs(60),
        }
    }
}

/// What was acknowledged, and how fast.
pub(crate) struct NativeProduceResult {
    /// MB/s of record values acknowledged (what librdkafka's runs report).
    pub(crate) mb_s: f64,
    pub(crate) requests_s: f64,
}

/// Sends to the leader of partition 0 (over the partitions it leads, each connection
/// starting at another one).
pub(crate) fn produce(spec: &NativeProduceSpec<'_>) -> anyhow::Result<NativeProduceResult> {
    let (address, partitions, _) =
        super::native::leader_of_partition_zero(spec.bootstrap, spec.topic)?;
    let records: Vec<ProduceRecord> = (0..spec.batch_records.max(1))
        .map(|_| ProduceRecord::new(None, Some(Bytes::from(vec![b'x'; spec.record_size]))))
        .collect();
    let batch = encode_batch(&records, Compression::None, now_ms())?;
    let requests = partitions
        .iter()
        .map(|&partition| produce_request(spec.topic, partition, batch.clone()))
        .collect::<anyhow::Result<Vec<Bytes>>>()?;

    let start = Instant::now();
    let deadline = spec.duration.map(|d| start + d);
    let pipelines: Vec<_> = (0..spec.connections.max(1))
        .map(|n| {
            let mut requests = requests.clone();
            let first = n % requests.len().max(1);
            requests.rotate_left(first);
            let pipeline = Pipeline {
                address: address.clone(),
                requests,
                batches: spec.batches,
                deadline,
                in_flight: spec.in_flight.max(1),
                timeout: spec.timeout,
            };
            thread::spawn(move || pipeline.run())
        })
        .collect();
    let mut acknowledged = 0u64;
    for pipeline in pipelines {
        acknowledged += pipeline
            .join()
            .map_err(|_| anyhow!("a native producer connection panicked"))??;
    }
    let elapsed = start.elapsed();
    // Duration-bound runs ask for u64::MAX / 2 batches per connection.
    let wanted = spec.batches.saturating_mul(spec.connections.max(1) as u64);
    if spec.duration.is_none() && acknowledged != wanted {
        bail!("native produce: {acknowledged} of {wanted} requests acknowledged");
    }
    let value_bytes = acknowledged * (spec.batch_records.max(1) * spec.record_size) as u64;
    Ok(NativeProduceResult {
        mb_s: mb_per_s(value_bytes, elapsed),
        requests_s: acknowledged as f64 / elapsed.as_secs_f64().max(1e-9),
    })
}

/// One connection: a writer (this thread) and a reader thread.
struct Pipeline {
    address: String,
    requests: Vec<Bytes>,
    batches: u64,
    deadline: Option<Instant>,
    in_flight: usize,
    timeout: Duration,
}

impl Pipeline {
    /// Returns how many requests were acknowledged.
    fn run(self) -> anyhow::Result<u64> {
        let address = &self.address;
        let stream =
            TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        let reader = stream.try_clone()?;
        // The channel's bound is the in-flight limit: the writer blocks on a full channel
        // until the reader takes the oldest request's answer off it.
        let (sent, outstanding) = mpsc::sync_channel::<i32>(self.in_flight);
        let answers = thread::spawn(move || read_answers(reader, outstanding));
        let written = write_requests(stream, &self, &sent);
        drop(sent);
        let acknowledged = answers
            .join()
            .map_err(|_| anyhow!("the native producer's reader panicked"))??;
        written?;
        Ok(acknowledged)
    }
}

fn produce_request(topic: &str, partition: i32, batch: Bytes) -> anyhow::Result<Bytes> {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    Ok(encode_request(
        ApiKey::Produce,
        PRODUCE_VERSION,
        0,
        Some("tidelog-bench-native"),
        &request,
    )?)
}

/// Writes up to `batches` requests (fewer if the deadline passes), partitions in turn,
/// each with the next correlation id.
fn write_requests(
    mut stream: TcpStream,
    pipeline: &Pipeline,
    sent: &mpsc::SyncSender<i32>,
) -> anyhow::Result<()> {
    let requests = &pipeline.requests;
    for n in 0..pipeline.batches {
        if pipeline.deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let correlation = i32::try_from(n % i32::MAX as u64)?;
        let frame = &requests[usize::try_from(n)? % requests.len()];
        // Announced before writing, so the reader never sees an answer it was not told of.
        if sent.send(correlation).is_err() {
            bail!("the native producer's reader stopped");
        }
        let id = correlation.to_be_bytes();
        let mut parts = [
            IoSlice::new(&frame[..CORRELATION_AT]),
            IoSlice::new(&id),
            IoSlice::new(&frame[CORRELATION_AT + 4..]),
        ];
        write_all_vectored(&mut stream, &mut parts)?;
    }
    Ok(())
}

fn write_all_vectored(stream: &mut TcpStream, mut parts: &mut [IoSlice<'_>]) -> anyhow::Result<()> {
    while !parts.is_empty() {
        let n = stream.write_vectored(parts)?;
        if n == 0 {
            bail!("the broker closed the connection");
        }
        IoSlice::advance_slices(&mut parts, n);
    }
    Ok(())
}

/// Reads answers in order until the writer is done and every request it announced is
/// answered, checking each one's correlation id and partition error codes; returns how
/// many were acknowledged.
fn read_answers(mut stream: TcpStream, outstanding: mpsc::Receiver<i32>) -> anyhow::Result<u64> {
    let mut acknowledged = 0u64;
    let mut size = [0u8; 4];
    while let Ok(expected) = outstanding.recv() {
        stream.read_exact(&mut size)?;
        let len = usize::try_from(i32::from_be_bytes(size))
            .ok()
            .filter(|len| *len <= MAX_RESPONSE)
            .ok_or_else(|| anyhow!("response size {:?} out of bounds", size))?;
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body)?;
        let (correlation, response): (i32, ProduceResponse) =
            decode_response(Bytes::from(body), ApiKey::Produce, PRODUCE_VERSION)?;
        if correlation != expected {
            bail!("answer {correlation} where {expected} was due");
        }
        let error = response
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.error_code != 0);
        if let Some(p) = error {
            bail!("produce to partition {}: error {}", p.index, p.error_code);
        }
        acknowledged += 1;
    }
    Ok(acknowledged)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
