//! `tidelog produce TOPIC`: one record per stdin line, sent in batches.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use std::io::BufRead;
use tidelog_client::{Acks, Compression, ProduceRecord, Producer, ProducerConfig, RecordMetadata};
use tokio::sync::mpsc;

use super::ConnectArgs;

#[derive(clap::Args)]
pub(crate) struct ProduceArgs {
    /// Topic to write to (auto-created when the broker allows it).
    topic: String,
    /// Split each line at the first occurrence of this string: key before, value after.
    /// Without it every record has a null key.
    #[arg(long)]
    key_separator: Option<String>,
    /// Write every record to this partition instead of partitioning by key.
    #[arg(long)]
    partition: Option<i32>,
    /// Acknowledgement level: 0, 1 or all.
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    acks: Acks,
    /// Batch codec: none, gzip, snappy, lz4, zstd.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    compression: Compression,
    /// Print `partition P offset O` for every record written.
    #[arg(long, short)]
    verbose: bool,
    /// Send once this many lines are buffered.
    #[arg(long, default_value_t = 10_000)]
    batch_lines: usize,
    /// Send buffered lines when stdin has been quiet this long.
    #[arg(long, default_value_t = 10)]
    linger_ms: u64,
    #[command(flatten)]
    connect: ConnectArgs,
}

fn parse_acks(s: &str) -> Result<Acks, String> {
    s.parse()
        .map_err(|e: tidelog_client::ClientError| e.to_string())
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    match s {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(format!(
            "unknown compression {other:?} (none, gzip, snappy, lz4, zstd)"
        )),
    }
}

/// Largest buffered payload before a send, whatever `--batch-lines` says.
const MAX_BUFFERED_BYTES: usize = 8 * 1024 * 1024;

/// Turns one input line (without its line ending) into a record.
fn to_record(line: &[u8], separator: Option<&[u8]>, line_no: u64) -> anyhow::Result<ProduceRecord> {
    let Some(sep) = separator else {
        return Ok(ProduceRecord::new(None, Some(Bytes::copy_from_slice(line))));
    };
    let at = line
        .windows(sep.len())
        .position(|w| w == sep)
        .with_context(|| format!("line {line_no} has no key separator"))?;
    Ok(ProduceRecord::new(
        Some(Bytes::copy_from_slice(&line[..at])),
        Some(Bytes::copy_from_slice(&line[at + sep.len()..])),
    ))
}

/// Strips one trailing `\n` or `\r\n`.
fn strip_line_ending(buf: &[u8]) -> &[u8] {
    let buf = buf.strip_suffix(b"\n").unwrap_or(buf);
    buf.strip_suffix(b"\r").unwrap_or(buf)
}

pub(crate) fn run(args: ProduceArgs) -> anyhow::Result<()> {
    if args.key_separator.as_deref() == Some("") {
        bail!("--key-separator must not be empty");
    }
    if args.partition.is_some_and(|p| p < 0) {
        bail!("--partition must be >= 0");
    }
    super::runtime()?.block_on(produce(args))
}

async fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    let client = args.connect.connect().await?;
    let config = ProducerConfig {
        acks: args.acks,
        compression: args.compression,
        // Idempotence needs acks=all; asking for fewer acks asks for no idempotence, as
        // Kafka's console producer does when only acks is given.
        enable_idempotence: args.acks == Acks::All,
        ..ProducerConfig::default()
    };
    let mut producer = Producer::new(client, config);
    let separator = args.key_separator.as_deref().map(str::as_bytes);
    let linger = Duration::from_millis(args.linger_ms);
    let mut lines = spawn_stdin_reader();
    let mut line_no = 0u64;
    loop {
        let next = if producer.buffered().0 == 0 {
            Some(lines.recv().await)
        } else {
            tokio::time::timeout(linger, lines.recv()).await.ok()
        };
        let eof = match next {
            // Quiet stdin: send what is buffered so interactive use sees its records.
            None => {
                flush(&mut producer, args.verbose).await?;
                continue;
            }
            Some(None) => true,
            Some(Some(line)) => {
                line_no += 1;
                let record = to_record(
                    strip_line_ending(&line.context("reading stdin")?),
                    separator,
                    line_no,
                )?;
                producer
                    .send(&args.topic, args.partition, record)
                    .await
                    .with_context(|| format!("producing to topic {}", args.topic))?;
                false
            }
        };
        let (count, bytes) = producer.buffered();
        if eof || count >= args.batch_lines || bytes >= MAX_BUFFERED_BYTES {
            flush(&mut producer, args.verbose).await?;
        }
        if eof {
            return Ok(());
        }
    }
}

/// Lines read ahead of the producer; bounds memory when the broker is slower than stdin.
const READ_AHEAD_LINES: usize = 4096;

/// Reads stdin on a plain thread (stdin is blocking) and hands lines over a bounded
/// channel. The channel closes at end of input; the thread ends at end of input, on a read
/// error (which it forwards), or when the receiver is dropped.
fn spawn_stdin_reader() -> mpsc::Receiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = mpsc::channel(READ_AHEAD_LINES);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if tx.blocking_send(Ok(line)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    rx
}

async fn flush(producer: &mut Producer, verbose: bool) -> anyhow::Result<()> {
    if producer.buffered().0 == 0 {
        return Ok(());
    }
    let written = producer.flush().await?;
    if verbose {
        print_positions(&written)?;
    }
    Ok(())
}

fn print_positions(written: &[RecordMetadata]) -> anyhow::Result<()> {
    let mut text = String::with_capacity(written.len() * 28);
    for m in written {
        text.push_str(&format!("partition {} offset {}\n", m.partition, m.offset));
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if !super::is_broken_pipe(&e) => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_at_the_first_separator() {
        let r = to_record(b"user-1:a:b", Some(b":"), 1).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"user-1"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"a:b"[..]));
        let r = to_record(b"k=>v", Some(b"=>"), 1).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"v"[..]));
        let r = to_record(b":v", Some(b":"), 1).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn missing_separator_names_the_line() {
        let e = to_record(b"no-sep", Some(b":"), 7).unwrap_err();
        assert!(e.to_string().contains("line 7"));
    }

    #[test]
    fn without_separator_the_whole_line_is_the_value() {
        let r = to_record(b"a:b", None, 1).unwrap();
        assert_eq!(r.key, None);
        assert_eq!(r.value.as_deref(), Some(&b"a:b"[..]));
    }

    #[test]
    fn line_endings_are_stripped_once() {
        assert_eq!(strip_line_ending(b"abc\n"), b"abc");
        assert_eq!(strip_line_ending(b"abc\r\n"), b"abc");
        assert_eq!(strip_line_ending(b"abc"), b"abc");
        assert_eq!(strip_line_ending(b"abc\n\n"), b"abc\n");
    }
}
