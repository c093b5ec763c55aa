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
    static DEFERRING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    FSYNCS.with(|n| n.set(n.get().wrapping_add(1)));
}

/// While a `Deferral` lives, the fsyncs this crate would make on its thread are not made:
/// its owner promises one [`sync_filesystems`] over every directory written before it
/// relies on anything written meanwhile being durable. Many logs closing at once use it
/// to replace tens of thousands of fsyncs by one `syncfs` per step.
pub(crate) struct Deferral {
    was: bool,
}

pub(crate) fn defer() -> Deferral {
    Deferral {
        was: DEFERRING.with(|d| d.replace(true)),
    }
}

impl Drop for Deferral {
    fn drop(&mut self) {
        DEFERRING.with(|d| d.set(self.was));
    }
}

fn deferring() -> bool {
    DEFERRING.with(Cell::get)
}

/// Makes everything written to the filesystems holding `dirs` durable: one `syncfs(2)`
/// per filesystem (directories on the same device share one). Since Linux 5.8 it
/// reports writeback errors of the filesystem, as fsync does for a file.
#[cfg(target_os = "linux")]
pub(crate) fn sync_filesystems<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut devices = std::collections::BTreeMap::new();
    for dir in dirs {
        let file = File::open(dir)?;
        devices.entry(file.metadata()?.dev()).or_insert(file);
    }
    for file in devices.values() {
        count();
        crate::mmap::syncfs(file)?;
    }
    Ok(())
}

/// How many fsync-class calls (fsync, fdatasync, msync, directory fsync) this crate has
/// made on the calling thread so far. For tests and diagnostics: take it before and
/// after an operation to see whether the operation synced on this thread.
pub fn fsyncs_on_this_thread() -> u64 {
    FSYNCS.with(Cell::get)
}

/// fdatasync: the data and the size, not the other metadata.
pub(crate) fn sync_data(file: &File) -> io::Result<()> {
    if deferring() {
        return Ok(());
    }
    count();
    file.sync_data()
}

/// fsync: data and all metadata.
pub(crate) fn sync_all(file: &File) -> io::Result<()> {
    if deferring() {
        return Ok(());
    }
    count();
    file.sync_all()
}

/// fsync of a directory, making creations, renames and unlinks in it durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    if deferring() {
        return Ok(());
    }
    sync_all(&File::open(dir)?)
}

/// fsync of a file opened by its path; a file that no longer exists needs none (it was
/// deleted by retention or truncation after the sync was asked for).
pub(crate) fn sync_path(path: &Path) -> io::Result<()> {
    if deferring() {
        return Ok(());
    }
    match File::open(path) {
        Ok(file) => sync_all(&file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// msync of a writable mapping.
pub(crate) fn sync_map(map: &memmap2::MmapMut) -> io::Result<()> {
    if deferring() {
        return Ok(());
    }
    count();
    map.flush()
}
