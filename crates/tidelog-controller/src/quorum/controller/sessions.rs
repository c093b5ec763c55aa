//! Broker sessions on the controller leader: heartbeats (which unfence), fencing of
//! brokers whose session expired, and the elections written in the same batch.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::Duration;

use tokio::sync::watch;

use super::leader::check_epoch;
use super::{lock, run_every, BrokerTraffic, HeartbeatReply, QuorumController, Sessions};
use crate::image::MetadataImage;
use crate::ops;
use crate::quorum::error::{QuorumError, RequestError};
use crate::quorum::forward::ForwardReply;
use crate::quorum::{MetadataQuorum, QuorumRole};
use crate::record::MetadataRecord;

impl QuorumController {
    pub(super) async fn heartbeat_here(
        &self,
        broker_id: i32,
        epoch: i64,
        traffic: Option<BrokerTraffic>,
    ) -> Result<ForwardReply, RequestError> {
        let status = self.quorum.status();
        // A leader without a majority behind it (`leader` is then unknown) keeps no
        // sessions: a broker it answered would think the cluster works.
        if status.role != QuorumRole::Leader || status.leader != Some(self.quorum.node_id()) {
            return Err(QuorumError::NotController {
                leader: status.leader.filter(|l| *l != self.quorum.node_id()),
            }
            .into());
        }
        let mut image = self.quorum.image();
        if check_epoch(&image, broker_id, epoch).is_err() {
            // A new leader's image may trail what it committed; look again once caught up.
            self.quorum.sync_leader().await?;
            image = self.quorum.image();
            check_epoch(&image, broker_id, epoch)?;
        }
        {
            let mut sessions = lock(&self.sessions);
            sessions.last_seen.insert(broker_id, self.clock.now());
            if let Some(traffic) = traffic {
                sessions.traffic.insert(broker_id, traffic);
            }
            // Bounded by the registered brokers: a broker gone from the image goes.
            sessions.traffic.retain(|id, _| image.broker(*id).is_some());
        }
        let fenced = image.broker(broker_id).is_some_and(|b| b.fenced);
        // A broker that finished its controlled shutdown stays fenced until it
        // registers again.
        let shut_down = lock(&self.sessions).shutting_down.get(&broker_id) == Some(&epoch);
        if fenced && !shut_down {
            let _writer = self.writer.lock().await;
            self.quorum.sync_leader().await?;
            let image = self.quorum.image();
            check_epoch(&image, broker_id, epoch)?;
            if image.broker(broker_id).is_some_and(|b| b.fenced) {
                let mut records = vec![MetadataRecord::UnfenceBroker { broker_id, epoch }];
                records.extend(self.repairs_after(&image, &records));
                self.quorum.propose(records).await?;
                tracing::info!(broker_id, epoch, "broker unfenced by its heartbeat");
            }
        }
        let image = self.quorum.image();
        Ok(ForwardReply::Heartbeat(HeartbeatReply {
            fenced: image.broker(broker_id).is_some_and(|b| b.fenced),
            metadata_offset: image.last_offset(),
            traffic: lock(&self.sessions).traffic.clone(),
        }))
    }

    /// Fences every unfenced broker whose session expired (leader only).
    async fn fence_expired(&self) -> Result<(), RequestError> {
        let status = self.quorum.status();
        let now = self.clock.now();
        let expired: Vec<(i32, i64)> = {
            let mut sessions = lock(&self.sessions);
            if status.role != QuorumRole::Leader {
                *sessions = Sessions::default();
                return Ok(());
            }
            if sessions.term != Some(status.term) {
                // Newly leading: every broker starts a fresh session now.
                *sessions = Sessions {
                    term: Some(status.term),
                    leader_since: Some(now),
                    last_seen: BTreeMap::new(),
                    // Epoch-checked where used, so one recorded this term stays valid.
                    shutting_down: std::mem::take(&mut sessions.shutting_down),
                    traffic: BTreeMap::new(),
                };
            }
            let since = sessions.leader_since.unwrap_or(now);
            self.quorum
                .image()
                .brokers()
                .filter(|b| !b.fenced)
                .filter(|b| {
                    let last = sessions
                        .last_seen
                        .get(&b.broker_id)
                        .copied()
                        .unwrap_or(since);
                    now.saturating_duration_since(last) > self.options.session_timeout
                })
                .map(|b| (b.broker_id, b.epoch))
                .collect()
        };
        if expired.is_empty() {
            return Ok(());
        }
        let _writer = self.writer.lock().await;
        self.quorum.sync_leader().await?;
        let image = self.quorum.image();
        let records: Vec<MetadataRecord> = expired
            .into_iter()
            .filter(|(id, epoch)| {
                image
                    .broker(*id)
                    .is_some_and(|b| !b.fenced && b.epoch == *epoch)
            })
            .map(|(broker_id, epoch)| {
                tracing::warn!(broker_id, epoch, timeout = ?self.options.session_timeout, "fencing a broker that stopped heartbeating");
                MetadataRecord::FenceBroker { broker_id, epoch }
            })
            .collect();
        if !records.is_empty() {
            let mut records = records;
            records.extend(self.repairs_after(&image, &records));
            self.quorum.propose(records).await?;
        }
        Ok(())
    }

    /// The elections needed once `records` (a fencing, unfencing or registration)
    /// are applied to `image`, to be written in the same batch.
    pub(super) fn repairs_after(
        &self,
        image: &MetadataImage,
        records: &[MetadataRecord],
    ) -> Vec<MetadataRecord> {
        let next = ops::image_with(image, records);
        ops::plan_leader_repairs(&next, self.unclean_default())
    }
}

pub(super) async fn fence_loop(
    controller: Weak<QuorumController>,
    stop: watch::Receiver<bool>,
    session_timeout: Duration,
) {
    let period = (session_timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
    run_every(controller, stop, period, |controller| async move {
        if let Err(e) = controller.fence_expired().await {
            tracing::debug!(error = %e, "broker fencing check failed");
        }
        if let Err(e) = controller.repair_partitions().await {
            tracing::debug!(error = %e, "partition leadership check failed");
        }
    })
    .await;
}
