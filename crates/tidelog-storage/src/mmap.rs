//! The crate's only `unsafe`: memory-mapping index files, finding where a sparse
//! index file holds data, and `syncfs(2)`.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

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

/// End of the last byte range of `file` that holds data, i.e. everything from there to
/// the end of the file is a hole (reads as zeros). Preallocated index files are sparse,
/// so this lets a load validate only the pages ever written instead of reading megabytes
/// of zeros. Filesystems without `SEEK_DATA` report the whole file as data.
pub(crate) fn data_end(file: &File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let fd = file.as_raw_fd();
    let mut end = 0u64;
    let mut at = 0u64;
    // Bounded: every round moves `at` forward, and a file has finitely many extents;
    // the cap guards against a filesystem that misreports.
    for _ in 0..1_000_000 {
        if at >= len {
            break;
        }
        let Ok(from) = libc::off_t::try_from(at) else {
            return Ok(len);
        };
        // SAFETY: lseek on a descriptor we own (borrowed from `file` for the call); it
        // only moves this descriptor's file position, which nothing else here uses.
        let data = unsafe { libc::lseek(fd, from, libc::SEEK_DATA) };
        if data < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ENXIO) {
                break; // no data at or after `at`
            }
            return Ok(len); // SEEK_DATA unsupported: treat everything as data
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Ok(len);
        }
        let hole = u64::try_from(hole).unwrap_or(len).min(len);
        end = end.max(hole);
        if hole <= at {
            return Ok(len);
        }
        at = hole;
    }
    Ok(end)
}

/// `syncfs(2)` on the filesystem holding `file`.
#[cfg(target_os = "linux")]
pub(crate) fn syncfs(file: &File) -> io::Result<()> {
    // SAFETY: syncfs only reads the descriptor, which `file` keeps open for the call.
    if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
