//! The names in a partition directory, read once when its log opens.
//!
//! Opening a log used to list its directory five times (interrupted cleaner swaps, the
//! segments, three kinds of orphaned index) and to try every checkpoint file by opening
//! it; at the chapter's 16,384 partitions per node that was about twenty system calls
//! per log at each start. One listing answers all of those questions, and a checkpoint
//! file that is not there is not opened.

use std::collections::HashSet;
use std::path::Path;

use super::open::parse_base;
use crate::error::StorageError;

pub(crate) struct DirListing {
    names: HashSet<String>,
}

impl DirListing {
    /// The names in `dir` (names that are not UTF-8 are none of the log's files).
    pub(crate) fn read(dir: &Path) -> Result<Self, StorageError> {
        let mut names = HashSet::new();
        for entry in std::fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.insert(name);
            }
        }
        Ok(DirListing { names })
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Sorted base offsets of the files named `<base>.<ext>`.
    pub(crate) fn bases(&self, ext: &str) -> Vec<i64> {
        let mut bases: Vec<i64> = self
            .names
            .iter()
            .filter_map(|name| parse_base(name, ext))
            .collect();
        bases.sort_unstable();
        bases
    }

    /// Every name, for the hygiene passes that look at suffixes.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Notes that `name` was removed.
    pub(crate) fn forget(&mut self, name: &str) {
        self.names.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_listing_answers_for_segments_indexes_and_checkpoints() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "00000000000000000100.log",
            "00000000000000000000.log",
            "00000000000000000000.index",
            "recovery-point-offset-checkpoint",
            "0000000000000000000x.log",
            "00000000000000000000.log.swap",
        ] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        let mut listing = DirListing::read(dir.path()).expect("listing");
        assert_eq!(listing.bases("log"), vec![0, 100]);
        assert_eq!(listing.bases("index"), vec![0]);
        assert!(listing.contains("recovery-point-offset-checkpoint"));
        assert!(!listing.contains("log-start-offset-checkpoint"));
        assert_eq!(listing.names().filter(|n| n.ends_with(".swap")).count(), 1);
        listing.forget("00000000000000000000.index");
        assert!(listing.bases("index").is_empty());
    }
}
