//! The seed's back-of-envelope sizing as a pure function: assumptions in, figures out.
//! No I/O. Every per-day figure divides by 86,400 (never 1e5); estimates are decimal
//! bytes, configuration values binary. Where the seed carries a printed, rounded figure
//! into the next line (61 msg/s per partition, 63 requests/s, 33,554 messages) this
//! does the same, so each printed line can be re-checked by hand.

use serde::Serialize;

use super::assumptions::validate;
pub(crate) use super::assumptions::Assumptions;

use super::consumers::consumer_side;
use super::durability::durability;
use super::format::{auto, decimal_rate};
use super::sheet::{add, ceil_whole, div, mul, sub, Num, Round, Section, Sheet, Style, Unit};

/// The resource that runs out first on the planned fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Resource {
    Network,
    Disk,
    /// Load is so small that the fleet is set by needing RF distinct brokers.
    ReplicaPlacement,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Binding {
    pub(crate) resource: Resource,
    pub(crate) nic_fraction: f64,
    pub(crate) disk_fraction: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub(crate) sections: Vec<Section>,
    pub(crate) binding: Binding,
}

impl Plan {
    /// The value of the figure with this JSON key.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<f64> {
        self.sections
            .iter()
            .flat_map(|section| section.figures.iter())
            .find(|figure| figure.key == key)
            .map(|figure| figure.value)
    }
}

/// Past this many brokers or partitions the assumptions are almost certainly in the
/// wrong units, and power-of-two rounding would leave exact integer range.
const MAX_WHOLE: f64 = (1u64 << 50) as f64;

pub(crate) const DAY: f64 = super::parse::SECONDS_PER_DAY;

/// Computes every figure of the plan from `a`.
pub(crate) fn plan(a: &Assumptions) -> anyhow::Result<Plan> {
    validate(a)?;
    let mut s = Sheet::default();
    let rf = f64::from(a.replication_factor);

    s.section("Storage");
    let ingest = s.calc(
        "ingest_bytes_per_sec",
        "ingest bytes/s:",
        mul(&[Num::auto(a.rate), Num::auto(a.message_bytes)]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let per_day = s.calc(
        "ingest_bytes_per_day",
        "per day:",
        mul(&[ingest, Num::int(DAY)]),
        Round::Exact,
        Style::Int,
        Unit::Bytes,
    );
    let days = a.retention_seconds / DAY;
    let retained = s.calc(
        "retained_bytes",
        &format!("{} retention:", retention_name(a.retention_seconds)),
        mul(&[per_day, Num::auto(days)]),
        Round::Exact,
        Style::Int,
        Unit::Bytes,
    );
    let stored = s.calc(
        "stored_bytes",
        &format!("replicated RF {}:", a.replication_factor),
        mul(&[retained, Num::int(rf)]),
        Round::Exact,
        Style::Int,
        Unit::Bytes,
    );

    s.section("Network fan-out");
    let copies = Num::int(rf - 1.0);
    let producer_in = s.given(
        "producer_in_bytes_per_sec",
        "producer in:",
        ingest,
        Unit::BytesPerSec,
    );
    let repl_out = s.calc(
        "replication_out_bytes_per_sec",
        "replication out:",
        mul(&[ingest, copies]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let repl_in = s.calc(
        "replication_in_bytes_per_sec",
        "replication in:",
        mul(&[ingest, copies]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let consumer_out = s.calc(
        "consumer_out_bytes_per_sec",
        "consumer out:",
        mul(&[ingest, Num::int(f64::from(a.consumer_groups))]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let cluster = s.calc(
        "cluster_bytes_per_sec",
        "cluster bytes/s:",
        add(&[producer_in, repl_out, repl_in, consumer_out]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );

    s.section("Brokers");
    let nic = nic_bytes(a.nic_gbps);
    let nic_num = s.given(
        "nic_bytes_per_sec",
        &format!("NIC at {} Gbps:", auto(a.nic_gbps)),
        Num::int(nic),
        Unit::BytesPerSec,
    );
    let budget = Num::new(a.nic_budget, Style::Dec(2));
    let usable = s.calc(
        "usable_bytes_per_sec_per_broker",
        "usable per broker:",
        mul(&[nic_num, budget]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let by_nic = s.calc(
        "brokers_needed",
        "brokers needed:",
        div(cluster, usable),
        Round::Up,
        Style::Int,
        Unit::Count,
    );
    let log_writes_value = ingest.value * rf;
    // The disk gets the same steady-path budget as the NIC, so the two compare fairly.
    let disk_usable = s.calc(
        "usable_disk_bytes_per_sec_per_broker",
        "usable disk per broker:",
        mul(&[Num::int(a.disk_sequential_bytes_per_sec), budget]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let by_disk = s.calc(
        "brokers_for_disk",
        "brokers for disk:",
        div(Num::int(log_writes_value), disk_usable),
        Round::Up,
        Style::Int,
        Unit::Count,
    );
    let needed = by_nic.value.max(by_disk.value).max(rf);
    let brokers = s.given(
        "brokers",
        "round up to a power of two:",
        Num::int(power_of_two(needed, "brokers")?),
        Unit::Count,
    );
    let compare_usable = s.calc(
        "compare_usable_bytes_per_sec_per_broker",
        &format!("usable at {} Gbps:", auto(a.compare_nic_gbps)),
        mul(&[Num::int(nic_bytes(a.compare_nic_gbps)), budget]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    s.calc(
        "brokers_needed_at_compare_nic",
        &format!("brokers at {} Gbps:", auto(a.compare_nic_gbps)),
        div(cluster, compare_usable),
        Round::Up,
        Style::Int,
        Unit::Count,
    );

    s.section("Per broker: network against disk");
    let per_broker_net = s.calc(
        "network_bytes_per_sec_per_broker",
        "per-broker network:",
        div(cluster, brokers),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let nic_fraction = s.calc(
        "nic_fraction",
        "fraction of NIC:",
        div(per_broker_net, nic_num),
        Round::Exact,
        fraction_style(per_broker_net.value / nic),
        Unit::Fraction,
    );
    let log_writes = s.calc(
        "log_write_bytes_per_sec",
        "log writes/s cluster:",
        mul(&[ingest, Num::int(rf)]),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let per_broker_writes = s.calc(
        "log_write_bytes_per_sec_per_broker",
        "per broker:",
        div(log_writes, brokers),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let disk_fraction = s.calc(
        "disk_fraction",
        &format!(
            "fraction of {}:",
            decimal_rate(a.disk_sequential_bytes_per_sec)
        ),
        div(per_broker_writes, Num::int(a.disk_sequential_bytes_per_sec)),
        Round::Exact,
        fraction_style(per_broker_writes.value / a.disk_sequential_bytes_per_sec),
        Unit::Fraction,
    );
    let stored_per_broker = s.calc(
        "stored_bytes_per_broker",
        "storage per broker:",
        div(stored, brokers),
        Round::Exact,
        Style::Int,
        Unit::Bytes,
    );
    let cached = s.calc(
        "page_cache_seconds",
        "seconds of log in RAM:",
        div(Num::int(a.page_cache_bytes), per_broker_writes),
        Round::Exact,
        Style::Int,
        Unit::Seconds,
    );
    s.calc(
        "page_cache_hours",
        "hours:",
        div(cached, Num::int(3_600.0)),
        Round::Exact,
        Style::Dec(2),
        Unit::Count,
    );
    let spare = s.calc(
        "spare_nic_bytes_per_sec_per_broker",
        "spare NIC per broker:",
        sub(nic_num, per_broker_net),
        Round::Exact,
        Style::Int,
        Unit::BytesPerSec,
    );
    let spare = Num::int(spare.value.max(0.0));
    let refill = s.calc(
        "refill_seconds",
        "seconds to refill one broker:",
        div(stored_per_broker, spare),
        Round::Exact,
        Style::Int,
        Unit::Seconds,
    );
    s.calc(
        "refill_days",
        "days:",
        div(refill, Num::int(DAY)),
        Round::Exact,
        Style::Dec(1),
        Unit::Count,
    );

    let side = consumer_side(&mut s, a, brokers)?;
    durability(&mut s, a, brokers, &side);

    let resource = if needed == rf && rf > by_nic.value.max(by_disk.value) {
        Resource::ReplicaPlacement
    } else if by_disk.value > by_nic.value {
        Resource::Disk
    } else {
        Resource::Network
    };
    Ok(Plan {
        sections: s.sections,
        binding: Binding {
            resource,
            nic_fraction: nic_fraction.value,
            disk_fraction: disk_fraction.value,
        },
    })
}

/// One gigabit per second is 125,000,000 bytes per second of payload.
fn nic_bytes(gbps: f64) -> f64 {
    gbps * 1e9 / 8.0
}

fn fraction_style(value: f64) -> Style {
    if value >= 0.1 {
        Style::Dec(2)
    } else {
        Style::Sig(3)
    }
}

/// "7-day" for whole days, "36h" for whole hours, else seconds.
fn retention_name(seconds: f64) -> String {
    if seconds > 0.0 && (seconds / DAY).fract() == 0.0 {
        format!("{}-day", seconds / DAY)
    } else if (seconds / 3_600.0).fract() == 0.0 {
        format!("{}h", seconds / 3_600.0)
    } else {
        format!("{seconds} s")
    }
}

/// Smallest power of two at or above `value` (a power of two spreads partitions and
/// replicas evenly across brokers).
pub(crate) fn power_of_two(value: f64, what: &str) -> anyhow::Result<f64> {
    let whole = ceil_whole(value);
    if !whole.is_finite() || whole > MAX_WHOLE {
        anyhow::bail!("the assumptions need more than 2^50 {what}; check the units of the flags");
    }
    let whole = whole.max(1.0) as u64;
    Ok(whole.next_power_of_two() as f64)
}
