//! Sparse offset and time indexes of one segment.

use std::io;
use std::path::Path;

use crate::index_file::IndexFile;

/// `<base>.index`: maps a relative offset to the byte position of the batch starting there.
///
/// Byte layout: a sequence of 8-byte entries `relative_offset u32 BE, position u32 BE`,
/// where `relative_offset = batch base offset - segment base offset`. One entry is
/// written per `index.interval.bytes` of log. Relative offsets and positions are strictly
/// increasing (the first entry may be `0, 0`). While the segment is active the file is
/// preallocated to `segment.index.bytes` with zeros; on roll or close it is trimmed to its
/// entries. Nothing is checksummed: on load the increasing-entries rule and the segment
/// size are checked, and segments recovered after a crash have their index rebuilt from
/// the log.
pub(crate) type OffsetIndex = SparseIndex<OFFSET_ENTRY>;

/// `<base>.timeindex`: maps a timestamp to the offset up to which all records are at most
/// that old.
///
/// Byte layout: 12-byte entries `timestamp i64 BE, relative_offset u32 BE`. An entry
/// `(t, r)` means every record at offset `<= base + r` has timestamp `<= t`: it is written
/// with the segment's running maximum timestamp and the last offset of the batch that
/// raised it, at most once per `index.interval.bytes`, plus a final entry when the segment
/// rolls. Timestamps strictly increase, offsets never decrease. Preallocated, trimmed,
/// validated and rebuilt exactly like [`OffsetIndex`].
pub(crate) type TimeIndex = SparseIndex<TIME_ENTRY>;

pub(crate) const OFFSET_ENTRY: usize = 8;
pub(crate) const TIME_ENTRY: usize = 12;

/// An index file of `ENTRY`-byte entries. What both kinds do alike (create, load and
/// validate, trim, flush) is here once; what an entry means is in the impl for each
/// entry size.
pub(crate) struct SparseIndex<const ENTRY: usize> {
    file: IndexFile,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Counts the leading entries that satisfy `ok(prev, cur)` and checks that everything
/// after them is zero (preallocated space). `None` = corrupt.
fn valid_prefix(file: &IndexFile, ok: impl Fn(Option<&[u8]>, &[u8]) -> bool) -> Option<usize> {
    let mut n = 0;
    while n < file.slots() {
        let cur = file.slot(n);
        let prev = (n > 0).then(|| file.slot(n - 1));
        let all_zero = cur.iter().all(|&b| b == 0);
        if (n > 0 && all_zero) || !ok(prev, cur) {
            break;
        }
        n += 1;
    }
    (n..file.slots())
        .all(|i| file.slot(i).iter().all(|&b| b == 0))
        .then_some(n)
}

impl<const ENTRY: usize> SparseIndex<ENTRY> {
    pub(crate) fn create(path: &Path, capacity_bytes: u64) -> io::Result<Self> {
        Ok(SparseIndex {
            file: IndexFile::create(path, ENTRY, capacity_bytes)?,
        })
    }

    /// Loads an existing index; `Ok(None)` when it is missing or its entries fail
    /// `ok(previous, current)` (the caller rebuilds it).
    fn load_valid(
        path: &Path,
        ok: impl Fn(Option<&[u8]>, &[u8]) -> bool,
    ) -> io::Result<Option<Self>> {
        if !path.exists() {
            return Ok(None);
        }
        let mut file = IndexFile::open(path, ENTRY)?;
        let valid = valid_prefix(&file, ok);
        Ok(valid.map(|n| {
            file.keep_entries(n);
            SparseIndex { file }
        }))
    }

    pub(crate) fn path(&self) -> &Path {
        self.file.path()
    }
    pub(crate) fn is_full(&self) -> bool {
        self.file.is_full()
    }
    pub(crate) fn len(&self) -> usize {
        self.file.len()
    }

    pub(crate) fn clear(&mut self) {
        self.file.keep_entries(0);
    }
    /// Forgets (and zeroes) the entries from `n` on.
    pub(crate) fn keep_first(&mut self, n: usize) {
        self.file.keep_entries(n);
    }
    pub(crate) fn resize(&mut self, bytes: u64) -> io::Result<()> {
        self.file.resize(bytes)
    }
    pub(crate) fn trim(&mut self) -> io::Result<()> {
        self.file.trim()
    }
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.file.flush()
    }
}

impl SparseIndex<OFFSET_ENTRY> {
    /// Loads an existing index; `Ok(None)` when it is missing or fails validation against
    /// a log of `log_size` bytes (the caller rebuilds it).
    pub(crate) fn load(path: &Path, log_size: u64) -> io::Result<Option<Self>> {
        Self::load_valid(path, |prev, cur| {
            let (rel, pos) = (u32_at(cur, 0), u32_at(cur, 4));
            if u64::from(pos) >= log_size {
                return false;
            }
            match prev {
                None => true,
                Some(p) => rel > u32_at(p, 0) && pos > u32_at(p, 4),
            }
        })
    }

    pub(crate) fn entry(&self, i: usize) -> (u32, u32) {
        let e = self.file.entry(i);
        (u32_at(e, 0), u32_at(e, 4))
    }

    pub(crate) fn append(&mut self, rel_offset: u32, position: u32) -> bool {
        if let Some(last) = self.len().checked_sub(1) {
            let (r, p) = self.entry(last);
            if rel_offset <= r || position <= p {
                return false;
            }
        }
        let mut e = [0u8; OFFSET_ENTRY];
        e[..4].copy_from_slice(&rel_offset.to_be_bytes());
        e[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&e)
    }

    /// Number of leading entries whose relative offset is below `rel`.
    pub(crate) fn entries_below(&self, rel: u32) -> usize {
        partition_point(self.len(), |i| self.entry(i).0 < rel)
    }

    /// Position of the last indexed batch starting at or before `rel_offset` (0 if none).
    pub(crate) fn floor_position(&self, rel_offset: u32) -> u32 {
        let n = self.len();
        let idx = partition_point(n, |i| self.entry(i).0 <= rel_offset);
        if idx == 0 {
            0
        } else {
            self.entry(idx - 1).1
        }
    }
}

impl SparseIndex<TIME_ENTRY> {
    /// Loads an existing index; `Ok(None)` when it is missing or fails validation (the
    /// caller rebuilds it).
    pub(crate) fn load(path: &Path) -> io::Result<Option<Self>> {
        Self::load_valid(path, |prev, cur| match prev {
            None => true,
            Some(p) => i64_at(cur, 0) > i64_at(p, 0) && u32_at(cur, 8) >= u32_at(p, 8),
        })
    }

    pub(crate) fn entry(&self, i: usize) -> (i64, u32) {
        let e = self.file.entry(i);
        (i64_at(e, 0), u32_at(e, 8))
    }

    pub(crate) fn last(&self) -> Option<(i64, u32)> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends when `timestamp` is newer than the last entry; false otherwise or when full.
    pub(crate) fn maybe_append(&mut self, timestamp: i64, rel_offset: u32) -> bool {
        if let Some((t, r)) = self.last() {
            if timestamp <= t || rel_offset < r {
                return false;
            }
        }
        let mut e = [0u8; TIME_ENTRY];
        e[..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..].copy_from_slice(&rel_offset.to_be_bytes());
        self.file.push(&e)
    }

    /// Number of leading entries whose relative offset is at most `rel` (offsets never
    /// decrease along the file).
    pub(crate) fn entries_up_to(&self, rel: u32) -> usize {
        partition_point(self.len(), |i| self.entry(i).1 <= rel)
    }

    /// Relative offset of the last entry with a timestamp strictly below `ts`: every record
    /// up to it is older than `ts`, so a search can start after it.
    pub(crate) fn last_offset_older_than(&self, ts: i64) -> Option<u32> {
        let idx = partition_point(self.len(), |i| self.entry(i).0 < ts);
        idx.checked_sub(1).map(|i| self.entry(i).1)
    }
}

/// First index in `0..n` for which `pred` is false (`pred` must be true-then-false).
fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
