//! The error codes each response carries, counted by `tidelog_request_errors_total`
//! (api, Kafka error name) when the response is encoded: the top-level code and the
//! per-topic, per-partition or per-group ones, wherever the API has them. Every
//! response a handler sends must say what its codes are (`Request::respond` requires
//! it), so no API's errors go uncounted.
//!
//! Produce counts its own per-partition codes as it answers (its empty impl here), and
//! Fetch and ApiVersions are written by their own encoders and counted there.

use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, AlterConfigsResponse,
    AlterPartitionReassignmentsResponse, CreatePartitionsResponse, CreateTopicsResponse,
    DeleteGroupsResponse, DeleteRecordsResponse, DeleteTopicsResponse, DescribeClusterResponse,
    DescribeConfigsResponse, DescribeGroupsResponse, DescribeProducersResponse,
    DescribeQuorumResponse, DescribeTransactionsResponse, ElectLeadersResponse, EndTxnResponse,
    FindCoordinatorResponse, HeartbeatResponse, IncrementalAlterConfigsResponse,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse,
    ListOffsetsResponse, ListPartitionReassignmentsResponse, ListTransactionsResponse,
    MetadataResponse, OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse,
    OffsetForLeaderEpochResponse, ProduceResponse, SyncGroupResponse, TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
};
use kafka_protocol::messages::{
    AlterClientQuotasResponse, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse,
    DescribeClientQuotasResponse, DescribeLogDirsResponse, DescribeTopicPartitionsResponse,
    GetTelemetrySubscriptionsResponse, ListConfigResourcesResponse, PushTelemetryResponse,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponse, DeleteShareGroupStateResponse,
    DescribeShareGroupOffsetsResponse, InitializeShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse,
    SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::messages::{CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse};
use kafka_protocol::messages::{ReadShareGroupStateResponse, WriteShareGroupStateResponse};
use kafka_protocol::messages::{
    ShareAcknowledgeResponse, ShareFetchResponse, ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
};

/// Every error code in a response; zeros (NONE) included, the probe skips them.
pub(crate) trait ErrorCodes {
    fn each_error(&self, f: &mut dyn FnMut(i16));
}

macro_rules! error_codes {
    ($($ty:ty => |$r:ident, $f:ident| $body:block)*) => {
        $(impl ErrorCodes for $ty {
            fn each_error(&self, $f: &mut dyn FnMut(i16)) {
                let $r = self;
                $body
            }
        })*
    };
}

error_codes! {
    ProduceResponse => |_r, _f| {}
    SaslHandshakeResponse => |r, f| { f(r.error_code); }
    SaslAuthenticateResponse => |r, f| { f(r.error_code); }
    AlterUserScramCredentialsResponse => |r, f| {
        for x in &r.results {
            f(x.error_code);
        }
    }
    DescribeUserScramCredentialsResponse => |r, f| {
        f(r.error_code);
        for x in &r.results {
            f(x.error_code);
        }
    }
    CreateAclsResponse => |r, f| {
        for x in &r.results {
            f(x.error_code);
        }
    }
    DescribeAclsResponse => |r, f| {
        f(r.error_code);
    }
    DeleteAclsResponse => |r, f| {
        for x in &r.filter_results {
            f(x.error_code);
            for m in &x.matching_acls {
                f(m.error_code);
            }
        }
    }
    DescribeLogDirsResponse => |r, f| {
        f(r.error_code);
        for x in &r.results {
            f(x.error_code);
        }
    }
    DescribeTopicPartitionsResponse => |r, f| {
        for t in &r.topics {
            f(t.error_code);
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    ListConfigResourcesResponse => |r, f| { f(r.error_code); }
    DescribeClientQuotasResponse => |r, f| { f(r.error_code); }
    AlterClientQuotasResponse => |r, f| {
        for e in &r.entries {
            f(e.error_code);
        }
    }
    GetTelemetrySubscriptionsResponse => |r, f| { f(r.error_code); }
    PushTelemetryResponse => |r, f| { f(r.error_code); }
    MetadataResponse => |r, f| {
        for t in &r.topics {
            f(t.error_code);
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    ListOffsetsResponse => |r, f| {
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    CreateTopicsResponse => |r, f| {
        for t in &r.topics {
            f(t.error_code);
        }
    }
    DeleteTopicsResponse => |r, f| {
        for t in &r.responses {
            f(t.error_code);
        }
    }
    DeleteRecordsResponse => |r, f| {
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    DescribeConfigsResponse => |r, f| {
        for x in &r.results {
            f(x.error_code);
        }
    }
    AlterConfigsResponse => |r, f| {
        for x in &r.responses {
            f(x.error_code);
        }
    }
    CreatePartitionsResponse => |r, f| {
        for x in &r.results {
            f(x.error_code);
        }
    }
    IncrementalAlterConfigsResponse => |r, f| {
        for x in &r.responses {
            f(x.error_code);
        }
    }
    DescribeClusterResponse => |r, f| {
        f(r.error_code);
    }
    DescribeQuorumResponse => |r, f| {
        f(r.error_code);
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    ElectLeadersResponse => |r, f| {
        f(r.error_code);
        for p in r.replica_election_results.iter().flat_map(|t| &t.partition_result) {
            f(p.error_code);
        }
    }
    AlterPartitionReassignmentsResponse => |r, f| {
        f(r.error_code);
        for p in r.responses.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    ListPartitionReassignmentsResponse => |r, f| {
        f(r.error_code);
    }
    InitProducerIdResponse => |r, f| {
        f(r.error_code);
    }
    AddPartitionsToTxnResponse => |r, f| {
        f(r.error_code);
        let topics = r
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .chain(&r.results_by_topic_v3_and_below);
        for p in topics.flat_map(|t| &t.results_by_partition) {
            f(p.partition_error_code);
        }
    }
    AddOffsetsToTxnResponse => |r, f| {
        f(r.error_code);
    }
    EndTxnResponse => |r, f| {
        f(r.error_code);
    }
    TxnOffsetCommitResponse => |r, f| {
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    WriteTxnMarkersResponse => |r, f| {
        for p in r
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| &t.partitions)
        {
            f(p.error_code);
        }
    }
    DescribeTransactionsResponse => |r, f| {
        for t in &r.transaction_states {
            f(t.error_code);
        }
    }
    ListTransactionsResponse => |r, f| {
        f(r.error_code);
    }
    DescribeProducersResponse => |r, f| {
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    FindCoordinatorResponse => |r, f| {
        f(r.error_code);
        for c in &r.coordinators {
            f(c.error_code);
        }
    }
    JoinGroupResponse => |r, f| {
        f(r.error_code);
    }
    SyncGroupResponse => |r, f| {
        f(r.error_code);
    }
    HeartbeatResponse => |r, f| {
        f(r.error_code);
    }
    LeaveGroupResponse => |r, f| {
        f(r.error_code);
        for m in &r.members {
            f(m.error_code);
        }
    }
    OffsetCommitResponse => |r, f| {
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    OffsetFetchResponse => |r, f| {
        f(r.error_code);
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
        for g in &r.groups {
            f(g.error_code);
            for p in g.topics.iter().flat_map(|t| &t.partitions) {
                f(p.error_code);
            }
        }
    }
    ListGroupsResponse => |r, f| {
        f(r.error_code);
    }
    ConsumerGroupHeartbeatResponse => |r, f| { f(r.error_code); }
    ShareGroupHeartbeatResponse => |r, f| { f(r.error_code); }
    ShareGroupDescribeResponse => |r, f| {
        for g in &r.groups {
            f(g.error_code);
        }
    }
    ShareFetchResponse => |r, f| {
        f(r.error_code);
        for t in &r.responses {
            for p in &t.partitions {
                f(p.error_code);
                f(p.acknowledge_error_code);
            }
        }
    }
    ShareAcknowledgeResponse => |r, f| {
        f(r.error_code);
        for t in &r.responses {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    ReadShareGroupStateResponse => |r, f| {
        for t in &r.results {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    WriteShareGroupStateResponse => |r, f| {
        for t in &r.results {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    InitializeShareGroupStateResponse => |r, f| {
        for t in &r.results {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    DeleteShareGroupStateResponse => |r, f| {
        for t in &r.results {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    ReadShareGroupStateSummaryResponse => |r, f| {
        for t in &r.results {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    DescribeShareGroupOffsetsResponse => |r, f| {
        for g in &r.groups {
            f(g.error_code);
            for t in &g.topics {
                for p in &t.partitions {
                    f(p.error_code);
                }
            }
        }
    }
    AlterShareGroupOffsetsResponse => |r, f| {
        f(r.error_code);
        for t in &r.responses {
            for p in &t.partitions {
                f(p.error_code);
            }
        }
    }
    DeleteShareGroupOffsetsResponse => |r, f| {
        f(r.error_code);
        for t in &r.responses {
            f(t.error_code);
        }
    }
    ConsumerGroupDescribeResponse => |r, f| {
        for g in &r.groups {
            f(g.error_code);
        }
    }
    DescribeGroupsResponse => |r, f| {
        for g in &r.groups {
            f(g.error_code);
        }
    }
    DeleteGroupsResponse => |r, f| {
        for g in &r.results {
            f(g.error_code);
        }
    }
    OffsetDeleteResponse => |r, f| {
        f(r.error_code);
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
    OffsetForLeaderEpochResponse => |r, f| {
        for p in r.topics.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    #[test]
    fn nested_codes_are_all_reported() {
        let response = CreateTopicsResponse::default().with_topics(vec![
            CreatableTopicResult::default()
                .with_name(TopicName(StrBytes::from_static_str("a")))
                .with_error_code(36),
            CreatableTopicResult::default()
                .with_name(TopicName(StrBytes::from_static_str("b")))
                .with_error_code(0),
        ]);
        let mut codes = Vec::new();
        response.each_error(&mut |c| codes.push(c));
        assert_eq!(codes, [36, 0]);
        let mut codes = Vec::new();
        HeartbeatResponse::default()
            .with_error_code(25)
            .each_error(&mut |c| codes.push(c));
        assert_eq!(codes, [25]);
    }
}
