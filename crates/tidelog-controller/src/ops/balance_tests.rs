use super::*;
use crate::ops::test_support::Images;

fn no_racks(ids: &[i32]) -> Vec<(i32, Option<&'static str>)> {
    ids.iter().map(|id| (*id, None)).collect()
}

fn topic(name: &str, replicas: &[&[i32]]) -> Assignment {
    replicas
        .iter()
        .enumerate()
        .map(|(i, r)| ((name.to_owned(), i32::try_from(i).unwrap()), r.to_vec()))
        .collect()
}

fn applied(current: &Assignment, plan: &Assignment) -> Assignment {
    let mut all = current.clone();
    all.extend(plan.iter().map(|(tp, r)| (tp.clone(), r.clone())));
    all
}

fn spread(counts: &BTreeMap<i32, usize>) -> (usize, usize) {
    extremes(counts).map(|(a, b)| (a.1, b.1)).unwrap()
}

fn assert_balanced(all: &Assignment, brokers: &[i32], rf: usize) {
    for replicas in all.values() {
        assert_eq!(replicas.len(), rf);
        let ids: BTreeSet<i32> = replicas.iter().copied().collect();
        assert_eq!(ids.len(), rf, "{replicas:?}");
        assert!(replicas.iter().all(|r| brokers.contains(r)), "{replicas:?}");
    }
    for counts in [replica_counts(all, brokers), leader_counts(all, brokers)] {
        let (most, fewest) = spread(&counts);
        assert!(most <= fewest + 1, "{counts:?}");
    }
}

/// Racks of each partition's replicas, for brokers that have one.
fn racks_of<'a>(replicas: &[i32], racks: &[(i32, Option<&'a str>)]) -> Vec<&'a str> {
    replicas
        .iter()
        .filter_map(|r| racks.iter().find(|(id, _)| id == r).and_then(|(_, k)| *k))
        .collect()
}

#[test]
fn a_new_empty_broker_gets_its_share_of_replicas_and_leaderships() {
    let three: [&[i32]; 3] = [&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]];
    let parts: Vec<(&[i32], &[i32], i32)> = (0..8)
        .map(|i| (three[i % 3], three[i % 3], three[i % 3][0]))
        .collect();
    let images = Images::new().brokers(&[1, 2, 3, 4]).topic("t", &parts);
    let current = assignment_of(&images.image);
    assert_eq!(current.len(), 8);
    let plan = plan_balanced_assignment(&current, &no_racks(&[1, 2, 3, 4]));
    let all = applied(&current, &plan);
    assert_balanced(&all, &[1, 2, 3, 4], 3);
    assert_eq!(
        replica_counts(&all, &[4])[&4],
        6,
        "24 replicas over 4 brokers"
    );
    // Only the moves needed: 6 replicas land on broker 4, each in its own partition,
    // each in the slot of the replica it replaces.
    assert_eq!(plan.len(), 6, "{plan:?}");
    for (tp, after) in &plan {
        let before = &current[tp];
        let changed: Vec<usize> = (0..3).filter(|i| before[*i] != after[*i]).collect();
        assert_eq!(changed.len(), 1, "{before:?} -> {after:?}");
        assert_eq!(after[changed[0]], 4);
    }
    // Balanced already: nothing to do.
    assert!(plan_balanced_assignment(&current, &no_racks(&[1, 2, 3])).is_empty());
}

#[test]
fn moves_rotate_over_topics_and_balance_preferred_leaders() {
    // 12 partitions, RF 2, round-robin over brokers 1-3: 8 replicas, 4 leaderships each.
    let rr: &[&[i32]] = &[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]];
    let mut current = topic("orders", rr);
    current.extend(topic("events", rr));
    let plan = plan_balanced_assignment(&current, &no_racks(&[1, 2, 3, 4]));
    let all = applied(&current, &plan);
    assert_eq!(plan.len(), 6, "{plan:?}");
    let ids = [1, 2, 3, 4];
    assert_eq!(
        replica_counts(&all, &ids).into_values().collect::<Vec<_>>(),
        [6, 6, 6, 6]
    );
    assert_eq!(
        leader_counts(&all, &ids).into_values().collect::<Vec<_>>(),
        [3, 3, 3, 3]
    );
    let from_orders = plan.keys().filter(|(t, _)| t == "orders").count();
    assert_eq!(from_orders, 3, "both topics give replicas: {plan:?}");
}

#[test]
fn the_most_loaded_broker_gives_first() {
    let current = topic("t", &[&[1], &[1], &[1], &[1], &[2], &[2]]);
    let plan = plan_balanced_assignment(&current, &no_racks(&[1, 2, 3]));
    assert_eq!(plan.len(), 2);
    assert!(plan.keys().all(|tp| current[tp] == [1]), "{plan:?}");
    let all = applied(&current, &plan);
    assert_eq!(
        replica_counts(&all, &[1, 2, 3]),
        BTreeMap::from([(1, 2), (2, 2), (3, 2)])
    );
}

#[test]
fn replicas_on_brokers_outside_the_set_stay_where_they_are() {
    // Broker 9 is gone (not in the set): its replicas neither move nor count.
    let current = topic("t", &[&[9], &[9], &[9], &[9], &[1], &[1]]);
    let plan = plan_balanced_assignment(&current, &no_racks(&[1, 2]));
    assert_eq!(plan.len(), 1, "broker 1 gives one of its two: {plan:?}");
    assert!(plan.keys().all(|tp| current[tp] == [1]));
    let current = topic("t", &[&[1, 3], &[3, 2], &[2, 1], &[3, 1]]);
    let plan = plan_balanced_assignment(&current, &no_racks(&[1, 2, 4]));
    let all = applied(&current, &plan);
    for (tp, replicas) in &all {
        assert_eq!(replicas.contains(&3), current[tp].contains(&3), "{all:?}");
    }
    let (most, fewest) = spread(&replica_counts(&all, &[1, 2, 4]));
    assert!(most <= fewest + 1, "{all:?}");
    assert!(plan_balanced_assignment(&current, &[]).is_empty());
}

#[test]
fn a_move_never_doubles_up_a_rack_that_another_rack_could_spare() {
    // Every partition has one replica in rack a and one in rack b; broker 1 is rack a's
    // only broker. The new broker 4 is in rack b, so it may only take rack-b replicas:
    // rack a keeps one replica of every partition and broker 1 keeps all six.
    let racks = [
        (1, Some("a")),
        (2, Some("b")),
        (3, Some("b")),
        (4, Some("b")),
    ];
    let current = topic("t", &[&[1, 2], &[3, 1], &[1, 2], &[3, 1], &[1, 2], &[3, 1]]);
    let plan = plan_balanced_assignment(&current, &racks);
    let all = applied(&current, &plan);
    assert!(!plan.is_empty());
    for replicas in all.values() {
        assert_eq!(
            racks_of(replicas, &racks)
                .iter()
                .filter(|r| **r == "a")
                .count(),
            1
        );
    }
    assert_eq!(replica_counts(&all, &[1])[&1], 6);
    let loads = replica_counts(&all, &[2, 3, 4]);
    assert_eq!(loads.into_values().collect::<Vec<_>>(), [2, 2, 2]);

    // Three racks, RF 2, no rack twice in a partition: the new broker in rack a takes
    // only replicas of partitions without one in rack a, or broker 1's (same rack).
    let racks = [
        (1, Some("a")),
        (2, Some("b")),
        (3, Some("c")),
        (4, Some("a")),
    ];
    let current = topic("t", &[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]]);
    let plan = plan_balanced_assignment(&current, &racks);
    let all = applied(&current, &plan);
    for replicas in all.values() {
        let used: BTreeSet<&str> = racks_of(replicas, &racks).into_iter().collect();
        assert_eq!(used.len(), 2, "{all:?}");
    }
    assert_eq!(replica_counts(&all, &[4])[&4], 3, "{all:?}");
}

#[test]
fn a_rack_holds_two_replicas_only_when_every_rack_holds_one() {
    // RF 3 over two racks: some rack must hold two, so moves may double up.
    let racks = [
        (1, Some("a")),
        (2, Some("a")),
        (3, Some("b")),
        (4, Some("b")),
    ];
    let current = topic("t", &[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2], &[1, 2, 3]]);
    let plan = plan_balanced_assignment(&current, &racks);
    let all = applied(&current, &plan);
    assert_balanced(&all, &[1, 2, 3, 4], 3);
    for replicas in all.values() {
        let used: BTreeSet<&str> = racks_of(replicas, &racks).into_iter().collect();
        assert_eq!(used.len(), 2, "{all:?}");
    }
    // Brokers without a rack follow no rack rule.
    let plan = plan_balanced_assignment(&current, &[(1, Some("a")), (2, None), (3, None)]);
    assert!(plan.is_empty(), "balanced already: {plan:?}");
}

#[test]
fn leadership_passes_along_a_chain_when_racks_keep_the_ends_apart() {
    // What rack-aware topic creation gives three racks; broker 4 joins rack a. Rack
    // rules leave broker 3 leading 4 and broker 2 leading 2 after the moves, and the
    // two share only partitions broker 2 leads: 3 hands a leadership to 1, 1 to 2.
    let racks = [
        (1, Some("a")),
        (2, Some("b")),
        (3, Some("c")),
        (4, Some("a")),
    ];
    let rr: &[&[i32]] = &[&[1, 2], &[2, 3], &[3, 1], &[1, 2], &[2, 3], &[3, 1]];
    let mut current = topic("orders", rr);
    current.extend(topic("events", &[rr[1], rr[2], rr[0], rr[1], rr[2], rr[0]]));
    let plan = plan_balanced_assignment(&current, &racks);
    let all = applied(&current, &plan);
    assert_balanced(&all, &[1, 2, 3, 4], 2);
    for replicas in all.values() {
        let used: BTreeSet<&str> = racks_of(replicas, &racks).into_iter().collect();
        assert_eq!(used.len(), 2, "{all:?}");
    }
}

fn distinct_racks(replicas: &[i32], racks: &[(i32, Option<&str>)]) -> usize {
    racks_of(replicas, racks)
        .into_iter()
        .collect::<BTreeSet<_>>()
        .len()
}

use proptest::prelude::Strategy as _;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

    /// Any assignment over brokers 1..=5, balanced over any set of at least three:
    /// valid replica lists, replicas outside the set untouched, replica counts of the
    /// set within one of each other.
    #[test]
    fn any_assignment_balances_replicas_over_any_set(
        parts in proptest::collection::vec(
            proptest::sample::subsequence(vec![1i32, 2, 3, 4, 5], 3).prop_shuffle(),
            1..12,
        ),
        set in proptest::sample::subsequence(vec![1i32, 2, 3, 4, 5], 3..=5),
    ) {
        let parts: Vec<&[i32]> = parts.iter().map(|p| &p[..]).collect();
        let current = topic("t", &parts);
        let all = applied(&current, &plan_balanced_assignment(&current, &no_racks(&set)));
        for (tp, replicas) in &all {
            let ids: BTreeSet<i32> = replicas.iter().copied().collect();
            proptest::prop_assert_eq!(ids.len(), 3);
            for (slot, r) in current[tp].iter().enumerate() {
                if !set.contains(r) {
                    proptest::prop_assert_eq!(replicas[slot], *r);
                }
            }
        }
        let counts = replica_counts(&all, &set);
        let (most, fewest) = spread(&counts);
        proptest::prop_assert!(most <= fewest + 1, "{:?}", counts);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]

    /// With every broker in one of three racks, no partition ever ends up in fewer
    /// known racks (those of the set's brokers) than it started in, and replicas
    /// outside the set stay put.
    #[test]
    fn moves_never_narrow_a_partitions_rack_spread(
        parts in proptest::collection::vec(
            proptest::sample::subsequence(vec![1i32, 2, 3, 4, 5, 6], 2..=3).prop_shuffle(),
            1..16,
        ),
        rack_of in proptest::collection::vec(proptest::sample::select(vec!["a", "b", "c"]), 6),
        set in proptest::sample::subsequence(vec![1i32, 2, 3, 4, 5, 6], 2..=6),
    ) {
        let parts: Vec<&[i32]> = parts.iter().map(|p| &p[..]).collect();
        let current = topic("t", &parts);
        let all_racks: Vec<(i32, Option<&str>)> =
            (1..=6).map(|id| (id, Some(rack_of[(id - 1) as usize]))).collect();
        let in_set: Vec<(i32, Option<&str>)> =
            all_racks.iter().copied().filter(|(id, _)| set.contains(id)).collect();
        let all = applied(&current, &plan_balanced_assignment(&current, &in_set));
        for (tp, replicas) in &all {
            let before = &current[tp];
            let ids: BTreeSet<i32> = replicas.iter().copied().collect();
            proptest::prop_assert_eq!(ids.len(), before.len());
            proptest::prop_assert!(
                distinct_racks(replicas, &in_set) >= distinct_racks(before, &in_set),
                "{:?} -> {:?}", before, replicas
            );
            for (slot, r) in before.iter().enumerate() {
                if !set.contains(r) {
                    proptest::prop_assert_eq!(replicas[slot], *r);
                }
            }
        }
    }
}
