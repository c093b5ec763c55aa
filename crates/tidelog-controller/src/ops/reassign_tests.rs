use super::*;
use crate::ops::alter_partition::plan_alter_partition;
use crate::ops::partition::AlterPartition;
use crate::ops::test_support::Images;

fn start(images: &mut Images, target: Option<&[i32]>) -> Result<(), PartitionError> {
    let plan = plan_alter_reassignments(
        &images.image,
        &[("t".to_owned(), 0, target.map(<[i32]>::to_vec))],
    );
    images.apply(&plan.records);
    plan.response.into_iter().next().map_or(Ok(()), |(_, r)| r)
}

fn alter_isr(images: &mut Images, leader: i32, new_isr: &[i32]) {
    let topic = images.image.topic("t").unwrap();
    let p = &topic.partitions[&0];
    let req = AlterPartition {
        broker_id: leader,
        broker_epoch: 0,
        topic_id: topic.topic_id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: new_isr.to_vec(),
    };
    let plan = plan_alter_partition(&images.image, &req).unwrap();
    images.apply(&plan.records);
    assert_eq!(*images.partition("t", 0), plan.response);
}

fn state(images: &Images) -> (Vec<i32>, Vec<i32>, i32, Vec<i32>, Vec<i32>) {
    let p = images.partition("t", 0);
    (
        p.replicas.clone(),
        p.isr.clone(),
        p.leader,
        p.adding_replicas.clone(),
        p.removing_replicas.clone(),
    )
}

#[test]
fn a_move_starts_waits_for_the_new_replica_and_completes_with_a_new_leader() {
    let mut images = Images::new()
        .brokers(&[1, 2, 3, 4])
        .topic("t", &[(&[1, 2, 3], &[1, 2, 3], 1)]);
    start(&mut images, Some(&[2, 3, 4])).unwrap();
    assert_eq!(
        state(&images),
        (vec![2, 3, 4, 1], vec![1, 2, 3], 1, vec![4], vec![1])
    );
    let listed = list_reassignments(&images.image, None);
    assert_eq!(
        listed,
        vec![Reassignment {
            topic: "t".into(),
            partition: 0,
            replicas: vec![2, 3, 4, 1],
            adding: vec![4],
            removing: vec![1],
        }]
    );

    // ISR changes that do not hold every target replica leave the move in flight;
    // once they do, the move completes, 1 leaves and hands leadership to 2.
    alter_isr(&mut images, 1, &[1, 2]);
    assert_eq!(state(&images).3, vec![4]);
    alter_isr(&mut images, 1, &[1, 2, 4]);
    assert_eq!(
        state(&images).3,
        vec![4],
        "3 is a target replica out of the ISR"
    );
    alter_isr(&mut images, 1, &[1, 2, 4, 3]);
    assert_eq!(
        state(&images),
        (vec![2, 3, 4], vec![2, 4, 3], 2, vec![], vec![])
    );
    assert_eq!(images.partition("t", 0).leader_epoch, 1);
    assert!(list_reassignments(&images.image, None).is_empty());
}

#[test]
fn cancelling_reverts_to_the_original_replicas() {
    let mut images = Images::new()
        .brokers(&[1, 2, 3, 4])
        .topic("t", &[(&[1, 2], &[1, 2], 1)]);
    start(&mut images, Some(&[3, 4])).unwrap();
    assert_eq!(
        state(&images),
        (vec![3, 4, 1, 2], vec![1, 2], 1, vec![3, 4], vec![1, 2])
    );
    // 3 joined the ISR meanwhile; cancelling drops it again.
    alter_isr(&mut images, 1, &[1, 2, 3]);
    start(&mut images, None).unwrap();
    assert_eq!(state(&images), (vec![1, 2], vec![1, 2], 1, vec![], vec![]));
    assert_eq!(start(&mut images, None).unwrap_err().error_code(), 85);
}

#[test]
fn a_move_that_adds_nobody_completes_at_once() {
    let mut images = Images::new()
        .brokers(&[1, 2, 3])
        .topic("t", &[(&[1, 2, 3], &[1, 2, 3], 1)]);
    start(&mut images, Some(&[3, 2])).unwrap();
    assert_eq!(state(&images), (vec![3, 2], vec![2, 3], 3, vec![], vec![]));
    // Asking for what is already there writes nothing.
    let epoch = images.partition("t", 0).partition_epoch;
    start(&mut images, Some(&[3, 2])).unwrap();
    assert_eq!(images.partition("t", 0).partition_epoch, epoch);
}

#[test]
fn a_new_target_replaces_a_move_in_flight() {
    let mut images = Images::new()
        .brokers(&[1, 2, 3, 4])
        .topic("t", &[(&[1], &[1], 1)]);
    start(&mut images, Some(&[2])).unwrap();
    alter_isr(&mut images, 1, &[1]);
    start(&mut images, Some(&[3, 1])).unwrap();
    assert_eq!(state(&images), (vec![3, 1], vec![1], 1, vec![3], vec![]));
    alter_isr(&mut images, 1, &[1, 3]);
    assert_eq!(state(&images), (vec![3, 1], vec![1, 3], 1, vec![], vec![]));
}

#[test]
fn bad_targets_are_refused_per_partition() {
    let images = Images::new()
        .brokers(&[1, 2])
        .topic("t", &[(&[1], &[1], 1), (&[2], &[2], 2)]);
    let plan = plan_alter_reassignments(
        &images.image,
        &[
            ("t".into(), 0, Some(vec![])),
            ("t".into(), 1, Some(vec![2, 2])),
            ("t".into(), 1, Some(vec![1])),
            ("x".into(), 0, Some(vec![1])),
            ("t".into(), 2, Some(vec![9])),
        ],
    );
    assert!(plan.records.is_empty());
    let codes: Vec<i16> = plan
        .response
        .iter()
        .map(|(_, r)| r.as_ref().err().map_or(0, PartitionError::error_code))
        .collect();
    assert_eq!(codes, vec![39, 39, 42, 3, 3]);
    let unregistered = plan_alter_reassignments(&images.image, &[("t".into(), 0, Some(vec![9]))]);
    assert_eq!(
        unregistered.response[0]
            .1
            .as_ref()
            .unwrap_err()
            .error_code(),
        39
    );
}
