//! What the APIs that answer partition by partition (ListOffsets, DeleteRecords,
//! OffsetForLeaderEpoch, OffsetCommit, OffsetDelete) share: the answer follows the
//! request, topic by topic and partition by partition in the order asked, and a
//! partition's own answer starts from the partition this node leads.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use crate::context::Ctx;
use crate::replica::Partition;

/// One answer per partition of each requested topic, in request order: `answer` is
/// called with the topic and each of its partitions, then `topic_answer` wraps the
/// topic with its partitions' answers.
pub(crate) fn answer_each<T, P, A, R>(
    topics: Vec<T>,
    partitions_of: impl Fn(&T) -> &[P],
    mut answer: impl FnMut(&T, &P) -> A,
    topic_answer: impl Fn(T, Vec<A>) -> R,
) -> Vec<R> {
    let mut answered = Vec::with_capacity(topics.len());
    for topic in topics {
        let answers = partitions_of(&topic)
            .iter()
            .map(|p| answer(&topic, p))
            .collect();
        answered.push(topic_answer(topic, answers));
    }
    answered
}

/// The partition, when this node leads it at `current_leader_epoch` (-1: any epoch);
/// else UNKNOWN_TOPIC_OR_PARTITION, or the leader check's error code
/// (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH).
pub(crate) fn led_partition(
    ctx: &Ctx,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<Arc<Partition>, i16> {
    let p = ctx
        .replicas
        .get(topic, partition)
        .ok_or(ResponseError::UnknownTopicOrPartition.code())?;
    p.check_leader(current_leader_epoch).map_err(|e| e.code())?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_follow_the_request_order() {
        let topics = vec![("b", vec![2, 0]), ("a", vec![]), ("c", vec![1])];
        let mut asked = 0;
        let answered = answer_each(
            topics,
            |(_, partitions)| partitions,
            |(name, _), p| {
                asked += 1;
                format!("{name}-{p}#{asked}")
            },
            |(name, _), answers| (name, answers),
        );
        assert_eq!(
            answered,
            vec![
                ("b", vec!["b-2#1".to_owned(), "b-0#2".to_owned()]),
                ("a", vec![]),
                ("c", vec!["c-1#3".to_owned()]),
            ]
        );
    }
}
