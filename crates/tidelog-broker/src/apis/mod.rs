//! One module per Kafka API, each declaring the versions it implements. The `apis!`
//! table below is the only list of them: routing and the ApiVersions answer are both
//! generated from it, so what is advertised is exactly what is implemented.

mod acl_wire;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_share_group_offsets;
mod alter_user_scram_credentials;
pub(crate) mod api_versions;
mod authorized_operations;
mod broker_configs;
mod client_quota_filter;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_share_group_offsets;
mod delete_share_group_state;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_quorum;
mod describe_share_group_offsets;
mod describe_topic_partitions;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod error_codes;
mod fetch;
mod find_coordinator;
mod get_telemetry_subscriptions;
mod group_configs;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod initialize_share_group_state;
mod join_group;
mod leave_group;
mod list_config_resources;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod partition_outcome;
mod per_partition;
mod produce;
mod push_telemetry;
mod read_share_group_state;
mod read_share_group_state_summary;
mod sasl_authenticate;
mod sasl_handshake;
mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod share_state_each;
mod sync_group;
mod txn_offset_commit;
mod write_share_group_state;
mod write_txn_markers;

use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::protocol::{Decodable, Encodable};
use tidelog_protocol::header::encode_response;
use tidelog_protocol::{DecodedHeader, ProtocolError};

use crate::context::Ctx;
use crate::metrics::Metrics;
use crate::net::Reply;
pub(crate) use error_codes::ErrorCodes;

/// A request whose header has been read; the body is decoded by its handler.
pub(crate) struct Request {
    pub(crate) header: DecodedHeader,
    pub(crate) body: Bytes,
    /// Where the error codes of its response are counted.
    pub(crate) metrics: std::sync::Arc<Metrics>,
    /// The connection's listener and principal.
    pub(crate) session: std::sync::Arc<crate::net::Session>,
    /// The client's address (what an ACL's host is compared with).
    pub(crate) peer: SocketAddr,
}

impl Request {
    /// The header's client id, empty when the client sent none.
    pub(crate) fn client_id(&self) -> String {
        self.header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }

    pub(crate) fn version(&self) -> i16 {
        self.header.api_version
    }

    /// Decodes the body at the request's version. Bytes left over after the last field
    /// are ignored, as Kafka's own broker does: librdkafka sends fields a version no
    /// longer has (e.g. Metadata v12 with include_cluster_authorized_operations).
    pub(crate) fn decode<T: Decodable>(&mut self) -> Result<T, ProtocolError> {
        let version = self.header.api_version;
        T::decode(&mut self.body, version).map_err(|e| ProtocolError::Decode {
            what: std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("request"),
            version,
            source: e.into(),
        })
    }

    /// Encodes the response, counting its error codes
    /// (`tidelog_request_errors_total`).
    pub(crate) fn respond<T: Encodable + ErrorCodes>(
        &self,
        body: &T,
    ) -> Result<Reply, ProtocolError> {
        count_errors(&self.metrics, self.header.api_key, body);
        encode_response(
            self.header.correlation_id,
            self.header.api_key,
            self.header.api_version,
            body,
        )
        .map(Reply::Bytes)
    }
}

/// The framed answer of a request answered later (a delayed reply's future), or a
/// closed connection when the body cannot be encoded: the client must not wait for an
/// answer that will never come.
pub(crate) fn later_response<T: Encodable + ErrorCodes>(
    metrics: &Metrics,
    header: &DecodedHeader,
    body: &T,
) -> Reply {
    count_errors(metrics, header.api_key, body);
    match encode_response(
        header.correlation_id,
        header.api_key,
        header.api_version,
        body,
    ) {
        Ok(bytes) => Reply::Bytes(bytes),
        Err(e) => {
            tracing::error!(api = ?header.api_key, error = %e, "cannot encode response");
            Reply::Close
        }
    }
}

macro_rules! apis {
    ($($key:ident => $module:ident),* $(,)?) => {
        /// Every API this node answers, with the versions it implements.
        pub(crate) const SUPPORTED: &[(ApiKey, VersionRange)] = &[$((ApiKey::$key, $module::VERSIONS)),*];

        async fn route(ctx: &Ctx, req: Request) -> Result<Reply, ProtocolError> {
            match req.header.api_key {
                $(ApiKey::$key => $module::handle(ctx, req).await,)*
                other => Err(ProtocolError::UnsupportedVersion { api_key: other, version: req.header.api_version }),
            }
        }
    };
}

apis! {
    Produce => produce,
    Fetch => fetch,
    ListOffsets => list_offsets,
    Metadata => metadata,
    ApiVersions => api_versions,
    CreateTopics => create_topics,
    DeleteTopics => delete_topics,
    DeleteRecords => delete_records,
    DescribeConfigs => describe_configs,
    AlterConfigs => alter_configs,
    CreatePartitions => create_partitions,
    IncrementalAlterConfigs => incremental_alter_configs,
    DescribeCluster => describe_cluster,
    DescribeTopicPartitions => describe_topic_partitions,
    DescribeLogDirs => describe_log_dirs,
    ListConfigResources => list_config_resources,
    DescribeClientQuotas => describe_client_quotas,
    AlterClientQuotas => alter_client_quotas,
    GetTelemetrySubscriptions => get_telemetry_subscriptions,
    PushTelemetry => push_telemetry,
    DescribeQuorum => describe_quorum,
    ElectLeaders => elect_leaders,
    AlterPartitionReassignments => alter_partition_reassignments,
    ListPartitionReassignments => list_partition_reassignments,
    InitProducerId => init_producer_id,
    AddPartitionsToTxn => add_partitions_to_txn,
    AddOffsetsToTxn => add_offsets_to_txn,
    EndTxn => end_txn,
    TxnOffsetCommit => txn_offset_commit,
    WriteTxnMarkers => write_txn_markers,
    DescribeTransactions => describe_transactions,
    ListTransactions => list_transactions,
    DescribeProducers => describe_producers,
    FindCoordinator => find_coordinator,
    JoinGroup => join_group,
    SyncGroup => sync_group,
    Heartbeat => heartbeat,
    ConsumerGroupHeartbeat => consumer_group_heartbeat,
    ConsumerGroupDescribe => consumer_group_describe,
    ShareGroupHeartbeat => share_group_heartbeat,
    ShareGroupDescribe => share_group_describe,
    ShareFetch => share_fetch,
    ShareAcknowledge => share_acknowledge,
    ReadShareGroupState => read_share_group_state,
    WriteShareGroupState => write_share_group_state,
    InitializeShareGroupState => initialize_share_group_state,
    DeleteShareGroupState => delete_share_group_state,
    ReadShareGroupStateSummary => read_share_group_state_summary,
    DescribeShareGroupOffsets => describe_share_group_offsets,
    AlterShareGroupOffsets => alter_share_group_offsets,
    DeleteShareGroupOffsets => delete_share_group_offsets,
    LeaveGroup => leave_group,
    OffsetCommit => offset_commit,
    OffsetFetch => offset_fetch,
    ListGroups => list_groups,
    DescribeGroups => describe_groups,
    DeleteGroups => delete_groups,
    OffsetDelete => offset_delete,
    OffsetForLeaderEpoch => offset_for_leader_epoch,
    SaslHandshake => sasl_handshake,
    SaslAuthenticate => sasl_authenticate,
    DescribeUserScramCredentials => describe_user_scram_credentials,
    AlterUserScramCredentials => alter_user_scram_credentials,
    CreateAcls => create_acls,
    DescribeAcls => describe_acls,
    DeleteAcls => delete_acls,
}

/// Counts every non-zero error code of a response under its API.
pub(crate) fn count_errors(metrics: &Metrics, key: ApiKey, body: &impl ErrorCodes) {
    body.each_error(&mut |code| metrics.requests.error_code(key, code));
}

/// Whether a request of this raw api key and version will be answered (checked before
/// its body is read).
pub(crate) fn accepts(api_key: i16, api_version: i16) -> bool {
    ApiKey::try_from(api_key)
        .ok()
        .and_then(supported_range)
        .is_some_and(|r| r.min <= api_version && api_version <= r.max)
}

fn supported_range(key: ApiKey) -> Option<VersionRange> {
    SUPPORTED.iter().find(|(k, _)| *k == key).map(|(_, r)| *r)
}

/// Routes one request. Anything a handler cannot answer closes this connection only.
pub(crate) async fn handle(
    ctx: &Ctx,
    header: DecodedHeader,
    body: Bytes,
    peer: SocketAddr,
    session: &std::sync::Arc<crate::net::Session>,
) -> Reply {
    let key = header.api_key;
    let version = header.api_version;
    let supported = supported_range(key).is_some_and(|r| r.min <= version && version <= r.max);
    let req = Request {
        header,
        body,
        metrics: std::sync::Arc::clone(&ctx.metrics),
        session: std::sync::Arc::clone(session),
        peer,
    };
    if !supported {
        if key == ApiKey::ApiVersions {
            return api_versions::unsupported_version(req.header.correlation_id);
        }
        tracing::warn!(%peer, ?key, version, "unsupported api or version; closing connection");
        return Reply::Close;
    }
    match route(ctx, req).await {
        Ok(reply) => reply,
        Err(e) => {
            tracing::warn!(%peer, ?key, version, error = %e, "bad request; closing connection");
            Reply::Close
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(key, min, max)` of every row of docs/compatibility.md's table.
    fn documented() -> Vec<(i16, i16, i16)> {
        let doc = include_str!("../../../../docs/compatibility.md");
        doc.lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let key = cells.get(2)?.parse::<i16>().ok()?;
                let versions = cells.get(3)?;
                let (min, max) = versions.split_once('–').unwrap_or((versions, versions));
                Some((key, min.parse().ok()?, max.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn compatibility_table_matches_the_handlers() {
        let mut documented = documented();
        documented.sort_unstable();
        let mut implemented: Vec<(i16, i16, i16)> = SUPPORTED
            .iter()
            .map(|(key, range)| (*key as i16, range.min, range.max))
            .collect();
        implemented.sort_unstable();
        assert_eq!(documented, implemented);
    }
}
