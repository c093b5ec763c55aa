//! The tidelog server: accepts Kafka-protocol connections, routes each request to the
//! handler for its API, and keeps the partitions this node hosts.
//!
//! Layout: `net` owns connections and framing, `apis` holds one module per Kafka API
//! (the table in `apis/mod.rs` is the single source of the advertised versions),
//! `replica` owns the partitions and their logs, `metadata` wraps the controller's
//! metadata image, `admin_http` serves health, and `server` ties them together.

mod admin_actions;
mod admin_auth;
mod admin_http;
mod apis;
mod auth;
pub mod config;
#[cfg(test)]
mod config_reference;
mod context;
mod coordinator;
mod dynamic_config;
mod errors;
mod group;
mod group_config;
mod internal_topic;
pub mod kafka_names;
pub mod listeners;
pub mod log_levels;
mod metadata;
mod metrics;
mod net;
mod poison;
pub mod properties;
mod quota;
mod readiness;
mod replica;
mod sasl;
mod server;
mod setting_rules;
pub mod settings;
mod share;
mod tls;
mod topic_config;
mod txn;

pub use config::{BrokerConfig, ConfigError, Origin as SettingOrigin};
pub use replica::LogDirFailure;
pub use server::{Broker, ClusterOptions, ControllerNode, Environment, NodeFailure, StartError};
