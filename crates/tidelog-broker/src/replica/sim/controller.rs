//! The controller as the simulation sees it: the real planners (`tidelog_controller::ops`)
//! deciding registrations, fencing, unfencing, elections and ISR changes against the
//! committed image, as the quorum controller's leader does. It is one reliable process:
//! its own failover is the Raft quorum's, tested on its own (`tests/quorum*.rs`).

use std::collections::BTreeMap;

use tidelog_controller::ops::{self, AlterPartition};
use tidelog_controller::{Endpoint, MetadataImage, MetadataRecord, Uuid};

pub(super) const TOPIC: &str = "sim";
pub(super) const TOPIC_ID: Uuid = Uuid::from_u128(0x5111);

pub(super) struct SimController {
    /// Every committed image; a version is an index.
    pub(super) images: Vec<MetadataImage>,
    last_seen: BTreeMap<i32, i64>,
    unclean: bool,
    session_timeout_ms: i64,
}

fn endpoint(node: i32) -> Vec<Endpoint> {
    vec![Endpoint {
        name: "PLAINTEXT".into(),
        host: "sim".into(),
        port: u16::try_from(9000 + node).unwrap_or(9000),
    }]
}

/// The incarnation of `node`'s `n`-th start.
pub(super) fn incarnation(node: i32, n: u32) -> u128 {
    (u128::from(n) << 32) | u128::from(node.unsigned_abs())
}

impl SimController {
    /// A cluster whose brokers `nodes` registered (first incarnations) and one
    /// partition replicated on all of them, led by the first.
    pub(super) fn new(nodes: &[i32], unclean: bool, session_timeout_ms: i64) -> Self {
        let mut image = MetadataImage::new("sim");
        let mut records = Vec::new();
        for (epoch, &node) in (0..).zip(nodes) {
            records.push(MetadataRecord::RegisterBroker {
                broker_id: node,
                incarnation: Uuid::from_u128(incarnation(node, 0)),
                epoch,
                listeners: endpoint(node),
                rack: None,
            });
        }
        records.push(MetadataRecord::Topic {
            name: TOPIC.into(),
            topic_id: TOPIC_ID,
        });
        records.push(MetadataRecord::Partition {
            topic_id: TOPIC_ID,
            partition: 0,
            replicas: nodes.to_vec(),
            isr: nodes.to_vec(),
            leader: nodes.first().copied().unwrap_or(-1),
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        });
        image = ops::image_with(&image, &records);
        SimController {
            images: vec![image],
            last_seen: nodes.iter().map(|&n| (n, 0)).collect(),
            unclean,
            session_timeout_ms,
        }
    }

    pub(super) fn image(&self) -> &MetadataImage {
        // `new` pushes the first image and nothing pops.
        &self.images[self.images.len() - 1]
    }

    pub(super) fn version(&self) -> usize {
        self.images.len() - 1
    }

    fn write(&mut self, records: Vec<MetadataRecord>) {
        if !records.is_empty() {
            let next = ops::image_with(self.image(), &records);
            self.images.push(next);
        }
    }

    /// `records` plus the elections they make necessary, as one batch.
    fn with_repairs(&self, mut records: Vec<MetadataRecord>) -> Vec<MetadataRecord> {
        let next = ops::image_with(self.image(), &records);
        records.extend(ops::plan_leader_repairs(&next, self.unclean));
        records
    }

    /// A (re)starting broker registers: a new incarnation is fenced until it heartbeats
    /// and loses what it led. Returns its broker epoch.
    pub(super) fn register(&mut self, node: i32, incarnation: u128, now: i64) -> i64 {
        let image = self.image();
        let epoch = image
            .last_offset()
            .map_or(0, |o| i64::try_from(o + 1).unwrap_or(i64::MAX));
        let incarnation = Uuid::from_u128(incarnation);
        let plan = ops::plan_register_broker(image, node, incarnation, epoch, endpoint(node), None);
        let restarted = image
            .broker(node)
            .is_some_and(|b| b.incarnation != incarnation);
        let mut records = plan.records;
        let epoch = if records.is_empty() {
            image.broker(node).map_or(epoch, |b| b.epoch)
        } else {
            if restarted {
                records.push(MetadataRecord::FenceBroker {
                    broker_id: node,
                    epoch,
                });
            }
            epoch
        };
        if !records.is_empty() {
            let records = self.with_repairs(records);
            self.write(records);
        }
        self.last_seen.insert(node, now);
        epoch
    }

    /// A heartbeat: `Err` when the broker epoch is not the registered one.
    pub(super) fn heartbeat(&mut self, node: i32, broker_epoch: i64, now: i64) -> Result<(), ()> {
        let Some(fenced) = self
            .image()
            .broker(node)
            .filter(|b| b.epoch == broker_epoch)
            .map(|b| b.fenced)
        else {
            return Err(());
        };
        self.last_seen.insert(node, now);
        if fenced {
            let records = self.with_repairs(vec![MetadataRecord::UnfenceBroker {
                broker_id: node,
                epoch: broker_epoch,
            }]);
            self.write(records);
        }
        Ok(())
    }

    /// AlterPartition from a leader: the new partition epoch, or the error code of the
    /// refusal.
    pub(super) fn alter_isr(&mut self, request: &AlterPartition) -> Result<i32, i16> {
        let registered = self.image().broker(request.broker_id).map(|b| b.epoch);
        if registered != Some(request.broker_epoch) {
            return Err(kafka_protocol::error::ResponseError::StaleBrokerEpoch.code());
        }
        let plan = ops::plan_alter_partition(self.image(), request).map_err(|e| e.error_code())?;
        let epoch = plan.response.partition_epoch;
        self.write(plan.records);
        Ok(epoch)
    }

    /// Fences every unfenced broker silent for longer than the session timeout.
    pub(super) fn fence_expired(&mut self, now: i64) -> Vec<i32> {
        let expired: Vec<(i32, i64)> = self
            .image()
            .brokers()
            .filter(|b| !b.fenced)
            .filter(|b| {
                let last = self.last_seen.get(&b.broker_id).copied().unwrap_or(0);
                now - last > self.session_timeout_ms
            })
            .map(|b| (b.broker_id, b.epoch))
            .collect();
        if expired.is_empty() {
            return Vec::new();
        }
        let records = expired
            .iter()
            .map(|&(broker_id, epoch)| MetadataRecord::FenceBroker { broker_id, epoch })
            .collect();
        let records = self.with_repairs(records);
        self.write(records);
        expired.into_iter().map(|(id, _)| id).collect()
    }
}
