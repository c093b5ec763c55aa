//! `--output text|json` for list and describe commands: text for people, JSON (one
//! document on stdout) for scripts, so nobody has to parse tab-separated columns.

use std::io::Write;

/// The flag every list/describe command takes.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct OutputArgs {
    /// Output format: text (columns, for people) or json (one document, for scripts).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) output: Output,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Text,
    Json,
}

impl OutputArgs {
    pub(crate) fn json(self) -> bool {
        self.output == Output::Json
    }
}

/// Broker ids as text columns show them: `1,2,3`, or `-` for none.
pub(crate) fn broker_ids(ids: &[i32]) -> String {
    if ids.is_empty() {
        return "-".into();
    }
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// Prints one JSON document and a newline on stdout.
pub(crate) fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}
