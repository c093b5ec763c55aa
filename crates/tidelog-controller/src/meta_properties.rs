//! The cluster id (generated once) and the node id (bound at first start), kept beside
//! the metadata log.
//!
//! File `meta.properties` (Java-properties style, UTF-8, always replaced atomically):
//! ```text
//! # tidelog cluster metadata identity. Do not edit.
//! version=1
//! cluster.id=<22 characters of base64url>
//! node.id=<i32>            (added by the first Controller::open)
//! ```
//! There is no checksum: the file is tiny and written by rename. A file without a
//! valid `cluster.id` is an error at startup (a new id would silently split a cluster),
//! and so is a `node.id` other than the configured one (the data would be served as
//! another node's, as Kafka also refuses).

use std::path::Path;

use uuid::Uuid;

use crate::durable::{read_bounded, write_atomically};
use crate::error::ControllerError;

pub(crate) const META_PROPERTIES: &str = "meta.properties";
const MAX_FILE_BYTES: u64 = 64 * 1024;

struct MetaProperties {
    cluster_id: String,
    node_id: Option<i32>,
}

impl MetaProperties {
    fn render(&self) -> String {
        let mut text = format!(
            "# tidelog cluster metadata identity. Do not edit.\nversion=1\ncluster.id={}\n",
            self.cluster_id
        );
        if let Some(node_id) = self.node_id {
            text.push_str(&format!("node.id={node_id}\n"));
        }
        text
    }
}

fn load(dir: &Path) -> Result<Option<MetaProperties>, ControllerError> {
    let path = dir.join(META_PROPERTIES);
    let Some(bytes) = read_bounded(&path, MAX_FILE_BYTES)? else {
        return Ok(None);
    };
    let text =
        String::from_utf8(bytes).map_err(|_| ControllerError::corrupt(&path, "not UTF-8"))?;
    let value_of = |wanted: &str| {
        text.lines()
            .map(str::trim)
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_once('='))
            .find(|(key, _)| key.trim() == wanted)
            .map(|(_, value)| value.trim().to_owned())
    };
    let cluster_id =
        value_of("cluster.id").ok_or_else(|| ControllerError::corrupt(&path, "no cluster.id"))?;
    if !is_valid_cluster_id(&cluster_id) {
        return Err(ControllerError::corrupt(
            &path,
            format!("invalid cluster.id {cluster_id:?}"),
        ));
    }
    let node_id = match value_of("node.id") {
        None => None,
        Some(v) => Some(
            v.parse::<i32>()
                .map_err(|_| ControllerError::corrupt(&path, format!("invalid node.id {v:?}")))?,
        ),
    };
    Ok(Some(MetaProperties {
        cluster_id,
        node_id,
    }))
}

/// The cluster id stored in `dir`, if the file exists.
pub(crate) fn stored_cluster_id(dir: &Path) -> Result<Option<String>, ControllerError> {
    Ok(load(dir)?.map(|props| props.cluster_id))
}

/// Returns the cluster id stored in `dir`, creating the file with a fresh random id if
/// there is none.
pub(crate) fn load_or_create_cluster_id(dir: &Path) -> Result<String, ControllerError> {
    if let Some(props) = load(dir)? {
        return Ok(props.cluster_id);
    }
    let props = MetaProperties {
        cluster_id: random_cluster_id(),
        node_id: None,
    };
    write_atomically(dir, META_PROPERTIES, props.render().as_bytes())?;
    Ok(props.cluster_id)
}

/// Records `node_id` as the owner of `dir` at first use; fails if another node id
/// already owns it. The file must exist (see `load_or_create_cluster_id`).
pub(crate) fn bind_node_id(dir: &Path, node_id: i32) -> Result<(), ControllerError> {
    let path = dir.join(META_PROPERTIES);
    let mut props = load(dir)?.ok_or_else(|| ControllerError::corrupt(&path, "missing"))?;
    match props.node_id {
        Some(stored) if stored == node_id => Ok(()),
        Some(stored) => Err(ControllerError::NodeIdMismatch {
            stored,
            configured: node_id,
        }),
        None => {
            props.node_id = Some(node_id);
            write_atomically(dir, META_PROPERTIES, props.render().as_bytes())
        }
    }
}

/// Binds a further log directory (`log.dirs` after the first) to this node of
/// `cluster_id` (the data directory's): its own `meta.properties` names both from the
/// first start on, so a disk moved over from another node or cluster is refused instead
/// of having its partitions served as this node's, as Kafka refuses it.
pub fn bind_log_dir(log_dir: &Path, cluster_id: &str, node_id: i32) -> Result<(), ControllerError> {
    match load(log_dir)? {
        Some(props) if props.cluster_id == cluster_id && props.node_id == Some(node_id) => Ok(()),
        Some(props) => Err(ControllerError::LogDirOfAnotherNode {
            dir: log_dir.display().to_string(),
            owner: format!(
                "cluster.id {} node.id {}",
                props.cluster_id,
                props
                    .node_id
                    .map_or_else(|| "(none)".to_owned(), |n| n.to_string())
            ),
            this: format!("cluster.id {cluster_id} node.id {node_id}"),
        }),
        None => {
            let props = MetaProperties {
                cluster_id: cluster_id.to_owned(),
                node_id: Some(node_id),
            };
            write_atomically(log_dir, META_PROPERTIES, props.render().as_bytes())
        }
    }
}

/// The cluster id in the metadata directory under `data_dir`, once the node has one.
pub fn data_dir_cluster_id(data_dir: &Path) -> Result<Option<String>, ControllerError> {
    stored_cluster_id(&crate::quorum::metadata_dir(data_dir))
}

fn is_valid_cluster_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A random UUID in Kafka's text form: 16 bytes as unpadded base64url (22 chars),
/// never starting with '-' so command-line tools do not mistake it for a flag.
pub(crate) fn random_cluster_id() -> String {
    loop {
        let id = base64url(Uuid::new_v4().as_bytes());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// Unpadded URL-safe base64 (RFC 4648 section 5), the text form Kafka gives ids.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let index = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[index as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_rfc4648_vectors() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn cluster_id_is_created_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create_cluster_id(dir.path()).unwrap();
        assert_eq!(first.len(), 22);
        assert!(!first.starts_with('-'));
        let again = load_or_create_cluster_id(dir.path()).unwrap();
        assert_eq!(first, again);
    }

    #[test]
    fn file_without_cluster_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(META_PROPERTIES), "version=1\n").unwrap();
        let err = load_or_create_cluster_id(dir.path()).unwrap_err();
        assert!(matches!(err, ControllerError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn node_id_is_bound_once_and_checked_after() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = load_or_create_cluster_id(dir.path()).unwrap();
        bind_node_id(dir.path(), 3).unwrap();
        bind_node_id(dir.path(), 3).unwrap();
        let err = bind_node_id(dir.path(), 4).unwrap_err();
        assert!(
            matches!(
                err,
                ControllerError::NodeIdMismatch {
                    stored: 3,
                    configured: 4
                }
            ),
            "{err}"
        );
        assert_eq!(load_or_create_cluster_id(dir.path()).unwrap(), cluster);
        let text = std::fs::read_to_string(dir.path().join(META_PROPERTIES)).unwrap();
        assert!(text.contains("node.id=3\n"), "{text}");
    }
}
