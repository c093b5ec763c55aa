//! The `.log` file of a segment, kept open only while it is needed.
//!
//! The active segment keeps its descriptor (every append writes to it). A closed
//! segment's file is opened on first read and kept in one process-wide cache of at most
//! [`set_max_open_segment_files`] descriptors, which closes the least recently used; a
//! [`crate::FileSlice`] being sent keeps its file open until it is dropped. This bounds
//! the descriptors of a broker with many segments by the cache size plus one per log.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Default bound on cached descriptors of closed segments, process-wide.
pub(crate) const DEFAULT_MAX_OPEN_SEGMENT_FILES: usize = 1024;

static MAX_OPEN: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_OPEN_SEGMENT_FILES);
static CACHE: Mutex<Lru> = Mutex::new(Lru {
    next_stamp: 0,
    by_stamp: BTreeMap::new(),
    stamp_of: BTreeMap::new(),
});

/// Sets how many `.log` files of closed segments stay open at most, process-wide (at
/// least one). Files beyond it are closed, least recently read first.
pub fn set_max_open_segment_files(max: usize) {
    MAX_OPEN.store(max.max(1), Ordering::Relaxed);
    cache().evict(max.max(1));
}

/// Descriptors currently held by the cache (for tests and metrics).
pub fn open_segment_files_cached() -> usize {
    cache().by_stamp.len()
}

fn cache() -> MutexGuard<'static, Lru> {
    // The cache's invariants hold between statements that cannot panic.
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Least recently used files, keyed by the address of their shared `File`.
struct Lru {
    next_stamp: u64,
    by_stamp: BTreeMap<u64, Arc<File>>,
    stamp_of: BTreeMap<usize, u64>,
}

impl Lru {
    fn touch(&mut self, file: &Arc<File>) {
        let key = Arc::as_ptr(file) as usize;
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        if let Some(old) = self.stamp_of.insert(key, stamp) {
            self.by_stamp.remove(&old);
        }
        self.by_stamp.insert(stamp, Arc::clone(file));
        self.evict(MAX_OPEN.load(Ordering::Relaxed));
    }

    fn evict(&mut self, max: usize) {
        while self.by_stamp.len() > max {
            let Some((_, file)) = self.by_stamp.pop_first() else {
                break;
            };
            self.stamp_of.remove(&(Arc::as_ptr(&file) as usize));
        }
    }

    fn remove(&mut self, file: &Arc<File>) {
        if let Some(stamp) = self.stamp_of.remove(&(Arc::as_ptr(file) as usize)) {
            self.by_stamp.remove(&stamp);
        }
    }
}

pub(crate) struct SegmentFile {
    path: PathBuf,
    /// Set while the segment is active.
    pinned: Option<Arc<File>>,
    /// The file while something (the cache, a slice) still holds it open.
    shared: Mutex<Weak<File>>,
}

impl SegmentFile {
    /// An open file, kept open (active segment).
    pub(crate) fn pinned(path: &Path, file: File) -> Self {
        let file = Arc::new(file);
        SegmentFile {
            path: path.to_path_buf(),
            shared: Mutex::new(Arc::downgrade(&file)),
            pinned: Some(file),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn weak(&self) -> MutexGuard<'_, Weak<File>> {
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The open file, opening it again if the cache closed it.
    pub(crate) fn get(&self) -> io::Result<Arc<File>> {
        if let Some(file) = &self.pinned {
            return Ok(Arc::clone(file));
        }
        let mut weak = self.weak();
        let file = match weak.upgrade() {
            Some(file) => file,
            None => {
                let file = Arc::new(OpenOptions::new().read(true).write(true).open(&self.path)?);
                *weak = Arc::downgrade(&file);
                file
            }
        };
        drop(weak);
        cache().touch(&file);
        Ok(file)
    }

    /// The segment becomes active: its descriptor stays open.
    pub(crate) fn pin(&mut self) -> io::Result<()> {
        if self.pinned.is_none() {
            let file = self.get()?;
            cache().remove(&file);
            self.pinned = Some(file);
        }
        Ok(())
    }

    /// The segment is closed: its descriptor moves to the cache.
    pub(crate) fn unpin(&mut self) {
        if let Some(file) = self.pinned.take() {
            cache().touch(&file);
        }
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        // A deleted or closed segment's descriptor must not linger in the cache.
        if let Some(file) = self.weak().upgrade() {
            cache().remove(&file);
        }
    }
}
