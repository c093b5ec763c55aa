//! Planning AlterPartition: the partition leader shrinks or expands its ISR. The
//! controller accepts the change only if it was made against the current state (both
//! epochs) by the current leader, and only live replicas may join. An ISR that now
//! holds every target replica of an in-flight reassignment completes it.

use super::partition::{
    change_record, complete_if_caught_up, is_live, with_next_epochs, AlterPartition, PartitionError,
};
use super::Plan;
use crate::image::{MetadataImage, PartitionImage};

/// Checks `req` against the image and plans the change; the answer is the partition
/// as it will be once the record is applied. The broker epoch is the caller's check.
pub fn plan_alter_partition(
    image: &MetadataImage,
    req: &AlterPartition,
) -> Result<Plan<PartitionImage>, PartitionError> {
    let Some(topic) = image.topic_by_id(&req.topic_id) else {
        return Err(PartitionError::UnknownTopicOrPartition(format!(
            "Topic id {} does not exist.",
            req.topic_id
        )));
    };
    let Some(state) = topic.partitions.get(&req.partition) else {
        return Err(PartitionError::UnknownTopicOrPartition(format!(
            "Partition {}-{} does not exist.",
            topic.name, req.partition
        )));
    };
    let name = format!("{}-{}", topic.name, req.partition);
    if req.leader_epoch != state.leader_epoch {
        return Err(PartitionError::FencedLeaderEpoch(format!(
            "{name}: leader epoch {} is not the current {}.",
            req.leader_epoch, state.leader_epoch
        )));
    }
    if state.leader != req.broker_id {
        return Err(PartitionError::InvalidRequest(format!(
            "{name}: broker {} is not the leader (the leader is {}).",
            req.broker_id, state.leader
        )));
    }
    if req.partition_epoch != state.partition_epoch {
        return Err(PartitionError::InvalidUpdateVersion(format!(
            "{name}: partition epoch {} is not the current {}.",
            req.partition_epoch, state.partition_epoch
        )));
    }
    check_new_isr(image, state, req, &name)?;

    let mut next = state.clone();
    next.isr = req.new_isr.clone();
    complete_if_caught_up(&mut next, |b| is_live(image, b));
    let records: Vec<_> = change_record(req.topic_id, req.partition, state, &next)
        .into_iter()
        .collect();
    let response = if records.is_empty() {
        next
    } else {
        with_next_epochs(state, next)
    };
    Ok(Plan { records, response })
}

fn check_new_isr(
    image: &MetadataImage,
    state: &PartitionImage,
    req: &AlterPartition,
    name: &str,
) -> Result<(), PartitionError> {
    if !req.new_isr.contains(&req.broker_id) {
        return Err(PartitionError::InvalidRequest(format!(
            "{name}: the new ISR {:?} does not contain the leader {}.",
            req.new_isr, req.broker_id
        )));
    }
    for (i, member) in req.new_isr.iter().enumerate() {
        if req.new_isr[..i].contains(member) {
            return Err(PartitionError::InvalidRequest(format!(
                "{name}: the new ISR {:?} names broker {member} twice.",
                req.new_isr
            )));
        }
        if !state.replicas.contains(member) {
            return Err(PartitionError::IneligibleReplica(format!(
                "{name}: broker {member} is not a replica (replicas {:?}).",
                state.replicas
            )));
        }
        if !state.isr.contains(member) && !is_live(image, *member) {
            return Err(PartitionError::IneligibleReplica(format!(
                "{name}: broker {member} is fenced or not registered and cannot join the ISR."
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::Images;

    fn req(images: &Images, broker_id: i32, new_isr: &[i32]) -> AlterPartition {
        let topic = images.image.topic("t").unwrap();
        let p = &topic.partitions[&0];
        AlterPartition {
            broker_id,
            broker_epoch: images.image.broker(broker_id).map_or(-1, |b| b.epoch),
            topic_id: topic.topic_id,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: new_isr.to_vec(),
        }
    }

    fn code(result: Result<Plan<PartitionImage>, PartitionError>) -> i16 {
        result.err().map_or(0, |e| e.error_code())
    }

    #[test]
    fn the_leader_shrinks_and_expands_its_isr() {
        let mut images = Images::new()
            .brokers(&[1, 2, 3])
            .topic("t", &[(&[1, 2, 3], &[1, 2, 3], 1)]);
        let shrink = plan_alter_partition(&images.image, &req(&images, 1, &[1, 2])).unwrap();
        assert_eq!(shrink.response.isr, vec![1, 2]);
        assert_eq!(shrink.response.partition_epoch, 1);
        images.apply(&shrink.records);
        assert_eq!(*images.partition("t", 0), shrink.response);

        let expand = plan_alter_partition(&images.image, &req(&images, 1, &[1, 2, 3])).unwrap();
        images.apply(&expand.records);
        let p = images.partition("t", 0);
        assert_eq!(
            (p.isr.clone(), p.leader_epoch, p.partition_epoch),
            (vec![1, 2, 3], 0, 2)
        );

        // The same ISR again: nothing to write.
        let same = plan_alter_partition(&images.image, &req(&images, 1, &[1, 2, 3])).unwrap();
        assert!(same.records.is_empty());
        assert_eq!(same.response, *images.partition("t", 0));
    }

    #[test]
    fn stale_epochs_wrong_leaders_and_bad_members_are_refused() {
        let images = Images::new()
            .brokers(&[1, 2, 3, 4])
            .topic("t", &[(&[1, 2, 3], &[1, 2], 1)])
            .fence(3);
        let mut stale_leader = req(&images, 1, &[1]);
        stale_leader.leader_epoch -= 1;
        assert_eq!(code(plan_alter_partition(&images.image, &stale_leader)), 74);
        let mut stale_partition = req(&images, 1, &[1]);
        stale_partition.partition_epoch += 1;
        assert_eq!(
            code(plan_alter_partition(&images.image, &stale_partition)),
            108
        );
        assert_eq!(
            code(plan_alter_partition(&images.image, &req(&images, 2, &[2]))),
            42
        );
        // A fenced replica cannot join; a broker that is no replica cannot either.
        assert_eq!(
            code(plan_alter_partition(
                &images.image,
                &req(&images, 1, &[1, 2, 3])
            )),
            107
        );
        assert_eq!(
            code(plan_alter_partition(
                &images.image,
                &req(&images, 1, &[1, 4])
            )),
            107
        );
        // The leader must stay in, and nobody twice.
        assert_eq!(
            code(plan_alter_partition(&images.image, &req(&images, 1, &[2]))),
            42
        );
        assert_eq!(
            code(plan_alter_partition(
                &images.image,
                &req(&images, 1, &[1, 1])
            )),
            42
        );
        let mut unknown = req(&images, 1, &[1]);
        unknown.partition = 7;
        assert_eq!(code(plan_alter_partition(&images.image, &unknown)), 3);
    }
}
