//! A lighter reference consumer built on the workspace's own protocol code (not
//! librdkafka): one Fetch in flight, like librdkafka's, over a plain blocking socket.
//! Each response is read into one buffer kept for the whole run and walked in place: the
//! response fields by hand, the record bytes only for their batch headers (to know where
//! the next fetch starts), the records themselves dropped unread. It shows what the
//! broker serves when the client costs almost nothing; the librdkafka figure stays the
//! target's value.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use tidelog_protocol::client::encode_request;

use crate::stats::mb_per_s;

/// Fetch v11: the last version that names topics and has no tagged fields, so the
/// response can be walked with fixed-width reads.
const FETCH_VERSION: i16 = 11;
const PARTITION_MAX_BYTES: i32 = 10 << 20;
const RESPONSE_MAX_BYTES: i32 = 50 << 20;
/// The largest response accepted: the request's bound plus one batch past it.
const MAX_FRAME: usize = (RESPONSE_MAX_BYTES as usize) + (16 << 20);

/// Reads every partition of `topic` (all led by one broker) from offset 0 to the high
/// watermark its first response reports; returns record-batch MB/s (headers included).
pub(crate) fn consume(bootstrap: &str, topic: &str, timeout: Duration) -> anyhow::Result<f64> {
    let (address, partitions, count) = super::native::leader_of_partition_zero(bootstrap, topic)?;
    if partitions.len() != count {
        bail!("the partitions of {topic} are not all led by one broker");
    }
    let mut stream =
        TcpStream::connect(&address).with_context(|| format!("connecting to {address}"))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut next: BTreeMap<i32, i64> = partitions.iter().map(|p| (*p, 0)).collect();
    let mut end: BTreeMap<i32, i64> = BTreeMap::new();
    let mut buffer = Vec::new();
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut correlation = 0i32;
    loop {
        if start.elapsed() > timeout {
            bail!("native consume of {topic} did not finish in {timeout:?}");
        }
        let wanted: Vec<(i32, i64)> = next
            .iter()
            .filter(|(p, offset)| end.get(p).is_none_or(|e| **offset < *e))
            .map(|(p, offset)| (*p, *offset))
            .collect();
        if wanted.is_empty() && end.len() == next.len() {
            break;
        }
        correlation = correlation.wrapping_add(1);
        stream.write_all(&fetch_request(topic, &wanted, correlation)?)?;
        let frame = read_frame(&mut stream, &mut buffer)?;
        for answer in walk_response(frame, correlation)? {
            if answer.error_code != 0 {
                bail!(
                    "fetch {topic}-{}: error {}",
                    answer.partition,
                    answer.error_code
                );
            }
            end.entry(answer.partition).or_insert(answer.high_watermark);
            let (walked, last) = walk_batches(answer.records);
            bytes += walked as u64;
            if let (Some(last), Some(offset)) = (last, next.get_mut(&answer.partition)) {
                *offset = last + 1;
            }
        }
    }
    let elapsed = start.elapsed();
    if bytes == 0 {
        return Err(anyhow!("native consume of {topic} read nothing"));
    }
    Ok(mb_per_s(bytes, elapsed))
}

fn fetch_request(topic: &str, wanted: &[(i32, i64)], correlation: i32) -> anyhow::Result<Vec<u8>> {
    let partitions = wanted
        .iter()
        .map(|(p, offset)| {
            FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(*offset)
                .with_partition_max_bytes(PARTITION_MAX_BYTES)
        })
        .collect();
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(RESPONSE_MAX_BYTES)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)]);
    let frame = encode_request(
        ApiKey::Fetch,
        FETCH_VERSION,
        correlation,
        Some("tidelog-bench-native"),
        &request,
    )?;
    Ok(frame.to_vec())
}

/// Reads one size-prefixed frame into `buffer` (grown once, then reused).
fn read_frame<'b>(stream: &mut TcpStream, buffer: &'b mut Vec<u8>) -> anyhow::Result<&'b [u8]> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let len = usize::try_from(i32::from_be_bytes(size))
        .ok()
        .filter(|len| *len <= MAX_FRAME)
        .ok_or_else(|| anyhow!("response size {size:?} out of bounds"))?;
    if buffer.len() < len {
        buffer.resize(len, 0);
    }
    stream.read_exact(&mut buffer[..len])?;
    Ok(&buffer[..len])
}

/// One partition's answer, its record bytes borrowed from the response.
struct Answer<'a> {
    partition: i32,
    error_code: i16,
    high_watermark: i64,
    records: &'a [u8],
}

/// Walks a Fetch v11 response (header v0) in place.
fn walk_response(frame: &[u8], correlation: i32) -> anyhow::Result<Vec<Answer<'_>>> {
    let mut r = Cursor { rest: frame };
    let got = r.i32()?;
    if got != correlation {
        bail!("answer {got} where {correlation} was due");
    }
    r.skip(4)?; // throttle_time_ms
    let error_code = r.i16()?;
    if error_code != 0 {
        bail!("fetch refused: error {error_code}");
    }
    r.skip(4)?; // session_id
    let mut answers = Vec::new();
    for _ in 0..r.count()? {
        let name_len = usize::try_from(r.i16()?).map_err(|_| anyhow!("null topic name"))?;
        r.skip(name_len)?;
        for _ in 0..r.count()? {
            let partition = r.i32()?;
            let error_code = r.i16()?;
            let high_watermark = r.i64()?;
            r.skip(8 + 8)?; // last_stable_offset, log_start_offset
            let aborted = r.count()?;
            r.skip(aborted.saturating_mul(16))?; // (producer_id, first_offset) each
            r.skip(4)?; // preferred_read_replica
            let records = match usize::try_from(r.i32()?) {
                Ok(len) => r.take(len)?,
                Err(_) => &[],
            };
            answers.push(Answer {
                partition,
                error_code,
                high_watermark,
                records,
            });
        }
    }
    Ok(answers)
}

/// Bounds-checked big-endian reads over a response.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        if n > self.rest.len() {
            bail!("fetch response cut short");
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn skip(&mut self, n: usize) -> anyhow::Result<()> {
        self.take(n).map(|_| ())
    }

    fn array<const N: usize>(&mut self) -> anyhow::Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> anyhow::Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> anyhow::Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> anyhow::Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An array's element count; a null array (-1) counts as empty.
    fn count(&mut self) -> anyhow::Result<usize> {
        Ok(usize::try_from(self.i32()?).unwrap_or(0))
    }
}

/// (bytes of the complete batches, last offset of the last complete batch). A batch cut
/// short by the fetch size is left for the next fetch.
fn walk_batches(mut records: &[u8]) -> (usize, Option<i64>) {
    let mut walked = 0;
    let mut last = None;
    while records.len() >= 27 {
        let base = i64::from_be_bytes(records[0..8].try_into().unwrap_or_default());
        let length = i32::from_be_bytes(records[8..12].try_into().unwrap_or_default());
        let delta = i32::from_be_bytes(records[23..27].try_into().unwrap_or_default());
        let Some(total) = usize::try_from(length).ok().and_then(|l| l.checked_add(12)) else {
            break;
        };
        if total > records.len() {
            break;
        }
        walked += total;
        last = Some(base + i64::from(delta));
        records = &records[total..];
    }
    (walked, last)
}

#[cfg(test)]
mod tests {
    use super::{walk_batches, walk_response, FETCH_VERSION};
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{ApiKey, FetchResponse, ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use tidelog_protocol::header::encode_response;

    #[test]
    fn a_v11_response_is_walked_in_place() {
        let records = batch(0, 9, 100);
        let response =
            FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    PartitionData::default()
                        .with_partition_index(3)
                        .with_high_watermark(10)
                        .with_aborted_transactions(Some(vec![AbortedTransaction::default()
                            .with_producer_id(ProducerId(7))
                            .with_first_offset(2)]))
                        .with_records(Some(records.clone().into())),
                    PartitionData::default()
                        .with_partition_index(4)
                        .with_error_code(1)
                        .with_high_watermark(-1),
                ])]);
        let frame = encode_response(42, ApiKey::Fetch, FETCH_VERSION, &response).unwrap();
        let answers = walk_response(&frame[4..], 42).unwrap();
        assert_eq!(answers.len(), 2);
        assert_eq!(
            (
                answers[0].partition,
                answers[0].error_code,
                answers[0].high_watermark
            ),
            (3, 0, 10)
        );
        assert_eq!(answers[0].records, &records[..]);
        assert_eq!((answers[1].partition, answers[1].error_code), (4, 1));
        assert!(answers[1].records.is_empty());
        assert!(walk_response(&frame[4..], 41).is_err());
        assert!(walk_response(&frame[4..frame.len() - 1], 42).is_err());
    }

    fn batch(base: i64, delta: i32, body: usize) -> Vec<u8> {
        let mut b = base.to_be_bytes().to_vec();
        b.extend_from_slice(&i32::try_from(15 + body).unwrap().to_be_bytes());
        b.extend_from_slice(&[0u8; 11]);
        b.extend_from_slice(&delta.to_be_bytes());
        b.extend(std::iter::repeat_n(7u8, body));
        b
    }

    #[test]
    fn complete_batches_count_and_a_cut_one_waits() {
        let mut bytes = batch(0, 9, 100);
        bytes.extend(batch(10, 4, 50));
        let whole = bytes.len();
        bytes.extend(&batch(15, 0, 80)[..40]);
        assert_eq!(walk_batches(&bytes), (whole, Some(14)));
        assert_eq!(walk_batches(&[]), (0, None));
    }
}
