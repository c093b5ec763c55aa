//! The leader's side of the partition requests (AlterPartition, controlled shutdown,
//! elections, reassignment) and the background elections: repairs after liveness
//! changes and periodic preferred-leader rebalancing. Planning is `crate::ops`; this
//! adds the broker-epoch checks and the in-memory controlled-shutdown set.

use std::sync::Weak;
use std::time::Duration;

use tokio::sync::watch;

use super::leader::check_epoch;
use super::{lock, run_every, QuorumController};
use crate::image::MetadataImage;
use crate::ops::{self, ElectionKind, PartitionError};
use crate::quorum::error::{codes, RequestError};
use crate::quorum::forward::{ForwardReply, ForwardedCall};
use crate::quorum::{MetadataQuorum, QuorumRole};
use crate::record::MetadataRecord;

impl QuorumController {
    /// Plans a partition request against the leader's `image` (writer lock held).
    pub(super) fn plan_partition_call(
        &self,
        image: &MetadataImage,
        call: ForwardedCall,
    ) -> Result<(Vec<MetadataRecord>, ForwardReply), RequestError> {
        match call {
            ForwardedCall::AlterPartition(req) => {
                check_epoch(image, req.broker_id, req.broker_epoch)?;
                self.refuse_shutting_down_members(image, &req)?;
                let plan = ops::plan_alter_partition(image, &req)?;
                Ok((plan.records, ForwardReply::Partition(plan.response)))
            }
            ForwardedCall::ControlledShutdown {
                broker_id,
                broker_epoch,
                exiting,
            } => {
                check_epoch(image, broker_id, broker_epoch)?;
                lock(&self.sessions)
                    .shutting_down
                    .insert(broker_id, broker_epoch);
                let mut plan = ops::plan_controlled_shutdown(image, broker_id);
                let live = image.broker(broker_id).is_some_and(|b| !b.fenced);
                if (plan.response == 0 || exiting) && live {
                    // Nothing left to hand over (or it leaves anyway): fence it now
                    // rather than when its session expires, so nothing is placed on or
                    // elects it meanwhile, and it is listed fenced once it is gone.
                    let fence = MetadataRecord::FenceBroker {
                        broker_id,
                        epoch: broker_epoch,
                    };
                    let mut records = std::mem::take(&mut plan.records);
                    records.push(fence);
                    records.extend(self.repairs_after(image, &records));
                    plan.records = records;
                }
                tracing::info!(
                    broker_id,
                    moved = plan.records.len(),
                    still_leading = plan.response,
                    "controlled shutdown"
                );
                Ok((plan.records, ForwardReply::LeadershipsHeld(plan.response)))
            }
            ForwardedCall::ElectLeaders { kind, partitions } => {
                let plan = ops::plan_elect_leaders(image, kind, partitions.as_deref());
                Ok((plan.records, ForwardReply::PartitionResults(plan.response)))
            }
            ForwardedCall::AlterReassignments { changes } => {
                let plan = ops::plan_alter_reassignments(image, &changes);
                Ok((plan.records, ForwardReply::PartitionResults(plan.response)))
            }
            ForwardedCall::ListReassignments { partitions } => {
                let list = ops::list_reassignments(image, partitions.as_deref());
                Ok((Vec::new(), ForwardReply::Reassignments(list)))
            }
            _ => Err(RequestError::Remote {
                code: codes::UNKNOWN_SERVER_ERROR,
                message: "not a partition request".to_owned(),
            }),
        }
    }

    /// A broker in controlled shutdown may not (re)join an ISR: it is about to stop.
    fn refuse_shutting_down_members(
        &self,
        image: &MetadataImage,
        req: &ops::AlterPartition,
    ) -> Result<(), RequestError> {
        let current_isr = image
            .topic_by_id(&req.topic_id)
            .and_then(|t| t.partitions.get(&req.partition))
            .map(|p| p.isr.clone())
            .unwrap_or_default();
        let sessions = lock(&self.sessions);
        for member in req.new_isr.iter().filter(|m| !current_isr.contains(m)) {
            let epoch = image.broker(*member).map(|b| b.epoch);
            if epoch.is_some() && sessions.shutting_down.get(member).copied() == epoch {
                return Err(PartitionError::IneligibleReplica(format!(
                    "Broker {member} is shutting down and cannot join the ISR."
                ))
                .into());
            }
        }
        Ok(())
    }

    /// Elections the leader writes on its own: `plan` (run on the current image)
    /// says what; it is planned again under the writer lock before proposing.
    async fn write_planned(
        &self,
        what: &str,
        plan: impl Fn(&MetadataImage) -> Vec<MetadataRecord>,
    ) -> Result<(), RequestError> {
        if self.quorum.status().role != QuorumRole::Leader || plan(&self.quorum.image()).is_empty()
        {
            return Ok(());
        }
        let _writer = self.writer.lock().await;
        self.quorum.sync_leader().await?;
        let records = plan(&self.quorum.image());
        if !records.is_empty() {
            tracing::info!(changes = records.len(), "{what}");
            self.quorum.propose(records).await?;
        }
        Ok(())
    }

    /// Where unclean election is decided for topics that do not set it: this (the
    /// active) controller's own dynamic config, the cluster's, then the static setting.
    pub(super) fn unclean_default(&self) -> ops::UncleanDefault {
        ops::UncleanDefault {
            controller_id: Some(self.quorum.node_id()),
            configured: self.options.unclean_leader_election_default,
        }
    }

    /// Any election the image calls for (e.g. unclean election was just enabled for a
    /// topic with an offline partition); normally nothing.
    pub(super) async fn repair_partitions(&self) -> Result<(), RequestError> {
        let unclean = self.unclean_default();
        self.write_planned("partition leadership repaired", |image| {
            ops::plan_leader_repairs(image, unclean)
        })
        .await
    }

    /// Moves leadership back to preferred replicas that are live and in sync.
    pub(super) async fn rebalance_leaders(&self) -> Result<(), RequestError> {
        let percent = self.options.leader_imbalance_percent;
        self.write_planned("leadership moved back to preferred replicas", |image| {
            let wanted = ops::imbalanced_partitions(image, percent);
            if wanted.is_empty() {
                return Vec::new();
            }
            ops::plan_elect_leaders(image, ElectionKind::Preferred, Some(&wanted)).records
        })
        .await
    }
}

pub(super) async fn rebalance_loop(
    controller: Weak<QuorumController>,
    stop: watch::Receiver<bool>,
    interval: Duration,
) {
    let period = interval.max(Duration::from_millis(50));
    run_every(controller, stop, period, |controller| async move {
        if let Err(e) = controller.rebalance_leaders().await {
            tracing::debug!(error = %e, "preferred leader rebalancing failed");
        }
    })
    .await;
}
