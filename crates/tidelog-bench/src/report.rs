//! Reports: every figure next to its ceiling and the ratio, as a human table and as
//! the JSON array `targets --json` promises (one object per target).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

/// One measured figure (or one target row) with its ceiling.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Figure {
    pub(crate) id: String,
    pub(crate) workload: String,
    /// `None` when the row was not run (see `note`).
    pub(crate) value: Option<f64>,
    pub(crate) unit: String,
    pub(crate) ceiling: Option<f64>,
    /// `value / ceiling` where a ceiling applies.
    pub(crate) ratio: Option<f64>,
    /// The target in words, e.g. "≥ 0.5 × min(loopback TCP, buffered write)".
    pub(crate) target: String,
    pub(crate) met: bool,
    /// How the figure was obtained, or why it was not.
    pub(crate) note: String,
}

impl Figure {
    pub(crate) fn new(id: &str, workload: &str, value: f64, unit: &str) -> Self {
        Self {
            id: id.to_string(),
            workload: workload.to_string(),
            value: Some(value),
            unit: unit.to_string(),
            ceiling: None,
            ratio: None,
            target: String::new(),
            met: false,
            note: String::new(),
        }
    }

    pub(crate) fn not_run(id: &str, workload: &str, unit: &str, target: &str, why: &str) -> Self {
        Self {
            value: None,
            target: target.to_string(),
            note: format!("not run: {why}"),
            ..Self::new(id, workload, f64::NAN, unit)
        }
    }

    /// Sets the ceiling and the ratio value / ceiling.
    pub(crate) fn ceiling(mut self, ceiling: f64) -> Self {
        self.ceiling = Some(ceiling);
        self.ratio = self
            .value
            .filter(|_| ceiling > 0.0)
            .map(|value| value / ceiling);
        self
    }

    /// The target is met when `value ≥ factor × ceiling` (throughput-like figures).
    pub(crate) fn at_least_ratio(mut self, factor: f64, words: &str) -> Self {
        self.met = self.ratio.is_some_and(|r| r >= factor);
        self.target = words.to_string();
        self
    }

    /// The target is met when `value ≤ factor × ceiling` (latency-like figures).
    pub(crate) fn at_most_ratio(mut self, factor: f64, words: &str) -> Self {
        self.met = self.ratio.is_some_and(|r| r <= factor);
        self.target = words.to_string();
        self
    }

    /// An absolute bound: met when `value ≥ bound` (or `≤` when `at_most`).
    pub(crate) fn bound(mut self, bound: f64, at_most: bool, words: &str) -> Self {
        self.met = self
            .value
            .is_some_and(|v| if at_most { v <= bound } else { v >= bound });
        self.target = words.to_string();
        self
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}

/// Formats a number compactly: 3 significant digits for small values, none for large.
pub(crate) fn number(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_string();
    }
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        format!("{value:.0}")
    } else if magnitude >= 100.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// The human table: id, workload, value, ceiling, ratio, target, met.
pub(crate) fn table(figures: &[Figure]) -> String {
    let rows: Vec<[String; 7]> = figures
        .iter()
        .map(|f| {
            [
                f.id.clone(),
                f.workload.clone(),
                f.value
                    .map(|v| format!("{} {}", number(v), f.unit))
                    .unwrap_or_else(|| "-".to_string()),
                f.ceiling
                    .map(|c| format!("{} {}", number(c), f.unit))
                    .unwrap_or_else(|| "-".to_string()),
                f.ratio.map(number).unwrap_or_else(|| "-".to_string()),
                f.target.clone(),
                if f.value.is_none() {
                    "not run".to_string()
                } else if f.target.is_empty() {
                    String::new()
                } else if f.met {
                    "yes".to_string()
                } else {
                    "NO".to_string()
                },
            ]
        })
        .collect();
    let header = [
        "id", "workload", "value", "ceiling", "ratio", "target", "met",
    ];
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(&header.map(String::from));
    for row in &rows {
        line(row);
    }
    for f in figures.iter().filter(|f| !f.note.is_empty()) {
        let _ = writeln!(out, "  {}: {}", f.id, f.note);
    }
    out
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_verdicts() {
        let f = Figure::new("T1", "produce", 600.0, "MB/s")
            .ceiling(1000.0)
            .at_least_ratio(0.5, "≥ 0.5 × ceiling");
        assert_eq!(f.ratio, Some(0.6));
        assert!(f.met);
        let f = Figure::new("T4", "ping", 300.0, "µs")
            .ceiling(20.0)
            .at_most_ratio(10.0, "≤ 10 × rtt");
        assert_eq!(f.ratio, Some(15.0));
        assert!(!f.met);
        let f = Figure::new("T6", "produce 100 B", 400_000.0, "records/s").bound(
            500_000.0,
            false,
            "≥ 500000",
        );
        assert!(!f.met && f.ratio.is_none());
        let skipped = Figure::not_run("T10", "rf3", "MB/s", "≥ 0.3 × T1", "needs a 3-node cluster");
        assert!(!skipped.met && skipped.value.is_none());
        let json = serde_json::to_value(&skipped).unwrap();
        assert!(json["value"].is_null());
        assert_eq!(json["note"], "not run: needs a 3-node cluster");
    }

    #[test]
    fn table_lists_every_row_and_verdict() {
        let rows = vec![
            Figure::new("T1", "produce", 600.0, "MB/s")
                .ceiling(1000.0)
                .at_least_ratio(0.5, "≥ 0.5×"),
            Figure::not_run("T10", "rf3", "MB/s", "≥ 0.3×", "needs a 3-node cluster"),
        ];
        let text = table(&rows);
        assert!(text.contains("600.0 MB/s"), "{text}");
        assert!(text.contains("0.600"), "{text}");
        assert!(text.contains("yes"), "{text}");
        assert!(text.contains("not run"), "{text}");
        assert!(
            text.contains("T10: not run: needs a 3-node cluster"),
            "{text}"
        );
    }
}
