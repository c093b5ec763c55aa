//! Which API versions this client speaks, and the per-connection choice of version.

use std::collections::HashMap;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiKey;

/// The APIs this client sends and the versions it can speak. The maxima stop before the
/// versions that address topics by id only (Produce/Fetch v13+), which this client does not
/// track; the minima are the oldest versions the codec can encode.
pub(crate) const CLIENT_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::FindCoordinator, 1, 3),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::InitProducerId, 0, 5),
    // Transactions as the client drives them (KIP-98), not KIP-890's broker-side
    // verification: AddPartitionsToTxn stops at v3 (v4 batches transactions for
    // brokers), EndTxn, AddOffsetsToTxn and TxnOffsetCommit before their TV2 versions.
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
];

/// Our supported range for `key`, if we send that API at all.
pub(crate) fn client_range(key: ApiKey) -> Option<(i16, i16)> {
    CLIENT_APIS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, min, max)| (min, max))
}

/// The version to use per API on one connection: min(our max, broker max), provided the
/// ranges overlap at all.
#[derive(Debug, Clone, Default)]
pub(crate) struct NegotiatedVersions {
    chosen: HashMap<i16, i16>,
}

impl NegotiatedVersions {
    /// Intersects our table with the broker's advertised ranges.
    pub(crate) fn negotiate(broker: &[ApiVersion]) -> Self {
        let mut chosen = HashMap::new();
        for &(key, our_min, our_max) in CLIENT_APIS {
            let Some(theirs) = broker.iter().find(|v| v.api_key == key as i16) else {
                continue;
            };
            let version = our_max.min(theirs.max_version);
            if version >= our_min && version >= theirs.min_version {
                chosen.insert(key as i16, version);
            }
        }
        NegotiatedVersions { chosen }
    }

    /// The agreed version of `key`, or `None` when the broker and we share none.
    pub(crate) fn get(&self, key: ApiKey) -> Option<i16> {
        self.chosen.get(&(key as i16)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(key: ApiKey, min: i16, max: i16) -> ApiVersion {
        ApiVersion::default()
            .with_api_key(key as i16)
            .with_min_version(min)
            .with_max_version(max)
    }

    #[test]
    fn picks_the_lower_of_the_two_maxima() {
        let v = NegotiatedVersions::negotiate(&[
            range(ApiKey::Produce, 0, 13),
            range(ApiKey::Fetch, 0, 7),
            range(ApiKey::Metadata, 0, 12),
        ]);
        assert_eq!(v.get(ApiKey::Produce), Some(12));
        assert_eq!(v.get(ApiKey::Fetch), Some(7));
        assert_eq!(v.get(ApiKey::Metadata), Some(12));
    }

    #[test]
    fn disjoint_or_missing_ranges_give_none() {
        let v = NegotiatedVersions::negotiate(&[
            range(ApiKey::Produce, 0, 2),
            range(ApiKey::Fetch, 13, 17),
        ]);
        assert_eq!(v.get(ApiKey::Produce), None);
        assert_eq!(v.get(ApiKey::Fetch), None);
        assert_eq!(v.get(ApiKey::ListOffsets), None);
    }

    #[test]
    fn our_table_is_within_the_codec_ranges() {
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::Message;
        let codec = |key: ApiKey| match key {
            ApiKey::Produce => ProduceRequest::VERSIONS,
            ApiKey::Fetch => FetchRequest::VERSIONS,
            ApiKey::ListOffsets => ListOffsetsRequest::VERSIONS,
            ApiKey::Metadata => MetadataRequest::VERSIONS,
            ApiKey::OffsetCommit => OffsetCommitRequest::VERSIONS,
            ApiKey::FindCoordinator => FindCoordinatorRequest::VERSIONS,
            ApiKey::ApiVersions => ApiVersionsRequest::VERSIONS,
            ApiKey::CreateTopics => CreateTopicsRequest::VERSIONS,
            ApiKey::DeleteTopics => DeleteTopicsRequest::VERSIONS,
            ApiKey::DescribeConfigs => DescribeConfigsRequest::VERSIONS,
            ApiKey::CreatePartitions => CreatePartitionsRequest::VERSIONS,
            ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::VERSIONS,
            ApiKey::DescribeCluster => DescribeClusterRequest::VERSIONS,
            ApiKey::DescribeQuorum => DescribeQuorumRequest::VERSIONS,
            ApiKey::ElectLeaders => ElectLeadersRequest::VERSIONS,
            ApiKey::AlterPartitionReassignments => AlterPartitionReassignmentsRequest::VERSIONS,
            ApiKey::ListPartitionReassignments => ListPartitionReassignmentsRequest::VERSIONS,
            ApiKey::DescribeLogDirs => DescribeLogDirsRequest::VERSIONS,
            ApiKey::SaslHandshake => SaslHandshakeRequest::VERSIONS,
            ApiKey::SaslAuthenticate => SaslAuthenticateRequest::VERSIONS,
            ApiKey::DescribeUserScramCredentials => DescribeUserScramCredentialsRequest::VERSIONS,
            ApiKey::AlterUserScramCredentials => AlterUserScramCredentialsRequest::VERSIONS,
            ApiKey::DescribeAcls => DescribeAclsRequest::VERSIONS,
            ApiKey::CreateAcls => CreateAclsRequest::VERSIONS,
            ApiKey::DeleteAcls => DeleteAclsRequest::VERSIONS,
            ApiKey::DescribeClientQuotas => DescribeClientQuotasRequest::VERSIONS,
            ApiKey::AlterClientQuotas => AlterClientQuotasRequest::VERSIONS,
            ApiKey::InitProducerId => InitProducerIdRequest::VERSIONS,
            ApiKey::AddPartitionsToTxn => AddPartitionsToTxnRequest::VERSIONS,
            ApiKey::AddOffsetsToTxn => AddOffsetsToTxnRequest::VERSIONS,
            ApiKey::EndTxn => EndTxnRequest::VERSIONS,
            ApiKey::TxnOffsetCommit => TxnOffsetCommitRequest::VERSIONS,
            other => panic!("{other:?} not in the table"),
        };
        for &(key, min, max) in CLIENT_APIS {
            let r = codec(key);
            assert!(r.min <= min && max <= r.max, "{key:?}");
        }
    }
}
