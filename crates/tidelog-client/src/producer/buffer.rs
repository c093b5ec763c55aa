//! The producer's bounded buffer (`buffer.memory`): records wait here, batched per
//! partition, until the broker acknowledges them; each record's result waits until the
//! next flush. Room is freed only by acknowledgements, never by forgetting records.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use super::RecordMetadata;
use crate::records::ProduceRecord;

pub(super) type PartitionKey = (String, i32);

/// What one record's result slot costs in the buffer until the flush that returns it: a
/// caller that never flushes runs out of room instead of memory.
pub(super) const RESULT_SLOT: usize = std::mem::size_of::<Option<RecordMetadata>>();

/// Records of one partition sent (and retried) together.
#[derive(Debug)]
pub(super) struct Batch {
    /// Each record's position in `send` order since the last flush.
    pub(super) slots: Vec<usize>,
    /// The records, until the batch is first sent; from then on `encoded` holds them
    /// (a retry resends the same bytes, with the same sequence).
    pub(super) records: Vec<ProduceRecord>,
    pub(super) encoded: Option<Bytes>,
    /// Bytes charged to the buffer for it.
    pub(super) bytes: usize,
    /// When its first record came: `linger.ms` counts from here.
    pub(super) created: std::time::Instant,
}

impl Batch {
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[derive(Debug)]
pub(super) struct Buffer {
    memory: usize,
    max_batch_bytes: usize,
    partitions: BTreeMap<PartitionKey, VecDeque<Batch>>,
    /// Bytes of records not yet acknowledged.
    unacked: usize,
    /// One slot per record sent since the last flush.
    results: Vec<Option<RecordMetadata>>,
}

impl Buffer {
    pub(super) fn new(memory: usize, max_batch_bytes: usize) -> Buffer {
        Buffer {
            memory,
            max_batch_bytes,
            partitions: BTreeMap::new(),
            unacked: 0,
            results: Vec::new(),
        }
    }

    /// Bytes in use: unacknowledged records plus result slots.
    pub(super) fn used(&self) -> usize {
        self.unacked + self.results.len() * RESULT_SLOT
    }

    /// Records sent since the last flush, and the bytes not yet acknowledged.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.results.len(), self.unacked)
    }

    /// Whether a record of `size` bytes fits now.
    pub(super) fn has_room(&self, size: usize) -> bool {
        self.used().saturating_add(size + RESULT_SLOT) <= self.memory
    }

    /// Whether a record of `size` bytes could ever fit (once everything is acknowledged
    /// and flushed).
    pub(super) fn could_fit(&self, size: usize) -> bool {
        size + RESULT_SLOT <= self.memory
    }

    /// Whether some records wait for an acknowledgement (and so room can still be freed
    /// without a flush).
    pub(super) fn has_unacked(&self) -> bool {
        !self.partitions.is_empty()
    }

    /// Appends a record to the newest unsent batch of its partition, or starts one.
    pub(super) fn push(&mut self, key: PartitionKey, record: ProduceRecord) {
        let size = record.approx_size();
        let slot = self.results.len();
        self.results.push(None);
        self.unacked += size;
        let queue = self.partitions.entry(key).or_default();
        match queue.back_mut() {
            Some(b) if b.encoded.is_none() && b.bytes + size <= self.max_batch_bytes => {
                b.slots.push(slot);
                b.records.push(record);
                b.bytes += size;
            }
            _ => queue.push_back(Batch {
                slots: vec![slot],
                records: vec![record],
                encoded: None,
                bytes: size,
                created: std::time::Instant::now(),
            }),
        }
    }

    /// The partitions whose oldest batch should go now: it is full (`batch.size`, or a
    /// newer batch was started behind it), waited `linger`, or is a retry. Also the
    /// earliest time another partition becomes due.
    pub(super) fn due(
        &self,
        linger: std::time::Duration,
        now: std::time::Instant,
    ) -> (Vec<PartitionKey>, Option<std::time::Instant>) {
        let mut due = Vec::new();
        let mut next: Option<std::time::Instant> = None;
        for (key, queue) in &self.partitions {
            let Some(oldest) = queue.front() else {
                continue;
            };
            let at = oldest.created + linger;
            let full = queue.len() > 1 || oldest.bytes >= self.max_batch_bytes;
            if full || oldest.encoded.is_some() || at <= now {
                due.push(key.clone());
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        (due, next)
    }

    /// The partitions with records waiting, oldest batch first in each.
    pub(super) fn waiting(&self) -> Vec<PartitionKey> {
        self.partitions.keys().cloned().collect()
    }

    /// The oldest batch of a partition: the one to send next.
    pub(super) fn oldest_mut(&mut self, key: &PartitionKey) -> Option<&mut Batch> {
        self.partitions.get_mut(key).and_then(VecDeque::front_mut)
    }

    /// The broker has the oldest batch of `key` at `base_offset` (-1: unknown, acks=0):
    /// its records get their results and their bytes are free again.
    pub(super) fn acknowledge(&mut self, key: &PartitionKey, base_offset: i64) {
        let Some(queue) = self.partitions.get_mut(key) else {
            return;
        };
        let Some(batch) = queue.pop_front() else {
            return;
        };
        if queue.is_empty() {
            self.partitions.remove(key);
        }
        self.unacked = self.unacked.saturating_sub(batch.bytes);
        for (i, slot) in batch.slots.iter().enumerate() {
            let offset = match i64::try_from(i) {
                Ok(i) if base_offset >= 0 => base_offset + i,
                _ => -1,
            };
            if let Some(r) = self.results.get_mut(*slot) {
                *r = Some(RecordMetadata {
                    partition: key.1,
                    offset,
                });
            }
        }
    }

    /// Drops everything, records and results (after an error that fails them all).
    pub(super) fn clear(&mut self) {
        self.partitions.clear();
        self.unacked = 0;
        self.results.clear();
    }

    /// Once everything is acknowledged: every record's result in `send` order, and the
    /// buffer starts over.
    pub(super) fn take_results(&mut self) -> Option<Vec<RecordMetadata>> {
        if self.has_unacked() {
            return None;
        }
        let results = std::mem::take(&mut self.results);
        results.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(len: usize) -> ProduceRecord {
        ProduceRecord::new(None, Some(Bytes::from(vec![0u8; len])))
    }

    fn key(p: i32) -> PartitionKey {
        ("t".into(), p)
    }

    #[test]
    fn room_is_the_unacknowledged_bytes_plus_result_slots() {
        let size = record(79).approx_size();
        let mut b = Buffer::new(3 * (size + RESULT_SLOT), 1 << 20);
        for _ in 0..3 {
            assert!(b.has_room(size));
            b.push(key(0), record(79));
        }
        assert!(!b.has_room(size), "three records fill it");
        assert_eq!(b.used(), 3 * (size + RESULT_SLOT));
        b.acknowledge(&key(0), 10);
        assert_eq!(b.used(), 3 * RESULT_SLOT, "acked records free their bytes");
        assert!(b.has_room(size));
        assert_eq!(b.take_results().unwrap().len(), 3);
        assert_eq!(b.used(), 0, "a flush frees the result slots");
    }

    #[test]
    fn a_record_larger_than_the_buffer_can_never_fit() {
        let b = Buffer::new(100, 1 << 20);
        assert!(!b.could_fit(100));
        assert!(b.could_fit(100 - RESULT_SLOT));
    }

    #[test]
    fn batches_split_at_batch_size_and_acks_free_the_oldest_first() {
        let size = record(100).approx_size();
        let mut b = Buffer::new(1 << 20, 2 * size);
        for _ in 0..5 {
            b.push(key(0), record(100));
        }
        b.push(key(1), record(100));
        assert_eq!(b.waiting(), vec![key(0), key(1)]);
        assert_eq!(b.oldest_mut(&key(0)).unwrap().len(), 2);
        b.acknowledge(&key(0), 0);
        b.acknowledge(&key(0), 2);
        assert_eq!(b.oldest_mut(&key(0)).unwrap().len(), 1);
        assert_eq!(b.counts(), (6, 2 * size));
        assert!(b.take_results().is_none(), "not everything is acknowledged");
        b.acknowledge(&key(0), 4);
        b.acknowledge(&key(1), 7);
        let offsets: Vec<(i32, i64)> = b
            .take_results()
            .unwrap()
            .iter()
            .map(|m| (m.partition, m.offset))
            .collect();
        assert_eq!(
            offsets,
            vec![(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 7)]
        );
    }

    #[test]
    fn a_sent_batch_takes_no_more_records() {
        let mut b = Buffer::new(1 << 20, 1 << 20);
        b.push(key(0), record(1));
        b.oldest_mut(&key(0)).unwrap().encoded = Some(Bytes::from_static(b"x"));
        b.push(key(0), record(1));
        assert_eq!(b.oldest_mut(&key(0)).unwrap().len(), 1);
        b.acknowledge(&key(0), -1);
        assert_eq!(b.oldest_mut(&key(0)).unwrap().len(), 1);
        b.acknowledge(&key(0), -1);
        let r = b.take_results().unwrap();
        assert!(r.iter().all(|m| m.offset == -1));
    }

    #[test]
    fn a_batch_is_due_when_full_lingered_or_followed_by_another() {
        let linger = std::time::Duration::from_millis(50);
        let mut b = Buffer::new(1 << 20, 250);
        b.push(key(0), record(100));
        let now = std::time::Instant::now();
        let (due, next) = b.due(linger, now);
        assert!(due.is_empty());
        assert!(next.is_some());
        assert_eq!(b.due(linger, now + linger).0, vec![key(0)]);
        b.push(key(1), record(100));
        b.push(key(1), record(100));
        b.push(key(1), record(100)); // starts a second batch: the first is full
        assert_eq!(b.due(linger, now).0, vec![key(1)]);
    }
}
