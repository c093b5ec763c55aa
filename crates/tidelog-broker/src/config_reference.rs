//! The tables of docs/configuration.md, rendered from the code that decides (tidelog's
//! settings, `crate::kafka_names`, the topic configs), and a test that the document
//! holds exactly them: `TIDELOG_UPDATE_DOCS=1 cargo test -p tidelog-broker
//! config_reference` rewrites it.

use std::fmt::Write;

use tidelog_controller::topic_config;

use crate::kafka_names::{Treatment, KAFKA_BROKER_NAMES};
use crate::settings;

const BEGIN: &str = "<!-- generated from the code: do not edit by hand -->";
const END: &str = "<!-- end of generated tables -->";

/// tidelog settings that are kept and reported but change nothing.
const STORED_ONLY: &[(&str, &str)] = &[
    (
        "compression.type",
        "accepted and stored: batches are kept as the producer compressed them",
    ),
    (
        "compression.gzip.level",
        "accepted and stored (no recompression)",
    ),
    (
        "compression.lz4.level",
        "accepted and stored (no recompression)",
    ),
    (
        "compression.zstd.level",
        "accepted and stored (no recompression)",
    ),
    (
        "log.preallocate",
        "accepted and stored: segment files grow as they are written",
    ),
];

fn status(treatment: Treatment) -> String {
    match treatment {
        Treatment::Process => "honoured: read by `tidelog serve` (see below)".into(),
        Treatment::Synonym { of, .. } => format!("honoured, as `{of}` (Kafka's precedence)"),
        Treatment::Ignored(why) => format!("accepted and ignored, with a warning: {why}"),
        Treatment::Refused { off: [], why } => format!("refused: {why}"),
        Treatment::Refused { off, why } => {
            let allowed: Vec<String> = off.iter().map(|v| cell(v)).collect();
            format!("refused unless {}: {why}", allowed.join(" or "))
        }
    }
}

fn cell(text: &str) -> String {
    if text.is_empty() {
        "(empty)".into()
    } else {
        format!("`{}`", text.replace('|', "\\|"))
    }
}

/// The generated part of docs/configuration.md.
pub(crate) fn render() -> String {
    let mut rows: Vec<(&str, String, String)> = settings::ALL
        .iter()
        .map(|(name, default, _)| {
            let note = STORED_ONLY
                .iter()
                .find(|(n, _)| n == name)
                .map_or("honoured", |(_, note)| note);
            (*name, cell(default), note.to_string())
        })
        .collect();
    rows.extend(
        KAFKA_BROKER_NAMES
            .iter()
            .map(|(name, t)| (*name, String::new(), status(*t))),
    );
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::new();
    let _ = writeln!(out, "{BEGIN}\n\n### Broker settings\n");
    let _ = writeln!(
        out,
        "| Setting | tidelog default | What tidelog does | Dynamic (KIP-226) |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for (name, default, status) in rows {
        let dynamic = crate::dynamic_config::doc_mode(name);
        let _ = writeln!(out, "| `{name}` | {default} | {status} | {dynamic} |");
    }
    let _ = writeln!(out, "\n### Topic configs\n");
    let _ = writeln!(
        out,
        "| Config | Default | Broker default from | What tidelog does |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    for def in topic_config::all() {
        let broker = if def.broker_key.is_empty() {
            String::new()
        } else {
            format!("`{}`", def.broker_key)
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {broker} | {} |",
            def.name,
            cell(def.default),
            def.doc.replace('|', "\\|")
        );
    }
    let _ = write!(out, "\n{END}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_configuration_md_lists_every_setting_as_the_code_treats_it() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
        let doc = std::fs::read_to_string(path).expect("docs/configuration.md");
        let (start, end) = (
            doc.find(BEGIN).expect("the begin marker"),
            doc.find(END).expect("the end marker") + END.len(),
        );
        let expected = render();
        if std::env::var_os("TIDELOG_UPDATE_DOCS").is_some() {
            let updated = format!("{}{expected}{}", &doc[..start], &doc[end..]);
            std::fs::write(path, updated).expect("writing docs/configuration.md");
            return;
        }
        assert!(
            doc[start..end] == expected,
            "docs/configuration.md is out of date: run TIDELOG_UPDATE_DOCS=1 cargo test -p tidelog-broker config_reference"
        );
    }
}
