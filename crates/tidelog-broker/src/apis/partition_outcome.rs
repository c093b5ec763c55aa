//! The per-partition answer of the admin calls the controller decides partition by
//! partition (ElectLeaders, AlterPartitionReassignments). Both collect outcomes keyed by
//! partition and fold the controller's reply into them the same way, so that fold lives
//! here once.

use std::collections::BTreeMap;

use tidelog_controller::quorum::{PartitionOutcomes, RequestError, TopicPartition};

/// A partition's outcome: `None` for success, else an error code and message.
pub(crate) type Outcome = Option<(i16, String)>;

/// Records the controller's reply in `outcomes`. When the call failed as a whole, every
/// partition in `asked` carries that error, which is also returned (code and message)
/// for the response's top-level error.
pub(crate) fn record_controller_reply(
    outcomes: &mut BTreeMap<TopicPartition, Outcome>,
    reply: Result<PartitionOutcomes, RequestError>,
    asked: impl IntoIterator<Item = TopicPartition>,
) -> Option<(i16, String)> {
    match reply {
        Ok(results) => {
            for (tp, result) in results {
                outcomes.insert(tp, result.err().map(|e| (e.error_code(), e.to_string())));
            }
            None
        }
        Err(e) => {
            for tp in asked {
                outcomes.insert(tp, Some((e.error_code(), e.to_string())));
            }
            Some((e.error_code(), e.to_string()))
        }
    }
}

/// The image of a one-broker cluster (broker 1) holding topic "orders" with
/// `num_partitions` partitions of one replica each.
#[cfg(test)]
pub(crate) fn image_with_orders(num_partitions: i32) -> tidelog_controller::MetadataImage {
    use tidelog_controller::ops::{plan_create_topic, plan_register_broker};
    use tidelog_controller::{CreateTopic, Endpoint, MetadataImage, TopicDefaults, Uuid};

    // Replays what the controller would have planned: the only way an image changes.
    fn replay(image: &mut MetadataImage, records: &[tidelog_controller::MetadataRecord]) {
        for record in records {
            let offset = image.last_offset().map_or(0, |o| o + 1);
            image.replay(offset, record);
        }
    }
    let mut image = MetadataImage::new("test");
    let endpoint = Endpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9092,
    };
    let registered = plan_register_broker(&image, 1, Uuid::from_u128(1), 0, vec![endpoint], None);
    replay(&mut image, &registered.records);
    let create = CreateTopic {
        name: "orders".into(),
        num_partitions,
        replication_factor: 1,
        assignments: vec![],
        configs: vec![],
    };
    let planned = plan_create_topic(
        &image,
        &create,
        TopicDefaults::default(),
        Uuid::from_u128(7),
        0,
    )
    .unwrap();
    replay(&mut image, &planned.records);
    image
}
