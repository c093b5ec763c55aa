//! Running the `tidelog` CLI as a child process in tests, bounded by a timeout.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a CLI command may take before the test fails.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What a finished `tidelog` CLI command left.
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `tidelog <args> --bootstrap <addr>` with `stdin`, under [`COMMAND_TIMEOUT`].
pub fn tidelog(bootstrap: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidelog"))
        .args(args)
        .args(["--bootstrap", bootstrap])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tidelog {args:?} did not finish in {COMMAND_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    writer.join().unwrap();
    Output {
        ok: status.success(),
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// `tidelog topic create NAME --partitions N`; the test fails with the CLI's error.
pub fn create_topic(bootstrap: &str, name: &str, partitions: u32) {
    let partitions = partitions.to_string();
    let created = tidelog(
        bootstrap,
        &["topic", "create", name, "--partitions", &partitions],
        b"",
    );
    assert!(created.ok, "topic create {name}: {}", created.stderr);
}
