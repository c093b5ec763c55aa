//! The metadata snapshot: the whole image at one offset, so the log prefix can go.
//!
//! File `metadata.snapshot`, byte layout (integers big-endian):
//! ```text
//! 0   [u8; 8] magic "TLMDSNAP"
//! 8   u8      format version = 1
//! 9   u32     CRC-32C of the payload
//! 13  u64     payload length (must equal file length - 21)
//! 21  ..      payload: JSON of SnapshotBody (last_offset, topics, brokers, configs,
//!             next_producer_id, scram_credentials, acls,
//!             client_quotas); the cluster id is not in it (see meta.properties)
//! ```
//! Written atomically (temp file, fsync, rename, fsync dir), so after a crash it is
//! either the previous snapshot or the new one. A snapshot that fails its checks is
//! an error at open: the log prefix it replaced is gone, so it cannot be rebuilt.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::acl::AclEntry;
use crate::durable::read_bounded;
#[cfg(test)]
use crate::durable::write_atomically;
use crate::error::ControllerError;
use crate::image::{BrokerImage, MetadataImage, TopicImage};
use crate::quota::{QuotaEntity, QuotaValue};
use crate::scram::ScramCredentialImage;

pub(crate) const SNAPSHOT_FILE: &str = "metadata.snapshot";
const MAGIC: &[u8; 8] = b"TLMDSNAP";
const FORMAT_VERSION: u8 = 1;
const HEADER_BYTES: usize = 8 + 1 + 4 + 8;
const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
struct SnapshotBody {
    last_offset: Option<u64>,
    topics: Vec<TopicImage>,
    brokers: Vec<BrokerImage>,
    broker_configs: BTreeMap<i32, BTreeMap<String, String>>,
    cluster_configs: BTreeMap<String, String>,
    next_producer_id: i64,
    /// Absent from a snapshot written before SCRAM credentials existed.
    #[serde(default)]
    scram_credentials: Vec<ScramCredentialImage>,
    /// Absent from a snapshot written before ACLs existed.
    #[serde(default)]
    acls: Vec<(uuid::Uuid, AclEntry)>,
    /// Absent from a snapshot written before client quotas existed.
    #[serde(default)]
    client_quotas: Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)>,
    /// Absent from a snapshot written before group configs existed.
    #[serde(default)]
    group_configs: BTreeMap<String, BTreeMap<String, String>>,
}

/// Only the legacy log (in tests) writes a snapshot file of its own.
#[cfg(test)]
pub(crate) fn write(dir: &Path, image: &MetadataImage) -> Result<(), ControllerError> {
    write_atomically(dir, SNAPSHOT_FILE, &encode(image)?)
}

/// The snapshot file's bytes for `image` (also what the Raft quorum ships to a voter
/// that fell behind its leader's log).
pub(crate) fn encode(image: &MetadataImage) -> Result<Vec<u8>, ControllerError> {
    let body = SnapshotBody {
        last_offset: image.last_offset,
        topics: image.topics.values().cloned().collect(),
        brokers: image.brokers.values().cloned().collect(),
        broker_configs: image.broker_configs.clone(),
        cluster_configs: image.cluster_configs.clone(),
        next_producer_id: image.next_producer_id,
        scram_credentials: image.scram.values().cloned().collect(),
        acls: image
            .acls
            .iter()
            .map(|(id, acl)| (*id, acl.clone()))
            .collect(),
        client_quotas: image
            .quotas
            .iter()
            .map(|(e, q)| (e.clone(), q.clone()))
            .collect(),
        group_configs: image.group_configs.clone(),
    };
    let payload = serde_json::to_vec(&body).map_err(|e| ControllerError::Encode(e.to_string()))?;
    let mut bytes = Vec::with_capacity(HEADER_BYTES + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.push(FORMAT_VERSION);
    bytes.extend_from_slice(&crc32c::crc32c(&payload).to_be_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// Loads the snapshot in `dir` into an image for `cluster_id`; `Ok(None)` if none exists.
pub(crate) fn load(dir: &Path, cluster_id: &str) -> Result<Option<MetadataImage>, ControllerError> {
    let path = dir.join(SNAPSHOT_FILE);
    let Some(bytes) = read_bounded(&path, MAX_SNAPSHOT_BYTES)? else {
        return Ok(None);
    };
    decode(&path, &bytes, cluster_id).map(Some)
}

/// Checks and decodes snapshot bytes made by [`encode`]; `path` names the source in errors.
pub(crate) fn decode(
    path: &Path,
    bytes: &[u8],
    cluster_id: &str,
) -> Result<MetadataImage, ControllerError> {
    let corrupt = |reason: &str| ControllerError::corrupt(path, reason);
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err(corrupt("bad magic or short header"));
    }
    if bytes[8] != FORMAT_VERSION {
        return Err(corrupt("unknown snapshot format version"));
    }
    let crc = u32::from_be_bytes([bytes[9], bytes[10], bytes[11], bytes[12]]);
    let mut len_bytes = [0u8; 8];
    len_bytes.copy_from_slice(&bytes[13..21]);
    let payload = &bytes[HEADER_BYTES..];
    if u64::from_be_bytes(len_bytes) != payload.len() as u64 {
        return Err(corrupt("payload length does not match the file length"));
    }
    if crc32c::crc32c(payload) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let body: SnapshotBody =
        serde_json::from_slice(payload).map_err(|e| corrupt(&format!("undecodable: {e}")))?;
    let mut image = MetadataImage::new(cluster_id);
    image.last_offset = body.last_offset;
    image.next_producer_id = body.next_producer_id;
    image.broker_configs = body.broker_configs;
    image.cluster_configs = body.cluster_configs;
    image.group_configs = body.group_configs;
    for credential in body.scram_credentials {
        image
            .scram
            .insert((credential.name.clone(), credential.mechanism), credential);
    }
    image.acls = std::sync::Arc::new(body.acls.into_iter().collect());
    image.quotas = body.client_quotas.into_iter().collect();
    for broker in body.brokers {
        image.brokers.insert(broker.broker_id, broker);
    }
    for topic in body.topics {
        if image
            .topic_ids
            .insert(topic.name.clone(), topic.topic_id)
            .is_some()
        {
            return Err(corrupt(&format!("topic {} appears twice", topic.name)));
        }
        image.topics.insert(topic.topic_id, topic);
    }
    if image.topics.len() != image.topic_ids.len() {
        return Err(corrupt("two topics share one topic id"));
    }
    Ok(image)
}
