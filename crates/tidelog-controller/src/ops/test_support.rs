//! Builds metadata images for the planners' unit tests by replaying records, the only
//! way an image changes.

use uuid::Uuid;

use crate::image::{MetadataImage, PartitionImage};
use crate::record::{ConfigResource, Endpoint, MetadataRecord};

pub(crate) struct Images {
    pub(crate) image: MetadataImage,
}

impl Images {
    pub(crate) fn new() -> Self {
        Images {
            image: MetadataImage::new("test"),
        }
    }

    pub(crate) fn apply(&mut self, records: &[MetadataRecord]) {
        self.image = super::image_with(&self.image, records);
    }

    /// Registers brokers `ids` (epoch = their record's offset), no rack.
    pub(crate) fn brokers(mut self, ids: &[i32]) -> Self {
        for &id in ids {
            self.register(id, None);
        }
        self
    }

    pub(crate) fn register(&mut self, id: i32, rack: Option<&str>) {
        let epoch = self.image.last_offset().map_or(0, |o| o as i64 + 1);
        self.apply(&[MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation: Uuid::from_u128(u128::try_from(epoch).unwrap_or(0) + 1),
            epoch,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9000,
            }],
            rack: rack.map(str::to_owned),
        }]);
    }

    pub(crate) fn fence_record(&self, id: i32) -> MetadataRecord {
        let epoch = self.image.broker(id).map_or(-1, |b| b.epoch);
        MetadataRecord::FenceBroker {
            broker_id: id,
            epoch,
        }
    }

    pub(crate) fn unfence_record(&self, id: i32) -> MetadataRecord {
        let epoch = self.image.broker(id).map_or(-1, |b| b.epoch);
        MetadataRecord::UnfenceBroker {
            broker_id: id,
            epoch,
        }
    }

    pub(crate) fn fence(mut self, id: i32) -> Self {
        let record = self.fence_record(id);
        self.apply(&[record]);
        self
    }

    /// A topic whose partition `i` has `(replicas, isr, leader)` = `parts[i]`.
    pub(crate) fn topic(mut self, name: &str, parts: &[(&[i32], &[i32], i32)]) -> Self {
        let topic_id = Uuid::from_u128(0x1000 + self.image.topic_count() as u128);
        let mut records = vec![MetadataRecord::Topic {
            name: name.into(),
            topic_id,
        }];
        for (partition, (replicas, isr, leader)) in (0..).zip(parts) {
            records.push(MetadataRecord::Partition {
                topic_id,
                partition,
                replicas: replicas.to_vec(),
                isr: isr.to_vec(),
                leader: *leader,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
            });
        }
        self.apply(&records);
        self
    }

    pub(crate) fn topic_config(mut self, topic: &str, name: &str, value: &str) -> Self {
        self.apply(&[MetadataRecord::Config {
            resource: ConfigResource::Topic(topic.into()),
            name: name.into(),
            value: Some(value.into()),
        }]);
        self
    }

    pub(crate) fn partition(&self, topic: &str, partition: i32) -> &PartitionImage {
        &self.image.topic(topic).expect("topic").partitions[&partition]
    }
}
