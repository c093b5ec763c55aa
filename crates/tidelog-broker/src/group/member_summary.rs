//! What the admin port shows of a group's members (`/v1/groups`, `member_details`),
//! taken from a shard's state when it publishes its groups: who each member is, its
//! epoch, and the partitions it holds (and, in a consumer group, the ones it is being
//! moved to). A classic member's assignment is the leader's ConsumerProtocolAssignment,
//! read when the group speaks the embedded consumer protocol (another protocol's bytes
//! are opaque to the coordinator, as to Kafka's).

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use tidelog_controller::MetadataImage;
use uuid::Uuid;

use super::consumer::classic::embedded_assignment;
use super::consumer::{Assignment, ConsumerMember, MemberState};
use super::share::ShareMember;
use super::state::Member;

/// Members described per group at most: a group of thousands still publishes in
/// bounded time (the count of members is always whole).
pub(crate) const MAX_MEMBERS_SHOWN: usize = 200;
/// A topic of an assignment: by name (a classic member's) or by id (a consumer or
/// share member's, named from the metadata image when shown).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum AssignedTopic {
    Name(String),
    Id(Uuid),
}

impl std::fmt::Display for AssignedTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssignedTopic::Name(name) => f.write_str(name),
            AssignedTopic::Id(id) => write!(f, "{id}"),
        }
    }
}

/// Partitions by topic; shown as `[{"topic", "partitions"}]`.
pub(crate) type MemberPartitions = BTreeMap<AssignedTopic, Vec<i32>>;

/// One member as the admin port shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MemberSummary {
    pub(crate) member_id: String,
    /// `group.instance.id` of a static member.
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    /// The member epoch (KIP-848 and share groups); None for a classic member, whose
    /// group has one generation.
    pub(crate) member_epoch: Option<i32>,
    /// Where a consumer-protocol member's reconciliation stands (`Stable`,
    /// `UnrevokedPartitions`, `UnreleasedPartitions`).
    pub(crate) reconciliation: Option<&'static str>,
    /// The partitions it holds now; None when they cannot be read (a classic group of
    /// another protocol than `consumer`).
    #[serde(serialize_with = "topic_list")]
    pub(crate) assigned: Option<MemberPartitions>,
    /// A consumer-protocol member's target assignment, which reconciliation moves it
    /// towards; None in other groups.
    #[serde(serialize_with = "topic_list")]
    pub(crate) target: Option<MemberPartitions>,
}

impl MemberSummary {
    /// The same with its topic ids named from `image` (a deleted topic keeps its id).
    pub(crate) fn named(&self, image: &MetadataImage) -> MemberSummary {
        let name = |partitions: &MemberPartitions| -> MemberPartitions {
            partitions
                .iter()
                .map(|(topic, p)| {
                    let named = match topic {
                        AssignedTopic::Id(id) => {
                            image.topic_by_id(id).map_or(AssignedTopic::Id(*id), |t| {
                                AssignedTopic::Name(t.name.clone())
                            })
                        }
                        AssignedTopic::Name(_) => topic.clone(),
                    };
                    (named, p.clone())
                })
                .collect()
        };
        MemberSummary {
            assigned: self.assigned.as_ref().map(name),
            target: self.target.as_ref().map(name),
            ..self.clone()
        }
    }
}

fn topic_list<S: Serializer>(
    partitions: &Option<MemberPartitions>,
    out: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct TopicPartitions<'a> {
        topic: String,
        partitions: &'a [i32],
    }
    match partitions {
        None => out.serialize_none(),
        Some(map) => out.collect_seq(map.iter().map(|(topic, partitions)| TopicPartitions {
            topic: topic.to_string(),
            partitions,
        })),
    }
}

fn by_id(assignment: &Assignment) -> MemberPartitions {
    assignment
        .iter()
        .map(|(id, partitions)| (AssignedTopic::Id(*id), partitions.iter().copied().collect()))
        .collect()
}

fn reconciliation(state: MemberState) -> &'static str {
    match state {
        MemberState::Stable => "Stable",
        MemberState::UnrevokedPartitions => "UnrevokedPartitions",
        MemberState::UnreleasedPartitions => "UnreleasedPartitions",
        MemberState::Unknown => "Unknown",
    }
}

pub(crate) fn of_classic(member: &Member, protocol_type: Option<&str>) -> MemberSummary {
    MemberSummary {
        member_id: member.id.clone(),
        instance_id: member.instance_id.clone(),
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        member_epoch: None,
        reconciliation: None,
        assigned: (protocol_type == Some("consumer"))
            .then(|| consumer_assignment(&member.assignment))
            .flatten(),
        target: None,
    }
}

pub(crate) fn of_consumer(member: &ConsumerMember) -> MemberSummary {
    MemberSummary {
        member_id: member.id.clone(),
        instance_id: member.metadata.instance_id.clone(),
        client_id: member.metadata.client_id.clone(),
        client_host: member.metadata.client_host.clone(),
        member_epoch: Some(member.current.member_epoch),
        reconciliation: Some(reconciliation(member.current.state)),
        assigned: Some(by_id(&member.current.assigned)),
        target: Some(by_id(&member.target)),
    }
}

pub(crate) fn of_share(member: &ShareMember) -> MemberSummary {
    MemberSummary {
        member_id: member.id.clone(),
        instance_id: None,
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        member_epoch: Some(member.member_epoch),
        reconciliation: None,
        assigned: Some(by_id(&member.assignment)),
        target: None,
    }
}

/// A classic member's partitions, by topic name; None when its bytes are no embedded
/// ConsumerProtocolAssignment.
fn consumer_assignment(bytes: &bytes::Bytes) -> Option<MemberPartitions> {
    let mut out = MemberPartitions::new();
    for (topic, partitions) in embedded_assignment(bytes)? {
        out.entry(AssignedTopic::Name(topic))
            .or_default()
            .extend(partitions);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, Bytes};
    use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    #[test]
    fn a_classic_consumer_assignment_is_read_by_topic_name() {
        let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![0, 2]),
        ]);
        let mut buf = bytes::BytesMut::new();
        buf.put_i16(1);
        assignment.encode(&mut buf, 1).unwrap();
        let read = consumer_assignment(&buf.freeze()).unwrap();
        assert_eq!(
            read.get(&AssignedTopic::Name("orders".into())),
            Some(&vec![0, 2])
        );
        assert_eq!(
            consumer_assignment(&Bytes::new()),
            Some(MemberPartitions::new())
        );
        let summary = MemberSummary {
            member_id: "m".into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            member_epoch: None,
            reconciliation: None,
            assigned: Some(read),
            target: None,
        };
        let shown = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            shown["assigned"],
            serde_json::json!([{"topic": "orders", "partitions": [0, 2]}])
        );
        assert!(shown["target"].is_null());
        assert_eq!(consumer_assignment(&Bytes::from_static(b"\x00")), None);
        assert_eq!(consumer_assignment(&Bytes::from_static(b"\xff\xff")), None);
    }
}
