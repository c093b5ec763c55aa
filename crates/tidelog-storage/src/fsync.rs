//! Every fsync this crate makes goes through here, counted per thread.
//!
//! The count is how tests prove that an operation does no fsync on the thread that calls
//! it (an append that rolls a segment, for one): the broker calls appends on its async
//! workers, where a multi-millisecond fsync would stall every connection of the worker.
//! Counting is a thread-local increment, cheap next to the system call it counts.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::path::Path;

thread_local! {
    static FSYNCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    FSYNCS.with(|n| n.set(n.get().wrapping_add(1)));
}

/// How many fsync-class calls (fsync, fdatasync, msync, directory fsync) this crate has
/// made on the calling thread so far. For tests and diagnostics: take it before and
/// after an operation to see whether the operation synced on this thread.
pub fn fsyncs_on_this_thread() -> u64 {
    FSYNCS.with(Cell::get)
}

/// fdatasync: the data and the size, not the other metadata.
pub(crate) fn sync_data(file: &File) -> io::Result<()> {
    count();
    file.sync_data()
}

/// fsync: data and all metadata.
pub(crate) fn sync_all(file: &File) -> io::Result<()> {
    count();
    file.sync_all()
}

/// fsync of a directory, making creations, renames and unlinks in it durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    sync_all(&File::open(dir)?)
}

/// fsync of a file opened by its path; a file that no longer exists needs none (it was
/// deleted by retention or truncation after the sync was asked for).
pub(crate) fn sync_path(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(file) => sync_all(&file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// msync of a writable mapping.
pub(crate) fn sync_map(map: &memmap2::MmapMut) -> io::Result<()> {
    count();
    map.flush()
}
