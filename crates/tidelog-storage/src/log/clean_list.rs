//! A log directory's record of which logs its last clean shutdown closed
//! ([`CLEAN_SHUTDOWN_LIST`], Kafka's per-directory clean-shutdown file), written once by
//! [`crate::close_logs`] instead of a marker file in every partition directory.
//!
//! The owner of the logs takes the lists ([`CleanShutdownLists::take`]: read, then
//! removed durably) before it opens any log, so a list on disk never outlives the
//! session it describes: a crash from then on finds none, and every log is recovered
//! from its own recovery point. Each entry also names the log's active segment and its
//! size, and a log is opened as clean only if it still ends there, so a list that some
//! other program left behind cannot vouch for a log changed since.
//!
//! An entry also holds the log's leader epochs, so a listed log's close writes neither
//! its recovery-point nor its epochs file (two file creations and renames per log that
//! dominated a shutdown with many partitions). The pair on disk stays as the last
//! flusher pass wrote it: older, but consistent (the epochs cover what lies below that
//! recovery point, and a recovery rebuilds the epochs above it from the batches). A log
//! opened clean from the list takes its epochs from the entry, and its owner has both
//! files brought up to date in the background ([`crate::Log::checkpoint_if_stale`]);
//! until then a crash only rescans more.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::StorageError;

/// File in a log directory naming the partition directories closed cleanly.
pub const CLEAN_SHUTDOWN_LIST: &str = "clean-shutdown-logs";

/// Where a log ended when it was closed cleanly, and its leader epochs then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClosedCleanly {
    pub(crate) active_base: i64,
    pub(crate) active_bytes: u64,
    /// (epoch, start offset) pairs, oldest first.
    pub(crate) epochs: Vec<(i32, i64)>,
}

impl ClosedCleanly {
    /// Whether the log in `dir`, whose segments start at `bases`, still ends where it
    /// was closed: same active segment, same size (one `stat`).
    pub(crate) fn still_holds(&self, dir: &Path, bases: &[i64]) -> bool {
        bases.last() == Some(&self.active_base)
            && std::fs::metadata(dir.join(crate::segment::file_name(self.active_base, "log")))
                .is_ok_and(|m| m.len() == self.active_bytes)
    }
}

/// The lists of the log directories, taken at start; each entry is handed out once.
#[derive(Debug, Default)]
pub struct CleanShutdownLists {
    by_dir: HashMap<PathBuf, HashMap<String, ClosedCleanly>>,
}

impl CleanShutdownLists {
    /// Reads each log directory's list and removes it durably (unlink, directory
    /// fsync) before returning: call it before opening any log of those directories.
    /// A list that does not parse vouches for nothing. Blocking file I/O.
    pub fn take(log_dirs: &[PathBuf]) -> Result<CleanShutdownLists, StorageError> {
        let mut by_dir = HashMap::new();
        for dir in log_dirs {
            let lines = checkpoint::read_lines(dir, CLEAN_SHUTDOWN_LIST);
            match std::fs::remove_file(dir.join(CLEAN_SHUTDOWN_LIST)) {
                Ok(()) => checkpoint::sync_dir(dir)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
            let entries = lines
                .and_then(|lines| lines.iter().map(|l| parse(l)).collect::<Option<_>>())
                .unwrap_or_default();
            by_dir.insert(dir.clone(), entries);
        }
        Ok(CleanShutdownLists { by_dir })
    }

    /// How many logs the lists name, in all.
    pub fn len(&self) -> usize {
        self.by_dir.values().map(HashMap::len).sum()
    }

    /// Whether the lists name no log.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of the partition directory `dir`, removed from the lists: only the
    /// first open of a directory in this process may take it.
    pub(crate) fn claim(&mut self, dir: &Path) -> Option<ClosedCleanly> {
        let name = dir.file_name()?.to_str()?;
        self.by_dir.get_mut(dir.parent()?)?.remove(name)
    }
}

/// `<name> <active base> <active bytes> <epochs>`, the epochs `-` or `e:o,e:o,...`.
fn parse(line: &str) -> Option<(String, ClosedCleanly)> {
    let mut parts = line.rsplitn(4, ' ');
    let epochs = parse_epochs(parts.next()?)?;
    let active_bytes = parts.next()?.parse().ok()?;
    let active_base = parts.next()?.parse().ok()?;
    let name = parts.next().filter(|n| !n.is_empty())?;
    Some((
        name.to_owned(),
        ClosedCleanly {
            active_base,
            active_bytes,
            epochs,
        },
    ))
}

fn parse_epochs(text: &str) -> Option<Vec<(i32, i64)>> {
    if text == "-" {
        return Some(Vec::new());
    }
    text.split(',')
        .map(|pair| {
            let (epoch, offset) = pair.split_once(':')?;
            Some((epoch.parse().ok()?, offset.parse().ok()?))
        })
        .collect()
}

fn format_epochs(epochs: &[(i32, i64)]) -> String {
    if epochs.is_empty() {
        return "-".to_owned();
    }
    let pairs: Vec<String> = epochs.iter().map(|(e, o)| format!("{e}:{o}")).collect();
    pairs.join(",")
}

/// Replaces `log_dir`'s list with `entries` (partition directory name, where its log
/// ended), atomically; durable as the caller's fsync policy has it (deferred inside
/// [`crate::close_logs`], which syncs the filesystem next).
pub(crate) fn write(log_dir: &Path, entries: &[(String, ClosedCleanly)]) -> std::io::Result<()> {
    let lines: Vec<String> = entries
        .iter()
        .map(|(name, c)| {
            let epochs = format_epochs(&c.epochs);
            format!("{name} {} {} {epochs}", c.active_base, c.active_bytes)
        })
        .collect();
    checkpoint::write_atomic(
        log_dir,
        CLEAN_SHUTDOWN_LIST,
        &checkpoint::encode_lines(&lines),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_read_once_and_gone_from_disk_before_any_log_opens() {
        let root = tempfile::tempdir().unwrap();
        let entry = ClosedCleanly {
            active_base: 40,
            active_bytes: 1234,
            epochs: vec![(0, 0), (3, 17)],
        };
        write(root.path(), &[("orders-0".into(), entry.clone())]).unwrap();
        let mut lists = CleanShutdownLists::take(&[root.path().to_path_buf()]).unwrap();
        assert!(!root.path().join(CLEAN_SHUTDOWN_LIST).exists());
        assert_eq!(lists.len(), 1);
        assert_eq!(lists.claim(&root.path().join("orders-0")), Some(entry));
        assert_eq!(
            lists.claim(&root.path().join("orders-0")),
            None,
            "handed out once"
        );
        let again = CleanShutdownLists::take(&[root.path().to_path_buf()]).unwrap();
        assert!(again.is_empty());
    }

    #[test]
    fn a_list_that_does_not_parse_vouches_for_nothing_and_is_removed() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join(CLEAN_SHUTDOWN_LIST),
            "0\n2\norders-0 0 10 -\norders-1 x 3 -\n",
        )
        .unwrap();
        let lists = CleanShutdownLists::take(&[root.path().to_path_buf()]).unwrap();
        assert!(lists.is_empty());
        assert!(!root.path().join(CLEAN_SHUTDOWN_LIST).exists());
    }

    #[test]
    fn names_with_dots_and_dashes_round_trip() {
        let (name, c) = parse("my.topic-name_1-12 5 0 -").unwrap();
        assert_eq!(name, "my.topic-name_1-12");
        assert_eq!((c.active_base, c.active_bytes), (5, 0));
        assert!(c.epochs.is_empty());
        let (_, c) = parse("t-0 0 99 0:0,2:40").unwrap();
        assert_eq!(c.epochs, [(0, 0), (2, 40)]);
        assert!(parse("0 5 -").is_none());
        assert!(parse("t-0 0 99 0:0,2").is_none());
    }
}
