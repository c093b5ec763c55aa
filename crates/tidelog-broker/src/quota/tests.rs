use tidelog_controller::quota::{plan_alter_client_quotas, QuotaAlteration};

use super::*;

/// An entity as `(type, name)` pairs, `None` the default.
type Parts<'a> = &'a [(&'a str, Option<&'a str>)];

fn image_with(quotas: &[(Parts, &str, f64)]) -> MetadataImage {
    let mut image = MetadataImage::new("c");
    let alterations: Vec<QuotaAlteration> = quotas
        .iter()
        .map(|(entity, key, value)| QuotaAlteration {
            entity: entity
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
            ops: vec![(key.to_string(), Some(*value))],
        })
        .collect();
    let plan = plan_alter_client_quotas(&image, &alterations, false);
    assert!(
        plan.response.iter().all(|(_, code, _)| *code == 0),
        "{:?}",
        plan.response
    );
    for record in &plan.records {
        let next = image.last_offset().map_or(0, |o| o + 1);
        image.replay(next, record);
    }
    image
}

const P: &str = PRODUCER_BYTE_RATE;

#[test]
fn resolution_follows_kafkas_order() {
    let levels: [(Parts, f64); 8] = [
        (&[("user", Some("alice")), ("client-id", Some("app"))], 1.0),
        (&[("user", Some("alice")), ("client-id", None)], 2.0),
        (&[("user", Some("alice"))], 3.0),
        (&[("user", None), ("client-id", Some("app"))], 4.0),
        (&[("user", None), ("client-id", None)], 5.0),
        (&[("user", None)], 6.0),
        (&[("client-id", Some("app"))], 7.0),
        (&[("client-id", None)], 8.0),
    ];
    let tags = [
        ("alice", "app"),
        ("alice", "app"),
        ("alice", ""),
        ("alice", "app"),
        ("alice", "app"),
        ("alice", ""),
        ("", "app"),
        ("", "app"),
    ];
    // With levels i.. set, level i wins.
    for first in 0..levels.len() {
        let quotas: Vec<(Parts, &str, f64)> =
            levels[first..].iter().map(|(e, v)| (*e, P, *v)).collect();
        let image = image_with(&quotas);
        let got = resolve(&image, P, "alice", "app").unwrap();
        assert_eq!(got.bound, levels[first].1, "level {}", first + 1);
        assert_eq!(
            (got.user_tag.as_str(), got.client_tag.as_str()),
            tags[first],
            "level {}",
            first + 1
        );
    }
    // Another key, or nobody matching, resolves to nothing.
    let image = image_with(&[(&[("user", Some("bob"))], P, 1.0)]);
    assert!(resolve(&image, P, "alice", "app").is_none());
    assert!(resolve(&image, CONSUMER_BYTE_RATE, "bob", "app").is_none());
}

fn manager() -> QuotaManager {
    QuotaManager::with_window(Window {
        samples: 11,
        window_ms: 1000,
    })
}

#[test]
fn a_client_over_its_quota_is_throttled_and_others_are_not() {
    let image = image_with(&[(&[("client-id", Some("noisy"))], P, 1000.0)]);
    let quotas = manager();
    // 5 000 bytes at once: measured over 10 windows that is 500 B/s, within quota.
    let r = quotas.record(&image, QuotaKind::Produce, "ANONYMOUS", "noisy", 5000.0, 0);
    assert_eq!(r.throttle_ms, 0);
    // 20 000 more: 2 500 B/s over 10 s, (2500 - 1000) / 1000 * 10 s = 15 s, capped at
    // the 11 s span.
    let r = quotas.record(
        &image,
        QuotaKind::Produce,
        "ANONYMOUS",
        "noisy",
        20_000.0,
        10,
    );
    assert_eq!(r.throttle_ms, 11_000);
    assert_eq!(r.throttle_time_ms(), 11_000);
    // A client without a quota records nothing.
    let other = quotas.record(&image, QuotaKind::Produce, "ANONYMOUS", "quiet", 1e9, 10);
    assert_eq!(other, Recorded::NONE);
    assert_eq!(quotas.sensor_count(), 1);
    // Taking the last value back brings the rate under the quota again.
    quotas.unrecord(&r);
    let r = quotas.record(&image, QuotaKind::Produce, "ANONYMOUS", "noisy", 1.0, 20);
    assert_eq!(r.throttle_ms, 0);
}

#[test]
fn a_user_quota_is_shared_by_its_client_ids_and_a_default_is_per_user() {
    let image = image_with(&[
        (&[("user", Some("alice"))], P, 1000.0),
        (&[("user", None)], P, 1000.0),
    ]);
    let quotas = manager();
    let a = quotas.record(&image, QuotaKind::Produce, "alice", "one", 8000.0, 0);
    assert_eq!(a.throttle_ms, 0);
    // Alice's second client shares the 1 000 B/s: 16 000 over 10 s is over it.
    let b = quotas.record(&image, QuotaKind::Produce, "alice", "two", 8000.0, 0);
    assert_eq!(b.throttle_ms, 6000);
    // Bob has the default quota, measured on his own.
    let c = quotas.record(&image, QuotaKind::Produce, "bob", "one", 8000.0, 0);
    assert_eq!(c.throttle_ms, 0);
    assert_eq!(quotas.sensor_count(), 2);
}

#[test]
fn request_throttles_are_capped_at_one_window() {
    let image = image_with(&[(&[("user", None)], REQUEST_PERCENTAGE, 1.0)]);
    let quotas = manager();
    // 5 s of handling time in a 10 s window is 50 % against a 1 % quota.
    let r = quotas.record(&image, QuotaKind::Request, "alice", "c", 500.0, 0);
    assert_eq!(r.throttle_ms, 1000);
}

#[test]
fn idle_sensors_expire_and_fetch_size_is_bounded() {
    let image = image_with(&[(&[("client-id", None)], CONSUMER_BYTE_RATE, 1000.0)]);
    let quotas = manager();
    quotas.record(&image, QuotaKind::Fetch, "u", "a", 10.0, SWEEP_EVERY_MS);
    assert_eq!(quotas.sensor_count(), 1);
    let later = SWEEP_EVERY_MS + INACTIVE_EXPIRY_MS + SWEEP_EVERY_MS;
    quotas.record(&image, QuotaKind::Fetch, "u", "b", 10.0, later);
    assert_eq!(quotas.sensor_count(), 1, "a's sensor expired, b's is new");
    assert_eq!(quotas.max_fetch_bytes(&image, "u", "a"), Some(10_000));
    assert_eq!(
        quotas.max_fetch_bytes(&MetadataImage::new("c"), "u", "a"),
        None
    );
}

#[test]
fn mute_keeps_the_longest_and_clears_when_taken() {
    let mute = Mute::default();
    assert!(mute.take().is_none());
    mute.extend(50);
    mute.extend(10);
    let until = mute.take().unwrap();
    assert!(until > Instant::now() + Duration::from_millis(30));
    assert!(mute.take().is_none());
    assert_eq!(quota_user("User:alice"), "alice");
    assert_eq!(percent_seconds(Duration::from_millis(20)), 2.0);
}
