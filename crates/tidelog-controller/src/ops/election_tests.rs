use super::*;
use crate::ops::partition::UNCLEAN_LEADER_ELECTION;
use crate::ops::test_support::Images;

/// Applies `first` (a fencing, unfencing, ...) and then the repairs planned on the
/// image it creates, as the controller does in one batch; returns the repairs.
fn fence_then_repair(
    images: &mut Images,
    first: MetadataRecord,
    unclean: bool,
) -> Vec<MetadataRecord> {
    images.apply(&[first]);
    let repairs = plan_leader_repairs(&images.image, unclean);
    images.apply(&repairs);
    repairs
}

fn three_way(isr: &[i32], leader: i32) -> Images {
    Images::new()
        .brokers(&[1, 2, 3])
        .topic("t", &[(&[1, 2, 3], isr, leader)])
}

#[test]
fn fencing_the_leader_elects_the_next_isr_member_and_drops_it_from_the_isr() {
    let mut images = three_way(&[1, 2, 3], 1);
    let fence = images.fence_record(1);
    let repairs = fence_then_repair(&mut images, fence, false);
    assert_eq!(repairs.len(), 1);
    let p = images.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3]));
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
    // Repairs are idempotent: nothing more to do.
    assert!(plan_leader_repairs(&images.image, false).is_empty());
}

#[test]
fn fencing_a_follower_only_shrinks_the_isr() {
    let mut images = three_way(&[1, 2, 3], 1);
    let fence = images.fence_record(3);
    let repairs = fence_then_repair(&mut images, fence, false);
    match &repairs[..] {
        [MetadataRecord::PartitionChange {
            leader: None,
            isr: Some(isr),
            replicas: None,
            ..
        }] => assert_eq!(isr, &[1, 2]),
        other => panic!("{other:?}"),
    }
    let p = images.partition("t", 0);
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
}

#[test]
fn the_last_isr_member_dying_takes_the_partition_offline_and_its_return_brings_it_back() {
    let mut images = three_way(&[1], 1);
    let fence = images.fence_record(1);
    fence_then_repair(&mut images, fence, false);
    let p = images.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (-1, vec![1], 1));
    // Live replicas outside the ISR do not lead without unclean election.
    assert!(plan_leader_repairs(&images.image, false).is_empty());

    let unfence = images.unfence_record(1);
    fence_then_repair(&mut images, unfence, false);
    let p = images.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (1, vec![1], 2));
}

#[test]
fn two_isr_members_dying_at_once_leave_the_old_leader_in_the_isr() {
    let mut images = three_way(&[2, 1], 1).fence(3);
    let both = [images.fence_record(1), images.fence_record(2)];
    images.apply(&both);
    let repairs = plan_leader_repairs(&images.image, false);
    images.apply(&repairs);
    let p = images.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (-1, vec![1]));
    // Broker 2 returns first, but it left the ISR when the ISR was cut to one member,
    // so it cannot lead cleanly.
    let unfence = images.unfence_record(2);
    fence_then_repair(&mut images, unfence, false);
    assert_eq!(images.partition("t", 0).leader, -1);
}

#[test]
fn unclean_election_takes_any_live_replica_when_enabled_by_default_or_by_topic() {
    // Off: stays offline.
    let mut off = three_way(&[1], 1);
    let fence = off.fence_record(1);
    fence_then_repair(&mut off, fence, false);
    assert_eq!(off.partition("t", 0).leader, -1);

    // Cluster default on.
    let mut on = three_way(&[1], 1);
    let fence = on.fence_record(1);
    fence_then_repair(&mut on, fence, true);
    let p = on.partition("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));

    // Topic config on beats default off; topic config off beats default on.
    let mut topic_on = three_way(&[1], 1).topic_config("t", UNCLEAN_LEADER_ELECTION, "true");
    let fence = topic_on.fence_record(1);
    fence_then_repair(&mut topic_on, fence, false);
    assert_eq!(topic_on.partition("t", 0).leader, 2);
    let mut topic_off = three_way(&[1], 1).topic_config("t", UNCLEAN_LEADER_ELECTION, "false");
    let fence = topic_off.fence_record(1);
    fence_then_repair(&mut topic_off, fence, true);
    assert_eq!(topic_off.partition("t", 0).leader, -1);

    // Enabling it later elects at the next repair.
    let mut later = topic_off;
    later.apply(&[MetadataRecord::Config {
        resource: crate::record::ConfigResource::Topic("t".into()),
        name: UNCLEAN_LEADER_ELECTION.into(),
        value: Some("true".into()),
    }]);
    let repairs = plan_leader_repairs(&later.image, false);
    later.apply(&repairs);
    assert_eq!(later.partition("t", 0).leader, 2);
}

/// Kafka's order for a topic without its own setting: the active controller's node
/// config, then the cluster-wide default, then the static setting.
#[test]
fn the_controllers_node_config_beats_the_cluster_default_which_beats_the_static_setting() {
    use crate::record::ConfigResource;
    let config = |resource: ConfigResource, value: &str| MetadataRecord::Config {
        resource,
        name: UNCLEAN_LEADER_ELECTION.into(),
        value: Some(value.into()),
    };
    let offline = || {
        let mut images = three_way(&[1], 1);
        let fence = images.fence_record(1);
        fence_then_repair(&mut images, fence, false);
        assert_eq!(images.partition("t", 0).leader, -1);
        images
    };
    let on_node_2 = UncleanDefault {
        controller_id: Some(2),
        configured: false,
    };
    let on_node_3 = UncleanDefault {
        controller_id: Some(3),
        ..on_node_2
    };

    // Node 2's own config counts only while node 2 is the controller.
    let mut images = offline();
    images.apply(&[config(ConfigResource::Broker(2), "true")]);
    assert!(plan_leader_repairs(&images.image, on_node_3).is_empty());
    let repairs = plan_leader_repairs(&images.image, on_node_2);
    images.apply(&repairs);
    assert_eq!(images.partition("t", 0).leader, 2);

    // The node's "false" beats the cluster's "true".
    let mut images = offline();
    images.apply(&[
        config(ConfigResource::Cluster, "true"),
        config(ConfigResource::Broker(2), "false"),
    ]);
    assert!(plan_leader_repairs(&images.image, on_node_2).is_empty());
    assert!(!plan_leader_repairs(&images.image, on_node_3).is_empty());

    // The cluster's "false" beats the static "true".
    let mut images = offline();
    images.apply(&[config(ConfigResource::Cluster, "false")]);
    assert!(plan_leader_repairs(&images.image, true).is_empty());
}

#[test]
fn controlled_shutdown_moves_leaders_and_leaves_isrs_but_keeps_sole_leaderships() {
    let mut images = Images::new().brokers(&[1, 2, 3]).topic(
        "t",
        &[
            (&[1, 2], &[1, 2], 1), // moves to 2
            (&[1, 3], &[1], 1),    // 1 is the only ISR member: held
            (&[2, 1], &[2, 1], 2), // follower: leaves the ISR
            (&[2, 3], &[2, 3], 2), // not a replica: untouched
        ],
    );
    let plan = plan_controlled_shutdown(&images.image, 1);
    assert_eq!(plan.response, 1);
    assert_eq!(plan.records.len(), 2);
    images.apply(&plan.records);
    let p0 = images.partition("t", 0);
    assert_eq!((p0.leader, p0.isr.clone()), (2, vec![2]));
    assert_eq!(images.partition("t", 1).leader, 1);
    assert_eq!(images.partition("t", 2).isr, vec![2]);
    assert_eq!(images.partition("t", 3).partition_epoch, 0);
    // Asking again changes nothing and still reports the held leadership.
    let again = plan_controlled_shutdown(&images.image, 1);
    assert!(again.records.is_empty());
    assert_eq!(again.response, 1);
}

#[test]
fn controlled_shutdown_skips_fenced_isr_members() {
    let images = three_way(&[1, 2, 3], 1).fence(2);
    let plan = plan_controlled_shutdown(&images.image, 1);
    assert_eq!(plan.response, 0);
    match &plan.records[..] {
        [MetadataRecord::PartitionChange {
            leader: Some(3),
            isr: Some(isr),
            ..
        }] => assert_eq!(isr, &[2, 3]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn preferred_election_results_per_partition() {
    let mut images = Images::new().brokers(&[1, 2, 3]).topic(
        "t",
        &[
            (&[1, 2], &[1, 2], 2), // elect 1
            (&[1, 2], &[1, 2], 1), // not needed
            (&[3, 2], &[2], 2),    // 3 not in ISR
        ],
    );
    let asked = vec![
        ("t".to_owned(), 0),
        ("t".to_owned(), 1),
        ("t".to_owned(), 2),
        ("t".to_owned(), 9),
        ("nope".to_owned(), 0),
        ("t".to_owned(), 0),
    ];
    let plan = plan_elect_leaders(&images.image, ElectionKind::Preferred, Some(&asked));
    let codes: Vec<(i32, i16)> = plan
        .response
        .iter()
        .map(|((_, p), r)| (*p, r.as_ref().err().map_or(0, PartitionError::error_code)))
        .collect();
    assert_eq!(codes, vec![(0, 0), (1, 84), (2, 80), (9, 3), (0, 3)]);
    images.apply(&plan.records);
    assert_eq!(images.partition("t", 0).leader, 1);
    assert_eq!(images.partition("t", 0).leader_epoch, 1);

    // All partitions: the ones needing nothing are left out; a fenced preferred
    // replica is not available.
    let images = images.fence(3);
    let all = plan_elect_leaders(&images.image, ElectionKind::Preferred, None);
    assert!(all.records.is_empty());
    let left: Vec<i32> = all.response.iter().map(|((_, p), _)| *p).collect();
    assert_eq!(left, vec![2]);
}

#[test]
fn unclean_election_on_request_prefers_the_isr_then_any_live_replica() {
    let mut images = Images::new().brokers(&[1, 2, 3]).topic(
        "t",
        &[
            (&[1, 2, 3], &[1, 2, 3], 1), // leader live: not needed
            (&[3, 2], &[3], 3),          // 3 dies: 2 takes it uncleanly
            (&[3], &[3], 3),             // no live replica at all
        ],
    );
    images = images.fence(3);
    // Clear repairs off (unclean disabled) first, as the controller would.
    let repairs = plan_leader_repairs(&images.image, false);
    images.apply(&repairs);
    assert_eq!(images.partition("t", 1).leader, -1);
    let plan = plan_elect_leaders(&images.image, ElectionKind::Unclean, None);
    let codes: Vec<(i32, i16)> = plan
        .response
        .iter()
        .map(|((_, p), r)| (*p, r.as_ref().err().map_or(0, PartitionError::error_code)))
        .collect();
    assert_eq!(codes, vec![(1, 0), (2, 83)]);
    images.apply(&plan.records);
    let p1 = images.partition("t", 1);
    assert_eq!((p1.leader, p1.isr.clone()), (2, vec![2]));
}

mod model {
    use proptest::prelude::*;

    use super::*;

    type Part = (Vec<i32>, Vec<i32>, i32);

    fn partition() -> impl Strategy<Value = Part> {
        proptest::sample::subsequence((1..=5).collect::<Vec<i32>>(), 1..=3)
            .prop_shuffle()
            .prop_flat_map(|replicas| {
                let n = replicas.len();
                (
                    Just(replicas.clone()),
                    proptest::sample::subsequence(replicas, 1..=n),
                )
            })
            .prop_flat_map(|(replicas, isr)| {
                let n = isr.len();
                (Just(replicas), Just(isr), 0..=n)
            })
            .prop_map(|(replicas, isr, pick)| {
                let leader = isr.get(pick).copied().unwrap_or(-1);
                (replicas, isr, leader)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the liveness, one repair reaches a state that needs no other, every
        /// leader is live and in sync, an ISR is never emptied, and only unclean
        /// election lets a replica outside the old ISR lead.
        #[test]
        fn repairs_are_safe_and_idempotent(
            parts in proptest::collection::vec(partition(), 1..6),
            fenced in proptest::collection::vec(any::<bool>(), 5),
            unclean in any::<bool>(),
        ) {
            let refs: Vec<(&[i32], &[i32], i32)> =
                parts.iter().map(|(r, i, l)| (&r[..], &i[..], *l)).collect();
            let mut images = Images::new().brokers(&[1, 2, 3, 4, 5]).topic("t", &refs);
            for (id, f) in (1..).zip(&fenced) {
                if *f {
                    images = images.fence(id);
                }
            }
            let repairs = plan_leader_repairs(&images.image, unclean);
            images.apply(&repairs);
            prop_assert!(plan_leader_repairs(&images.image, unclean).is_empty());
            let live = |b: i32| images.image.is_broker_live(b);
            for (i, (replicas, old_isr, _)) in (0..).zip(&parts) {
                let p = images.partition("t", i);
                prop_assert!(!p.isr.is_empty());
                prop_assert!(p.isr.iter().all(|m| replicas.contains(m)));
                if p.leader == -1 {
                    prop_assert_eq!(p.isr.len(), 1);
                    prop_assert!(!old_isr.iter().any(|m| live(*m)));
                    prop_assert!(!unclean || !replicas.iter().any(|r| live(*r)));
                } else {
                    prop_assert!(live(p.leader) && p.isr.contains(&p.leader));
                    prop_assert!(p.isr.iter().all(|m| live(*m)));
                    prop_assert!(unclean || old_isr.contains(&p.leader));
                }
            }
        }
    }
}

#[test]
fn automatic_rebalancing_moves_only_brokers_past_the_imbalance_threshold() {
    // Broker 1 prefers 10 partitions and leads 9 of them (10 % elsewhere: at the
    // threshold, left alone); broker 2 prefers 5 and leads 3 (40 % elsewhere).
    let mut partitions: Vec<(&[i32], &[i32], i32)> = Vec::new();
    for i in 0..10 {
        partitions.push((&[1, 2], &[1, 2], if i == 0 { 2 } else { 1 }));
    }
    for i in 0..5 {
        partitions.push((&[2, 1], &[1, 2], if i < 2 { 1 } else { 2 }));
    }
    let images = Images::new().brokers(&[1, 2]).topic("t", &partitions);
    let wanted = imbalanced_partitions(&images.image, 10);
    assert_eq!(wanted, vec![("t".to_owned(), 10), ("t".to_owned(), 11)]);
    // With no tolerance every partition led elsewhere goes back.
    let all = imbalanced_partitions(&images.image, 0);
    assert_eq!(all.len(), 3);
    assert!(all.contains(&("t".to_owned(), 0)));
    // The planned election hands those two back to broker 2.
    let plan = plan_elect_leaders(&images.image, ElectionKind::Preferred, Some(&wanted));
    assert_eq!(plan.records.len(), 2);
}
