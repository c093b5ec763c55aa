//! tidelog-controller: the cluster metadata state machine and its local log.
//!
//! - [`MetadataRecord`]s are the only way metadata changes; [`MetadataImage::replay`]
//!   applies them. Startup (snapshot + log) and normal operation run the same code.
//! - [`ops`] holds request handlers as pure functions of the image returning
//!   `(records, response)`; a Raft controller will reuse them unchanged.
//! - [`MetadataLog`] persists records in `<data-dir>/__cluster_metadata/`.
//! - [`Controller`] ties them together; it writes through the [`MetadataStore`] seam
//!   ([`MetadataLog`] on one node, [`MemoryStore`] in tests, Raft later).
//! - [`topic_config`] is the catalogue of supported topic configs.
//! - [`quorum`] replicates the metadata log across controller voters with Raft.

mod controller;
mod durable;
mod error;
mod frame;
mod image;
mod meta_properties;
mod metadata_log;
pub mod ops;
mod placement;
pub mod quorum;
mod record;
mod snapshot;
mod store;
pub mod topic_config;

pub use controller::{Controller, SNAPSHOT_EVERY_RECORDS};
pub use error::{ControllerError, TopicError};
pub use image::{BrokerImage, MetadataImage, PartitionImage, TopicImage, INTERNAL_TOPICS};
pub use metadata_log::{metadata_dir, MetadataLog, METADATA_DIR_NAME};
pub use ops::{validate_topic_name, CreateTopic, TopicDefaults};
pub use record::{ConfigResource, Endpoint, MetadataRecord};
pub use store::{MemoryStore, MetadataStore};
pub use topic_config::{ConfigDef, ConfigEntryInfo, ConfigType};
pub use uuid::Uuid;
