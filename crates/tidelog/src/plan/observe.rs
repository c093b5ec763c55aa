//! What `--bootstrap` saw on a running cluster, and how it replaces assumptions. Pure:
//! the network side lives in `bootstrap.rs`.
//!
//! The model takes one value per assumption, so several topics are folded
//! conservatively: rates add up, message size is the record-weighted mean of sampled
//! records, replication factor and retention are the largest among topics that carried
//! traffic. Each fold that loses information says so in a note.

use serde::Serialize;

use super::format::auto;
use super::model::Assumptions;

/// One topic as observed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct TopicSample {
    pub(crate) name: String,
    pub(crate) partitions: u32,
    pub(crate) replication_factor: u32,
    /// `retention.ms`; `None` when it could not be read, negative for "forever".
    pub(crate) retention_ms: Option<i64>,
    /// Records appended during the window (sum over partitions of the end-offset growth).
    pub(crate) produced: u64,
    /// Records read back from partition tails to measure their size.
    pub(crate) sampled_records: u64,
    /// Key + value bytes of those records.
    pub(crate) sampled_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Observed {
    pub(crate) bootstrap: String,
    pub(crate) window_seconds: f64,
    pub(crate) brokers: u32,
    pub(crate) topics: Vec<TopicSample>,
}

/// `base` with the observed values in place of the assumed ones, and notes for the reader.
pub(crate) fn apply(
    observed: &Observed,
    base: &Assumptions,
) -> anyhow::Result<(Assumptions, Vec<String>)> {
    if !(observed.window_seconds.is_finite() && observed.window_seconds > 0.0) {
        anyhow::bail!("the observation window must be longer than zero");
    }
    let active: Vec<&TopicSample> = observed
        .topics
        .iter()
        .filter(|topic| topic.produced > 0)
        .collect();
    if active.is_empty() {
        anyhow::bail!(
            "no records were appended to any of the {} topics on {} during the {} s window; \
             nothing to plan from (observe longer with --sample, or plan from assumptions)",
            observed.topics.len(),
            observed.bootstrap,
            auto(observed.window_seconds)
        );
    }
    let mut a = base.clone();
    let mut notes = Vec::new();

    let produced: u64 = active.iter().map(|topic| topic.produced).sum();
    let exact_rate = produced as f64 / observed.window_seconds;
    // Whole messages per second, rounded up, so the printed formulas stay exact.
    a.rate = exact_rate.ceil();
    notes.push(format!(
        "observed {} on {} for {} s: {} records appended to {} of {} topics = {} msg/s (used: {})",
        observed.bootstrap,
        plural(observed.brokers, "broker"),
        auto(observed.window_seconds),
        auto(produced as f64),
        active.len(),
        observed.topics.len(),
        auto(exact_rate),
        auto(a.rate)
    ));

    let records: u64 = active.iter().map(|topic| topic.sampled_records).sum();
    let bytes: u64 = active.iter().map(|topic| topic.sampled_bytes).sum();
    if records > 0 && bytes > 0 {
        a.message_bytes = (bytes as f64 / records as f64).ceil();
        notes.push(format!(
            "message size: {} key+value bytes over {} sampled records = {} B each",
            auto(bytes as f64),
            auto(records as f64),
            auto(a.message_bytes)
        ));
    } else {
        notes.push(format!(
            "message size: no records could be sampled; assumed {} B",
            auto(a.message_bytes)
        ));
    }

    let factors: Vec<u32> = active.iter().map(|t| t.replication_factor).collect();
    if let Some(&largest) = factors.iter().max() {
        a.replication_factor = largest.max(1);
        let mixed = factors.iter().any(|&rf| rf != largest);
        notes.push(format!(
            "replication factor: {}{}",
            a.replication_factor,
            if mixed {
                " (the largest among active topics; they differ)"
            } else {
                ""
            }
        ));
    }

    let finite: Vec<i64> = active
        .iter()
        .filter_map(|topic| topic.retention_ms)
        .filter(|&ms| ms > 0)
        .collect();
    let forever: Vec<&str> = active
        .iter()
        .filter(|topic| topic.retention_ms.is_some_and(|ms| ms < 0))
        .map(|topic| topic.name.as_str())
        .collect();
    let unknown = active.iter().any(|topic| topic.retention_ms.is_none());
    match finite.iter().max() {
        Some(&largest) => {
            a.retention_seconds = largest as f64 / 1_000.0;
            notes.push(format!(
                "retention: {} s (retention.ms {largest}, the longest among active topics)",
                auto(a.retention_seconds)
            ));
        }
        None => notes.push(format!(
            "retention: not readable from the cluster; assumed {} s",
            auto(a.retention_seconds)
        )),
    }
    if !forever.is_empty() {
        notes.push(format!(
            "retention: {} keep records forever; their storage grows without bound",
            forever.join(", ")
        ));
    }
    if unknown && !finite.is_empty() {
        notes.push("retention: some topics' retention.ms could not be read".to_owned());
    }
    notes.push(format!(
        "not observed, still assumed: {} consumer groups (tidelog group list lists them), consumer time, headroom",
        a.consumer_groups
    ));
    Ok((a, notes))
}

fn plural(count: u32, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, rf: u32, retention_ms: Option<i64>, produced: u64) -> TopicSample {
        TopicSample {
            name: name.to_owned(),
            partitions: 4,
            replication_factor: rf,
            retention_ms,
            produced,
            sampled_records: produced.min(100),
            sampled_bytes: produced.min(100) * 500,
        }
    }

    fn observed(topics: Vec<TopicSample>) -> Observed {
        Observed {
            bootstrap: "127.0.0.1:9092".to_owned(),
            window_seconds: 10.0,
            brokers: 1,
            topics,
        }
    }

    #[test]
    fn observed_values_replace_assumptions() {
        let seen = observed(vec![
            topic("clicks", 1, Some(3_600_000), 25_000),
            topic("payments", 3, Some(604_800_000), 5_001),
            topic("idle", 3, Some(86_400_000_000), 0),
        ]);
        let (a, notes) = apply(&seen, &Assumptions::default()).expect("traffic seen");
        assert_eq!(a.rate, 3_001.0); // 30,001 records / 10 s = 3,000.1, rounded up
        assert_eq!(a.message_bytes, 500.0);
        assert_eq!(a.replication_factor, 3);
        assert_eq!(a.retention_seconds, 604_800.0); // the idle topic does not count
        assert_eq!(a.consumer_groups, Assumptions::default().consumer_groups);
        assert!(
            notes.iter().any(|note| note.contains("they differ")),
            "{notes:?}"
        );
    }

    #[test]
    fn message_size_is_weighted_by_records() {
        let mut small = topic("small", 1, Some(1_000), 10);
        small.sampled_records = 300;
        small.sampled_bytes = 300 * 100;
        let mut large = topic("large", 1, Some(1_000), 10);
        large.sampled_records = 100;
        large.sampled_bytes = 100 * 1_000;
        let (a, _) = apply(&observed(vec![small, large]), &Assumptions::default()).expect("ok");
        assert_eq!(a.message_bytes, 325.0); // 130,000 / 400
    }

    #[test]
    fn unreadable_or_infinite_retention_keeps_the_assumption() {
        let seen = observed(vec![topic("a", 1, None, 10), topic("b", 1, Some(-1), 10)]);
        let (a, notes) = apply(&seen, &Assumptions::default()).expect("ok");
        assert_eq!(a.retention_seconds, 7.0 * 86_400.0);
        assert!(
            notes.iter().any(|note| note.contains("forever")),
            "{notes:?}"
        );
    }

    #[test]
    fn no_traffic_is_an_error_not_a_zero_plan() {
        let seen = observed(vec![topic("idle", 3, Some(1_000), 0)]);
        let error = apply(&seen, &Assumptions::default()).expect_err("nothing to plan from");
        assert!(
            error.to_string().contains("no records were appended"),
            "{error}"
        );
        assert!(apply(&observed(vec![]), &Assumptions::default()).is_err());
    }
}
