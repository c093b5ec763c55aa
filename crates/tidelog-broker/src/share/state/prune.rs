//! Pruning `__share_group_state`: its log start moves past snapshots no share partition
//! needs any more, as Kafka's share coordinator prunes its topic.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::{Prune, SHARE_STATE_TOPIC};
use crate::replica::ReplicaManager;

/// Moves the log start of `__share_group_state` partitions past what no share partition
/// needs any more (on a blocking thread: it writes the log-start checkpoint).
pub(super) async fn prune_loop(
    replicas: Arc<ReplicaManager>,
    mut prunes: mpsc::Receiver<(i32, Prune)>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (partition, Prune(offset)) = tokio::select! {
            job = prunes.recv() => match job {
                Some(job) => job,
                None => return,
            },
            _ = shutdown.changed() => return,
        };
        let Some(p) = replicas.get(SHARE_STATE_TOPIC, partition) else {
            continue;
        };
        let pruned = tokio::task::spawn_blocking(move || {
            let moved = p.with_log(|log| {
                let target = offset.min(log.high_watermark());
                if target > log.log_start_offset() {
                    log.delete_records_before(target)?;
                    return Ok(true);
                }
                Ok(false)
            })?;
            if moved {
                p.write_checkpoints()
                    .map_err(crate::replica::PartitionError::Storage)?;
                p.log_start_moved();
            }
            Ok::<_, crate::replica::PartitionError>(())
        })
        .await;
        match pruned {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(partition, error = %e, "pruning {SHARE_STATE_TOPIC} failed")
            }
            Err(e) => tracing::warn!(partition, error = %e, "pruning {SHARE_STATE_TOPIC} panicked"),
        }
    }
}
