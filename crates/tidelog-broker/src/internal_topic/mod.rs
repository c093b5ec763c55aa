//! What the group and transaction coordinators do alike for their compacted internal
//! topics (`__consumer_offsets`, `__transaction_state`): create the topic on first use,
//! place a key on a partition (`placement`), say which node coordinates a key, track
//! which partitions this node leads and has loaded, read a partition back for replay
//! (`read`), and wait for a write to be replicated before answering (`replicated`).
//! Each coordinator keeps its own state and record format; it only
//! tells this module how to forget a partition and how to replay its records.

mod placement;
mod read;
mod replicated;

use std::collections::{HashMap, HashSet};
use std::ops::DerefMut;
use std::time::Instant;

use kafka_protocol::error::ResponseError;
use tidelog_controller::CreateTopic;

pub(crate) use placement::partition_for;
pub(crate) use read::{read_entries, read_records, Entry};
pub(crate) use replicated::{
    append_error_code, await_replicated, coordinator_code, replicated_now, Written,
};

use crate::context::BrokerContext;
use crate::replica::{Partition, PartitionError};

/// Where a coordinator is: a node and its advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Coordinates {
    pub(crate) node_id: i32,
    pub(crate) host: String,
    pub(crate) port: i32,
}

/// The coordinator of `key` in `topic` (group or transactional id): the leader of its
/// partition. Without the topic, this node (it creates the topic on first use).
pub(crate) fn coordinator_for(
    ctx: &BrokerContext,
    topic: &str,
    key: &str,
) -> Result<Coordinates, i16> {
    let image = ctx.metadata.image();
    let node_id = match image.topic(topic) {
        Some(t) => {
            let p = partition_for(key, t.partition_count());
            match t.partitions.get(&p) {
                Some(p) if p.leader >= 0 => p.leader,
                _ => return Err(ResponseError::CoordinatorNotAvailable.code()),
            }
        }
        None => ctx.node_id(),
    };
    let broker = image
        .broker(node_id)
        .filter(|b| !b.fenced)
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    let endpoint = broker
        .listeners
        .first()
        .ok_or(ResponseError::CoordinatorNotAvailable.code())?;
    Ok(Coordinates {
        node_id,
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
    })
}

/// How an internal topic is created.
pub(crate) struct TopicSpec<'a> {
    pub(crate) name: &'a str,
    pub(crate) partitions: i32,
    /// Capped by the number of live brokers.
    pub(crate) replication: i64,
    pub(crate) segment_bytes: String,
}

/// What `create_if_missing` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Creation {
    /// The metadata image already had the topic.
    Existed,
    /// This call created it.
    Created,
    /// Someone else created it between the image lookup and the create.
    CreatedMeanwhile,
}

/// Creates the compacted topic `spec` describes unless the metadata image has it
/// (replication `min(spec.replication, live brokers)`); COORDINATOR_NOT_AVAILABLE if
/// the controller refuses.
pub(crate) async fn create_if_missing(
    ctx: &BrokerContext,
    spec: TopicSpec<'_>,
) -> Result<Creation, i16> {
    if ctx.metadata.image().topic(spec.name).is_some() {
        return Ok(Creation::Existed);
    }
    let name = spec.name;
    let partitions = spec.partitions.max(1);
    let live = ctx.metadata.image().live_broker_ids().len().max(1);
    let replication = i16::try_from(spec.replication.min(live as i64)).unwrap_or(1);
    let create = CreateTopic {
        name: name.to_string(),
        num_partitions: partitions,
        replication_factor: replication,
        assignments: Vec::new(),
        configs: vec![
            ("cleanup.policy".to_string(), Some("compact".to_string())),
            ("segment.bytes".to_string(), Some(spec.segment_bytes)),
        ],
    };
    let outcome = ctx.metadata.create_internal_topic(create).await;
    match outcome {
        Ok(_) => {
            tracing::info!(partitions, replication, "created {name}");
            Ok(Creation::Created)
        }
        Err(e) if e.error_code() == ResponseError::TopicAlreadyExists.code() => {
            Ok(Creation::CreatedMeanwhile)
        }
        Err(e) => {
            tracing::error!(error = %e, "creating {name} failed");
            Err(ResponseError::CoordinatorNotAvailable.code())
        }
    }
}

/// The partition of `topic` holding `key` if this node leads it; else the error a
/// client should see (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE). Whether the
/// partition is loaded is the caller's next question (`Loads::is_loaded`).
pub(crate) fn led_partition_of(ctx: &BrokerContext, topic: &str, key: &str) -> Result<i32, i16> {
    let image = ctx.metadata.image();
    let Some(t) = image.topic(topic) else {
        return Err(ResponseError::CoordinatorNotAvailable.code());
    };
    let partition = partition_for(key, t.partition_count());
    match t.partitions.get(&partition) {
        Some(p) if p.leader == ctx.node_id() => Ok(partition),
        Some(_) => Err(ResponseError::NotCoordinator.code()),
        None => Err(ResponseError::CoordinatorNotAvailable.code()),
    }
}

/// Which partitions of an internal topic a coordinator has loaded (and in which leader
/// epoch), and which it is loading right now (read outside its lock).
#[derive(Debug, Default)]
pub(crate) struct Loads {
    loaded: HashMap<i32, i32>,
    loading: HashSet<i32>,
}

impl Loads {
    pub(crate) fn is_loaded(&self, partition: i32) -> bool {
        self.loaded.contains_key(&partition)
    }

    pub(crate) fn any_loading(&self) -> bool {
        !self.loading.is_empty()
    }
}

/// A coordinator's in-memory state, as `load_owned` sees it.
pub(crate) trait Replayed {
    type Record;
    fn loads(&mut self) -> &mut Loads;
    /// Drops everything held for `partition` (this node no longer leads it).
    fn forget(&mut self, partition: i32);
    /// Applies `records`, read from `partition` in log order.
    fn replay_loaded(&mut self, partition: i32, records: Vec<Self::Record>);
}

/// Loads the partitions of `topic` this node leads and has not loaded yet (in their
/// current leader epoch), and forgets those it no longer leads or led in an older epoch
/// (leadership moved away and back: the log may have changed meanwhile). Logs are read
/// with `lock` released, so requests for other partitions go on meanwhile; a failed
/// read is retried on the next call. Blocking.
///
/// A partition is read to its log end, not its high watermark: on a new leader the
/// high watermark lags until the followers fetch. It counts as loaded only once the
/// high watermark has reached the end read, so nothing served from memory can be
/// truncated later; until then it is retried (and clients are told the load is in
/// progress).
pub(crate) fn load_owned<S, G>(
    ctx: &BrokerContext,
    topic: &str,
    lock: impl Fn() -> G,
    read: impl Fn(&Partition) -> Result<(Vec<S::Record>, i64), PartitionError>,
) where
    S: Replayed,
    G: DerefMut<Target = S>,
{
    let image = ctx.metadata.image();
    let led: HashMap<i32, i32> = image
        .topic(topic)
        .map(|t| {
            t.partitions
                .iter()
                .filter(|(_, p)| p.leader == ctx.node_id())
                .map(|(i, p)| (*i, p.leader_epoch))
                .collect()
        })
        .unwrap_or_default();
    let todo: Vec<(i32, i32)> = {
        let mut state = lock();
        let loads = state.loads();
        let gone: Vec<i32> = loads
            .loaded
            .iter()
            .filter(|(p, epoch)| led.get(p) != Some(epoch))
            .map(|(p, _)| *p)
            .collect();
        for p in gone {
            state.loads().loaded.remove(&p);
            state.forget(p);
        }
        let loads = state.loads();
        let todo: Vec<(i32, i32)> = led
            .iter()
            .map(|(p, epoch)| (*p, *epoch))
            .filter(|(p, _)| !loads.loaded.contains_key(p) && !loads.loading.contains(p))
            .collect();
        loads.loading.extend(todo.iter().map(|(p, _)| *p));
        todo
    };
    for (index, epoch) in todo {
        let started = Instant::now();
        let records = match ctx.replicas.get(topic, index) {
            Some(p) => read_committed_to_end(&p, &read),
            None => Err(Some(PartitionError::Closed)),
        };
        let mut state = lock();
        state.loads().loading.remove(&index);
        match records {
            Ok(records) => {
                let count = records.len();
                state.forget(index);
                state.replay_loaded(index, records);
                state.loads().loaded.insert(index, epoch);
                if count > 0 {
                    tracing::info!(
                        topic,
                        partition = index,
                        records = count,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "loaded coordinator state"
                    );
                }
            }
            Err(None) => {}
            Err(Some(e)) => {
                tracing::warn!(partition = index, error = %e, "loading {topic} partition failed; will retry");
            }
        }
    }
}

/// Reads `p` to its log end with `read` if its high watermark is there (before and
/// after the read); `Err(None)` when it is not yet (retry later).
fn read_committed_to_end<R>(
    p: &Partition,
    read: &impl Fn(&Partition) -> Result<(Vec<R>, i64), PartitionError>,
) -> Result<Vec<R>, Option<PartitionError>> {
    let caught_up = |end: i64| -> Result<bool, Option<PartitionError>> {
        Ok(p.offsets().map_err(Some)?.high_watermark >= end)
    };
    let log_end = p.with_log(|log| Ok(log.log_end_offset())).map_err(Some)?;
    if !caught_up(log_end)? {
        return Err(None);
    }
    let (records, end) = read(p).map_err(Some)?;
    if !caught_up(end)? {
        return Err(None);
    }
    Ok(records)
}
