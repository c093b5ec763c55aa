//! Text and JSON views of a [`Plan`]. Text follows the seed's layout: label, formula
//! with the numbers substituted, `=`, result; JSON carries every figure's exact value.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::format::{auto, binary_bytes, decimal_bytes, decimal_rate, number, percent};
use super::model::{Assumptions, Plan, Resource};
use super::observe::Observed;
use super::sheet::{Figure, Formula, Unit};

/// Column where the formula starts, and where the `=` goes, as in the seed.
const LABEL_WIDTH: usize = 22;
const FORMULA_WIDTH: usize = 43;

pub(crate) fn text(a: &Assumptions, plan: &Plan, notes: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tidelog plan: {} msg/s x {} B, RF {}, {} retention, {} consumer groups, {} Gbps NIC at {}",
        auto(a.rate),
        auto(a.message_bytes),
        a.replication_factor,
        retention_text(a.retention_seconds),
        a.consumer_groups,
        auto(a.nic_gbps),
        percent(a.nic_budget),
    );
    let _ = writeln!(
        out,
        "(estimates in decimal units, configuration values in binary units; per day = 86,400 s)"
    );
    for note in notes {
        let _ = writeln!(out, "- {note}");
    }
    for section in &plan.sections {
        let _ = writeln!(out, "\n{}", section.title);
        for figure in &section.figures {
            let _ = writeln!(out, "  {}", line(figure));
        }
    }
    let _ = writeln!(out, "\n{}", binding_text(plan));
    out
}

fn line(figure: &Figure) -> String {
    let value = number(figure.numeric());
    let suffix = suffix(figure)
        .map(|suffix| format!("  ({suffix})"))
        .unwrap_or_default();
    match &figure.formula {
        Some(formula) => {
            // The `=` stays in its column even when a long label pushes the formula right.
            let label = pad(&figure.label, LABEL_WIDTH, 1);
            let lhs = pad(
                &format!("{label}{}", formula_text(formula)),
                LABEL_WIDTH + FORMULA_WIDTH,
                2,
            );
            format!("{lhs}=  {value}{suffix}")
        }
        None => {
            let label = pad(&figure.label, LABEL_WIDTH + FORMULA_WIDTH + 3, 1);
            format!("{label}{value}{suffix}")
        }
    }
}

/// `text` left-aligned in `width` columns, with at least `min_gap` spaces after it.
fn pad(text: &str, width: usize, min_gap: usize) -> String {
    let used = text.chars().count();
    let gap = width.saturating_sub(used).max(min_gap);
    format!("{text}{}", " ".repeat(gap))
}

pub(crate) fn formula_text(formula: &Formula) -> String {
    let separator = format!(" {} ", formula.op.symbol());
    formula
        .terms
        .iter()
        .map(|term| number(*term))
        .collect::<Vec<_>>()
        .join(&separator)
}

fn suffix(figure: &Figure) -> Option<String> {
    let value = figure.value;
    if !value.is_finite() {
        return None;
    }
    match figure.unit {
        Unit::Bytes if value >= 1e6 => Some(decimal_bytes(value)),
        Unit::BytesPerSec if value >= 1e6 => Some(decimal_rate(value)),
        Unit::ConfigBytes if value >= 1_024.0 => Some(binary_bytes(value)),
        Unit::Fraction => Some(percent(value)),
        _ => None,
    }
}

fn binding_text(plan: &Plan) -> String {
    let nic = percent(plan.binding.nic_fraction);
    let disk = percent(plan.binding.disk_fraction);
    match plan.binding.resource {
        Resource::Network => format!(
            "Binding resource: network. Per broker the NIC is at {nic} and the disk at {disk} \
             of its sequential bandwidth; the network runs out first."
        ),
        Resource::Disk => format!(
            "Binding resource: disk. Per broker the disk is at {disk} of its sequential \
             bandwidth and the NIC at {nic}; the disk runs out first, so the fleet is sized by it."
        ),
        Resource::ReplicaPlacement => format!(
            "Binding resource: replica placement. The load needs fewer brokers than the \
             replication factor (NIC at {nic}, disk at {disk}); the fleet is sized by RF."
        ),
    }
}

fn retention_text(seconds: f64) -> String {
    let days = seconds / 86_400.0;
    if days.fract() == 0.0 {
        format!("{}-day", auto(days))
    } else {
        format!("{} h", auto(seconds / 3_600.0))
    }
}

/// Every figure by key, the sections with their printed formulas, the assumptions, what
/// `--bootstrap` observed (`null` without it) and the binding resource. Infinite values
/// (no headroom: never drains) are `null`.
pub(crate) fn json(
    a: &Assumptions,
    plan: &Plan,
    observed: Option<&Observed>,
    notes: &[String],
) -> Value {
    let mut figures = Map::new();
    let mut sections = Vec::new();
    for section in &plan.sections {
        let mut lines = Vec::new();
        for figure in &section.figures {
            figures.insert(figure.key.to_owned(), json_number(figure.value));
            lines.push(json!({
                "key": figure.key,
                "label": figure.label,
                "formula": figure.formula.as_ref().map(formula_text),
                "value": json_number(figure.value),
                "printed": number(figure.numeric()),
                "unit": figure.unit,
            }));
        }
        sections.push(json!({ "title": section.title, "lines": lines }));
    }
    json!({
        "assumptions": a,
        "figures": figures,
        "sections": sections,
        "observed": observed,
        "notes": notes,
        "binding_resource": {
            "resource": plan.binding.resource,
            "nic_fraction": json_number(plan.binding.nic_fraction),
            "disk_fraction": json_number(plan.binding.disk_fraction),
        },
    })
}

/// Whole values as JSON integers (so 1814400000000000000 is not printed as 1.8144e18).
fn json_number(value: f64) -> Value {
    if !value.is_finite() {
        return Value::Null;
    }
    // A whole f64 inside the integer type's range converts without loss.
    if value.fract() == 0.0 {
        if (0.0..18_446_744_073_709_551_616.0).contains(&value) {
            return Value::from(value as u64);
        }
        if (-9_223_372_036_854_775_808.0..0.0).contains(&value) {
            return Value::from(value as i64);
        }
    }
    Value::from(value)
}
