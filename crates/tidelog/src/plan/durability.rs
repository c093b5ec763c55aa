//! What is lost, or remembered, when things fail: unreplicated data at acks=1, the
//! unclean-election truncation, the producer buffer (acks=0 loss and the backpressure
//! SLO), and the size of the consumer-side dedup window.

use super::consumers::{count_style, seconds_operand, ConsumerSide};
use super::format::auto;
use super::model::Assumptions;
use super::sheet::{add, as_printed, div, mul, Num, Round, Sheet, Style, Unit};

pub(crate) fn durability(s: &mut Sheet, a: &Assumptions, brokers: Num, side: &ConsumerSide) {
    let rate = Num::auto(a.rate);

    s.section("Replication: acks=1");
    let per_broker = s.calc(
        "ingest_msgs_per_sec_per_broker",
        "per-broker ingest:",
        div(rate, brokers),
        Round::Exact,
        Style::Int,
        Unit::MessagesPerSec,
    );
    let fetch_lag = s.given(
        "follower_fetch_lag_seconds",
        "follower fetch lag under load, seconds:",
        seconds_operand(a.follower_fetch_lag_seconds),
        Unit::Seconds,
    );
    let carried = as_printed(per_broker);
    s.calc(
        "unreplicated_messages_acks1",
        "unreplicated at acks=1:",
        mul(&[carried, fetch_lag]),
        Round::Exact,
        count_style(carried.value * fetch_lag.value),
        Unit::Messages,
    );

    s.section("Unclean leader election");
    let lag = s.given(
        "replica_lag_max_seconds",
        "replica.lag.time.max.ms, seconds:",
        Num::auto(a.replica_lag_max_seconds),
        Unit::Seconds,
    );
    let partition_rate = s.given(
        "truncation_partition_msgs_per_sec",
        "per-partition rate:",
        side.partition_rate,
        Unit::MessagesPerSec,
    );
    let behind = s.calc(
        "messages_behind_per_partition",
        "minimum messages behind:",
        mul(&[partition_rate, lag]),
        Round::Exact,
        Style::Auto,
        Unit::Messages,
    );
    let led = s.given(
        "partitions_led_per_broker",
        "partitions on that broker:",
        side.leaders_per_broker,
        Unit::Count,
    );
    s.calc(
        "messages_truncated",
        "messages truncated:",
        mul(&[led, behind]),
        Round::Exact,
        Style::Auto,
        Unit::Messages,
    );

    s.section("Producer buffer");
    let buffer = s.given(
        "buffer_memory_bytes",
        "buffer.memory:",
        Num::int(a.buffer_memory_bytes),
        Unit::ConfigBytes,
    );
    let buffered = s.calc(
        "buffered_messages",
        "messages buffered:",
        div(buffer, Num::auto(a.message_bytes)),
        Round::Down,
        Style::Int,
        Unit::Messages,
    );
    s.calc(
        "buffer_seconds",
        &format!(
            "seconds of buffer at {} msg/s:",
            auto(side.producer_rate.value)
        ),
        div(buffered, side.producer_rate),
        Round::Exact,
        Style::Dec(1),
        Unit::Seconds,
    );

    s.section("Dedup window");
    let horizon = s.calc(
        "dedup_horizon_seconds",
        "redelivery horizon:",
        add(&[
            Num::auto(a.session_timeout_seconds),
            Num::auto(a.rebalance_seconds),
        ]),
        Round::Exact,
        Style::Auto,
        Unit::Seconds,
    );
    let keys = s.calc(
        "dedup_keys",
        "keys in the window:",
        mul(&[rate, horizon]),
        Round::Exact,
        Style::Int,
        Unit::Count,
    );
    s.calc(
        "dedup_bytes",
        &format!("bytes at {} B/key:", auto(a.dedup_key_bytes)),
        mul(&[keys, Num::auto(a.dedup_key_bytes)]),
        Round::Exact,
        Style::Int,
        Unit::Bytes,
    );
}
