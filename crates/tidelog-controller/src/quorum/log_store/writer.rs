//! The thread that does the Raft log's file I/O, one operation at a time in the order
//! they were submitted (openraft requires every write, vote included, to complete in
//! order). openraft's storage calls are async: they update the in-memory log, queue
//! the write here and either await its completion or, for appends, return at once and
//! let [`LogFlushed`] report durability when the fsync is done. No async worker waits
//! on the disk.
//!
//! Appends already queued behind one another are written together and share one
//! fdatasync. After a failed write every later operation fails: what is on disk is
//! unknown, and openraft stops the node on a storage error.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use tokio::sync::{mpsc, oneshot};

use super::{LOG_FILE, STATE_FILE};
use crate::durable::{sync_dir, write_atomically};
use crate::error::ControllerError;
use crate::quorum::types::TypeConfig;

/// Writes queued at most; a caller submitting more waits (asynchronously) for room.
const QUEUE: usize = 64;

/// One file operation.
pub(super) enum Op {
    /// Frames to add at the end of `raft.log`, then fdatasync.
    Append(Vec<u8>),
    /// Cut `raft.log` to this length, then fdatasync.
    Truncate(u64),
    /// Replace `raft.log` with these bytes (temp file, fsync, rename, directory fsync).
    Rewrite(Vec<u8>),
    /// Replace `raft.state` with these bytes, likewise.
    SaveState(Vec<u8>),
}

/// Who is told when an operation is on disk.
pub(super) enum Done {
    /// openraft's append callback.
    Flushed(LogFlushed<TypeConfig>),
    /// A caller awaiting (or, in tests, blocking on) the result.
    Reply(oneshot::Sender<Result<(), String>>),
}

impl Done {
    fn complete(self, result: Result<(), String>) {
        match self {
            Done::Flushed(callback) => {
                callback.log_io_completed(result.map_err(std::io::Error::other));
            }
            Done::Reply(reply) => {
                // The caller gave up waiting (its task ended): nothing to tell.
                let _ = reply.send(result);
            }
        }
    }
}

pub(super) struct Job {
    pub(super) op: Op,
    pub(super) done: Done,
}

/// The submitting side. The thread ends once this is dropped and the queue drained.
#[derive(Debug)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// Held by a test to keep the thread from writing (it takes it before each write).
    #[cfg(test)]
    pub(super) gate: Arc<Mutex<()>>,
}

/// Waits for a writer's thread to end (after its `Writer` was dropped).
#[derive(Debug, Clone)]
pub(crate) struct WriterThread {
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl WriterThread {
    /// Blocks until the writer has finished every queued write and stopped.
    pub(crate) fn join(&self) {
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                tracing::error!("the raft log writer thread panicked");
            }
        }
    }
}

/// The writer's file, as the thread sees it.
struct LogFile {
    dir: PathBuf,
    file: File,
    len: u64,
    #[cfg(test)]
    gate: Arc<Mutex<()>>,
}

impl Writer {
    /// Starts the thread writing `file` (`len` bytes long) in `dir`.
    pub(super) fn start(dir: &Path, file: File, len: u64) -> Result<Writer, ControllerError> {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let log = LogFile {
            dir: dir.to_path_buf(),
            file,
            len,
            #[cfg(test)]
            gate: Arc::new(Mutex::new(())),
        };
        #[cfg(test)]
        let gate = Arc::clone(&log.gate);
        let thread = std::thread::Builder::new()
            .name("raft-log-writer".into())
            .spawn(move || run(log, queue))
            .map_err(|e| ControllerError::io(dir, e))?;
        Ok(Writer {
            jobs,
            thread: Arc::new(Mutex::new(Some(thread))),
            #[cfg(test)]
            gate,
        })
    }

    pub(super) fn thread(&self) -> WriterThread {
        WriterThread {
            thread: Arc::clone(&self.thread),
        }
    }

    /// Room for one job in the queue, waited for without blocking a worker. Reserve
    /// first, then change the in-memory log and send: jobs then queue in the order of
    /// those changes.
    pub(super) async fn reserve(&self) -> Result<mpsc::Permit<'_, Job>, String> {
        self.jobs
            .reserve()
            .await
            .map_err(|_| "the raft log writer stopped".to_string())
    }

    /// Submits a job from a thread outside the async runtime and waits for it (tests).
    #[cfg(test)]
    pub(super) fn run_blocking(&self, op: Op) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .blocking_send(Job {
                op,
                done: Done::Reply(reply),
            })
            .map_err(|_| "the raft log writer stopped".to_string())?;
        answer
            .blocking_recv()
            .map_err(|_| "the raft log writer dropped the job".to_string())?
    }
}

fn run(mut log: LogFile, mut queue: mpsc::Receiver<Job>) {
    let mut failed: Option<String> = None;
    let mut next: Option<Job> = None;
    loop {
        let Some(job) = next.take().or_else(|| queue.blocking_recv()) else {
            return;
        };
        #[cfg(test)]
        let gate = Arc::clone(&log.gate);
        #[cfg(test)]
        let _open = gate.lock().unwrap_or_else(|p| p.into_inner());
        let Op::Append(bytes) = job.op else {
            let result = match &failed {
                Some(e) => Err(e.clone()),
                None => log.apply(job.op),
            };
            if let Err(e) = &result {
                failed.get_or_insert_with(|| e.clone());
            }
            job.done.complete(result);
            continue;
        };
        // Appends queued right behind this one share its write and fdatasync.
        let mut frames = bytes;
        let mut waiting = vec![job.done];
        while let Ok(more) = queue.try_recv() {
            match more.op {
                Op::Append(bytes) => {
                    frames.extend_from_slice(&bytes);
                    waiting.push(more.done);
                }
                _ => {
                    next = Some(more);
                    break;
                }
            }
        }
        let result = match &failed {
            Some(e) => Err(e.clone()),
            None => log.append(&frames),
        };
        if let Err(e) = &result {
            failed.get_or_insert_with(|| e.clone());
        }
        for done in waiting {
            done.complete(result.clone());
        }
    }
}

impl LogFile {
    fn path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    fn append(&mut self, frames: &[u8]) -> Result<(), String> {
        let written = self
            .file
            .write_all(frames)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // Best effort: leave no partial frame for a later append to follow.
            let _ = self.file.set_len(self.len);
            return Err(ControllerError::io(self.path(), e).to_string());
        }
        self.len += frames.len() as u64;
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Append(frames) => self.append(&frames),
            Op::Truncate(len) => {
                self.file
                    .set_len(len)
                    .and_then(|()| self.file.sync_data())
                    .map_err(|e| ControllerError::io(self.path(), e).to_string())?;
                self.len = len;
                Ok(())
            }
            Op::Rewrite(bytes) => self.rewrite(&bytes).map_err(|e| e.to_string()),
            Op::SaveState(bytes) => {
                write_atomically(&self.dir, STATE_FILE, &bytes).map_err(|e| e.to_string())
            }
        }
    }

    fn rewrite(&mut self, bytes: &[u8]) -> Result<(), ControllerError> {
        write_atomically(&self.dir, LOG_FILE, bytes)?;
        let path = self.path();
        self.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| ControllerError::io(&path, e))?;
        self.len = bytes.len() as u64;
        sync_dir(&self.dir)
    }
}
