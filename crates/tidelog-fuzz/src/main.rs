//! `tidelog-fuzz`: runs the fuzz targets on stable Rust. Mutation without coverage
//! feedback: for coverage-guided runs use cargo-fuzz over the same targets (`fuzz/`,
//! nightly). See docs/reliability.md.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use tidelog_fuzz::driver::{fuzz, inputs_in, replay, Budget, Finding};
use tidelog_fuzz::targets::target;
use tidelog_fuzz::TARGETS;

#[derive(Parser)]
#[command(about = "Fuzz tidelog's decoders, validators and recovery on stable Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The targets and what each checks.
    List,
    /// Replays a target's corpus and regressions, then mutates them for a while.
    Run {
        /// Target name (see `list`), or `all`.
        target: String,
        /// Seconds of mutation per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Stop after this many executions per target.
        #[arg(long, default_value_t = u64::MAX)]
        executions: u64,
        /// Seed of the mutation sequence (the same seed replays the same inputs).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where the corpora are (one directory per target).
        #[arg(long, default_value = "fuzz/corpus")]
        corpus: PathBuf,
        /// Where findings are written (one directory per target); commit one as a
        /// regression once it is fixed.
        #[arg(long, default_value = "fuzz/artifacts")]
        artifacts: PathBuf,
    },
    /// Runs a target on the given files (a finding, to debug it).
    Replay {
        /// Target name.
        target: String,
        /// Input files.
        files: Vec<PathBuf>,
    },
    /// Writes the seed inputs built from tidelog's own encoders (fuzz/corpus/).
    Seeds {
        /// Output directory (one directory per target).
        #[arg(default_value = "fuzz/corpus")]
        dir: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::List => {
            for t in TARGETS {
                println!("{:<16} {}", t.name, t.about);
            }
            Ok(())
        }
        Command::Run {
            target: name,
            seconds,
            executions,
            seed,
            corpus,
            artifacts,
        } => {
            let chosen: Vec<_> = if name == "all" {
                TARGETS.iter().collect()
            } else {
                vec![target(&name).with_context(|| format!("no target {name:?}; see `list`"))?]
            };
            let budget = Budget {
                executions,
                time: Duration::from_secs(seconds),
            };
            for t in chosen {
                let mut inputs: Vec<Vec<u8>> = inputs_in(&corpus.join(t.name))?
                    .into_iter()
                    .map(|(_, bytes)| bytes)
                    .collect();
                let regressions = PathBuf::from("fuzz/regressions").join(t.name);
                inputs.extend(inputs_in(&regressions)?.into_iter().map(|(_, b)| b));
                if let Some(finding) = replay(t, &inputs) {
                    save(&artifacts, t.name, &finding)?;
                    bail!("{}: a saved input fails: {}", t.name, finding.message);
                }
                let report = fuzz(t, &inputs, seed, budget);
                println!(
                    "{}: {} inputs replayed, {} mutated executions (seed {seed})",
                    t.name,
                    inputs.len(),
                    report.executions
                );
                if let Some(finding) = report.finding {
                    let path = save(&artifacts, t.name, &finding)?;
                    bail!(
                        "{}: {} (input saved to {})",
                        t.name,
                        finding.message,
                        path.display()
                    );
                }
            }
            Ok(())
        }
        Command::Replay {
            target: name,
            files,
        } => {
            let t = target(&name).with_context(|| format!("no target {name:?}; see `list`"))?;
            for file in files {
                let input =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                match replay(t, &[input]) {
                    Some(finding) => println!("{}: FAILS: {}", file.display(), finding.message),
                    None => println!("{}: ok", file.display()),
                }
            }
            Ok(())
        }
        Command::Seeds { dir } => {
            let written = tidelog_fuzz::seeds::write_seeds(&dir)?;
            println!("{written} seed inputs written under {}", dir.display());
            Ok(())
        }
    }
}

/// Writes a finding's input as `<artifacts>/<target>/crash-<hash>`.
fn save(artifacts: &std::path::Path, target: &str, finding: &Finding) -> anyhow::Result<PathBuf> {
    let dir = artifacts.join(target);
    std::fs::create_dir_all(&dir)?;
    let hash = finding.input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("crash-{hash:016x}"));
    std::fs::write(&path, &finding.input)?;
    Ok(path)
}
