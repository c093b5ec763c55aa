//! The node's view of cluster metadata, and the one door through which it changes.
//!
//! On a cluster of one the controller runs in-process; every change goes through it
//! (records appended to the local metadata log, then replayed), and afterwards the
//! replica manager follows the new image. Handlers read a cheap shared snapshot.

use std::sync::{Arc, Mutex, RwLock};

use tidelog_controller::{Controller, MetadataImage};

use crate::config::BrokerConfig;
use crate::replica::ReplicaManager;

pub(crate) struct MetadataManager {
    controller: Mutex<Controller>,
    image: RwLock<Arc<MetadataImage>>,
}

impl MetadataManager {
    pub(crate) fn new(controller: Controller) -> Self {
        let image = Arc::new(controller.image().clone());
        MetadataManager {
            controller: Mutex::new(controller),
            image: RwLock::new(image),
        }
    }

    /// The latest metadata image.
    pub(crate) fn image(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs a change on the controller, publishes the new image, and makes the hosted
    /// partitions follow it. Returns what the change returned.
    pub(crate) fn change<T>(
        &self,
        replicas: &ReplicaManager,
        broker: &BrokerConfig,
        f: impl FnOnce(&mut Controller) -> T,
    ) -> T {
        let mut controller = self.controller.lock().unwrap_or_else(|p| p.into_inner());
        let result = f(&mut controller);
        let image = Arc::new(controller.image().clone());
        *self.image.write().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&image);
        if let Err(e) = replicas.apply_image(&image, broker) {
            tracing::error!(error = %e, "applying metadata to local partitions failed");
        }
        result
    }
}
