//! The background flusher: a few blocking threads that do the fsyncs and checkpoint
//! writes a log hands off, so its owner's lock is never held across them.
//!
//! Kafka flushes a rolled segment from its scheduler thread (the roll only schedules
//! it); here a roll, a due `flush.ms` or a checkpoint request queues the log, and a
//! flusher thread runs one pass for it: sync the rolled segments, snapshots and
//! directory (and the active segment when `flush.ms` asked), then write the checkpoint
//! files that changed (see `DurabilityHandle`).
//!
//! The queue is bounded by the number of logs: a log is queued at most once, and work
//! asked for while it waits is done by that one pass. A log whose flusher falls behind
//! just has a recovery point further back (more to rescan after a crash), never one
//! that claims unsynced data.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::error::StorageError;
use crate::log::{DurabilityHandle, Shared};

/// Told of every failed background pass: the log directory and what failed (for the
/// owner's error metrics; the failure is also logged).
pub type FlushFailureObserver = Arc<dyn Fn(&Path, &StorageError) + Send + Sync>;

/// Handle on a set of flusher threads; clones share them. Attach it to logs with
/// [`crate::Log::set_background_flusher`]. The threads stop at [`BackgroundFlusher::shutdown`]
/// or when the last handle is dropped.
#[derive(Clone)]
pub struct BackgroundFlusher {
    inner: Arc<Inner>,
    _owner: Arc<Owner>,
}

struct Inner {
    queue: Mutex<Queue>,
    work: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    on_failure: Mutex<Option<FlushFailureObserver>>,
}

struct Queue {
    logs: VecDeque<Arc<Shared>>,
    stopping: bool,
}

/// Dropped with the last handle: tells the threads to finish (the threads themselves
/// hold only `Inner`).
struct Owner {
    inner: Arc<Inner>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

impl Inner {
    fn run_pass(&self, log: &Arc<Shared>) {
        let handle = DurabilityHandle {
            shared: Arc::clone(log),
        };
        let Err(e) = handle.background_pass() else {
            return;
        };
        tracing::error!(
            dir = %handle.dir().display(),
            error = %e,
            "background flush failed; the recovery point stays where it was"
        );
        let observer = self
            .on_failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if let Some(observer) = observer {
            observer(handle.dir(), &e);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue is a deque and a flag: consistent between any two statements.
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stop(&self) {
        self.lock().stopping = true;
        self.work.notify_all();
    }

    /// The next log to flush; `None` once stopping and the queue is drained.
    fn next(&self) -> Option<Arc<Shared>> {
        let mut queue = self.lock();
        loop {
            if let Some(log) = queue.logs.pop_front() {
                // Cleared before the pass: work asked for from now on queues it again.
                log.queued.store(false, Ordering::Release);
                return Some(log);
            }
            if queue.stopping {
                return None;
            }
            queue = self
                .work
                .wait(queue)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl BackgroundFlusher {
    /// Starts `threads` flusher threads (at least one).
    pub fn start(threads: usize) -> Result<BackgroundFlusher, StorageError> {
        let flusher = BackgroundFlusher::manual();
        for i in 0..threads.max(1) {
            let inner = Arc::clone(&flusher.inner);
            let thread = std::thread::Builder::new()
                .name(format!("log-flusher-{i}"))
                .spawn(move || {
                    while let Some(log) = inner.next() {
                        inner.run_pass(&log);
                    }
                })?;
            flusher
                .inner
                .threads
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(thread);
        }
        Ok(flusher)
    }

    /// A flusher without threads: queued passes run only when [`BackgroundFlusher::run_pending`]
    /// is called. For deterministic tests (a crash "before the background flush") and
    /// tools that want to choose when to sync.
    pub fn manual() -> BackgroundFlusher {
        let inner = Arc::new(Inner {
            queue: Mutex::new(Queue {
                logs: VecDeque::new(),
                stopping: false,
            }),
            work: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            on_failure: Mutex::new(None),
        });
        BackgroundFlusher {
            _owner: Arc::new(Owner {
                inner: Arc::clone(&inner),
            }),
            inner,
        }
    }

    /// Runs every queued pass on the calling thread; returns how many ran.
    pub fn run_pending(&self) -> usize {
        let mut ran = 0;
        loop {
            let next = self.inner.lock().logs.pop_front();
            let Some(log) = next else { return ran };
            log.queued.store(false, Ordering::Release);
            self.inner.run_pass(&log);
            ran += 1;
        }
    }

    /// Installs (or removes) the observer told of every failed pass.
    pub fn set_failure_observer(&self, observer: Option<FlushFailureObserver>) {
        *self
            .inner
            .on_failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = observer;
    }

    /// Logs waiting for a pass.
    pub fn queued(&self) -> usize {
        self.inner.lock().logs.len()
    }

    /// Runs what is queued, then stops and joins the threads. Logs still attached do
    /// their durability work on their callers' threads from then on (their close makes
    /// everything durable either way).
    pub fn shutdown(&self) {
        self.inner.stop();
        let threads = std::mem::take(
            &mut *self
                .inner
                .threads
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a log flusher thread panicked");
            }
        }
        // A manual flusher has no threads to drain its queue.
        self.run_pending();
    }

    /// Queues a pass for `log`; false when the flusher has stopped (the caller then
    /// does the work itself).
    pub(crate) fn schedule(&self, log: &DurabilityHandle) -> bool {
        let mut queue = self.inner.lock();
        if queue.stopping {
            return false;
        }
        if !log.shared.queued.swap(true, Ordering::AcqRel) {
            queue.logs.push_back(Arc::clone(&log.shared));
            drop(queue);
            self.inner.work.notify_one();
        }
        true
    }
}
