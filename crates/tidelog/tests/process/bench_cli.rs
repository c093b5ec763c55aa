//! `tidelog bench …` hands its arguments to `tidelog-bench` found beside the binary (or
//! on PATH), and says how to build it when it is nowhere.

// Helpers outside #[test] fns: a failed expect here is the test failing.
#![allow(clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs `binary` with `args` and an empty PATH, killing it after 30 s.
fn run(binary: &Path, args: &[&str]) -> Output {
    // The copy was just written: a process another test thread forks meanwhile holds
    // the write descriptor until it execs, and exec of the copy fails with ETXTBSY
    // until then. That window is short; try again.
    let mut attempts = 0;
    let mut child = loop {
        let spawned = Command::new(binary)
            .args(args)
            .env("PATH", "")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        match spawned {
            Err(e) if e.raw_os_error() == Some(libc_etxtbsy()) && attempts < 100 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other.expect("spawn tidelog"),
        }
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("poll tidelog").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tidelog {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect output")
}

/// ETXTBSY on Linux ("text file busy").
fn libc_etxtbsy() -> i32 {
    26
}

/// A copy of the built `tidelog` in a fresh directory, so what sits beside it is ours.
fn tidelog_alone(dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("tidelog");
    std::fs::copy(env!("CARGO_BIN_EXE_tidelog"), &copy).expect("copy tidelog");
    copy
}

#[test]
fn arguments_reach_tidelog_bench_unchanged_and_its_exit_code_comes_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tidelog = tidelog_alone(dir.path());
    let fake = dir.path().join("tidelog-bench");
    std::fs::write(&fake, "#!/bin/sh\nprintf '%s|' \"$@\"\nexit 3\n").expect("write fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let out = run(
        &tidelog,
        &["bench", "targets", "--only", "T1,T10", "--help", "a b"],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "targets|--only|T1,T10|--help|a b|"
    );
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn without_tidelog_bench_it_says_how_to_build_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tidelog = tidelog_alone(dir.path());
    let out = run(&tidelog, &["bench", "ceilings"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cargo build --release -p tidelog-bench"),
        "stderr: {stderr}"
    );
}
