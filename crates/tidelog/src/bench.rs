//! `tidelog bench …`: the benchmark tool is its own binary, `tidelog-bench` (it links
//! librdkafka, which the broker does not need); this hands the arguments to it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};

/// Everything after `tidelog bench` goes to `tidelog-bench` unchanged.
#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Arguments for tidelog-bench (try `tidelog bench --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// Replaces this process with `tidelog-bench` from beside this binary, else from PATH.
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    let program = locate().context("finding tidelog-bench")?;
    let error = Command::new(&program).args(&args.args).exec();
    bail!("running {}: {error}", program.display())
}

fn locate() -> anyhow::Result<PathBuf> {
    let beside = std::env::current_exe()?.with_file_name("tidelog-bench");
    if beside.is_file() {
        return Ok(beside);
    }
    let on_path = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("tidelog-bench"))
        .find(|candidate| candidate.is_file());
    match on_path {
        Some(found) => Ok(found),
        None => bail!(
            "tidelog-bench is neither at {} nor on PATH; build it with \
             `cargo build --release -p tidelog-bench`",
            beside.display()
        ),
    }
}
