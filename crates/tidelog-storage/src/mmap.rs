//! The crate's only `unsafe`: memory-mapping index files.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

use memmap2::MmapMut;

/// Maps the whole of `file` read-write; `None` for an empty file (nothing to map).
pub(crate) fn map_file(file: &File) -> io::Result<Option<MmapMut>> {
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    // SAFETY: index files are private to this process's `Log`, which holds the only handle
    // and never changes the file length while this mapping exists (it unmaps before every
    // `set_len`). Another process truncating the file under us is outside the contract of
    // a data directory, as with Kafka.
    let map = unsafe { MmapMut::map_mut(file)? };
    // Index pages are touched one at a time (appends, binary searches). Without this,
    // the first touch of a preallocated, sparse index made the kernel read ahead and
    // zero-fill megabytes of holes: most of the time of recovering a log after a crash.
    map.advise(memmap2::Advice::Random)?;
    Ok(Some(map))
}
