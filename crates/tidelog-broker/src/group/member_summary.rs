//! What the admin port shows of a group's members (`/v1/groups`), taken from a shard's
//! state when it publishes its groups: who each member is, its epoch, and the
//! partitions it holds (and, in a consumer group, the ones it is being moved to).
//! A classic member's assignment is the leader's ConsumerProtocolAssignment, read when
//! the group speaks the embedded consumer protocol (another protocol's bytes are
//! opaque to the coordinator, as to Kafka's).

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use uuid::Uuid;

use super::consumer::{Assignment, ConsumerMember, MemberState};
use super::share::ShareMember;
use super::state::Member;

/// Members described per group at most: a group of thousands still publishes in
/// bounded time (the count of members is always whole).
pub(crate) const MAX_MEMBERS_SHOWN: usize = 200;
/// The newest embedded ConsumerProtocolAssignment version known; a newer one is read
/// as this one, as Kafka's `ConsumerProtocol` does.
const NEWEST_ASSIGNMENT_VERSION: i16 = 3;

/// A topic of an assignment: by name (a classic member's) or by id (a consumer or
/// share member's, named from the metadata image when shown).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum AssignedTopic {
    Name(String),
    Id(Uuid),
}

/// Partitions by topic.
pub(crate) type MemberPartitions = BTreeMap<AssignedTopic, Vec<i32>>;

/// One member as the admin port shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub(crate) assigned: Option<MemberPartitions>,
    /// A consumer-protocol member's target assignment, which reconciliation moves it
    /// towards; None in other groups.
    pub(crate) target: Option<MemberPartitions>,
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

/// The partitions of an embedded ConsumerProtocolAssignment (empty bytes: none yet,
/// as before the first SyncGroup); None when the bytes are not one.
fn consumer_assignment(bytes: &Bytes) -> Option<MemberPartitions> {
    let mut out = MemberPartitions::new();
    if bytes.is_empty() {
        return Some(out);
    }
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 0 {
        return None;
    }
    let assignment =
        ConsumerProtocolAssignment::decode(&mut buf, version.min(NEWEST_ASSIGNMENT_VERSION))
            .ok()?;
    for tp in assignment.assigned_partitions {
        out.entry(AssignedTopic::Name(tp.topic.0.to_string()))
            .or_default()
            .extend(tp.partitions);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
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
        assert_eq!(consumer_assignment(&Bytes::from_static(b"\x00")), None);
        assert_eq!(consumer_assignment(&Bytes::from_static(b"\xff\xff")), None);
    }
}
