//! `tidelog completion SHELL` and `tidelog man`: shell completions and a man page,
//! generated from the same clap definitions the parser uses, so they cannot drift
//! from the flags that exist.

use std::io::Write;

use anyhow::Context;
use clap::CommandFactory;

#[derive(clap::Args)]
pub(crate) struct CompletionArgs {
    /// The shell to complete for (bash, zsh, fish; also elvish, powershell).
    shell: clap_complete::Shell,
}

/// Prints the completion script for the shell on stdout, e.g.
/// `tidelog completion bash > /etc/bash_completion.d/tidelog`.
pub(crate) fn completion(args: CompletionArgs) -> anyhow::Result<()> {
    let mut command = crate::Cli::command();
    // Into memory first: clap_complete panics on a failed write, and `| head` is normal.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "tidelog", &mut script);
    print(&script).context("writing the completion script")
}

/// Prints tidelog(1) as roff on stdout, e.g. `tidelog man > /usr/share/man/man1/tidelog.1`.
pub(crate) fn man() -> anyhow::Result<()> {
    let page = clap_mangen::Man::new(crate::Cli::command());
    let mut roff = Vec::new();
    page.render(&mut roff).context("rendering the man page")?;
    print(&roff).context("writing the man page")
}

/// Writes to stdout; a reader that went away early (`| head`) is no failure.
fn print(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if crate::cli::is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}
