//! tidelog-controller: the cluster metadata state machine and the Raft quorum that
//! replicates it. Every node runs the same controller: a single node is a one-voter
//! quorum of itself.
//!
//! - [`MetadataRecord`]s are the only way metadata changes; [`MetadataImage::replay`]
//!   applies them. Startup (snapshot + log) and normal operation run the same code.
//! - [`ops`] holds request handlers as pure functions of the image returning
//!   `(records, response)`.
//! - [`quorum`] runs them on the leader of a Raft quorum of 1, 3 or 5 voters and
//!   replicates their records (`<data-dir>/__cluster_metadata/quorum/`).
//! - [`topic_config`] is the catalogue of supported topic configs.
//! - `legacy` reads (once, to migrate it) the local metadata log single nodes wrote
//!   before they ran the Raft controller.

pub mod acl;
mod durable;
mod error;
mod image;
mod legacy;
mod meta_properties;
pub mod ops;
mod placement;
pub mod quorum;
pub mod quota;
mod record;
pub mod scram;
pub mod scram_bootstrap;
mod snapshot;
pub mod topic_config;

pub use error::{ControllerError, TopicError};
pub use image::{BrokerImage, MetadataImage, PartitionImage, TopicImage, INTERNAL_TOPICS};
pub use meta_properties::{bind_log_dir, data_dir_cluster_id};
pub use ops::{validate_topic_name, CreateTopic, TopicDefaults};
pub use quorum::{metadata_dir, METADATA_DIR_NAME};
pub use record::{ConfigResource, Endpoint, MetadataRecord};
pub use topic_config::{ConfigDef, ConfigEntryInfo, ConfigType};
pub use uuid::Uuid;
