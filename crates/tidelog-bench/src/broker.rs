//! `--spawn`: start `tidelog serve` on ephemeral loopback ports with a temporary data
//! dir, optionally pinned to CPU 0 with `taskset`, and read its CPU and memory from /proc.
//! The process is killed when the handle drops, so no broker outlives the bench.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::procfs;

/// Where to find `tidelog`: an explicit path, `TIDELOG_BIN`, or beside this binary
/// (`target/<profile>/tidelog-bench` sits next to `target/<profile>/tidelog`).
pub(crate) fn locate_tidelog(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("TIDELOG_BIN") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent()?;
    // Test binaries live one level down, in target/<profile>/deps.
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent()?;
    }
    let sibling = dir.join("tidelog");
    if sibling.is_file() {
        return Some(sibling);
    }
    let target = dir.parent()?;
    ["release", "debug"]
        .iter()
        .map(|profile| target.join(profile).join("tidelog"))
        .find(|p| p.is_file())
}

/// How to start the broker.
#[derive(Clone, Debug)]
pub(crate) struct SpawnOptions {
    pub(crate) binary: PathBuf,
    /// Parent of the temporary data dir (its filesystem is the one the disk ceilings measure).
    pub(crate) work_root: PathBuf,
    /// CPU to pin the broker to, when `taskset` exists.
    pub(crate) cpu: Option<usize>,
    /// Extra `--set name=value` broker settings.
    pub(crate) settings: Vec<String>,
    /// Open-file limit for the broker (via `prlimit`), when the default is too low for
    /// the partition counts under test.
    pub(crate) nofile: Option<u64>,
    /// An SSL listener beside the PLAINTEXT one, with this PEM key store.
    pub(crate) ssl_keystore: Option<PathBuf>,
}

/// A running `tidelog serve`.
pub(crate) struct SpawnedBroker {
    options: SpawnOptions,
    child: Option<Child>,
    listen: SocketAddr,
    /// The SSL listener's address, when the options ask for one.
    ssl: Option<SocketAddr>,
    admin: SocketAddr,
    root: tempfile::TempDir,
}

impl SpawnedBroker {
    /// Starts the broker and waits (up to 30 s) until `/readyz` answers 200.
    pub(crate) fn start(options: SpawnOptions) -> anyhow::Result<Self> {
        let root = tempfile::Builder::new()
            .prefix("tidelog-bench-")
            .tempdir_in(&options.work_root)
            .with_context(|| format!("temp dir in {}", options.work_root.display()))?;
        std::fs::create_dir_all(root.path().join("data"))?;
        let ssl = options
            .ssl_keystore
            .as_ref()
            .map(|_| free_port())
            .transpose()?;
        let mut broker = Self {
            listen: free_port()?,
            ssl,
            admin: free_port()?,
            options,
            child: None,
            root,
        };
        broker.launch()?;
        broker.wait_ready(Duration::from_secs(30))?;
        Ok(broker)
    }

    pub(crate) fn bootstrap(&self) -> String {
        self.listen.to_string()
    }

    /// The SSL listener's address, when there is one.
    pub(crate) fn ssl_bootstrap(&self) -> Option<String> {
        self.ssl.map(|addr| addr.to_string())
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(crate) fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// The broker's `/metrics` exposition.
    pub(crate) fn metrics(&self) -> Option<String> {
        http_get(self.admin, "/metrics")
    }

    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        procfs::cpu_seconds(self.pid()?)
    }

    pub(crate) fn rss_bytes(&self) -> Option<u64> {
        procfs::rss_bytes(self.pid()?)
    }

    /// Open files inside partition directories of topics whose name starts with
    /// `topic_prefix` (so the metadata log and other topics do not count).
    pub(crate) fn open_partition_files(&self, topic_prefix: &str) -> Option<usize> {
        let dir = self.data_dir().canonicalize().ok()?;
        let files = procfs::open_files_under(self.pid()?, &dir)?;
        Some(
            files
                .iter()
                .filter(|path| {
                    path.ancestors().any(|a| {
                        a.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(topic_prefix))
                    })
                })
                .count(),
        )
    }

    fn launch(&mut self) -> anyhow::Result<()> {
        let mut args = match (self.ssl, &self.options.ssl_keystore) {
            (Some(ssl), Some(keystore)) => vec![
                "--set".to_string(),
                format!("listeners=PLAINTEXT://{},SSL://{ssl}", self.listen),
                "--set".to_string(),
                "ssl.keystore.type=PEM".to_string(),
                "--set".to_string(),
                format!("ssl.keystore.location={}", keystore.display()),
            ],
            _ => vec!["--listen".to_string(), self.listen.to_string()],
        };
        args.extend([
            "--admin-listen".to_string(),
            self.admin.to_string(),
            "--data-dir".to_string(),
            self.data_dir().display().to_string(),
        ]);
        let log = self.root.path().join("broker.log");
        self.child = Some(spawn_serve(&self.options, &args, &log)?);
        Ok(())
    }

    /// Polls `/readyz`; fails early if the process exits. Returns how long it took.
    pub(crate) fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("broker exited with {status}; log: {}", self.log_tail());
                }
            }
            if http_status(self.admin, "/readyz").is_some_and(|code| code == 200) {
                return Ok(start.elapsed());
            }
            thread::sleep(Duration::from_millis(5));
        }
        bail!(
            "broker not ready after {timeout:?}; log: {}",
            self.log_tail()
        )
    }

    /// SIGTERM, then wait (up to 300 s) for a clean exit; returns how long it took.
    pub(crate) fn stop_clean(&mut self) -> anyhow::Result<Duration> {
        let Some(mut child) = self.child.take() else {
            return Ok(Duration::ZERO);
        };
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()?;
        if !status.success() {
            bail!("kill -TERM failed");
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(300) {
            if child.try_wait()?.is_some() {
                return Ok(start.elapsed());
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("broker still running 300 s after SIGTERM; killed")
    }

    /// SIGKILL: no chance to write a clean-shutdown marker.
    pub(crate) fn kill_hard(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Starts again on the same ports and data dir; returns the time to ready.
    pub(crate) fn restart(&mut self, timeout: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        self.launch()?;
        self.wait_ready(timeout)?;
        Ok(start.elapsed())
    }

    fn log_tail(&self) -> String {
        log_tail(&self.root.path().join("broker.log"))
    }
}

/// Starts `tidelog serve ARGS` with the options' `--set` settings, pinned as the options
/// say, its output going to `log`.
pub(crate) fn spawn_serve(
    options: &SpawnOptions,
    args: &[String],
    log: &Path,
) -> anyhow::Result<Child> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = pinned_command(options);
    command.arg("serve").args(args);
    for setting in &options.settings {
        command.arg("--set").arg(setting);
    }
    command
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} serve {}",
                options.binary.display(),
                args.join(" ")
            )
        })
}

/// The last 20 lines of a node's log, for an error message.
pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(20).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

impl Drop for SpawnedBroker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `tidelog` under `prlimit` and `taskset` as the options ask, in a session of its own
/// (see [`own_session_prefix`]); each of these execs what follows, so the child's pid is
/// the broker's.
pub(crate) fn pinned_command(options: &SpawnOptions) -> Command {
    let mut words: Vec<std::ffi::OsString> = Vec::new();
    if own_session_available() {
        words.extend(own_session_prefix().iter().map(Into::into));
    }
    if let Some(limit) = options.nofile {
        words.extend([
            "prlimit".into(),
            format!("--nofile={limit}:{limit}").into(),
            "--".into(),
        ]);
    }
    if let Some(cpu) = options.cpu.filter(|_| taskset_available()) {
        words.extend(["taskset".into(), "-c".into(), cpu.to_string().into()]);
    }
    words.push(options.binary.clone().into_os_string());
    let mut command = Command::new(&words[0]);
    command.args(&words[1..]);
    command
}

/// Runs the broker in a new session, so in a scheduling group (autogroup) of its own
/// instead of the bench's. Linux shares a group's CPU weight among CPUs by its load on
/// each: in the bench's group, whose load threads keep CPU 1 busy, the broker on CPU 0
/// got a fraction of one weight there and, against any other busy process on CPU 0,
/// waited for the CPU a tick (4 ms at HZ=250) on about 1 % of its wake-ups: the
/// one-in-flight p99. A service (systemd unit, container) has a group of its own, and so
/// has a peer started from another shell. Out of the bench's session the broker no
/// longer gets the terminal's Ctrl-C, so it is killed when the bench dies instead (when
/// the thread that started it ends: every spawn happens on the bench's main thread).
fn own_session_prefix() -> [&'static str; 5] {
    ["setsid", "setpriv", "--pdeathsig", "KILL", "--"]
}

fn own_session_available() -> bool {
    ["setsid", "setpriv"].iter().all(|tool| {
        Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

pub(crate) fn taskset_available() -> bool {
    Command::new("taskset")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Pins this whole process (every thread, and threads created later) to one CPU.
pub(crate) fn pin_self(cpu: usize) -> anyhow::Result<()> {
    let status = Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &cpu.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("taskset could not pin the load to CPU {cpu}");
    }
    Ok(())
}

/// A port the kernel just handed out; the tiny window before the broker binds it is
/// acceptable on a machine where nothing else picks ephemeral ports for listening.
fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// The body of `GET path` (at most 8 MiB), or `None` if the server did not answer with
/// 200 in time.
pub(crate) fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.take(8 << 20).read_to_end(&mut response).ok()?;
    let text = String::from_utf8(response).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    (status == 200).then(|| body.to_string())
}

/// The value of an unlabelled metric in a Prometheus text exposition.
pub(crate) fn metric_value(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse().ok()
    })
}

/// The status code of `GET path`, or `None` if the server did not answer in 1 s.
pub(crate) fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 32];
    let mut filled = 0;
    while filled < 12 {
        let n = stream.read(&mut head[filled..]).ok()?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    let text = std::str::from_utf8(&head[..filled]).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{metric_value, own_session_available, pinned_command, SpawnOptions};
    use std::path::PathBuf;

    /// The sixth field of /proc/PID/stat: the session the process belongs to.
    fn session_of(pid: u32) -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) is in parentheses and may hold spaces.
        let after_name = &stat[stat.rfind(')')? + 1..];
        after_name.split_whitespace().nth(3)?.parse().ok()
    }

    #[test]
    fn a_spawned_broker_leads_a_session_of_its_own_under_its_own_pid() {
        if !own_session_available() {
            return;
        }
        let options = SpawnOptions {
            binary: PathBuf::from("sleep"),
            work_root: std::env::temp_dir(),
            cpu: None,
            settings: Vec::new(),
            nofile: None,
            ssl_keystore: None,
        };
        let mut child = match pinned_command(&options).arg("30").spawn() {
            Ok(child) => child,
            Err(e) => panic!("starting sleep: {e}"),
        };
        let pid = child.id();
        // setsid and setpriv exec what follows; wait until `sleep` is what runs.
        let mut comm = String::new();
        for _ in 0..200 {
            comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "sleep" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let session = session_of(pid);
        let ours = session_of(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(comm.trim(), "sleep", "the child's pid is the broker's");
        assert_eq!(session, Some(pid), "the broker leads its own session");
        assert_ne!(session, ours);
    }

    #[test]
    fn unlabelled_metrics_are_found_by_their_whole_name() {
        let text = "# TYPE x histogram\nx_sum 0.5\nx_count 3\nx_count_other 9\ny{a=\"b\"} 1\n";
        assert_eq!(metric_value(text, "x_count"), Some(3.0));
        assert_eq!(metric_value(text, "x_sum"), Some(0.5));
        assert_eq!(metric_value(text, "x"), None);
        assert_eq!(metric_value(text, "y"), None);
    }
}
