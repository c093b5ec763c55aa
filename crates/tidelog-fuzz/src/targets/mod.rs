//! The targets, by name. A target returns normally for every input, valid or not; a
//! panic is a finding.

mod metadata_record;
mod record_batch;
mod request;
mod segment;

/// A named fuzz target.
pub struct Target {
    /// Its name: the corpus directory and the cargo-fuzz target.
    pub name: &'static str,
    /// What it checks.
    pub about: &'static str,
    /// Runs one input.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "request",
        about: "a connection's bytes: frames, request headers and bodies of every API at every version; what decodes re-encodes stably",
        run: request::run,
    },
    Target {
        name: "record_batch",
        about: "produce validation: a batch it accepts is read in full by kafka-protocol's decoder and by tidelog's own log reader",
        run: record_batch::run,
    },
    Target {
        name: "segment",
        about: "recovery of a partition from an arbitrary segment file: it opens or refuses, serves only whole valid batches, and appends after",
        run: segment::run,
    },
    Target {
        name: "metadata_record",
        about: "metadata records from arbitrary bytes: decoding, re-encoding and replay into an image",
        run: metadata_record::run,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
