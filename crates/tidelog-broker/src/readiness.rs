//! Whether this node serves: a broker once it is registered and its metadata has caught
//! up with the quorum's, a controller-only node while it knows a quorum leader.
//!
//! A watch channel rather than a flag, so the Kafka listeners and a single node's
//! start-up wait for it instead of polling.

use std::sync::Arc;

use tokio::sync::watch;

#[derive(Clone)]
pub(crate) struct Readiness(Arc<watch::Sender<bool>>);

impl Readiness {
    pub(crate) fn new() -> Self {
        Readiness(Arc::new(watch::Sender::new(false)))
    }

    /// Whether this changed it.
    pub(crate) fn set(&self, ready: bool) -> bool {
        self.0.send_if_modified(|current| {
            let changed = *current != ready;
            *current = ready;
            changed
        })
    }

    pub(crate) fn is_ready(&self) -> bool {
        *self.0.borrow()
    }

    /// Returns once this node is ready.
    pub(crate) async fn wait(&self) {
        let mut changes = self.0.subscribe();
        // The sender lives in `self`, so the channel cannot close under this wait.
        let _ = changes.wait_for(|ready| *ready).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_wait_ends_when_the_node_becomes_ready() {
        let readiness = Readiness::new();
        let waiting = tokio::spawn({
            let readiness = readiness.clone();
            async move { readiness.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        assert!(readiness.set(true));
        assert!(!readiness.set(true));
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the wait ends")
            .expect("the task did not panic");
        assert!(readiness.is_ready());
        assert!(readiness.set(false));
        assert!(!readiness.is_ready());
    }
}
