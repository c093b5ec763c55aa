//! Runs a target over inputs, catching panics: replays of saved inputs (corpora,
//! regressions) and seeded mutation for a bounded number of executions or time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::mutate::{mutate, Rng};
use crate::Target;

/// Inputs grow at most to this size.
pub const MAX_INPUT: usize = 64 << 10;

/// An input that broke an invariant, with the panic message.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The input.
    pub input: Vec<u8>,
    /// What the target reported.
    pub message: String,
}

/// How long a mutation run goes on.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Stop after this many executions.
    pub executions: u64,
    /// Or after this long, whichever comes first.
    pub time: Duration,
}

/// What a mutation run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// Inputs run.
    pub executions: u64,
    /// The first finding, if any (the run stops there).
    pub finding: Option<Finding>,
}

/// The message of the last panic under [`quietly`].
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Runs `work` with panics recorded instead of printed: a finding is reported once,
/// with its input, not as a backtrace per panic. The hook is process-wide, so callers
/// run one at a time.
pub fn quietly<T>(work: impl FnOnce() -> T) -> T {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let text = match info.location() {
            Some(at) => format!(
                "{} at {}:{}",
                payload_text(info.payload()),
                at.file(),
                at.line()
            ),
            None => payload_text(info.payload()),
        };
        if let Ok(mut slot) = LAST_PANIC.lock() {
            *slot = Some(text);
        }
    }));
    let out = work();
    std::panic::set_hook(previous);
    out
}

/// Runs `target` on `input`; `Err` with the panic message when it panics.
pub fn run_one(target: &Target, input: &[u8]) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| (target.run)(input))) {
        Ok(()) => Ok(()),
        Err(payload) => Err(LAST_PANIC
            .lock()
            .ok()
            .and_then(|mut m| m.take())
            .unwrap_or_else(|| payload_text(payload.as_ref()))),
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic without a message".to_owned()
    }
}

/// Runs every input; the first that panics is returned.
pub fn replay(target: &Target, inputs: &[Vec<u8>]) -> Option<Finding> {
    quietly(|| {
        inputs.iter().find_map(|input| {
            run_one(target, input).err().map(|message| Finding {
                input: input.clone(),
                message,
            })
        })
    })
}

/// Mutates `seeds` (an empty input when there are none) with `seed`'s generator
/// within `budget`, stopping at the first finding.
pub fn fuzz(target: &Target, seeds: &[Vec<u8>], seed: u64, budget: Budget) -> Report {
    quietly(|| fuzz_loop(target, seeds, seed, budget))
}

fn fuzz_loop(target: &Target, seeds: &[Vec<u8>], seed: u64, budget: Budget) -> Report {
    let start = Instant::now();
    let mut rng = Rng::new(seed);
    let empty = [Vec::new()];
    let seeds = if seeds.is_empty() { &empty[..] } else { seeds };
    let mut executions = 0;
    while executions < budget.executions && start.elapsed() < budget.time {
        let mut input = seeds[rng.below(seeds.len())].clone();
        // Several rounds of edits from one seed reach further than one.
        for _ in 0..1 + rng.below(8) {
            mutate(&mut input, &mut rng, seeds, MAX_INPUT);
            executions += 1;
            if let Err(message) = run_one(target, &input) {
                return Report {
                    executions,
                    finding: Some(Finding { input, message }),
                };
            }
        }
    }
    Report {
        executions,
        finding: None,
    }
}

/// The files of `dir` (none when it does not exist), sorted by name.
pub fn inputs_in(dir: &Path) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut files = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_file() {
            let bytes = std::fs::read(&path)?;
            files.push((path, bytes));
        }
    }
    files.sort();
    Ok(files)
}
