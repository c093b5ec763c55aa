use super::*;

fn kafka_defaults() -> BrokerGroupDefaults {
    BrokerGroupDefaults::from_settings(|_| None)
}

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn validation_gives_kafkas_messages_in_kafkas_order() {
    let d = kafka_defaults();
    assert_eq!(d.validate(&props(&[])), Ok(()));
    assert_eq!(
        d.validate(&props(&[(CONSUMER_SESSION_TIMEOUT_MS, "50000")])),
        Ok(())
    );
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("bogus", "1")], "Unknown group config name: bogus"),
        (
            &[(CONSUMER_SESSION_TIMEOUT_MS, "abc")],
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT",
        ),
        (
            &[(CONSUMER_SESSION_TIMEOUT_MS, "0")],
            "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1",
        ),
        (
            &[(CONSUMER_SESSION_TIMEOUT_MS, "30000")],
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            &[(CONSUMER_SESSION_TIMEOUT_MS, "60001")],
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        // The heartbeat bound is checked before the session's.
        (
            &[
                (CONSUMER_SESSION_TIMEOUT_MS, "1"),
                (CONSUMER_HEARTBEAT_INTERVAL_MS, "20000"),
            ],
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        ),
        (
            &[(SHARE_ISOLATION_LEVEL, "hello")],
            "Invalid value hello for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted",
        ),
        (
            &[(SHARE_RENEW_ACKNOWLEDGE_ENABLE, "1")],
            "Invalid value 1 for configuration share.renew.acknowledge.enable: Expected value to be either true or false",
        ),
        (
            &[(SHARE_RECORD_LOCK_DURATION_MS, "999")],
            "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000",
        ),
        (
            &[(SHARE_DELIVERY_COUNT_LIMIT, "11")],
            "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit",
        ),
        (
            &[(STREAMS_NUM_STANDBY_REPLICAS, "3")],
            "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas",
        ),
    ];
    for (given, message) in cases {
        assert_eq!(
            d.validate(&props(given)),
            Err(message.to_string()),
            "{given:?}"
        );
    }
}

#[test]
fn session_must_exceed_heartbeat_with_the_broker_bounds_overlapping() {
    // Bounds that let a session timeout reach the heartbeat interval.
    let d = BrokerGroupDefaults::from_settings(|name| match name {
        "group.consumer.min.session.timeout.ms" => Some("1000".into()),
        _ => None,
    });
    assert_eq!(
        d.validate(&props(&[(CONSUMER_SESSION_TIMEOUT_MS, "5000")])),
        Err(
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                .into()
        )
    );
    assert_eq!(
        d.validate(&props(&[(CONSUMER_SESSION_TIMEOUT_MS, "5001")])),
        Ok(())
    );
}

#[test]
fn share_auto_offset_reset_takes_kafkas_strategies() {
    let d = kafka_defaults();
    for ok in [
        "earliest",
        "LATEST",
        "by_duration:PT1H",
        "by_duration:P2DT3M",
        "by_duration:PT1.5S",
    ] {
        assert_eq!(
            d.validate(&props(&[(SHARE_AUTO_OFFSET_RESET, ok)])),
            Ok(()),
            "{ok}"
        );
    }
    for bad in [
        "none",
        "by_duration:",
        "by_duration:P",
        "by_duration:PT",
        "by_duration:-PT1H",
        "by_duration:1H",
    ] {
        assert!(
            d.validate(&props(&[(SHARE_AUTO_OFFSET_RESET, bad)]))
                .is_err(),
            "{bad}"
        );
    }
}

#[test]
fn the_lookup_reads_the_groups_own_value_else_the_brokers() {
    let d = BrokerGroupDefaults::from_settings(|name| match name {
        "group.consumer.session.timeout.ms" => Some("46000".into()),
        _ => None,
    });
    let mut image = MetadataImage::new("c");
    image.replay(
        1,
        &tidelog_controller::MetadataRecord::Config {
            resource: tidelog_controller::ConfigResource::Group("g1".into()),
            name: CONSUMER_SESSION_TIMEOUT_MS.into(),
            value: Some("55000".into()),
        },
    );
    // Stored under wider bounds: held to today's, as Kafka's evaluate caps it.
    image.replay(
        2,
        &tidelog_controller::MetadataRecord::Config {
            resource: tidelog_controller::ConfigResource::Group("g2".into()),
            name: CONSUMER_SESSION_TIMEOUT_MS.into(),
            value: Some("90000".into()),
        },
    );
    let (_tx, rx) = watch::channel(Arc::new(image.clone()));
    let lookup = GroupConfigs::new(d.clone()).with_images(rx);
    assert_eq!(lookup.consumer_session_timeout_ms("g1"), 55_000);
    assert_eq!(lookup.consumer_session_timeout_ms("g2"), 60_000);
    assert_eq!(lookup.consumer_session_timeout_ms("other"), 46_000);
    assert_eq!(lookup.consumer_heartbeat_interval_ms("g1"), 5_000);
    let described = describe(&d, &image, "g1");
    assert_eq!(described.len(), DEFS.len());
    assert!(described.contains(&(
        CONSUMER_SESSION_TIMEOUT_MS.to_string(),
        "55000".to_string(),
        ConfigSource::Group
    )));
    assert!(described.contains(&(
        SHARE_ISOLATION_LEVEL.to_string(),
        "read_uncommitted".to_string(),
        ConfigSource::Default
    )));
}

#[test]
fn iso_durations_read_as_javas_duration_parse_reads_them() {
    let secs = |s: u64| Some(Duration::from_secs(s));
    assert_eq!(parse_iso_duration("PT1H"), secs(3_600));
    assert_eq!(parse_iso_duration("p2dt3m"), secs(2 * 86_400 + 180));
    assert_eq!(
        parse_iso_duration("PT1.5S"),
        Some(Duration::from_millis(1_500))
    );
    assert_eq!(
        parse_iso_duration("PT0.000000001S"),
        Some(Duration::from_nanos(1))
    );
    assert_eq!(parse_iso_duration("P1D"), secs(86_400));
    assert_eq!(parse_iso_duration("PT1M1H"), None, "hours before minutes");
    assert_eq!(parse_iso_duration("PT"), None);
    assert_eq!(
        parse_iso_duration("P99999999999999999999D"),
        None,
        "overflow"
    );
}

#[test]
fn share_groups_read_their_own_configs_else_the_brokers_share_defaults() {
    let d = BrokerGroupDefaults::from_settings(|name| match name {
        "group.share.record.lock.duration.ms" => Some("2000".into()),
        "group.share.heartbeat.interval.ms" => Some("500".into()),
        _ => None,
    });
    let mut image = MetadataImage::new("c");
    for (offset, (name, value)) in [
        (SHARE_RECORD_LOCK_DURATION_MS, "20000"),
        (SHARE_DELIVERY_COUNT_LIMIT, "3"),
        (SHARE_AUTO_OFFSET_RESET, "EARLIEST"),
        (SHARE_HEARTBEAT_INTERVAL_MS, "6000"),
    ]
    .into_iter()
    .enumerate()
    {
        image.replay(
            offset as u64 + 1,
            &tidelog_controller::MetadataRecord::Config {
                resource: tidelog_controller::ConfigResource::Group("sg".into()),
                name: name.into(),
                value: Some(value.into()),
            },
        );
    }
    let (_tx, rx) = watch::channel(Arc::new(image));
    let lookup = GroupConfigs::new(d).with_images(rx);
    assert_eq!(lookup.share_limits("sg"), (20_000, 3, 2_000));
    assert_eq!(lookup.share_auto_offset_reset("sg"), "earliest");
    assert_eq!(lookup.share_heartbeat_interval_ms("sg"), 6_000);
    assert_eq!(
        lookup.share_limits("other"),
        (2_000, 5, 2_000),
        "the broker's"
    );
    assert_eq!(lookup.share_auto_offset_reset("other"), "latest");
    assert_eq!(lookup.share_heartbeat_interval_ms("other"), 500);
    assert_eq!(lookup.share_session_timeout_ms("other"), 45_000);
}

/// KIP-1191's group configs: a dead-letter topic is never an internal topic (checked
/// last, as Kafka does), and the copy flag is a boolean.
#[test]
fn a_dead_letter_topic_is_never_internal() {
    let d = kafka_defaults();
    assert_eq!(
        d.validate(&props(&[
            (ERRORS_DEADLETTERQUEUE_TOPIC_NAME, "dlq.orders"),
            (ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE, "true"),
        ])),
        Ok(())
    );
    assert_eq!(
        d.validate(&props(&[(ERRORS_DEADLETTERQUEUE_TOPIC_NAME, "")])),
        Ok(())
    );
    assert_eq!(
        d.validate(&props(&[(
            ERRORS_DEADLETTERQUEUE_TOPIC_NAME,
            "__consumer_offsets"
        )])),
        Err("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'".into())
    );
    assert_eq!(
        d.validate(&props(&[
            (ERRORS_DEADLETTERQUEUE_TOPIC_NAME, "__x"),
            (SHARE_DELIVERY_COUNT_LIMIT, "11"),
        ])),
        Err("share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit".into())
    );
    assert_eq!(
        d.validate(&props(&[(ERRORS_DEADLETTERQUEUE_COPY_RECORD_ENABLE, "yes")])),
        Err("Invalid value yes for configuration errors.deadletterqueue.copy.record.enable: Expected value to be either true or false".into())
    );
    let configs = GroupConfigs::new(d);
    assert_eq!(configs.dead_letter_topic("g"), None);
}
