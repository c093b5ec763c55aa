//! The CI slice of fuzzing: every committed corpus input and every regression (an
//! input that once broke an invariant, kept after the fix) passes its target, and a
//! fixed, seeded run of mutations over them finds nothing. Long runs are
//! `tidelog-fuzz run` and cargo-fuzz (docs/reliability.md).

use std::path::PathBuf;
use std::time::Duration;

use tidelog_fuzz::driver::{fuzz, inputs_in, replay, Budget};
use tidelog_fuzz::TARGETS;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Mutated executions per target in CI: a few seconds each on this machine.
fn executions(target: &str) -> u64 {
    match target {
        "segment" => 3_000,
        _ => 300_000,
    }
}

// One test for all targets: the driver's panic hook is process-wide.
#[test]
fn corpora_and_regressions_pass_and_a_seeded_run_finds_nothing() {
    let mut failures = Vec::new();
    for target in TARGETS {
        let mut inputs = Vec::new();
        for kind in ["corpus", "regressions"] {
            let dir = fuzz_dir().join(kind).join(target.name);
            let found = inputs_in(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            inputs.extend(found);
        }
        assert!(
            inputs
                .iter()
                .any(|(p, _)| p.to_string_lossy().contains("/corpus/")),
            "{}: no corpus (run `tidelog-fuzz seeds`)",
            target.name
        );
        let bytes: Vec<Vec<u8>> = inputs.iter().map(|(_, b)| b.clone()).collect();
        if let Some(finding) = replay(target, &bytes) {
            let path = inputs
                .iter()
                .find(|(_, b)| *b == finding.input)
                .map(|(p, _)| p.display().to_string())
                .unwrap_or_default();
            failures.push(format!("{}: {path}: {}", target.name, finding.message));
            continue;
        }
        let budget = Budget {
            executions: executions(target.name),
            time: Duration::from_secs(120),
        };
        let report = fuzz(target, &bytes, 20_261_201, budget);
        if let Some(finding) = report.finding {
            failures.push(format!(
                "{}: after {} executions: {} (input {:02x?})",
                target.name, report.executions, finding.message, finding.input
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
