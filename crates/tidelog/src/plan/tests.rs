//! The seed's own figures, from its default assumptions, pinned exactly.

use clap::Parser;

use super::format::number;
use super::model::{plan, Assumptions, Plan, Resource};
use super::render;
use super::PlanArgs;

fn seed() -> Plan {
    plan(&Assumptions::default()).expect("the seed's assumptions are valid")
}

fn figure(plan: &Plan, key: &str) -> f64 {
    plan.get(key)
        .unwrap_or_else(|| panic!("no figure named {key}"))
}

fn printed(plan: &Plan, key: &str) -> String {
    let figure = plan
        .sections
        .iter()
        .flat_map(|section| section.figures.iter())
        .find(|figure| figure.key == key)
        .unwrap_or_else(|| panic!("no figure named {key}"));
    number(figure.numeric())
}

#[test]
fn storage_and_network() {
    let p = seed();
    assert_eq!(figure(&p, "ingest_bytes_per_sec"), 1_000_000_000.0);
    assert_eq!(figure(&p, "ingest_bytes_per_day"), 86_400_000_000_000.0);
    assert_eq!(figure(&p, "retained_bytes"), 604_800_000_000_000.0);
    assert_eq!(figure(&p, "stored_bytes"), 1_814_400_000_000_000.0);
    assert_eq!(figure(&p, "replication_out_bytes_per_sec"), 2_000_000_000.0);
    assert_eq!(figure(&p, "replication_in_bytes_per_sec"), 2_000_000_000.0);
    assert_eq!(figure(&p, "consumer_out_bytes_per_sec"), 3_000_000_000.0);
    assert_eq!(figure(&p, "cluster_bytes_per_sec"), 8_000_000_000.0);
}

#[test]
fn brokers_by_nic_and_the_fractions() {
    let p = seed();
    assert_eq!(figure(&p, "usable_bytes_per_sec_per_broker"), 75_000_000.0);
    assert_eq!(figure(&p, "brokers_needed"), 107.0);
    assert_eq!(figure(&p, "brokers"), 128.0);
    assert_eq!(figure(&p, "brokers_needed_at_compare_nic"), 11.0);
    assert_eq!(figure(&p, "network_bytes_per_sec_per_broker"), 62_500_000.0);
    assert_eq!(figure(&p, "nic_fraction"), 0.5);
    assert_eq!(printed(&p, "nic_fraction"), "0.50");
    assert_eq!(
        figure(&p, "log_write_bytes_per_sec_per_broker"),
        23_437_500.0
    );
    assert_eq!(printed(&p, "disk_fraction"), "0.0234");
    assert_eq!(figure(&p, "stored_bytes_per_broker"), 14_175_000_000_000.0);
    assert_eq!(printed(&p, "page_cache_seconds"), "4,267");
    assert_eq!(printed(&p, "page_cache_hours"), "1.19");
    assert_eq!(figure(&p, "refill_seconds"), 226_800.0);
    assert_eq!(printed(&p, "refill_days"), "2.6");
    assert_eq!(p.binding.resource, Resource::Network);
}

#[test]
fn ten_gbps_gives_eleven_brokers() {
    let ten = Assumptions {
        nic_gbps: 10.0,
        ..Assumptions::default()
    };
    let p = plan(&ten).expect("valid");
    assert_eq!(figure(&p, "brokers_needed"), 11.0);
    assert_eq!(figure(&p, "brokers"), 16.0);
}

#[test]
fn partitions_from_consumer_latency() {
    let p = seed();
    assert_eq!(figure(&p, "consumer_capacity_msgs_per_sec"), 100.0);
    assert_eq!(figure(&p, "provisioned_msgs_per_sec"), 1_200_000.0);
    assert_eq!(figure(&p, "consumers"), 12_000.0);
    assert_eq!(figure(&p, "partitions"), 16_384.0);
    assert_eq!(printed(&p, "partition_msgs_per_sec"), "61");
    assert_eq!(figure(&p, "replicas"), 49_152.0);
    assert_eq!(figure(&p, "replicas_per_broker"), 384.0);
    assert_eq!(figure(&p, "leaders_per_broker"), 128.0);
    assert_eq!(figure(&p, "file_handles_per_broker"), 1_152.0);
}

#[test]
fn batching_with_and_without_sticky_partitioner() {
    let p = seed();
    assert_eq!(figure(&p, "producer_msgs_per_sec"), 1_000.0);
    assert_eq!(printed(&p, "producer_msgs_per_sec_per_partition"), "0.061");
    assert_eq!(figure(&p, "record_bytes"), 1_024.0);
    assert_eq!(figure(&p, "messages_per_batch"), 16.0);
    assert_eq!(figure(&p, "requests_per_sec_per_producer"), 63.0);
    assert_eq!(figure(&p, "requests_per_sec_sticky"), 63_000.0);
    assert_eq!(figure(&p, "requests_per_sec_unbatched"), 1_000_000.0);
}

#[test]
fn duplicates_from_the_commit_interval() {
    let p = seed();
    assert_eq!(printed(&p, "consumer_msgs_per_sec"), "83.3");
    assert_eq!(printed(&p, "replay_per_restart"), "416.7");
    assert_eq!(figure(&p, "replayed_per_day"), 5_000_000.0);
    assert_eq!(printed(&p, "duplicates_per_sec"), "57.9");
    assert_eq!(figure(&p, "processed_per_day"), 86_400_000_000.0);
    assert_eq!(printed(&p, "duplicate_rate"), "0.0000579");
    assert_eq!(figure(&p, "offset_commits_per_sec"), 2_400.0);

    let fast = Assumptions {
        commit_interval_seconds: 0.1,
        ..Assumptions::default()
    };
    let p = plan(&fast).expect("valid");
    assert_eq!(figure(&p, "replayed_per_day").round(), 100_000.0);
    assert_eq!(printed(&p, "duplicates_per_sec"), "1.2");
    assert_eq!(figure(&p, "offset_commits_per_sec").round(), 120_000.0);
}

#[test]
fn drain_time_from_headroom() {
    let p = seed();
    assert_eq!(figure(&p, "stall_backlog_messages"), 30_000_000.0);
    assert_eq!(figure(&p, "drain_msgs_per_sec").round(), 200_000.0);
    assert_eq!(figure(&p, "drain_seconds").round(), 150.0);
    assert_eq!(figure(&p, "compare_drain_msgs_per_sec").round(), 50_000.0);
    assert_eq!(figure(&p, "compare_drain_seconds").round(), 600.0);

    let none = Assumptions {
        headroom: 0.0,
        ..Assumptions::default()
    };
    let p = plan(&none).expect("valid");
    assert_eq!(figure(&p, "drain_seconds"), f64::INFINITY);
    assert_eq!(figure(&p, "consumers"), 10_000.0);
}

#[test]
fn rebalance_ceiling() {
    let p = seed();
    assert_eq!(figure(&p, "poll_batch_seconds"), 5.0);
    assert_eq!(figure(&p, "max_poll_records_ceiling"), 30_000.0);
}

#[test]
fn failure_losses_and_dedup_window() {
    let p = seed();
    assert_eq!(printed(&p, "ingest_msgs_per_sec_per_broker"), "7,813");
    assert_eq!(printed(&p, "unreplicated_messages_acks1"), "78");
    assert_eq!(figure(&p, "truncation_partition_msgs_per_sec"), 61.0);
    assert_eq!(figure(&p, "messages_behind_per_partition"), 1_830.0);
    assert_eq!(figure(&p, "messages_truncated"), 234_240.0);
    assert_eq!(figure(&p, "buffer_memory_bytes"), 33_554_432.0);
    assert_eq!(figure(&p, "buffered_messages"), 33_554.0);
    assert_eq!(printed(&p, "buffer_seconds"), "33.6");
    assert_eq!(figure(&p, "dedup_horizon_seconds"), 60.0);
    assert_eq!(figure(&p, "dedup_keys"), 60_000_000.0);
    assert_eq!(figure(&p, "dedup_bytes"), 960_000_000.0);
}

#[test]
fn figure_keys_are_unique() {
    let p = seed();
    let mut keys: Vec<_> = p
        .sections
        .iter()
        .flat_map(|section| section.figures.iter().map(|figure| figure.key))
        .collect();
    let total = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), total);
}

#[test]
fn text_lines_show_formula_and_result() {
    let text = render::text(&Assumptions::default(), &seed(), &[]);
    let expected = [
        "replicated RF 3:      604,800,000,000,000 x 3                    =  1,814,400,000,000,000  (1.81 PB)",
        "brokers needed:       8,000,000,000 / 75,000,000                 =  107",
        "fraction of 1 GB/s:   23,437,500 / 1,000,000,000                 =  0.0234  (2.34%)",
        "duplicates/s:         5,000,000 / 86,400                         =  57.9",
        "messages truncated:   128 x 1,830                                =  234,240",
        "seconds of buffer at 1,000 msg/s: 33,554 / 1,000                 =  33.6",
        "bytes at 16 B/key:    60,000,000 x 16                            =  960,000,000  (960 MB)",
    ];
    for line in expected {
        assert!(text.contains(line), "missing line {line:?} in\n{text}");
    }
    assert!(text.contains("Binding resource: network."), "{text}");
}

#[test]
fn json_has_every_figure_as_a_number() {
    let p = seed();
    let json = render::json(&Assumptions::default(), &p, None, &[]);
    assert_eq!(json["figures"]["stored_bytes"], 1_814_400_000_000_000u64);
    assert_eq!(json["figures"]["brokers"], 128);
    assert_eq!(json["binding_resource"]["resource"], "network");
    assert_eq!(json["assumptions"]["rate"], 1_000_000.0);
    let count: usize = p.sections.iter().map(|section| section.figures.len()).sum();
    assert_eq!(
        json["figures"].as_object().map(|map| map.len()),
        Some(count)
    );
}

#[test]
fn flags_default_to_the_seed() {
    #[derive(Parser)]
    struct Harness {
        #[command(flatten)]
        args: PlanArgs,
    }
    let parsed = Harness::try_parse_from(["plan"]).expect("defaults parse");
    assert_eq!(parsed.args.assumptions(), Assumptions::default());

    let parsed = Harness::try_parse_from([
        "plan",
        "--retention",
        "36h",
        "--nic-budget",
        "0.6",
        "--headroom",
        "5%",
    ])
    .expect("flags parse");
    let a = parsed.args.assumptions();
    assert_eq!(a.retention_seconds, 129_600.0);
    assert_eq!(a.headroom, 0.05);
    let p = plan(&a).expect("valid");
    assert_eq!(figure(&p, "retained_bytes"), 129_600_000_000_000.0);
}

#[test]
fn nonsense_is_refused() {
    for bad in [
        Assumptions {
            rate: 0.0,
            ..Assumptions::default()
        },
        Assumptions {
            replication_factor: 0,
            ..Assumptions::default()
        },
        Assumptions {
            batch_bytes: 100.0,
            ..Assumptions::default()
        },
        Assumptions {
            nic_gbps: 1e-20,
            ..Assumptions::default()
        },
    ] {
        assert!(plan(&bad).is_err(), "{bad:?} should be refused");
    }
}
