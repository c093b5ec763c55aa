use super::*;

fn entity(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    parts
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
        .collect()
}

fn alter(parts: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
    QuotaAlteration {
        entity: entity(parts),
        ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn apply(image: &mut MetadataImage, plan: &Plan<Vec<QuotaResult>>) {
    for record in &plan.records {
        let next = image.last_offset().map_or(0, |o| o + 1);
        image.replay(next, record);
    }
}

fn codes(plan: &Plan<Vec<QuotaResult>>) -> Vec<i16> {
    plan.response.iter().map(|(_, c, _)| *c).collect()
}

fn key_of(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
    QuotaEntity(entity(parts).into_iter().collect())
}

#[test]
fn kafkas_entity_and_value_checks() {
    let image = MetadataImage::new("c");
    let plan = plan_alter_client_quotas(
        &image,
        &[
            alter(
                &[(USER, Some("alice"))],
                &[(PRODUCER_BYTE_RATE, Some(1024.0))],
            ),
            alter(&[], &[(PRODUCER_BYTE_RATE, Some(1.0))]),
            alter(&[("group", Some("g"))], &[(PRODUCER_BYTE_RATE, Some(1.0))]),
            alter(&[(USER, Some(""))], &[(PRODUCER_BYTE_RATE, Some(1.0))]),
            alter(&[(USER, Some("a")), (USER, Some("b"))], &[]),
            alter(&[(USER, Some("bob"))], &[("unknown_key", Some(1.0))]),
            alter(&[(USER, Some("carol"))], &[(PRODUCER_BYTE_RATE, Some(1.5))]),
            alter(&[(USER, Some("dave"))], &[(CONSUMER_BYTE_RATE, Some(-5.0))]),
            alter(&[(USER, Some("erin"))], &[(CONSUMER_BYTE_RATE, Some(0.0))]),
            alter(&[(IP, Some("10.0.0.1")), (USER, None)], &[]),
            alter(
                &[(IP, Some("not an ip"))],
                &[(CONNECTION_CREATION_RATE, Some(5.0))],
            ),
            alter(&[(IP, None)], &[(PRODUCER_BYTE_RATE, Some(5.0))]),
            alter(
                &[(USER, Some("frank"))],
                &[
                    (REQUEST_PERCENTAGE, Some(1.0)),
                    (REQUEST_PERCENTAGE, Some(2.0)),
                ],
            ),
            alter(&[(USER, Some("alice"))], &[(CONSUMER_BYTE_RATE, Some(1.0))]),
        ],
        false,
    );
    let bad = INVALID_REQUEST;
    assert_eq!(
        codes(&plan),
        vec![0, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad, bad]
    );
    let messages: Vec<&str> = plan
        .response
        .iter()
        .map(|(_, _, m)| m.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(messages[5], "Invalid configuration key unknown_key");
    assert_eq!(
        messages[6],
        "Configuration producer_byte_rate must be a Long value"
    );
    assert!(
        messages[13].starts_with("Ignoring duplicate entity"),
        "{}",
        messages[13]
    );
    // Only alice's valid entry wrote anything.
    assert_eq!(plan.records.len(), 1);
}

#[test]
fn set_change_remove_and_validate_only() {
    let mut image = MetadataImage::new("c");
    let alice = [(USER, Some("alice")), (CLIENT_ID, None)];
    let set = [alter(
        &alice,
        &[
            (PRODUCER_BYTE_RATE, Some(2048.0)),
            (REQUEST_PERCENTAGE, Some(12.5)),
        ],
    )];
    let dry = plan_alter_client_quotas(&image, &set, true);
    assert_eq!(codes(&dry), vec![0]);
    assert!(dry.records.is_empty());
    let plan = plan_alter_client_quotas(&image, &set, false);
    apply(&mut image, &plan);
    let stored = image.client_quota(&key_of(&alice)).unwrap();
    assert_eq!(stored.get(PRODUCER_BYTE_RATE), Some(&QuotaValue(2048.0)));
    assert_eq!(stored.get(REQUEST_PERCENTAGE), Some(&QuotaValue(12.5)));
    // The same values again write nothing; removing an absent key writes nothing.
    let again = plan_alter_client_quotas(&image, &set, false);
    assert!(again.records.is_empty());
    let absent = [alter(&alice, &[(CONSUMER_BYTE_RATE, None)])];
    assert!(plan_alter_client_quotas(&image, &absent, false)
        .records
        .is_empty());
    // Removing both keys removes the entity.
    let remove = [alter(
        &alice,
        &[(PRODUCER_BYTE_RATE, None), (REQUEST_PERCENTAGE, None)],
    )];
    let plan = plan_alter_client_quotas(&image, &remove, false);
    assert_eq!(plan.records.len(), 2);
    apply(&mut image, &plan);
    assert!(image.client_quotas().is_empty());
}

#[test]
fn describe_matches_as_kafkas_image() {
    let mut image = MetadataImage::new("c");
    let entities: [&[(&str, Option<&str>)]; 6] = [
        &[(USER, Some("alice"))],
        &[(USER, None)],
        &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
        &[(USER, None), (CLIENT_ID, None)],
        &[(CLIENT_ID, Some("app"))],
        &[(IP, Some("10.0.0.1"))],
    ];
    let alterations: Vec<QuotaAlteration> = entities
        .iter()
        .map(|e| {
            let key = if e[0].0 == IP {
                CONNECTION_CREATION_RATE
            } else {
                PRODUCER_BYTE_RATE
            };
            alter(e, &[(key, Some(100.0))])
        })
        .collect();
    let plan = plan_alter_client_quotas(&image, &alterations, false);
    assert_eq!(codes(&plan), vec![0; 6]);
    apply(&mut image, &plan);
    let found = |components: &[(&str, QuotaMatch)], strict: bool| -> Vec<String> {
        let components: Vec<(String, QuotaMatch)> = components
            .iter()
            .map(|(k, m)| (k.to_string(), m.clone()))
            .collect();
        describe_client_quotas(&image, &components, strict)
            .into_iter()
            .map(|(e, _)| e.describe())
            .collect()
    };
    assert_eq!(found(&[], false).len(), 6);
    assert!(found(&[], true).is_empty());
    let exact = || QuotaMatch::Exact("alice".into());
    assert_eq!(
        found(&[(USER, exact())], false),
        vec!["client-id=app,user=alice", "user=alice"]
    );
    assert_eq!(found(&[(USER, exact())], true), vec!["user=alice"]);
    assert_eq!(
        found(&[(USER, QuotaMatch::Default)], false),
        vec!["client-id=<default>,user=<default>", "user=<default>"]
    );
    assert_eq!(found(&[(USER, QuotaMatch::Specified)], false).len(), 4);
    assert_eq!(found(&[(USER, QuotaMatch::Specified)], true).len(), 2);
    assert_eq!(
        found(&[(CLIENT_ID, QuotaMatch::Specified)], true),
        vec!["client-id=app"]
    );
    assert_eq!(
        found(
            &[
                (USER, QuotaMatch::Specified),
                (CLIENT_ID, QuotaMatch::Default)
            ],
            true
        ),
        vec!["client-id=<default>,user=<default>"]
    );
    assert_eq!(
        found(&[(IP, QuotaMatch::Specified)], false),
        vec!["ip=10.0.0.1"]
    );
}

#[test]
fn records_encode_as_json_and_survive_a_snapshot() {
    let record = MetadataRecord::ClientQuota {
        entity: key_of(&[(USER, Some("alice")), (CLIENT_ID, None)]),
        key: PRODUCER_BYTE_RATE.into(),
        value: Some(QuotaValue(1024.0)),
    };
    let text = serde_json::to_string(&record).unwrap();
    assert_eq!(
        text,
        r#"{"ClientQuota":{"entity":{"client-id":null,"user":"alice"},"key":"producer_byte_rate","value":1024.0}}"#
    );
    let back: MetadataRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(back, record);
    let mut image = MetadataImage::new("c");
    image.replay(0, &record);
    let bytes = crate::snapshot::encode(&image).unwrap();
    let restored = crate::snapshot::decode(std::path::Path::new("x"), &bytes, "c").unwrap();
    assert_eq!(restored, image);
    assert_eq!(restored.client_quotas().len(), 1);
}
