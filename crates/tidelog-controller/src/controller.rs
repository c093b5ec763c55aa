//! The single-node controller: the planners of `ops`, the metadata log, and the image,
//! behind `&mut self` (the broker holds it in one mutex). Each request: plan against
//! the image, append the records (fsynced), replay them, answer.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use crate::error::{ControllerError, TopicError};
use crate::image::{MetadataImage, TopicImage};
use crate::meta_properties::bind_node_id;
use crate::metadata_log::MetadataLog;
use crate::ops::{self, CreateTopic, TopicDefaults};
use crate::record::{Endpoint, MetadataRecord};
use crate::store::MetadataStore;

/// After this many records beyond the last snapshot, a new snapshot is written so that
/// startup replays a bounded log.
pub const SNAPSHOT_EVERY_RECORDS: u64 = 10_000;

/// Generic over where records go ([`MetadataStore`]); `Controller` alone is the
/// single-node controller on the local [`MetadataLog`].
#[derive(Debug)]
pub struct Controller<S: MetadataStore = MetadataLog> {
    log: S,
    image: Arc<MetadataImage>,
    node_id: i32,
    defaults: TopicDefaults,
    /// Random per process: lets the image tell this run's registration from the last.
    incarnation: Uuid,
    /// Rotates the broker that leads each new topic's first partition.
    placement_cursor: usize,
    /// The unused rest of this node's current producer-id block (empty at start, so a
    /// restarted node never reuses ids it may have handed out before).
    producer_ids: Range<i64>,
}

impl Controller<MetadataLog> {
    /// Opens the metadata log in `dir` (the `__cluster_metadata` directory itself, see
    /// [`crate::metadata_dir`]) and rebuilds the image. The node must then call
    /// [`Controller::register_broker`] before topics can be placed on it.
    /// The first open binds the directory to `node_id`; a later open with another id
    /// fails with [`ControllerError::NodeIdMismatch`].
    pub fn open(
        dir: &Path,
        node_id: i32,
        defaults: TopicDefaults,
    ) -> Result<Controller, ControllerError> {
        let (log, image) = MetadataLog::open(dir)?;
        bind_node_id(dir, node_id)?;
        Ok(Controller::with_store(log, image, node_id, defaults))
    }
}

impl<S: MetadataStore> Controller<S> {
    /// A controller over any store, starting from `image` (which must reflect every
    /// record already in the store).
    pub fn with_store(
        store: S,
        image: MetadataImage,
        node_id: i32,
        defaults: TopicDefaults,
    ) -> Self {
        let placement_cursor = image.topic_count();
        Controller {
            log: store,
            image: Arc::new(image),
            node_id,
            defaults,
            incarnation: Uuid::new_v4(),
            placement_cursor,
            producer_ids: 0..0,
        }
    }

    /// The store, e.g. to inspect a [`crate::MemoryStore`] in tests.
    pub fn store(&self) -> &S {
        &self.log
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.log
    }

    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    /// A cheap, consistent copy of the current image for readers outside the lock.
    /// The controller copies on its next write while such a handle is alive.
    pub fn shared_image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn defaults(&self) -> TopicDefaults {
        self.defaults
    }

    /// Registers this node as a broker with its advertised listeners. The broker epoch
    /// is the offset of the registration record.
    pub fn register_broker(
        &mut self,
        listeners: Vec<Endpoint>,
        rack: Option<String>,
    ) -> Result<(), ControllerError> {
        let epoch = i64::try_from(self.log.next_offset()).unwrap_or(i64::MAX);
        let plan = ops::plan_register_broker(
            &self.image,
            self.node_id,
            self.incarnation,
            epoch,
            listeners,
            rack,
        );
        self.apply(&plan.records)
    }

    /// Creates a topic (or, with `validate_only`, checks that it could be created and
    /// returns what it would look like, changing nothing).
    pub fn create_topic(
        &mut self,
        req: CreateTopic,
        validate_only: bool,
    ) -> Result<TopicImage, TopicError> {
        let topic_id = self.fresh_topic_id();
        let plan = ops::plan_create_topic(
            &self.image,
            &req,
            self.defaults,
            topic_id,
            self.placement_cursor,
        )?;
        if validate_only {
            return Ok(plan.response);
        }
        self.apply(&plan.records)?;
        self.placement_cursor = self.placement_cursor.wrapping_add(1);
        Ok(self
            .image
            .topic(&req.name)
            .cloned()
            .unwrap_or(plan.response))
    }

    /// Deletes a topic; returns its id so the broker can remove its partitions' data.
    pub fn delete_topic(&mut self, name: &str) -> Result<Uuid, TopicError> {
        let plan = ops::plan_delete_topic(&self.image, name)?;
        self.apply(&plan.records)?;
        Ok(plan.response)
    }

    pub fn create_partitions(
        &mut self,
        name: &str,
        new_total: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let plan =
            ops::plan_create_partitions(&self.image, name, new_total, self.placement_cursor)?;
        if !validate_only {
            self.apply(&plan.records)?;
        }
        Ok(())
    }

    /// Incremental topic config change: `Some` sets a value, `None` deletes it. All
    /// changes are validated before any is applied, and applied atomically.
    pub fn alter_topic_configs(
        &mut self,
        name: &str,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let plan = ops::plan_alter_topic_configs(&self.image, name, &changes)?;
        if !validate_only {
            self.apply(&plan.records)?;
        }
        Ok(())
    }

    /// Next producer id, from blocks of [`ops::PRODUCER_ID_BLOCK_SIZE`] recorded in the
    /// log before any id of the block is handed out.
    pub fn allocate_producer_id(&mut self) -> Result<i64, ControllerError> {
        if self.producer_ids.is_empty() {
            let epoch = self.image.broker(self.node_id).map_or(-1, |b| b.epoch);
            let plan = ops::plan_producer_id_block(&self.image, self.node_id, epoch)?;
            self.apply(&plan.records)?;
            self.producer_ids = plan.response;
        }
        let id = self.producer_ids.start;
        self.producer_ids.start += 1;
        Ok(id)
    }

    /// Writes a snapshot of the current image and drops the log prefix it covers.
    /// Called periodically by the controller itself; call it at clean shutdown too.
    pub fn snapshot(&mut self) -> Result<(), ControllerError> {
        self.log.snapshot(&self.image)
    }

    /// Appends `records` durably, then replays them. The image is untouched when the
    /// append fails.
    fn apply(&mut self, records: &[MetadataRecord]) -> Result<(), ControllerError> {
        if records.is_empty() {
            return Ok(());
        }
        let last = self.log.append(records)?;
        let first = (last + 1).saturating_sub(records.len() as u64);
        let image = Arc::make_mut(&mut self.image);
        for (offset, record) in (first..).zip(records) {
            image.replay(offset, record);
        }
        if self.log.records_since_snapshot() >= SNAPSHOT_EVERY_RECORDS {
            if let Err(e) = self.log.snapshot(&self.image) {
                // The records are durable in the log; a failed snapshot only means a
                // longer replay at the next start.
                tracing::warn!(error = %e, "metadata snapshot failed");
            }
        }
        Ok(())
    }

    fn fresh_topic_id(&self) -> Uuid {
        loop {
            let id = Uuid::new_v4();
            // Kafka reserves the nil id and id 1 (the metadata topic's).
            if id.as_u128() > 1 && self.image.topic_by_id(&id).is_none() {
                return id;
            }
        }
    }
}
