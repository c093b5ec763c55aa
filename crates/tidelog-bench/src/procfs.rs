//! What the kernel says about a process: CPU seconds, resident memory, open files.
//! Linux only (reads `/proc/<pid>/…`); every figure is `None` where /proc cannot tell.

use std::fs;
use std::process::Command;
use std::sync::OnceLock;

/// Clock ticks per second for `/proc/<pid>/stat` times. Asked of `getconf` once because
/// reading it through `sysconf` would need `unsafe`; 100 is what Linux uses everywhere.
fn clock_ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|text| text.trim().parse::<f64>().ok())
            .filter(|ticks| *ticks > 0.0)
            .unwrap_or(100.0)
    })
}

/// User plus system CPU seconds the process has used so far.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after it start
    // at the last ')'. Then state is field 3, utime field 14, stime field 15.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks_per_second())
}

/// Resident set size in bytes (`VmRSS`).
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Dirty page cache in bytes (`Dirty` of `/proc/meminfo`): data written but not yet on
/// disk. Past the kernel's dirty limits, `write()` is throttled to the disk's own speed.
pub(crate) fn dirty_bytes() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("Dirty:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Number of open file descriptors (sockets and pipes included).
pub(crate) fn open_fds(pid: u32) -> Option<usize> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The soft limit on open files (`Max open files` in /proc/<pid>/limits).
pub(crate) fn max_open_files(pid: u32) -> Option<u64> {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Paths of the open descriptors that point under `dir` (segments, indexes), which is
/// what "open files per partition replica" counts.
pub(crate) fn open_files_under(pid: u32, dir: &std::path::Path) -> Option<Vec<std::path::PathBuf>> {
    let entries = fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        entries
            .filter_map(Result::ok)
            .filter_map(|e| fs::read_link(e.path()).ok())
            .filter(|target| target.starts_with(dir))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_cpu_rss_and_files() {
        let pid = std::process::id();
        let mut spin = 0u64;
        for i in 0..2_000_000u64 {
            spin = spin.wrapping_add(i * i);
        }
        assert!(spin > 0);
        assert!(cpu_seconds(pid).is_some());
        let rss = rss_bytes(pid).unwrap_or(0);
        assert!(rss > 1024 * 1024, "rss {rss}");
        assert!(open_fds(pid).unwrap_or(0) >= 3);
        assert!(max_open_files(pid).unwrap_or(0) >= 3);
        assert!(dirty_bytes().is_some());
    }

    #[test]
    fn counts_files_under_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let canonical = dir.path().canonicalize().unwrap();
        let _a = fs::File::create(canonical.join("a")).unwrap();
        let _b = fs::File::create(canonical.join("b")).unwrap();
        assert_eq!(
            open_files_under(std::process::id(), &canonical).map(|f| f.len()),
            Some(2)
        );
    }
}
