use std::net::SocketAddr;
use std::path::PathBuf;

use super::*;
use crate::settings;
use crate::topic_config::ConfigSource;

fn broker(id: i32) -> BrokerConfig {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    BrokerConfig::new(id, any, any, PathBuf::from("/tmp/x"))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn per_broker_beats_cluster_default_beats_static_beats_default() {
    let mut config = broker(1);
    config.set("log.retention.hours", "2").expect("a setting");
    config
        .set("log.segment.bytes", "2097152")
        .expect("a setting");
    let effective = resolve_with(&config, &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(effective.get(settings::LOG_RETENTION_MS), 7_200_000);
    assert_eq!(effective.source("log.retention.ms"), ConfigSource::Broker);
    assert_eq!(effective.source("log.roll.ms"), ConfigSource::Default);

    let cluster = map(&[
        ("log.retention.ms", "60000"),
        ("log.segment.bytes", "1048576"),
    ]);
    let effective = resolve_with(&config, &cluster, &BTreeMap::new());
    assert_eq!(effective.get(settings::LOG_RETENTION_MS), 60_000);
    assert_eq!(
        effective.source("log.retention.ms"),
        ConfigSource::DynamicDefault
    );
    assert_eq!(effective.get(settings::LOG_SEGMENT_BYTES), 1_048_576);

    // This broker's own config wins, through a synonym too: a higher level beats a
    // lower one whatever names either used.
    let own = map(&[("log.retention.minutes", "5")]);
    let effective = resolve_with(&config, &cluster, &own);
    assert_eq!(effective.get(settings::LOG_RETENTION_MS), 300_000);
    assert_eq!(
        effective.source("log.retention.ms"),
        ConfigSource::DynamicBroker
    );
    // Within one level the setting's own name beats its synonyms.
    let own = map(&[("log.retention.minutes", "5"), ("log.retention.ms", "7000")]);
    let effective = resolve_with(&config, &cluster, &own);
    assert_eq!(effective.get(settings::LOG_RETENTION_MS), 7000);

    // Static settings and stored values that no longer validate are left alone.
    let odd = map(&[("num.partitions", "9"), ("log.segment.bytes", "1")]);
    let effective = resolve_with(&config, &odd, &BTreeMap::new());
    assert_eq!(effective.get(settings::NUM_PARTITIONS), 1);
    assert_eq!(effective.get(settings::LOG_SEGMENT_BYTES), 2_097_152);
    // The topic view follows: a topic without an override sees the dynamic default.
    let effective = resolve_with(&config, &cluster, &BTreeMap::new());
    let topic = crate::topic_config::effective(&effective, &BTreeMap::new());
    assert_eq!(
        topic.get("retention.ms"),
        Some(&("60000".to_string(), ConfigSource::DynamicDefault))
    );
    assert_eq!(
        crate::topic_config::log_config(&effective, &BTreeMap::new()).retention_ms,
        60_000
    );
}

#[test]
fn validation_answers_as_kafka_does() {
    let ok = map(&[
        ("log.retention.ms", "1000"),
        ("log.retention.hours", "1"),
        ("num.io.threads", "4"),
        ("max.connections", "100"),
        ("custom.plugin.setting", "x"),
    ]);
    assert_eq!(validate(&ok), Ok(()));
    assert_eq!(
        validate(&map(&[
            ("num.partitions", "3"),
            ("broker.id", "1"),
            ("log.retention.ms", "1")
        ])),
        Err("Cannot update these configs dynamically: Set(broker.id, num.partitions)".into())
    );
    assert_eq!(
        validate(&map(&[("ssl.keystore.location", "/x")])),
        Err("These security configs can be dynamically updated only per-listener using the listener prefix: Set(ssl.keystore.location)".into())
    );
    let bad = validate(&map(&[("log.retention.ms", "-5")])).unwrap_err();
    assert!(
        bad.starts_with("Invalid value -5 for configuration log.retention.ms:"),
        "{bad}"
    );
    let bad = validate(&map(&[("log.retention.ms", "soon")])).unwrap_err();
    assert!(bad.contains("Not a number"), "{bad}");
    assert!(validate(&map(&[("unclean.leader.election.enable", "maybe")])).is_err());
    assert!(validate(&map(&[("advertised.listeners", "PLAINTEXT://x:1")])).is_err());
    assert_eq!(check_resource_name("", 3), Ok(()));
    assert_eq!(check_resource_name("3", 3), Ok(()));
    assert_eq!(
        check_resource_name("4", 3),
        Err("Unexpected broker id, expected 3, but received 4".into())
    );
    assert_eq!(
        check_resource_name("x", 3),
        Err("Node id must be an integer, but it is: x".into())
    );
}

#[test]
fn every_listed_name_is_kafkas_and_classified_as_listed() {
    for name in NO_EFFECT {
        assert!(
            kafka_names::treatment(name).is_some()
                || settings::ALL.iter().any(|(n, _, _)| n == name),
            "{name} is not a Kafka broker setting"
        );
    }
    for name in APPLIED {
        assert_eq!(class(name), Class::Applied, "{name}");
    }
    for name in NOT_LIVE {
        assert_eq!(class(name), Class::NotLive, "{name}");
    }
    assert_eq!(class("log.retention.ms"), Class::Applied);
    assert_eq!(class("min.insync.replicas"), Class::Applied);
    assert_eq!(class("message.max.bytes"), Class::Applied);
    assert_eq!(
        class("log.retention.hours"),
        Class::Synonym {
            of: "log.retention.ms",
            unit_ms: 3_600_000
        }
    );
    assert_eq!(class("num.partitions"), Class::Static);
    assert_eq!(class("node.id"), Class::Static);
    assert_eq!(class("no.such.setting"), Class::Unknown);
    assert_eq!(
        synonyms("log.retention.ms"),
        vec![
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000)
        ]
    );
    assert_eq!(config_type("log.retention.ms"), ConfigType::Long);
    assert_eq!(config_type("log.cleanup.policy"), ConfigType::List);
    assert_eq!(config_type("num.partitions"), ConfigType::Int);
    assert_eq!(
        config_type("auto.create.topics.enable"),
        ConfigType::Boolean
    );
    assert_eq!(config_type("ssl.key.password"), ConfigType::Password);
}

#[test]
fn synonyms_list_every_level_in_kafkas_order() {
    use tidelog_controller::{ConfigResource, MetadataRecord};
    let mut config = broker(1);
    config.set("log.retention.hours", "2").expect("a setting");
    let mut image = MetadataImage::new("c");
    let records = [
        (ConfigResource::Cluster, "log.retention.ms", "60000"),
        (ConfigResource::Broker(1), "log.retention.minutes", "5"),
        (ConfigResource::Broker(2), "log.retention.ms", "1"),
    ];
    for (offset, (resource, name, value)) in records.into_iter().enumerate() {
        image.replay(
            offset as u64,
            &MetadataRecord::Config {
                resource,
                name: name.into(),
                value: Some(value.into()),
            },
        );
    }
    let got = broker_synonyms(&config, &image, "log.retention.ms", true);
    let want = vec![
        ("log.retention.minutes", "5", ConfigSource::DynamicBroker),
        ("log.retention.ms", "60000", ConfigSource::DynamicDefault),
        ("log.retention.hours", "2", ConfigSource::Broker),
        ("log.retention.ms", "604800000", ConfigSource::Default),
    ];
    let want: Vec<(String, String, ConfigSource)> = want
        .into_iter()
        .map(|(n, v, s)| (n.to_string(), v.to_string(), s))
        .collect();
    assert_eq!(got, want);
    // The cluster default's view leaves this broker's own configs out.
    assert_eq!(
        broker_synonyms(&config, &image, "log.retention.ms", false).len(),
        3
    );
    let entries = describe_broker(&config, &image, "1").expect("this broker");
    let retention = entries
        .iter()
        .find(|e| e.name == "log.retention.ms")
        .expect("described");
    assert_eq!(retention.value, "300000");
    assert_eq!(retention.source, ConfigSource::DynamicBroker);
    assert!(!retention.read_only);
    // The synonym given in the file is a setting of its own, as in Kafka's describe.
    let hours = entries
        .iter()
        .find(|e| e.name == "log.retention.hours")
        .expect("a statically given synonym is described");
    assert_eq!(
        (hours.value.as_str(), hours.source),
        ("2", ConfigSource::Broker)
    );
    let partitions = entries
        .iter()
        .find(|e| e.name == "num.partitions")
        .expect("described");
    assert!(partitions.read_only);
    assert_eq!(partitions.source, ConfigSource::Default);
    let defaults = describe_broker(&config, &image, "").expect("the cluster default");
    assert_eq!(defaults.len(), 1);
    assert_eq!(defaults[0].source, ConfigSource::DynamicDefault);
    assert_eq!(
        describe_broker(&config, &image, "2").unwrap_err(),
        "Unexpected broker id, expected 1 or empty string, but received 2"
    );
}
