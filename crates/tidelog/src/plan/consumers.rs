//! The consumer side of the plan: partitions from consumer latency, producer batching,
//! duplicates from the commit interval, drain time from headroom, the rebalance-storm
//! ceiling. The seed's point is that these, not the brokers, are where the system fails.

use super::format::auto;
use super::model::{power_of_two, Assumptions, DAY};
use super::sheet::{add, as_printed, div, mul, sub, Num, Round, Sheet, Style, Unit};

/// Figures the durability sections reuse.
pub(crate) struct ConsumerSide {
    /// Per-partition message rate as printed (the seed carries 61, not 61.035).
    pub(crate) partition_rate: Num,
    pub(crate) leaders_per_broker: Num,
    pub(crate) producer_rate: Num,
}

pub(crate) fn consumer_side(
    s: &mut Sheet,
    a: &Assumptions,
    brokers: Num,
) -> anyhow::Result<ConsumerSide> {
    let rate = Num::auto(a.rate);
    let rf = Num::int(f64::from(a.replication_factor));

    s.section("Partitions from consumer latency");
    let per_message = seconds_operand(a.consumer_ms / 1_000.0);
    let capacity = s.calc(
        "consumer_capacity_msgs_per_sec",
        "consumer capacity:",
        div(Num::int(1.0), per_message),
        Round::Exact,
        Style::Auto,
        Unit::MessagesPerSec,
    );
    let provisioned = s.calc(
        "provisioned_msgs_per_sec",
        &format!("capacity to provision at {}:", headroom_name(a.headroom)),
        mul(&[rate, Num::auto(1.0 + a.headroom)]),
        Round::Exact,
        Style::Auto,
        Unit::MessagesPerSec,
    );
    let consumers = s.calc(
        "consumers",
        "consumers needed:",
        div(provisioned, capacity),
        Round::Up,
        Style::Int,
        Unit::Count,
    );
    let partitions = s.given(
        "partitions",
        "partitions, power of two:",
        Num::int(power_of_two(consumers.value, "partitions")?),
        Unit::Count,
    );
    let partition_rate = div(rate, partitions).eval();
    let partition_rate = s.calc(
        "partition_msgs_per_sec",
        "per-partition rate:",
        div(rate, partitions),
        Round::Exact,
        count_style(partition_rate),
        Unit::MessagesPerSec,
    );
    let replicas = s.calc(
        "replicas",
        "replicas cluster-wide:",
        mul(&[partitions, rf]),
        Round::Exact,
        Style::Int,
        Unit::Count,
    );
    let replicas_per_broker = s.calc(
        "replicas_per_broker",
        "replicas per broker:",
        div(replicas, brokers),
        Round::Up,
        Style::Int,
        Unit::Count,
    );
    let leaders_per_broker = s.calc(
        "leaders_per_broker",
        "leaders per broker:",
        div(partitions, brokers),
        Round::Up,
        Style::Int,
        Unit::Count,
    );
    s.calc(
        "file_handles_per_broker",
        "open file handles:",
        mul(&[
            replicas_per_broker,
            Num::int(f64::from(a.files_per_replica)),
        ]),
        Round::Exact,
        Style::Int,
        Unit::Count,
    );

    s.section("Producer batching");
    let producers = Num::int(f64::from(a.producers));
    let producer_rate = s.calc(
        "producer_msgs_per_sec",
        "per-producer rate:",
        div(rate, producers),
        Round::Exact,
        Style::Auto,
        Unit::MessagesPerSec,
    );
    let touches = div(producer_rate, partitions).eval();
    s.calc(
        "producer_msgs_per_sec_per_partition",
        "per partition:",
        div(producer_rate, partitions),
        Round::Exact,
        count_style(touches),
        Unit::MessagesPerSec,
    );
    let record = s.calc(
        "record_bytes",
        "record on disk:",
        add(&[
            Num::int(a.record_overhead_bytes),
            Num::auto(a.message_bytes),
        ]),
        Round::Exact,
        Style::Int,
        Unit::Bytes,
    );
    let per_batch = s.calc(
        "messages_per_batch",
        &format!(
            "messages per {} batch:",
            super::format::binary_bytes(a.batch_bytes)
        ),
        div(Num::int(a.batch_bytes), record),
        Round::Down,
        Style::Int,
        Unit::Messages,
    );
    let producer_requests = s.calc(
        "requests_per_sec_per_producer",
        "requests/s per producer:",
        div(producer_rate, per_batch),
        Round::Up,
        Style::Int,
        Unit::Count,
    );
    s.calc(
        "requests_per_sec_sticky",
        "cluster request rate:",
        mul(&[producers, producer_requests]),
        Round::Exact,
        Style::Int,
        Unit::Count,
    );
    s.calc(
        "requests_per_sec_unbatched",
        "unbatched:",
        mul(&[producers, producer_rate]),
        Round::Exact,
        Style::Int,
        Unit::Count,
    );

    duplicates(s, a, consumers);
    drain(s, a);

    s.section("Rebalance storm");
    s.calc(
        "poll_batch_seconds",
        "max.poll.records batch:",
        mul(&[Num::int(f64::from(a.max_poll_records)), per_message]),
        Round::Exact,
        Style::Auto,
        Unit::Seconds,
    );
    let limit = s.given(
        "max_poll_interval_seconds",
        "limit, seconds:",
        Num::auto(a.max_poll_interval_seconds),
        Unit::Seconds,
    );
    s.calc(
        "max_poll_records_ceiling",
        "safe ceiling:",
        div(limit, per_message),
        Round::Down,
        Style::Int,
        Unit::Messages,
    );

    Ok(ConsumerSide {
        partition_rate: as_printed(partition_rate),
        leaders_per_broker,
        producer_rate,
    })
}

fn duplicates(s: &mut Sheet, a: &Assumptions, consumers: Num) {
    let rate = Num::auto(a.rate);
    let interval = Num::auto(a.commit_interval_seconds);
    let restarts = Num::auto(a.restarts_per_consumer_per_day);
    s.section("Duplicates (at-least-once)");
    let per_consumer = s.calc(
        "consumer_msgs_per_sec",
        "per-consumer throughput:",
        div(rate, consumers),
        Round::Exact,
        Style::Dec(1),
        Unit::MessagesPerSec,
    );
    s.calc(
        "replay_per_restart",
        "replay per restart:",
        mul(&[per_consumer, interval]),
        Round::Exact,
        Style::Dec(1),
        Unit::Messages,
    );
    s.calc(
        "restarts_per_day",
        "restarts/day:",
        mul(&[consumers, restarts]),
        Round::Exact,
        Style::Auto,
        Unit::Count,
    );
    // Straight from the inputs, not through the rounded per-consumer figures: the
    // consumer count cancels, which is the seed's check that this is offered load.
    let replayed = s.calc(
        "replayed_per_day",
        "replayed/day:",
        mul(&[rate, interval, restarts]),
        Round::Exact,
        Style::Auto,
        Unit::Messages,
    );
    s.calc(
        "duplicates_per_sec",
        "duplicates/s:",
        div(replayed, Num::int(DAY)),
        Round::Exact,
        Style::Dec(1),
        Unit::MessagesPerSec,
    );
    let processed = s.calc(
        "processed_per_day",
        "processed/day:",
        mul(&[rate, Num::int(DAY)]),
        Round::Exact,
        Style::Int,
        Unit::Messages,
    );
    s.calc(
        "duplicate_rate",
        "duplicate rate:",
        div(replayed, processed),
        Round::Exact,
        Style::Sig(3),
        Unit::Fraction,
    );
    let commits = s.calc(
        "offset_commits_per_sec",
        "offset commits/s:",
        div(consumers, interval),
        Round::Exact,
        Style::Auto,
        Unit::Count,
    );
    s.calc(
        "offset_commits_per_sec_per_partition",
        "per __consumer_offsets partition:",
        div(commits, Num::int(f64::from(a.offsets_partitions))),
        Round::Exact,
        Style::Auto,
        Unit::Count,
    );
}

fn drain(s: &mut Sheet, a: &Assumptions) {
    let rate = Num::auto(a.rate);
    s.section("Drain time from headroom");
    let backlog = s.calc(
        "stall_backlog_messages",
        &format!("backlog from a {} s stall:", auto(a.stall_seconds)),
        mul(&[rate, Num::auto(a.stall_seconds)]),
        Round::Exact,
        Style::Int,
        Unit::Messages,
    );
    let keys = [
        (
            "drain_capacity_msgs_per_sec",
            "drain_msgs_per_sec",
            "drain_seconds",
        ),
        (
            "compare_drain_capacity_msgs_per_sec",
            "compare_drain_msgs_per_sec",
            "compare_drain_seconds",
        ),
    ];
    for ((capacity_key, rate_key, time_key), headroom) in
        keys.into_iter().zip([a.headroom, a.compare_headroom])
    {
        let capacity = s.calc(
            capacity_key,
            &format!("capacity at {}:", headroom_name(headroom)),
            mul(&[rate, Num::auto(1.0 + headroom)]),
            Round::Exact,
            Style::Auto,
            Unit::MessagesPerSec,
        );
        let surplus = s.calc(
            rate_key,
            "drain rate:",
            sub(capacity, rate),
            Round::Exact,
            Style::Auto,
            Unit::MessagesPerSec,
        );
        s.calc(
            time_key,
            "drain time:",
            div(backlog, surplus),
            Round::Exact,
            Style::Auto,
            Unit::Seconds,
        );
    }
}

/// "20% headroom".
pub(crate) fn headroom_name(headroom: f64) -> String {
    format!("{}% headroom", auto(headroom * 100.0))
}

/// Whole numbers once they are large enough for rounding not to matter.
pub(crate) fn count_style(value: f64) -> Style {
    if value >= 10.0 {
        Style::Int
    } else {
        Style::Sig(2)
    }
}

/// The seed prints sub-second times with three decimals (0.010).
pub(crate) fn seconds_operand(seconds: f64) -> Num {
    let millis = seconds * 1_000.0;
    if seconds < 1.0 && millis >= 1.0 && (millis - millis.round()).abs() < 1e-9 {
        Num::new(seconds, Style::Dec(3))
    } else {
        Num::auto(seconds)
    }
}
