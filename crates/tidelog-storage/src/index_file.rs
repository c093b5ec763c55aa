//! A memory-mapped file of fixed-size entries, preallocated while its segment is active
//! and trimmed to its entries when the segment closes.
//!
//! No file descriptor is kept: the mapping stays valid after the file is closed, and the
//! rare operations that need one (resize, fsync) open the file by path. With 10,000
//! partitions under a 20,000 open-file limit, two descriptors per segment matter.
//!
//! Nor is a file without entries mapped: the map is made by the first entry pushed. A
//! process may hold `vm.max_map_count` maps (65,530 by default), and 49,152 partitions
//! whose active segments hold less than `index.interval.bytes` each would otherwise
//! need two maps apiece.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::mmap::{data_end, map_file};

pub(crate) struct IndexFile {
    path: PathBuf,
    map: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    capacity: usize,
}

impl IndexFile {
    /// Creates (or empties) the file and preallocates `capacity_bytes`.
    pub(crate) fn create(path: &Path, entry_size: usize, capacity_bytes: u64) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            map: None,
            entry_size,
            entries: 0,
            capacity: 0,
        };
        index.resize_file(&file, capacity_bytes)?;
        Ok(index)
    }

    /// Opens an existing file and maps it; every whole entry slot up to the end of the
    /// file's data counts as present until the caller validates with
    /// [`IndexFile::keep_entries`]. Slots past the data (holes of a preallocated file)
    /// read as zeros and are neither checked nor rewritten.
    pub(crate) fn open(path: &Path, entry_size: usize) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::other("index file too large"))?;
        let data = usize::try_from(data_end(&file)?).unwrap_or(len).min(len);
        let map = if data == 0 { None } else { map_file(&file)? };
        let capacity = len / entry_size;
        Ok(IndexFile {
            path: path.to_path_buf(),
            map,
            entry_size,
            entries: data.div_ceil(entry_size).min(capacity),
            capacity,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }

    /// Bytes of entry `i` (`i < len()`).
    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        match &self.map {
            Some(m) => &m[i * self.entry_size..(i + 1) * self.entry_size],
            None => &[],
        }
    }

    /// Bytes of slot `i` regardless of `len()`, for validation of preallocated tails.
    pub(crate) fn slot(&self, i: usize) -> &[u8] {
        self.entry(i)
    }

    /// Slots that may hold data: right after `open`, those up to the end of the file's
    /// data; the rest are holes.
    pub(crate) fn slots(&self) -> usize {
        self.entries
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        if self.is_full() || bytes.len() != self.entry_size {
            return false;
        }
        let at = self.entries * self.entry_size;
        if self.map.is_none() {
            // The first entry: the file is mapped now. Should that fail, the entry is
            // left out (a sparse index stays correct without it: lookups scan on).
            match self.reopen().and_then(|file| map_file(&file)) {
                Ok(map) => self.map = map,
                Err(e) => {
                    tracing::warn!(index = %self.path.display(), error = %e, "mapping an index file failed; entry left out");
                    return false;
                }
            }
        }
        if let Some(m) = &mut self.map {
            m[at..at + self.entry_size].copy_from_slice(bytes);
            self.entries += 1;
            return true;
        }
        false
    }

    /// Forgets entries from `n` on, zeroing them so a later load sees a clean tail.
    pub(crate) fn keep_entries(&mut self, n: usize) {
        let n = n.min(self.capacity);
        match &mut self.map {
            Some(m) => {
                let from = n * self.entry_size;
                let to = self.entries.max(n) * self.entry_size;
                let to = to.min(m.len());
                m[from..to].fill(0);
                self.entries = n;
            }
            // Unmapped: the file holds no entries.
            None => self.entries = 0,
        }
    }

    /// Changes the file size to `bytes` (rounded down to whole entries, never below the
    /// current entries) and remaps.
    pub(crate) fn resize(&mut self, bytes: u64) -> io::Result<()> {
        let file = self.reopen()?;
        self.resize_file(&file, bytes)
    }

    fn resize_file(&mut self, file: &File, bytes: u64) -> io::Result<()> {
        let slots = usize::try_from(bytes).map_err(|_| io::Error::other("index size too large"))?
            / self.entry_size;
        let slots = slots.max(self.entries);
        if self
            .map
            .as_ref()
            .is_some_and(|m| m.len() == slots * self.entry_size)
        {
            self.capacity = slots;
            return Ok(());
        }
        self.map = None;
        file.set_len((slots * self.entry_size) as u64)?;
        // Mapped again only if it has entries; otherwise the first push maps it.
        if self.entries > 0 {
            self.map = map_file(file)?;
        }
        self.capacity = slots;
        Ok(())
    }

    fn reopen(&self) -> io::Result<File> {
        OpenOptions::new().read(true).write(true).open(&self.path)
    }

    /// Shrinks the file to exactly its entries (segment closed).
    pub(crate) fn trim(&mut self) -> io::Result<()> {
        self.resize((self.entries * self.entry_size) as u64)
    }

    pub(crate) fn flush(&self) -> io::Result<()> {
        if let Some(m) = &self.map {
            crate::fsync::sync_map(m)?;
        }
        // The size may have changed since the file was last synced.
        crate::fsync::sync_all(&self.reopen()?)
    }
}
