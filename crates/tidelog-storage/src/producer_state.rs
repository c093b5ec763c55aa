//! Per-producer idempotence state: the last batches of each producer id.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::Path;

use crate::batch::BatchHeader;
use crate::checkpoint::write_atomic;

/// How many recent batches are remembered per producer (Kafka's in-flight limit).
pub const BATCHES_PER_PRODUCER: usize = 5;

/// One appended batch of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_seq: i32,
    /// Sequence of the last record.
    pub last_seq: i32,
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

/// What the log knows about one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// Latest epoch seen.
    pub epoch: i16,
    /// Up to [`BATCHES_PER_PRODUCER`] most recent batches of that epoch, oldest first.
    pub batches: VecDeque<BatchMetadata>,
    /// First offset of the producer's open transaction, if one is open.
    pub current_txn_first_offset: Option<i64>,
    /// The coordinator epoch of the newest transaction marker, -1 before any: a marker
    /// from an older coordinator is refused (Kafka's TransactionCoordinatorFenced).
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    /// The remembered batch with exactly this sequence range (a retried duplicate).
    pub fn find_duplicate(&self, first_seq: i32, last_seq: i32) -> Option<&BatchMetadata> {
        self.batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
    }
    /// Sequence of the newest remembered record.
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }
}

/// What a transaction marker (control batch) says: how the transaction ended, and the
/// coordinator epoch in its value (-1 when it carries none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MarkerInfo {
    pub(crate) aborted: bool,
    pub(crate) coordinator_epoch: i32,
}

impl MarkerInfo {
    /// Read from a control batch's bytes; an unreadable marker counts as a COMMIT with
    /// no coordinator epoch (it closes the transaction without aborting its records).
    pub(crate) fn of(batch: &[u8]) -> Self {
        match tidelog_records::batch_transaction_marker(batch) {
            Some((marker, epoch)) => MarkerInfo {
                aborted: marker == tidelog_records::ControlMarker::Abort,
                coordinator_epoch: epoch.unwrap_or(-1),
            },
            None => MarkerInfo::unreadable(),
        }
    }

    /// A control batch too large to read back during recovery.
    pub(crate) fn unreadable() -> Self {
        MarkerInfo {
            aborted: false,
            coordinator_epoch: -1,
        }
    }
}

/// A transaction closed by a control batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompletedTxn {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) marker_offset: i64,
    pub(crate) aborted: bool,
}

/// Producer id -> [`ProducerEntry`].
///
/// Snapshot file `<offset>.snapshot` (state after every batch below `offset`), big-endian:
/// `magic "TLPS", version u16 = 2, crc u32 (CRC-32C of everything after it),
/// count u32, count x { producer_id i64, epoch i16, txn_first_offset i64 (-1 = none),
/// coordinator_epoch i32, n u8 (<= 5), n x { first_seq i32, last_seq i32, first_offset
/// i64, last_offset i64, timestamp i64 } }`. Version 1 (no coordinator_epoch) is still
/// read, as -1. Written at every roll (into the page cache; the background flusher
/// fsyncs it) and atomically at close; on open the newest
/// snapshot that parses and is not beyond the log end is loaded and the log replayed from
/// its offset. A snapshot that fails its CRC is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: BTreeMap<i64, ProducerEntry>,
}

const MAGIC: &[u8; 4] = b"TLPS";
const BATCH_BYTES: usize = 32;
const ENTRY_MIN: usize = 19;
const SNAPSHOT_VERSION: u16 = 2;

impl ProducerStateTable {
    /// State of one producer id.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }
    /// All producers in id order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers.iter().map(|(k, v)| (*k, v))
    }
    /// Number of producer ids tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }
    /// No producer tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
    /// Smallest first offset of any open transaction (bounds the last stable offset).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers
            .values()
            .filter_map(|p| p.current_txn_first_offset)
            .min()
    }

    pub(crate) fn clear(&mut self) {
        self.producers.clear();
    }

    /// Forgets producers without an open transaction whose newest batch timestamp is
    /// below `cutoff_ts`; returns how many.
    pub(crate) fn remove_idle(&mut self, cutoff_ts: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || e.batches.back().is_some_and(|b| b.timestamp >= cutoff_ts)
        });
        before - self.producers.len()
    }

    /// Applies one appended batch; `marker` is what a control batch says (`None` for
    /// data batches).
    pub(crate) fn update(
        &mut self,
        h: &BatchHeader<'_>,
        marker: Option<MarkerInfo>,
    ) -> Option<CompletedTxn> {
        let pid = h.producer_id();
        if pid < 0 {
            return None;
        }
        let entry = self.producers.entry(pid).or_insert_with(|| ProducerEntry {
            epoch: h.producer_epoch(),
            batches: VecDeque::new(),
            current_txn_first_offset: None,
            coordinator_epoch: -1,
        });
        if h.producer_epoch() != entry.epoch {
            entry.epoch = h.producer_epoch();
            entry.batches.clear();
        }
        if let Some(marker) = marker {
            if marker.coordinator_epoch >= 0 {
                entry.coordinator_epoch = marker.coordinator_epoch;
            }
            let first = entry.current_txn_first_offset.take()?;
            return Some(CompletedTxn {
                producer_id: pid,
                first_offset: first,
                marker_offset: h.base_offset(),
                aborted: marker.aborted,
            });
        }
        if h.base_sequence() >= 0 {
            entry.batches.push_back(BatchMetadata {
                first_seq: h.base_sequence(),
                last_seq: h.last_sequence(),
                first_offset: h.base_offset(),
                last_offset: h.last_offset(),
                timestamp: h.max_timestamp(),
            });
            while entry.batches.len() > BATCHES_PER_PRODUCER {
                entry.batches.pop_front();
            }
        }
        if h.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(h.base_offset());
        }
        None
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for (pid, e) in &self.producers {
            body.extend_from_slice(&pid.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
                body.extend_from_slice(&b.timestamp.to_be_bytes());
            }
        }
        let mut out = Vec::with_capacity(body.len() + 10);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < 14 || &bytes[..4] != MAGIC {
            return None;
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != 1 && version != SNAPSHOT_VERSION {
            return None;
        }
        let crc = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
        let body = &bytes[10..];
        if crc32c::crc32c(body) != crc {
            return None;
        }
        let mut r = Reader { buf: body, pos: 0 };
        let count = r.u32()? as usize;
        if count > body.len() / ENTRY_MIN {
            return None;
        }
        let mut producers = BTreeMap::new();
        for _ in 0..count {
            let pid = r.i64()?;
            let epoch = r.i16()?;
            let txn = r.i64()?;
            let coordinator_epoch = if version >= 2 { r.i32()? } else { -1 };
            let n = usize::from(r.u8()?);
            if n > BATCHES_PER_PRODUCER || n * BATCH_BYTES > body.len() - r.pos {
                return None;
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMetadata {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    timestamp: r.i64()?,
                });
            }
            producers.insert(
                pid,
                ProducerEntry {
                    epoch,
                    batches,
                    current_txn_first_offset: (txn >= 0).then_some(txn),
                    coordinator_epoch,
                },
            );
        }
        (r.pos == body.len()).then_some(ProducerStateTable { producers })
    }

    /// Writes the snapshot straight to its file, into the page cache only: at a roll the
    /// fsync is the background flusher's. A crash may leave the file torn, and a torn
    /// snapshot fails its CRC and is ignored (recovery replays from an older one).
    pub(crate) fn write_snapshot_unsynced(&self, dir: &Path, offset: i64) -> io::Result<()> {
        let path = dir.join(crate::segment::file_name(offset, "snapshot"));
        std::fs::write(path, self.encode())
    }

    /// Writes the snapshot atomically and durably (close).
    pub(crate) fn write_snapshot(&self, dir: &Path, offset: i64) -> io::Result<()> {
        write_atomic(
            dir,
            &crate::segment::file_name(offset, "snapshot"),
            &self.encode(),
        )
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let s = self.buf.get(self.pos..self.pos + N)?;
        self.pos += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|a| a[0])
    }
    fn i16(&mut self) -> Option<i16> {
        self.take().map(i16::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take().map(i32::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_be_bytes)
    }
}
