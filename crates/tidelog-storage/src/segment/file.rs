//! The `.log` file of a segment, kept open only while it is needed.
//!
//! Every segment's `.log` descriptor, the active segment's included, lives in one
//! process-wide cache of at most [`set_max_open_segment_files`] descriptors, which
//! closes the least recently used. A file is opened again (by its path) on the next
//! append, read, truncation or fsync that needs it. Whoever uses a file holds its
//! `Arc<File>` for the length of the use (an append, a scan, a [`crate::FileSlice`] being
//! sent, an fsync), so eviction never closes a descriptor in use: it only drops the
//! cache's reference, and the descriptor closes when the last user lets go. The
//! descriptors of a broker are bounded by the cache size plus the files in use at once,
//! whatever its partition and segment counts.
//!
//! Evicting a file with unsynced writes loses nothing: the writes are in the page
//! cache (they belong to the inode, not the descriptor), and the obligation to fsync
//! them stays where it always was, in the log's durability state
//! (`DurabilityHandle`): its next sync pass opens the file again and fdatasyncs it, which
//! on Linux flushes the inode's dirty pages whichever descriptor wrote them (and reports
//! a writeback error that no one has seen yet to the new descriptor, since 4.16).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Default bound on cached `.log` descriptors, process-wide.
pub(crate) const DEFAULT_MAX_OPEN_SEGMENT_FILES: usize = 1024;

static MAX_OPEN: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_OPEN_SEGMENT_FILES);
/// The stamp the next touch gets; stamps start at 1 (0 means never touched).
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);
static CACHE: Mutex<Lru> = Mutex::new(Lru {
    by_stamp: BTreeMap::new(),
    stamp_of: BTreeMap::new(),
});

/// Sets how many segment `.log` files (active or not) stay open at most, process-wide
/// (at least one). Files beyond it are closed, least recently used first; a file in use
/// stays open until its use ends.
pub fn set_max_open_segment_files(max: usize) {
    MAX_OPEN.store(max.max(1), Ordering::Relaxed);
    let evicted = cache().evict(max.max(1));
    drop(evicted);
}

/// The bound set by [`set_max_open_segment_files`].
pub fn max_open_segment_files() -> usize {
    MAX_OPEN.load(Ordering::Relaxed)
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
    by_stamp: BTreeMap<u64, Arc<File>>,
    stamp_of: BTreeMap<usize, u64>,
}

impl Lru {
    /// Makes `file` the most recently used; returns its new stamp and the files it
    /// evicted, for the caller to drop (close) once the lock is released.
    fn touch(&mut self, file: &Arc<File>) -> (u64, Vec<Arc<File>>) {
        let key = Arc::as_ptr(file) as usize;
        let stamp = NEXT_STAMP.fetch_add(1, Ordering::Relaxed);
        if let Some(old) = self.stamp_of.insert(key, stamp) {
            self.by_stamp.remove(&old);
        }
        self.by_stamp.insert(stamp, Arc::clone(file));
        (stamp, self.evict(MAX_OPEN.load(Ordering::Relaxed)))
    }

    /// Drops the least recently used entries beyond `max`; returns their files. A
    /// close can be slow (ext4 starts writing back a file it was told to truncate), so
    /// it must not happen under the cache's lock.
    #[must_use]
    fn evict(&mut self, max: usize) -> Vec<Arc<File>> {
        let mut evicted = Vec::new();
        while self.by_stamp.len() > max {
            let Some((_, file)) = self.by_stamp.pop_first() else {
                break;
            };
            self.stamp_of.remove(&(Arc::as_ptr(&file) as usize));
            evicted.push(file);
        }
        evicted
    }

    fn remove(&mut self, file: &Arc<File>) {
        if let Some(stamp) = self.stamp_of.remove(&(Arc::as_ptr(file) as usize)) {
            self.by_stamp.remove(&stamp);
        }
    }
}

pub(crate) struct SegmentFile {
    path: PathBuf,
    /// The file while something (the cache, a user) still holds it open.
    shared: Mutex<Weak<File>>,
    /// This file's stamp in the cache when it was last touched (0: never).
    stamp: AtomicU64,
}

impl SegmentFile {
    /// A file just opened (or created), handed to the cache.
    pub(crate) fn new(path: &Path, file: File) -> Self {
        let file = Arc::new(file);
        let segment_file = SegmentFile {
            path: path.to_path_buf(),
            shared: Mutex::new(Arc::downgrade(&file)),
            stamp: AtomicU64::new(0),
        };
        segment_file.touch(&file);
        segment_file
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn weak(&self) -> MutexGuard<'_, Weak<File>> {
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn touch(&self, file: &Arc<File>) {
        let (stamp, evicted) = cache().touch(file);
        self.stamp.store(stamp, Ordering::Relaxed);
        drop(evicted);
    }

    /// Touched so recently that it is certainly still cached: fewer than a quarter of
    /// the cache's capacity touched since. Saves the hot append path the global lock.
    fn recently_touched(&self) -> bool {
        let stamp = self.stamp.load(Ordering::Relaxed);
        let window = (MAX_OPEN.load(Ordering::Relaxed) / 4) as u64;
        stamp != 0 && NEXT_STAMP.load(Ordering::Relaxed).saturating_sub(stamp) < window
    }

    /// The open file, opening it again if the cache closed it. Hold the `Arc` only for
    /// the length of one use: while held, the descriptor stays open.
    pub(crate) fn get(&self) -> io::Result<Arc<File>> {
        let mut weak = self.weak();
        let (file, reopened) = match weak.upgrade() {
            Some(file) => (file, false),
            None => {
                let file = Arc::new(OpenOptions::new().read(true).write(true).open(&self.path)?);
                *weak = Arc::downgrade(&file);
                (file, true)
            }
        };
        drop(weak);
        if reopened || !self.recently_touched() {
            self.touch(&file);
        }
        Ok(file)
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
