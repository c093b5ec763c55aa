//! Client-side assignment for the classic group protocol: the leader decodes every
//! member's ConsumerProtocolSubscription, runs the assignor the coordinator chose, and
//! sends one ConsumerProtocolAssignment per member. The byte layouts are Kafka's
//! (`ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json`), so a
//! group that mixes these members with librdkafka or Java members assigns consistently.
//!
//! Subscriptions (all versions, with the owned partitions and generation a cooperative
//! member sends) are in `subscription.rs`; the cooperative-sticky assignor in `sticky.rs`.
//! Assignment v0 (v1 is the same layout, sent by cooperative members): `i16 version, i32 n, n × (string topic, i32 m, m × i32 partition),
//! bytes user_data`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};

use super::config::AssignmentStrategy;
use super::subscription::{self, put_string, Subscription};
use crate::groups::parse_assignment;
use crate::partition_admin::TopicPartition;

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberSubscription {
    pub(crate) member_id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) topics: Vec<String>,
    /// What the member says it owns (subscription v1+; empty for an eager member).
    pub(crate) owned: Vec<TopicPartition>,
    /// The generation `owned` is from (-1 when unknown).
    pub(crate) generation: i32,
}

impl MemberSubscription {
    /// The member as its JoinGroup metadata describes it.
    pub(crate) fn decode(member_id: String, instance_id: Option<String>, metadata: &Bytes) -> Self {
        let s = subscription::decode(metadata);
        let generation = match (s.generation, &s.user_data) {
            (-1, Some(data)) => subscription::user_data_generation(data).unwrap_or(-1),
            (g, _) => g,
        };
        MemberSubscription {
            member_id,
            instance_id,
            topics: s.topics,
            owned: s.owned,
            generation,
        }
    }
}

/// member id → topic → partitions.
pub(crate) type GroupAssignment = BTreeMap<String, BTreeMap<String, Vec<i32>>>;

/// Kafka's member order in both assignors: static members first, by instance id, then
/// dynamic members by member id, so a restarted static member gets the same partitions.
fn member_order(a: &MemberSubscription, b: &MemberSubscription) -> Ordering {
    match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// Runs `strategy` over the members for the topics' partition counts (topics missing
/// from `partition_counts` are skipped).
pub(crate) fn assign(
    strategy: AssignmentStrategy,
    members: &[MemberSubscription],
    partition_counts: &BTreeMap<String, i32>,
) -> GroupAssignment {
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| member_order(a, b));
    let mut out: GroupAssignment = members
        .iter()
        .map(|m| (m.member_id.clone(), BTreeMap::new()))
        .collect();
    let mut give = |member: &str, topic: &str, partition: i32| {
        if let Some(topics) = out.get_mut(member) {
            topics.entry(topic.to_owned()).or_default().push(partition);
        }
    };
    match strategy {
        AssignmentStrategy::CooperativeSticky => {
            return super::sticky::assign(&sorted, partition_counts);
        }
        AssignmentStrategy::Range => {
            for (topic, &count) in partition_counts {
                let subscribers: Vec<_> =
                    sorted.iter().filter(|m| m.topics.contains(topic)).collect();
                let n = i32::try_from(subscribers.len()).unwrap_or(i32::MAX);
                if n == 0 {
                    continue;
                }
                let (each, extra) = (count / n, count % n);
                let mut next = 0;
                for (i, member) in (0..).zip(subscribers) {
                    let take = each + i32::from(i < extra);
                    for p in next..next + take {
                        give(&member.member_id, topic, p);
                    }
                    next += take;
                }
            }
        }
        AssignmentStrategy::RoundRobin => {
            let topics: BTreeSet<&String> = sorted
                .iter()
                .flat_map(|m| &m.topics)
                .filter(|t| partition_counts.contains_key(*t))
                .collect();
            let mut turn = 0usize;
            for topic in topics {
                let count = partition_counts.get(topic).copied().unwrap_or(0);
                for p in 0..count {
                    // The next member in the circle that subscribes to this topic.
                    for step in 0..sorted.len() {
                        let member = sorted[(turn + step) % sorted.len()];
                        if member.topics.contains(topic) {
                            give(&member.member_id, topic, p);
                            turn = (turn + step + 1) % sorted.len();
                            break;
                        }
                    }
                }
            }
        }
    }
    out
}

/// The JoinGroup metadata: v0 with the topics alone for an eager member; v2 with what
/// it owns and since which generation for a cooperative one.
pub(crate) fn encode_subscription(
    topics: &[String],
    cooperative: Option<(&[TopicPartition], i32)>,
    rack: Option<&str>,
) -> Bytes {
    let (owned, generation) = match cooperative {
        Some((owned, generation)) => (owned.to_vec(), generation),
        None => (Vec::new(), -1),
    };
    let s = Subscription {
        topics: topics.to_vec(),
        user_data: None,
        owned,
        generation,
        rack: rack.map(str::to_owned),
    };
    subscription::encode(&s, subscription::version_for(&s, cooperative.is_some()))
}

/// The topics of any version of ConsumerProtocolSubscription; malformed input yields
/// what was whole.
#[cfg(test)]
pub(crate) fn parse_subscription(bytes: &Bytes) -> Vec<String> {
    subscription::decode(bytes).topics
}

/// ConsumerProtocolAssignment at `version` (0, or 1 for cooperative members: the same
/// layout).
pub(crate) fn encode_assignment(assigned: &BTreeMap<String, Vec<i32>>, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    b.put_i32(i32::try_from(assigned.len()).unwrap_or(0));
    for (topic, partitions) in assigned {
        put_string(&mut b, topic);
        b.put_i32(i32::try_from(partitions.len()).unwrap_or(0));
        for p in partitions {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1);
    b.freeze()
}

/// The (topic, partition) pairs of a ConsumerProtocolAssignment, sorted.
pub(crate) fn decode_assignment(bytes: &Bytes) -> Vec<(String, i32)> {
    let mut out: Vec<(String, i32)> = parse_assignment(bytes)
        .into_iter()
        .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn member(id: &str, instance: Option<&str>, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            instance_id: instance.map(Into::into),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            owned: Vec::new(),
            generation: -1,
        }
    }

    #[test]
    fn range_gives_the_first_members_the_remainder() {
        let members = [member("b", None, &["t"]), member("a", None, &["t", "u"])];
        let counts = BTreeMap::from([("t".to_string(), 5), ("u".to_string(), 2)]);
        let out = assign(AssignmentStrategy::Range, &members, &counts);
        assert_eq!(out["a"]["t"], vec![0, 1, 2]);
        assert_eq!(out["b"]["t"], vec![3, 4]);
        assert_eq!(out["a"]["u"], vec![0, 1]);
        assert!(!out["b"].contains_key("u"));
    }

    #[test]
    fn range_orders_static_members_by_instance_id_first() {
        // Member ids change on every restart; instance ids do not.
        let members = [
            member("zzz", Some("i-1"), &["t"]),
            member("aaa", Some("i-2"), &["t"]),
            member("bbb", None, &["t"]),
        ];
        let counts = BTreeMap::from([("t".to_string(), 3)]);
        let out = assign(AssignmentStrategy::Range, &members, &counts);
        assert_eq!(out["zzz"]["t"], vec![0]);
        assert_eq!(out["aaa"]["t"], vec![1]);
        assert_eq!(out["bbb"]["t"], vec![2]);
    }

    #[test]
    fn round_robin_deals_partitions_of_all_topics_in_turn() {
        let members = [
            member("m1", None, &["a", "b"]),
            member("m2", None, &["a", "b"]),
        ];
        let counts = BTreeMap::from([("a".to_string(), 3), ("b".to_string(), 3)]);
        let out = assign(AssignmentStrategy::RoundRobin, &members, &counts);
        // Kafka's example: a0 m1, a1 m2, a2 m1, b0 m2, b1 m1, b2 m2.
        assert_eq!(out["m1"]["a"], vec![0, 2]);
        assert_eq!(out["m1"]["b"], vec![1]);
        assert_eq!(out["m2"]["a"], vec![1]);
        assert_eq!(out["m2"]["b"], vec![0, 2]);
    }

    #[test]
    fn round_robin_skips_members_not_subscribed_to_the_topic() {
        let members = [member("m1", None, &["a"]), member("m2", None, &["a", "b"])];
        let counts = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 2)]);
        let out = assign(AssignmentStrategy::RoundRobin, &members, &counts);
        assert_eq!(out["m1"]["a"], vec![0]);
        assert_eq!(out["m2"]["a"], vec![1]);
        assert_eq!(out["m2"]["b"], vec![0, 1]);
        assert!(!out["m1"].contains_key("b"));
    }

    #[test]
    fn every_partition_goes_to_exactly_one_member() {
        let members: Vec<_> = (0..3)
            .map(|i| member(&format!("m{i}"), None, &["t"]))
            .collect();
        let counts = BTreeMap::from([("t".to_string(), 6)]);
        for strategy in [AssignmentStrategy::Range, AssignmentStrategy::RoundRobin] {
            let out = assign(strategy, &members, &counts);
            let mut all: Vec<i32> = out.values().flat_map(|t| t["t"].clone()).collect();
            all.sort_unstable();
            assert_eq!(all, (0..6).collect::<Vec<_>>());
            assert!(out.values().all(|t| t["t"].len() == 2));
        }
    }

    #[test]
    fn subscription_and_assignment_round_trip() {
        let topics = vec!["orders".to_string(), "refunds".to_string()];
        assert_eq!(
            parse_subscription(&encode_subscription(&topics, None, None)),
            topics
        );
        let assigned = BTreeMap::from([("orders".to_string(), vec![2, 0])]);
        assert_eq!(
            decode_assignment(&encode_assignment(&assigned, 0)),
            vec![("orders".to_string(), 0), ("orders".to_string(), 2)]
        );
        // A v1 subscription (owned partitions after the user data) still yields topics.
        let mut v1 = BytesMut::from(&encode_subscription(&topics, None, None)[..]);
        v1[1] = 1;
        v1.put_i32(0);
        assert_eq!(parse_subscription(&v1.freeze()), topics);
        assert_eq!(
            parse_subscription(&Bytes::from_static(&[0, 0, 0])),
            Vec::<String>::new()
        );
    }
}
