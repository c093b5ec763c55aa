//! SCRAM credentials written into a data directory before its first start
//! (`tidelog user create --data-dir`), as Kafka's `kafka-storage format --add-scram`
//! does: the first super user of a cluster whose every listener needs SASL, with no
//! unauthenticated listener to create it through. The node submits them to the
//! controller quorum (the same AlterUserScramCredentials write a client's request
//! makes, so they are replayed like any other) when it first registers, before it is
//! ready, and removes the file once they are applied.
//!
//! Only salts and derived keys are written, never the password; the file is readable by
//! its owner only.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::meta_properties::META_PROPERTIES;
use crate::quorum::metadata_dir;
use crate::scram::ScramUpsertion;

pub const FILE_NAME: &str = "bootstrap-scram-credentials.json";
/// A bootstrap file is a handful of users; anything larger is not one.
const MAX_FILE_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("{0} has started before: create users through a listener (tidelog user create --bootstrap-server ...)")]
    Started(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a bootstrap credentials file: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// Where the data directory keeps them.
pub fn path(data_dir: &Path) -> PathBuf {
    metadata_dir(data_dir).join(FILE_NAME)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BootstrapError + '_ {
    move |source| BootstrapError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Whether the node owning `data_dir` has ever started (it wrote its metadata).
fn started(data_dir: &Path) -> bool {
    let dir = metadata_dir(data_dir);
    let quorum_files =
        std::fs::read_dir(dir.join("quorum")).is_ok_and(|mut entries| entries.next().is_some());
    quorum_files || dir.join(META_PROPERTIES).exists()
}

/// Adds (or replaces, for the same user and mechanism) one credential.
pub fn add(data_dir: &Path, credential: ScramUpsertion) -> Result<PathBuf, BootstrapError> {
    if started(data_dir) {
        return Err(BootstrapError::Started(data_dir.to_path_buf()));
    }
    let file = path(data_dir);
    let mut all = pending(data_dir)?;
    all.retain(|c| !(c.name == credential.name && c.mechanism == credential.mechanism));
    all.push(credential);
    let dir = metadata_dir(data_dir);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let text = serde_json::to_vec_pretty(&all).map_err(|e| BootstrapError::Corrupt {
        path: file.clone(),
        reason: e.to_string(),
    })?;
    let partial = file.with_extension("json.partial");
    let mut out = owner_only(&partial).map_err(io(&partial))?;
    out.write_all(&text).map_err(io(&partial))?;
    out.sync_all().map_err(io(&partial))?;
    std::fs::rename(&partial, &file).map_err(io(&file))?;
    Ok(file)
}

#[cfg(unix)]
fn owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

/// The credentials waiting in `data_dir` (none without a file).
pub fn pending(data_dir: &Path) -> Result<Vec<ScramUpsertion>, BootstrapError> {
    let file = path(data_dir);
    let size = match std::fs::metadata(&file) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&file)(e)),
    };
    if size > MAX_FILE_BYTES {
        return Err(BootstrapError::Corrupt {
            path: file,
            reason: format!("{size} bytes"),
        });
    }
    let text = std::fs::read(&file).map_err(io(&file))?;
    serde_json::from_slice(&text).map_err(|e| BootstrapError::Corrupt {
        path: file,
        reason: e.to_string(),
    })
}

/// Removes the file once its credentials are in the metadata.
pub fn applied(data_dir: &Path) -> Result<(), BootstrapError> {
    let file = path(data_dir);
    match std::fs::remove_file(&file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&file)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::SCRAM_SHA_512;

    fn credential(name: &str, key: u8) -> ScramUpsertion {
        ScramUpsertion {
            name: name.into(),
            mechanism: SCRAM_SHA_512,
            iterations: 4096,
            salt: vec![1; 16],
            stored_key: vec![key; 64],
            server_key: vec![key; 64],
        }
    }

    #[test]
    fn credentials_accumulate_until_applied_and_only_before_the_first_start() {
        let dir = tempfile::tempdir().unwrap();
        assert!(pending(dir.path()).unwrap().is_empty());
        add(dir.path(), credential("admin", 1)).unwrap();
        add(dir.path(), credential("alice", 2)).unwrap();
        add(dir.path(), credential("admin", 3)).unwrap();
        let found = pending(dir.path()).unwrap();
        let keys: Vec<(&str, u8)> = found
            .iter()
            .map(|c| (c.name.as_str(), c.stored_key[0]))
            .collect();
        assert_eq!(keys, [("alice", 2), ("admin", 3)]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        applied(dir.path()).unwrap();
        assert!(pending(dir.path()).unwrap().is_empty());
        std::fs::write(
            metadata_dir(dir.path()).join(META_PROPERTIES),
            "node.id=1\n",
        )
        .unwrap();
        assert!(matches!(
            add(dir.path(), credential("late", 4)),
            Err(BootstrapError::Started(_))
        ));
    }

    #[test]
    fn a_file_that_is_not_a_credential_list_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(metadata_dir(dir.path())).unwrap();
        std::fs::write(path(dir.path()), "admin:secret").unwrap();
        assert!(matches!(
            pending(dir.path()),
            Err(BootstrapError::Corrupt { .. })
        ));
    }
}
