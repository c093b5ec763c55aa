//! Certificate reload without a restart. A listener's TLS server (and the client this
//! node connects to other brokers' listener with) is rebuilt when the files it was
//! built from change on disk: `ssl.keystore.location` and `ssl.truststore.location`.
//!
//! There is no watcher task: a TLS object is checked when it is about to be used (a
//! handshake), at most once per [`CHECK_INTERVAL`], by comparing the files' metadata
//! (modification time, size, inode; an atomic rename or a Kubernetes secret's symlink
//! swap changes them) on a blocking thread. So the first connection after a change
//! already gets the new certificate, an idle listener costs nothing, and nothing needs
//! stopping at shutdown. Connections already open keep the TLS session they have.
//!
//! Files that changed but do not build (a half-written file, a key that does not match
//! the certificate) are refused: the old TLS object stays in force and the reason is
//! logged once, until the files change again.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use super::{ListenerSsl, TlsError};
use crate::config::BrokerConfig;
use crate::settings;

/// The least time between two looks at a listener's files.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What a file looked like when it was last read (or refused).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
    changed: i64,
}

fn stamp(path: &PathBuf) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
        changed: meta.ctime(),
    })
}

/// A TLS object built from a listener's settings, rebuilt when its files change.
pub(crate) struct Reloadable<T> {
    listener: String,
    /// "server" or "client", for the log.
    side: &'static str,
    config: BrokerConfig,
    build: fn(&ListenerSsl<'_>) -> Result<T, TlsError>,
    files: Vec<PathBuf>,
    current: RwLock<Arc<T>>,
    /// The files as last built from (or refused).
    stamps: Mutex<Vec<Option<FileStamp>>>,
    checked_at: Mutex<Instant>,
    checking: AtomicBool,
}

impl<T: Send + Sync + 'static> Reloadable<T> {
    /// Builds it for the first time; reads files: call it off the async workers.
    pub(crate) fn load(
        config: &BrokerConfig,
        listener: &str,
        side: &'static str,
        build: fn(&ListenerSsl<'_>) -> Result<T, TlsError>,
    ) -> Result<Reloadable<T>, TlsError> {
        let ssl = ListenerSsl::new(config, listener);
        let files: Vec<PathBuf> = [
            settings::SSL_KEYSTORE_LOCATION,
            settings::SSL_TRUSTSTORE_LOCATION,
        ]
        .into_iter()
        .map(|setting| ssl.get(setting))
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .collect();
        // Stamped before reading: a change while building is seen at the next check.
        let stamps = files.iter().map(stamp).collect();
        let built = build(&ssl)?;
        Ok(Reloadable {
            listener: listener.to_string(),
            side,
            config: config.clone(),
            build,
            files,
            current: RwLock::new(Arc::new(built)),
            stamps: Mutex::new(stamps),
            checked_at: Mutex::new(Instant::now()),
            checking: AtomicBool::new(false),
        })
    }

    /// The TLS object in force now, after a look at the files when one is due.
    pub(crate) async fn get(self: &Arc<Self>) -> Arc<T> {
        if self.due() && !self.checking.swap(true, Ordering::AcqRel) {
            // Cleared however this ends, even if the waiting task is dropped.
            let _checking = Checking(&self.checking);
            let this = Arc::clone(self);
            let _ = tokio::task::spawn_blocking(move || this.check()).await;
        }
        self.current()
    }

    pub(super) fn current(&self) -> Arc<T> {
        match self.current.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    fn due(&self) -> bool {
        if self.files.is_empty() {
            return false;
        }
        let Ok(mut at) = self.checked_at.lock() else {
            return false;
        };
        if at.elapsed() < CHECK_INTERVAL {
            return false;
        }
        *at = Instant::now();
        true
    }

    /// Rebuilds when the files changed since the last build (or refusal). Blocking.
    pub(crate) fn check(&self) {
        let now: Vec<Option<FileStamp>> = self.files.iter().map(stamp).collect();
        {
            let Ok(mut seen) = self.stamps.lock() else {
                return;
            };
            if *seen == now {
                return;
            }
            *seen = now;
        }
        let listener = &self.listener;
        match (self.build)(&ListenerSsl::new(&self.config, listener)) {
            Ok(built) => {
                if let Ok(mut current) = self.current.write() {
                    *current = Arc::new(built);
                }
                tracing::info!(listener = %listener, side = self.side, "the TLS key store or trust store changed on disk: reloaded (new connections use it)");
            }
            Err(e) => {
                tracing::warn!(listener = %listener, side = self.side, "the TLS key store or trust store changed on disk but is refused ({e}); new connections keep the one loaded before");
            }
        }
    }
}

/// Clears the "a check is running" flag when dropped.
struct Checking<'a>(&'a AtomicBool);

impl Drop for Checking<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
