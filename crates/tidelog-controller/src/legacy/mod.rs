//! A single node's metadata in the format written before every node ran the Raft
//! controller (the local metadata log of releases up to 5966dcc), and its migration.
//!
//! Such a node kept its records in `<data-dir>/__cluster_metadata/` itself (segments
//! `<20 digits>.log` and `metadata.snapshot`, see `log`), beside `meta.properties`. Today
//! every node runs a Raft voter in `__cluster_metadata/quorum/`. At the first start of a
//! single node on such a directory, [`migrate`] rebuilds the old image, writes it as the
//! first entry of a fresh one-voter quorum in `quorum.migrating/`, and renames that to
//! `quorum/` (the commit point: after a crash before it the migration simply runs
//! again). The old files then move to `legacy-metadata-log/`, kept for the operator.
//! A node started with `--quorum` on such a directory refuses to start instead: the
//! other voters do not hold its topics.

mod frame;
mod log;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod migrate_tests;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::durable::sync_dir;
use crate::error::ControllerError;
use crate::image::MetadataImage;
use crate::quorum::{MetadataQuorum, QuorumConfig, QuorumError, RaftQuorum};
use crate::record::{ConfigResource, MetadataRecord};
use crate::snapshot::SNAPSHOT_FILE;
pub(crate) use log::MetadataLog;

/// Where the old files go once migrated.
const MIGRATED_DIR: &str = "legacy-metadata-log";
/// Where the new quorum is built before it is renamed into place.
const STAGING_DIR: &str = "quorum.migrating";
/// How long the fresh one-voter quorum may take to elect itself and commit.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The old-format files directly in `meta_dir` (`__cluster_metadata`): its segments and
/// snapshot. Empty when there are none.
pub(crate) fn legacy_files(meta_dir: &Path) -> Result<Vec<PathBuf>, ControllerError> {
    if !meta_dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = log::list_segments(meta_dir)?
        .into_iter()
        .map(|base| log::segment_path(meta_dir, base))
        .collect();
    let snapshot = meta_dir.join(SNAPSHOT_FILE);
    if snapshot.is_file() {
        files.push(snapshot);
    }
    Ok(files)
}

/// What a node started with `--quorum` is told about an unmigrated single node's
/// directory.
pub(crate) fn refusal(meta_dir: &Path) -> QuorumError {
    let topics = match MetadataLog::open(meta_dir) {
        Ok((_, image)) => describe_topics(&image),
        Err(e) => format!("unreadable: {e}"),
    };
    QuorumError::LegacyMetadata(format!(
        "{} holds the metadata of a single node written by an earlier release ({topics}); \
         it would be hidden in a cluster. Start this data directory once without --quorum to \
         migrate it to a one-voter controller, or give this node an empty data directory",
        meta_dir.display()
    ))
}

/// Migrates the old metadata in `meta_dir` into the quorum `config` describes (a one-voter
/// quorum, its `dir` inside `meta_dir`). Returns what was migrated, for the log line.
pub(crate) async fn migrate(meta_dir: &Path, config: &QuorumConfig) -> Result<String, QuorumError> {
    let (_, image) = MetadataLog::open(meta_dir)?;
    let records = image_records(&image, config.node_id);
    let staging = meta_dir.join(STAGING_DIR);
    if staging.exists() {
        // A migration that crashed before its commit point: start it over.
        fs::remove_dir_all(&staging).map_err(|e| ControllerError::io(&staging, e))?;
    }
    let mut staged = config.clone();
    staged.dir = staging.clone();
    staged.listen = None;
    let quorum = RaftQuorum::start(staged).await?;
    let written = write_first_entry(&quorum, records).await;
    let stopped = quorum.shutdown().await;
    drop(quorum);
    written?;
    stopped?;
    fs::rename(&staging, &config.dir).map_err(|e| ControllerError::io(&config.dir, e))?;
    sync_dir(meta_dir)?;
    let moved_to = set_aside(meta_dir)?;
    Ok(format!(
        "{}; the old files are kept in {}",
        describe_topics(&image),
        moved_to.display()
    ))
}

/// Moves the old files out of the way once the quorum holds their content (also after a
/// crash between the rename and this).
pub(crate) fn set_aside(meta_dir: &Path) -> Result<PathBuf, ControllerError> {
    let target = meta_dir.join(MIGRATED_DIR);
    fs::create_dir_all(&target).map_err(|e| ControllerError::io(&target, e))?;
    for file in legacy_files(meta_dir)? {
        let Some(name) = file.file_name() else {
            continue;
        };
        let to = target.join(name);
        fs::rename(&file, &to).map_err(|e| ControllerError::io(&to, e))?;
    }
    sync_dir(&target)?;
    sync_dir(meta_dir)?;
    Ok(target)
}

async fn write_first_entry(
    quorum: &RaftQuorum,
    records: Vec<MetadataRecord>,
) -> Result<(), QuorumError> {
    let deadline = Instant::now() + MIGRATION_TIMEOUT;
    // A fresh one-voter quorum elects itself at once; wait for that, bounded.
    while let Err(e) = quorum.sync_leader().await {
        if Instant::now() >= deadline {
            return Err(e);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if records.is_empty() {
        return Ok(());
    }
    quorum.propose(records).await.map(|_| ())
}

/// Records that rebuild `image` from nothing: every topic with its partitions (leader
/// epochs and partition epochs as they were: the partitions' logs and leader-epoch files
/// carry them) and configs, the broker and cluster configs, and the producer-id mark so
/// no id is ever handed out twice. Brokers are left out: this node registers anew.
pub(crate) fn image_records(image: &MetadataImage, node_id: i32) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics() {
        records.push(MetadataRecord::Topic {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
        });
        for (index, p) in &topic.partitions {
            records.push(MetadataRecord::Partition {
                topic_id: topic.topic_id,
                partition: *index,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                adding_replicas: p.adding_replicas.clone(),
                removing_replicas: p.removing_replicas.clone(),
            });
        }
        records.extend(
            topic
                .configs
                .iter()
                .map(|(name, value)| MetadataRecord::Config {
                    resource: ConfigResource::Topic(topic.name.clone()),
                    name: name.clone(),
                    value: Some(value.clone()),
                }),
        );
    }
    for (broker, configs) in &image.broker_configs {
        records.extend(configs.iter().map(|(name, value)| MetadataRecord::Config {
            resource: ConfigResource::Broker(*broker),
            name: name.clone(),
            value: Some(value.clone()),
        }));
    }
    records.extend(
        image
            .cluster_configs
            .iter()
            .map(|(name, value)| MetadataRecord::Config {
                resource: ConfigResource::Cluster,
                name: name.clone(),
                value: Some(value.clone()),
            }),
    );
    for (group, configs) in &image.group_configs {
        records.extend(configs.iter().map(|(name, value)| MetadataRecord::Config {
            resource: ConfigResource::Group(group.clone()),
            name: name.clone(),
            value: Some(value.clone()),
        }));
    }
    if image.next_producer_id > 0 {
        records.push(MetadataRecord::ProducerIds {
            broker_id: node_id,
            broker_epoch: -1,
            next_producer_id: image.next_producer_id,
        });
    }
    records
}

fn describe_topics(image: &MetadataImage) -> String {
    let names: Vec<&str> = image
        .topics()
        .filter(|t| !t.is_internal())
        .map(|t| t.name.as_str())
        .collect();
    let shown: Vec<&str> = names.iter().take(5).copied().collect();
    let more = names.len().saturating_sub(shown.len());
    let list = shown.join(", ");
    match (names.len(), more) {
        (0, _) => "no topics".to_string(),
        (1, _) => format!("1 topic: {list}"),
        (n, 0) => format!("{n} topics: {list}"),
        (n, more) => format!("{n} topics: {list} and {more} more"),
    }
}
