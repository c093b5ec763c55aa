//! Seed inputs for the targets, built from tidelog's and kafka-protocol's own encoders:
//! every request API at every version (a default body, which the mutator then fills),
//! record batches with every codec, a real segment file, and metadata records of every
//! kind. `tidelog-fuzz seeds DIR` writes them; `fuzz/corpus/` holds what it wrote.

use std::path::Path;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tidelog_controller::{ConfigResource, Endpoint, MetadataRecord, Uuid};
use tidelog_records::{BatchBuilder, Codec};
use tidelog_storage::{AppendOptions, AppendOrigin, Log, LogConfig};

/// A default request body of `key` (`None` for a key this codec cannot build).
fn default_request(key: ApiKey) -> Option<RequestKind> {
    Some(match key {
        ApiKey::Produce => RequestKind::Produce(ProduceRequest::default()),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(OffsetCommitRequest::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(OffsetFetchRequest::default()),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(FindCoordinatorRequest::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(JoinGroupRequest::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(HeartbeatRequest::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(LeaveGroupRequest::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(SyncGroupRequest::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(DescribeGroupsRequest::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
        ApiKey::OffsetForLeaderEpoch => {
            RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        ApiKey::AddPartitionsToTxn => {
            RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
        }
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
        ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default()),
        ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default()),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default()),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(DescribeAclsRequest::default()),
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default()),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::AlterReplicaLogDirs => {
            RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default())
        }
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
        ApiKey::SaslAuthenticate => {
            RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default())
        }
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default())
        }
        ApiKey::CreateDelegationToken => {
            RequestKind::CreateDelegationToken(CreateDelegationTokenRequest::default())
        }
        ApiKey::RenewDelegationToken => {
            RequestKind::RenewDelegationToken(RenewDelegationTokenRequest::default())
        }
        ApiKey::ExpireDelegationToken => {
            RequestKind::ExpireDelegationToken(ExpireDelegationTokenRequest::default())
        }
        ApiKey::DescribeDelegationToken => {
            RequestKind::DescribeDelegationToken(DescribeDelegationTokenRequest::default())
        }
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(DeleteGroupsRequest::default()),
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(ElectLeadersRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::AlterPartitionReassignments => {
            RequestKind::AlterPartitionReassignments(AlterPartitionReassignmentsRequest::default())
        }
        ApiKey::ListPartitionReassignments => {
            RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default())
        }
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(OffsetDeleteRequest::default()),
        ApiKey::DescribeClientQuotas => {
            RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default())
        }
        ApiKey::AlterClientQuotas => {
            RequestKind::AlterClientQuotas(AlterClientQuotasRequest::default())
        }
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default())
        }
        ApiKey::AlterUserScramCredentials => {
            RequestKind::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default())
        }
        ApiKey::Vote => RequestKind::Vote(VoteRequest::default()),
        ApiKey::BeginQuorumEpoch => {
            RequestKind::BeginQuorumEpoch(BeginQuorumEpochRequest::default())
        }
        ApiKey::EndQuorumEpoch => RequestKind::EndQuorumEpoch(EndQuorumEpochRequest::default()),
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(DescribeQuorumRequest::default()),
        ApiKey::AlterPartition => RequestKind::AlterPartition(AlterPartitionRequest::default()),
        ApiKey::UpdateFeatures => RequestKind::UpdateFeatures(UpdateFeaturesRequest::default()),
        ApiKey::Envelope => RequestKind::Envelope(EnvelopeRequest::default()),
        ApiKey::FetchSnapshot => RequestKind::FetchSnapshot(FetchSnapshotRequest::default()),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::DescribeProducers => {
            RequestKind::DescribeProducers(DescribeProducersRequest::default())
        }
        ApiKey::BrokerRegistration => {
            RequestKind::BrokerRegistration(BrokerRegistrationRequest::default())
        }
        ApiKey::BrokerHeartbeat => RequestKind::BrokerHeartbeat(BrokerHeartbeatRequest::default()),
        ApiKey::UnregisterBroker => {
            RequestKind::UnregisterBroker(UnregisterBrokerRequest::default())
        }
        ApiKey::DescribeTransactions => {
            RequestKind::DescribeTransactions(DescribeTransactionsRequest::default())
        }
        ApiKey::ListTransactions => {
            RequestKind::ListTransactions(ListTransactionsRequest::default())
        }
        ApiKey::AllocateProducerIds => {
            RequestKind::AllocateProducerIds(AllocateProducerIdsRequest::default())
        }
        ApiKey::ConsumerGroupHeartbeat => {
            RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default())
        }
        ApiKey::ConsumerGroupDescribe => {
            RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default())
        }
        ApiKey::ControllerRegistration => {
            RequestKind::ControllerRegistration(ControllerRegistrationRequest::default())
        }
        ApiKey::GetTelemetrySubscriptions => {
            RequestKind::GetTelemetrySubscriptions(GetTelemetrySubscriptionsRequest::default())
        }
        ApiKey::PushTelemetry => RequestKind::PushTelemetry(PushTelemetryRequest::default()),
        ApiKey::AssignReplicasToDirs => {
            RequestKind::AssignReplicasToDirs(AssignReplicasToDirsRequest::default())
        }
        ApiKey::ListConfigResources => {
            RequestKind::ListConfigResources(ListConfigResourcesRequest::default())
        }
        ApiKey::DescribeTopicPartitions => {
            RequestKind::DescribeTopicPartitions(DescribeTopicPartitionsRequest::default())
        }
        ApiKey::ShareGroupHeartbeat => {
            RequestKind::ShareGroupHeartbeat(ShareGroupHeartbeatRequest::default())
        }
        ApiKey::ShareGroupDescribe => {
            RequestKind::ShareGroupDescribe(ShareGroupDescribeRequest::default())
        }
        ApiKey::ShareFetch => RequestKind::ShareFetch(ShareFetchRequest::default()),
        ApiKey::ShareAcknowledge => {
            RequestKind::ShareAcknowledge(ShareAcknowledgeRequest::default())
        }
        ApiKey::AddRaftVoter => RequestKind::AddRaftVoter(AddRaftVoterRequest::default()),
        ApiKey::RemoveRaftVoter => RequestKind::RemoveRaftVoter(RemoveRaftVoterRequest::default()),
        ApiKey::UpdateRaftVoter => RequestKind::UpdateRaftVoter(UpdateRaftVoterRequest::default()),
        ApiKey::InitializeShareGroupState => {
            RequestKind::InitializeShareGroupState(InitializeShareGroupStateRequest::default())
        }
        ApiKey::ReadShareGroupState => {
            RequestKind::ReadShareGroupState(ReadShareGroupStateRequest::default())
        }
        ApiKey::WriteShareGroupState => {
            RequestKind::WriteShareGroupState(WriteShareGroupStateRequest::default())
        }
        ApiKey::DeleteShareGroupState => {
            RequestKind::DeleteShareGroupState(DeleteShareGroupStateRequest::default())
        }
        ApiKey::ReadShareGroupStateSummary => {
            RequestKind::ReadShareGroupStateSummary(ReadShareGroupStateSummaryRequest::default())
        }
        ApiKey::DescribeShareGroupOffsets => {
            RequestKind::DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest::default())
        }
        ApiKey::AlterShareGroupOffsets => {
            RequestKind::AlterShareGroupOffsets(AlterShareGroupOffsetsRequest::default())
        }
        ApiKey::DeleteShareGroupOffsets => {
            RequestKind::DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest::default())
        }
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

/// A size-prefixed request frame: header v1/v2 as the version needs, then `body`.
fn frame(key: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")));
    let mut out = BytesMut::new();
    kafka_protocol::protocol::Encodable::encode(
        &header,
        &mut out,
        key.request_header_version(version),
    )
    .ok()?;
    body.encode(&mut out, version).ok()?;
    let mut framed = Vec::with_capacity(out.len() + 4);
    framed.put_i32(i32::try_from(out.len()).ok()?);
    framed.extend_from_slice(&out);
    Some(framed)
}

/// A small batch of three keyed records with a header, in `codec`.
fn batch(codec: Codec) -> Vec<u8> {
    let mut builder = BatchBuilder::new().compression(codec);
    for i in 0..3u8 {
        builder = builder.record(tidelog_records::RecordSpec {
            key: Some(vec![b'k', i]),
            value: Some(vec![i; 20]),
            timestamp: 1_700_000_000_000 + i64::from(i),
            headers: vec![("h".to_owned(), Some(vec![i]))],
        });
    }
    builder.build().unwrap_or_default()
}

/// Requests: per API one input holding a frame at each of its versions, plus a
/// Produce carrying real batches.
fn request_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for key in ApiKey::iter() {
        let Some(body) = default_request(key) else {
            continue;
        };
        let range = key.valid_versions();
        let frames: Vec<u8> = (range.min..=range.max)
            .filter_map(|v| frame(key, v, i32::from(v), &body))
            .flatten()
            .collect();
        if !frames.is_empty() {
            seeds.push((format!("{key:?}"), frames));
        }
    }
    for codec in Codec::ALL {
        let records = bytes::Bytes::from(batch(codec));
        let produce = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("orders")))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ])]);
        if let Some(f) = frame(ApiKey::Produce, 9, 1, &RequestKind::Produce(produce)) {
            seeds.push((format!("Produce-v9-{codec:?}"), f));
        }
    }
    seeds
}

/// Batches with every codec, under the rules from a client (1) and a compacted topic
/// (3), each also with the CRC recomputed after mutation (+4).
fn record_batch_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for codec in Codec::ALL {
        for flags in [1u8, 3, 5, 7] {
            let mut input = vec![flags];
            input.extend(batch(codec));
            seeds.push((format!("{codec:?}-{flags}"), input));
        }
    }
    seeds
}

/// A real segment of batches in every codec with its offset index, in the target's
/// layout (index length, index, log).
fn segment_seeds() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let dir = tempfile::tempdir()?;
    let config = LogConfig {
        index_interval_bytes: 64,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    };
    let opts = AppendOptions {
        leader_epoch: 0,
        now_ms: 1,
        origin: AppendOrigin::Client,
    };
    let storage = |e: tidelog_storage::StorageError| std::io::Error::other(e.to_string());
    let mut log = Log::open(dir.path(), config).map_err(storage)?;
    for codec in Codec::ALL {
        let mut b = batch(codec);
        log.append(&mut b, &opts).map_err(storage)?;
    }
    log.flush().map_err(storage)?;
    drop(log);
    let name = "00000000000000000000";
    let log_bytes = std::fs::read(dir.path().join(format!("{name}.log")))?;
    let mut index = std::fs::read(dir.path().join(format!("{name}.index"))).unwrap_or_default();
    // The preallocated tail is zeros; keep the entries.
    while index.len() > 8 && index[index.len() - 8..].iter().all(|b| *b == 0) {
        index.truncate(index.len() - 8);
    }
    let index_len = u16::try_from(index.len()).unwrap_or(0);
    let mut with_index = index_len.to_be_bytes().to_vec();
    with_index.extend_from_slice(&index[..usize::from(index_len)]);
    with_index.extend_from_slice(&log_bytes);
    let mut without = vec![0, 0];
    without.extend_from_slice(&log_bytes);
    Ok(vec![
        ("with-index".to_owned(), with_index),
        ("log-only".to_owned(), without),
    ])
}

/// One line of JSON per kind of metadata record, in a plausible order.
fn metadata_seeds() -> Vec<(String, Vec<u8>)> {
    let topic_id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
    let records = [
        MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation: Uuid::from_u128(9),
            epoch: 0,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            rack: Some("a".into()),
        },
        MetadataRecord::UnfenceBroker {
            broker_id: 1,
            epoch: 0,
        },
        MetadataRecord::Topic {
            name: "orders".into(),
            topic_id,
        },
        MetadataRecord::Partition {
            topic_id,
            partition: 0,
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
        },
        MetadataRecord::PartitionChange {
            topic_id,
            partition: 0,
            leader: Some(1),
            isr: Some(vec![1]),
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
        },
        MetadataRecord::Config {
            resource: ConfigResource::Topic("orders".into()),
            name: "retention.ms".into(),
            value: Some("1000".into()),
        },
        MetadataRecord::Config {
            resource: ConfigResource::Broker(1),
            name: "log.retention.ms".into(),
            value: None,
        },
        MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: 0,
            next_producer_id: 1000,
        },
        MetadataRecord::FenceBroker {
            broker_id: 1,
            epoch: 0,
        },
        MetadataRecord::RemoveTopic { topic_id },
    ];
    let mut lines = Vec::new();
    for record in &records {
        if let Ok(json) = serde_json::to_vec(record) {
            lines.extend(json);
            lines.push(b'\n');
        }
    }
    vec![("every-kind".to_owned(), lines)]
}

/// Writes every target's seeds under `dir/<target>/`.
pub fn write_seeds(dir: &Path) -> std::io::Result<usize> {
    let sets = [
        ("request", request_seeds()),
        ("record_batch", record_batch_seeds()),
        ("segment", segment_seeds()?),
        ("metadata_record", metadata_seeds()),
    ];
    let mut written = 0;
    for (target, seeds) in sets {
        let target_dir = dir.join(target);
        std::fs::create_dir_all(&target_dir)?;
        for (name, bytes) in seeds {
            std::fs::write(target_dir.join(format!("seed-{name}")), bytes)?;
            written += 1;
        }
    }
    Ok(written)
}
