//! The node's background tasks: started in one place, in dependency order, each with
//! its own stop signal, and stopped in reverse order, so nothing still running ever
//! depends on a task that has already ended.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long shutdown waits for one task before it moves on.
const STOP_WITHIN: Duration = Duration::from_secs(10);

struct Task {
    name: &'static str,
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

#[derive(Default)]
pub(super) struct Tasks {
    started: Vec<Task>,
}

impl Tasks {
    /// Starts `task` with the receiver of its stop signal (it ends when that turns
    /// true or its sender is gone).
    pub(super) fn start<F, Fut>(&mut self, name: &'static str, task: F)
    where
        F: FnOnce(watch::Receiver<bool>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let handle = tokio::spawn(task(stopped));
        self.started.push(Task { name, stop, handle });
    }

    /// Stops every task, the last started first, waiting for each to end.
    pub(super) async fn stop_all(self) {
        for task in self.started.into_iter().rev() {
            let _ = task.stop.send(true);
            if tokio::time::timeout(STOP_WITHIN, task.handle)
                .await
                .is_err()
            {
                tracing::warn!(
                    task = task.name,
                    "a background task did not stop within 10 s"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::Tasks;

    #[tokio::test]
    async fn tasks_stop_in_reverse_order_of_start() {
        let ended = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Tasks::default();
        for name in ["first", "second", "third"] {
            let ended = Arc::clone(&ended);
            tasks.start(name, move |mut stop| async move {
                let _ = stop.wait_for(|s| *s).await;
                ended.lock().unwrap().push(name);
            });
        }
        tasks.stop_all().await;
        assert_eq!(*ended.lock().unwrap(), ["third", "second", "first"]);
    }
}
